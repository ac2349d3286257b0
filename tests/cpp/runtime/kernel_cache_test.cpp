// Compiling through the caches with NVRTC (no GPU needed): a second process (here, a second cache on
// the same directory) gets the first one's cubin from disk, byte for byte; any change to source, arch
// or options compiles anew; a damaged entry is recompiled and rewritten; an unusable directory leaves
// only the memory cache; threads asking at once get correct cubins, sharing compiles; and processes
// starting together on one directory compile each kernel once.
#include "support/error.h"
#include "device/kernel_cache.h"
#include "device/cuda/nvrtc.h"
#include "device/hip/hiprtc.h"
#include "runtime/temp_dir.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <thread>

extern char** environ;

namespace braze::device {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

#define SKIP_WITHOUT_NVRTC() \
  if (!nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: kernel compilation not checked"

// A small kernel whose name and constant vary, so tests can make as many distinct sources as they need.
std::string scaleKernel(const std::string& name, float factor = 2.0f) {
  return "extern \"C\" __global__ void " + name + "(float* x, int n) {\n" +
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n" + "  if (i < n) x[i] *= " + std::to_string(factor) +
         "f;\n}\n";
}

// The cubin names its kernels (ELF symbols): how a test tells whose cubin it was handed.
bool cubinMentions(const CompiledKernel& kernel, const std::string& name) {
  return std::string_view(kernel.cubin.data(), kernel.cubin.size()).find(name) != std::string_view::npos;
}

const CompileOptions kSm90{.arch = "sm_90"};

TEST(KernelCache, SecondCacheOnTheDirectoryHitsDiskWithTheSameCubin) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  const std::string source = scaleKernel("scale");
  KernelCache first(dir.path());
  const CachedKernel compiled = first.compile(source, "scale", kSm90);
  EXPECT_EQ(compiled.source, CompileSource::Compiler);
  const CachedKernel again = first.compile(source, "scale", kSm90);
  EXPECT_EQ(again.source, CompileSource::Memory);
  EXPECT_EQ(again.kernel, compiled.kernel);  // the same object: a memory hit copies nothing
  EXPECT_EQ(first.stats(), (KernelCacheStats{.memory_hits = 1, .disk_hits = 0, .compiles = 1}));

  KernelCache second(dir.path());  // what a new process sees
  const CachedKernel loaded = second.compile(source, "scale", kSm90);
  EXPECT_EQ(loaded.source, CompileSource::Disk);
  EXPECT_EQ(loaded.kernel->cubin, compiled.kernel->cubin);
  EXPECT_EQ(loaded.kernel->log, compiled.kernel->log);
  EXPECT_EQ(loaded.kernel->options, compiled.kernel->options);
  EXPECT_EQ(second.stats(), (KernelCacheStats{.memory_hits = 0, .disk_hits = 1, .compiles = 0}));
}

TEST(KernelCache, ChangingSourceArchOrAnyOptionMisses) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  const std::string source = scaleKernel("scale");
  KernelCache(dir.path()).compile(source, "scale", kSm90);
  KernelCache cache(dir.path());
  EXPECT_EQ(cache.compile(source + "// changed\n", "scale", kSm90).source, CompileSource::Compiler);
  EXPECT_EQ(cache.compile(source, "scale", {.arch = "sm_80"}).source, CompileSource::Compiler);
  EXPECT_EQ(cache.compile(source, "scale", {.arch = "sm_90", .fmad = false}).source, CompileSource::Compiler);
  EXPECT_EQ(cache.compile(source, "scale", {.arch = "sm_90", .maxrregcount = 32}).source, CompileSource::Compiler);
  EXPECT_EQ(cache.compile(source, "scale", {.arch = "sm_90", .lineinfo = true}).source, CompileSource::Compiler);
  EXPECT_EQ(cache.compile(source, "scale", kSm90).source, CompileSource::Disk);
  // The kernel's name is for messages only: the same source under another name is the same cubin.
  EXPECT_EQ(cache.compile(source, "another_name", kSm90).source, CompileSource::Memory);
}

TEST(KernelCache, KeyHoldsTheNvrtcVersionAndArguments) {
  SKIP_WITHOUT_NVRTC();
  const std::string key = kernelCacheKey("SOURCE", {.arch = "sm_80", .maxrregcount = 40, .lineinfo = true});
  EXPECT_TRUE(key.starts_with(std::string("braze ") + BRAZE_VERSION + "\n")) << key;
  EXPECT_NE(key.find("nvrtc " + nvrtcVersion() + "\n"), std::string::npos) << key;
  for (const char* part : {"--gpu-architecture=sm_80", "-default-device", "--fmad=true", "--maxrregcount=40",
                           "-lineinfo", "-I"}) {
    EXPECT_NE(key.find(part), std::string::npos) << part << " missing from " << key;
  }
  EXPECT_TRUE(key.ends_with("\nSOURCE")) << key;
}

// A gfx arch goes to hiprtc: the key names it, and its arguments; a CUDA-only option is refused, naming it.
TEST(KernelCache, KeyOfAGfxArchHoldsTheHiprtcVersionAndArguments) {
  const std::string key = kernelCacheKey("SOURCE", {.arch = "gfx90a"});
  // hiprtc's version (read from its library's name here), or that a machine has none.
  const std::string compiler = hiprtcAvailable() ? "hiprtc " + hiprtcVersion() : "hiprtc (not found)";
  EXPECT_NE(key.find("\n" + compiler + "\n"), std::string::npos) << key;
  EXPECT_NE(key.find("--offload-arch=gfx90a -std=c++17 -O3 -ffp-contract=off"), std::string::npos) << key;
  EXPECT_EQ(key.find("nvrtc"), std::string::npos) << key;
  EXPECT_NE(kernelCacheKey("SOURCE", {.arch = "gfx942"}), key);
  try {
    kernelCacheKey("SOURCE", {.arch = "gfx90a", .maxrregcount = 40});
    FAIL() << "maxrregcount accepted for a gfx arch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("maxrregcount (40) has no hiprtc option"), std::string::npos) << e.what();
  }
}

TEST(KernelCache, DamagedEntryIsRecompiledAndRewritten) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  const std::string source = scaleKernel("scale");
  const CachedKernel original = KernelCache(dir.path()).compile(source, "scale", kSm90);
  const std::filesystem::path entry = KernelDiskCache(dir.path()).entryPath(kernelCacheKey(source, kSm90));
  ASSERT_TRUE(std::filesystem::exists(entry));
  for (const char* damage : {"truncate", "garbage"}) {
    SCOPED_TRACE(damage);
    if (std::string_view(damage) == "truncate") {
      std::filesystem::resize_file(entry, std::filesystem::file_size(entry) / 2);
    } else {
      std::ofstream(entry, std::ios::binary | std::ios::trunc) << "not a cache entry at all";
    }
    ::testing::internal::CaptureStderr();
    const CachedKernel recompiled = KernelCache(dir.path()).compile(source, "scale", kSm90);
    const std::string warning = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(warning.find(entry.string() + " is damaged"), std::string::npos) << warning;
    EXPECT_EQ(recompiled.source, CompileSource::Compiler);
    EXPECT_EQ(recompiled.kernel->cubin, original.kernel->cubin);
    const CachedKernel reloaded = KernelCache(dir.path()).compile(source, "scale", kSm90);
    EXPECT_EQ(reloaded.source, CompileSource::Disk);  // the entry was rewritten
    EXPECT_EQ(reloaded.kernel->cubin, original.kernel->cubin);
  }
}

// A cubin with line info loaded from disk by a new process: the source file its line table names is
// written again (tmp directories get cleaned), so profilers still show the kernel's source.
TEST(KernelCache, ADiskHitWithLineinfoWritesTheSourceAgain) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  TempDir tmp;
  ScopedEnv tmpdir("TMPDIR", tmp.path().string());
  const std::string source = scaleKernel("profiled");
  const CompileOptions options{.arch = "sm_90", .lineinfo = true};
  KernelCache(dir.path()).compile(source, "profiled", options);
  const auto saved = [&] {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(tmp.path())) files.push_back(entry.path());
    return files;
  };
  ASSERT_EQ(saved().size(), 1u);
  const std::filesystem::path file = saved()[0];
  std::filesystem::remove(file);
  EXPECT_EQ(KernelCache(dir.path()).compile(source, "profiled", options).source, CompileSource::Disk);
  EXPECT_EQ(saved(), std::vector<std::filesystem::path>{file});
  KernelCache(dir.path()).compile(source, "profiled", kSm90);  // no line info: nothing more written
  EXPECT_EQ(saved().size(), 1u);
}

TEST(KernelCache, UnusableDirectoryLeavesTheMemoryCache) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  std::ofstream(dir.path() / "a_file") << "not a directory";
  KernelCache cache(dir.path() / "a_file" / "cache");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cache.compile(scaleKernel("scale"), "scale", kSm90).source, CompileSource::Compiler);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("not saving compiled kernels"), std::string::npos) << warnings;
  EXPECT_FALSE(cache.disk()->writable());
  EXPECT_EQ(cache.compile(scaleKernel("scale"), "scale", kSm90).source, CompileSource::Memory);
  KernelCache memory_only(std::nullopt);
  EXPECT_EQ(memory_only.disk(), nullptr);
  EXPECT_EQ(memory_only.compile(scaleKernel("scale"), "scale", kSm90).source, CompileSource::Compiler);
}

TEST(KernelCache, CompileErrorsAreThrownEveryTimeAndNeverStored) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  ScopedEnv tmpdir("TMPDIR", dir.path().string());  // where the broken kernel's source is saved
  KernelCache cache(dir.path());
  const std::string broken = "extern \"C\" __global__ void broken(float* x) { x[0] = 1.0f }\n";
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      cache.compile(broken, "broken_fusion", kSm90);
      FAIL() << "a kernel with a syntax error compiled";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("'broken_fusion'"), std::string::npos) << error.what();
    }
  }
  EXPECT_EQ(cache.stats().compiles, 2);
  try {
    cache.compile(broken, "virtual_arch", {.arch = "compute_90"});
    FAIL() << "a virtual arch was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("virtual_arch"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(std::filesystem::exists(cache.disk()->entryPath(kernelCacheKey(broken, kSm90))));
}

// This test binary points BRAZE_CACHE_DIR at a directory of its own (cache_dir_environment.cpp), and
// the process's cache, which GPU runs compile through, must be there: never in the real ~/.cache.
TEST(KernelCache, ProcessCacheLivesWhereTheEnvironmentSays) {
  const std::optional<std::filesystem::path> root = kernelCacheDirFromEnv();
  const KernelDiskCache* disk = processKernelCache().disk();
  ASSERT_EQ(disk != nullptr, root.has_value());
  if (!root) GTEST_SKIP() << "the disk cache is turned off in this environment";
  EXPECT_EQ(disk->directory().parent_path(), *root);
  SKIP_WITHOUT_NVRTC();
  const std::string source = scaleKernel("process_cache_probe", 3.5f);
  const CachedKernel first = compileCached(source, "process_cache_probe", kSm90);
  EXPECT_EQ(compileCached(source, "process_cache_probe", kSm90).source, CompileSource::Memory);
  EXPECT_TRUE(std::filesystem::exists(disk->entryPath(kernelCacheKey(source, kSm90))));
  EXPECT_EQ(KernelCache(*root).compile(source, "process_cache_probe", kSm90).kernel->cubin, first.kernel->cubin);
}

// Two caches on one directory stand for two processes; threads of each ask for the same few kernels.
TEST(KernelCache, ConcurrentCompilesGetTheirOwnCorrectCubins) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  const std::vector<std::string> names = {"scale_a", "scale_b", "scale_c"};
  std::vector<std::string> sources;
  std::vector<std::vector<char>> expected;
  for (size_t i = 0; i < names.size(); ++i) {
    sources.push_back(scaleKernel(names[i], 1.0f + static_cast<float>(i)));
    expected.push_back(compileCuda(sources[i], names[i], kSm90).cubin);  // NVRTC is deterministic
  }
  KernelCache processes[2] = {KernelCache(dir.path()), KernelCache(dir.path())};
  constexpr int kThreads = 8;
  std::vector<CachedKernel> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const size_t i = static_cast<size_t>(t) % names.size();
      try {
        got[t] = processes[t % 2].compile(sources[i], names[i], kSm90);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE(t);
    ASSERT_EQ(errors[t], "");
    const size_t i = static_cast<size_t>(t) % names.size();
    EXPECT_EQ(got[t].kernel->cubin, expected[i]);
    EXPECT_TRUE(cubinMentions(*got[t].kernel, names[i]));
  }
  // Within one cache, threads wanting the same kernel share one compile or disk load; across the two,
  // the entry's lock makes the later one wait for the first's entry instead of compiling again.
  int64_t compiles = 0;
  for (KernelCache& cache : processes) {
    const KernelCacheStats stats = cache.stats();
    EXPECT_EQ(stats.compiles + stats.disk_hits, static_cast<int64_t>(names.size()));
    EXPECT_EQ(stats.compiles + stats.disk_hits + stats.memory_hits, kThreads / 2);
    compiles += stats.compiles;
  }
  EXPECT_EQ(compiles, static_cast<int64_t>(names.size()));
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(KernelCache(dir.path()).compile(sources[i], names[i], kSm90).kernel->cubin, expected[i]);
  }
}

// What each process of EightProcessesCompileEachKernelOnce runs: this test binary started again on this
// test alone, with the shared directory in the environment. Elsewhere it has nothing to do.
constexpr const char* kChildDirVariable = "BRAZE_TEST_CACHE_CHILD_DIR";
const std::string kSharedKernel = scaleKernel("shared_by_processes", 5.0f);

TEST(KernelCacheAcrossProcesses, ChildProcess) {
  const char* dir_text = std::getenv(kChildDirVariable);
  if (dir_text == nullptr) GTEST_SKIP() << "runs only as a child of EightProcessesCompileEachKernelOnce";
  const std::filesystem::path dir(dir_text);
  std::ofstream(dir / fmt::format("ready.{}", ::getpid())) << "";
  // Start together: the parent says go once every child is ready, so their compiles overlap.
  for (int waited = 0; !std::filesystem::exists(dir / "go"); ++waited) {
    ASSERT_LT(waited, 20'000) << "the parent never said go";
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  const CachedKernel got = KernelCache(dir / "cache").compile(kSharedKernel, "shared_by_processes", kSm90);
  ASSERT_TRUE(cubinMentions(*got.kernel, "shared_by_processes"));
  std::ofstream(dir / fmt::format("result.{}", ::getpid())) << toString(got.source);
}

// The ranks of a tensor-parallel job start at once on one cache directory: one compiles, the rest wait
// on the entry's lock and load its cubin.
TEST(KernelCacheAcrossProcesses, EightProcessesCompileEachKernelOnce) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  ScopedEnv child_dir(kChildDirVariable, dir.path().string());
  constexpr int kProcesses = 8;
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=KernelCacheAcrossProcesses.ChildProcess";
  // The children run one test each, whatever this run was asked: without the GTEST_* variables (an
  // XML output file, sharding) that the parent was started with.
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!std::string_view(*entry).starts_with("GTEST_")) environment.emplace_back(*entry);
  }
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t quiet;  // the children's gtest banners would bury this test's output
  ::posix_spawn_file_actions_init(&quiet);
  ::posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    char* argv[] = {self.data(), filter.data(), nullptr};
    pid_t pid = 0;
    const int spawned = ::posix_spawn(&pid, self.c_str(), &quiet, nullptr, argv, envp.data());
    ASSERT_EQ(spawned, 0) << "cannot start " << self;
    children.push_back(pid);
  }
  ::posix_spawn_file_actions_destroy(&quiet);
  const auto readyCount = [&] {
    int ready = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
      ready += entry.path().filename().string().starts_with("ready.");
    }
    return ready;
  };
  for (int waited = 0; readyCount() < kProcesses && waited < 20'000; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  std::ofstream(dir.path() / "go") << "";
  std::map<std::string, int> sources;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid << " failed: " << status;
    std::ifstream result(dir.path() / fmt::format("result.{}", pid));
    std::string source;
    result >> source;
    ++sources[source];
  }
  EXPECT_EQ(sources, (std::map<std::string, int>{{"compiler", 1}, {"disk", kProcesses - 1}}));
}

}  // namespace
}  // namespace braze::device
