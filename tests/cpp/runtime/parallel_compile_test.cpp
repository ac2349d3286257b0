// A plan's kernels compiled at once (no GPU needed): results come back in the jobs' order, and a
// broken kernel is reported by name only after the others have finished and been cached.
#include "support/error.h"
#include "device/parallel_compile.h"
#include "device/cuda/nvrtc.h"
#include "runtime/temp_dir.h"

#include <gtest/gtest.h>

namespace braze::device {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: kernel compilation not checked"

CompileJob job(const std::string& name, bool broken = false) {
  return {"extern \"C\" __global__ void " + name + "(float* x) { x[threadIdx.x] += 1.0f" + (broken ? "" : ";") + " }\n",
          name, CompileOptions{.arch = "sm_90"}};
}

bool cubinMentions(const CompiledKernel& kernel, const std::string& name) {
  return std::string_view(kernel.cubin.data(), kernel.cubin.size()).find(name) != std::string_view::npos;
}

TEST(ParallelCompile, ResultsComeInJobOrder) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  KernelCache cache(dir.path());
  const std::vector<CompileJob> jobs = {job("k0"), job("k1"), job("k2"), job("k3"), job("k1_again")};
  const std::vector<CachedKernel> results = compileAll(jobs, cache);
  ASSERT_EQ(results.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(cubinMentions(*results[i].kernel, jobs[i].name)) << jobs[i].name;
    EXPECT_EQ(results[i].source, CompileSource::Compiler);
  }
  EXPECT_TRUE(compileAll({}, cache).empty());
  // A plan run again finds everything in memory.
  for (const CachedKernel& again : compileAll(jobs, cache)) EXPECT_EQ(again.source, CompileSource::Memory);
}

TEST(ParallelCompile, BrokenKernelsAreReportedAfterTheOthersFinish) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  ScopedEnv tmpdir("TMPDIR", dir.path().string());  // where the broken kernels' sources are saved
  KernelCache cache(dir.path());
  const std::vector<CompileJob> jobs = {job("good_0"), job("broken_1", true), job("good_2"), job("broken_3", true),
                                        job("good_4")};
  try {
    compileAll(jobs, cache);
    FAIL() << "a plan with broken kernels compiled";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.kind(), ErrorKind::Runtime);
    // The first broken kernel in plan order is the one reported, with NVRTC's log.
    EXPECT_NE(message.find("could not compile kernel 'broken_1'"), std::string::npos) << message;
    EXPECT_NE(message.find("error: expected a \";\""), std::string::npos) << message;
    EXPECT_NE(message.find("1 more kernel(s) of this plan failed to compile: broken_3"), std::string::npos)
        << message;
  }
  // Every good kernel was compiled and cached before the error was thrown.
  EXPECT_EQ(cache.stats().compiles, 5);
  for (const char* good : {"good_0", "good_2", "good_4"}) {
    EXPECT_EQ(cache.compile(job(good).source, good, job(good).options).source, CompileSource::Memory) << good;
  }
}

TEST(ParallelCompile, OneBrokenKernelIsThrownUnchanged) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  ScopedEnv tmpdir("TMPDIR", dir.path().string());  // where the broken kernel's source is saved
  KernelCache cache(std::nullopt);
  try {
    compileAll({job("fine"), job("alone_broken", true)}, cache);
    FAIL() << "a broken kernel compiled";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'alone_broken'"), std::string::npos) << message;
    EXPECT_NE(message.find("Source saved to "), std::string::npos) << message;
    EXPECT_EQ(message.find("more kernel(s)"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace braze::device
