// The FusionCache on a real GPU: every case of the kernel corpus, its inputs uploaded with their
// layouts and alignment, run five times through one cache (later runs are cache hits, on stream-ordered
// pool allocations; the last three launch multi-kernel plans as a CUDA graph, one of them on a second
// upload), outputs downloaded and compared with the reference evaluator. Skips without a GPU.
#include "fusions/kernel_corpus.h"
#include "kernel/run_gpu.h"
#include "runtime/fusion_cache.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

class GpuFusionCache : public ::testing::TestWithParam<testing::KernelCaseMaker> {};

TEST_P(GpuFusionCache, CachedRunsMatchTheReference) {
  BRAZE_SKIP_WITHOUT_GPU();
  const testing::KernelCase c = GetParam().make();
  // Two uploads of the inputs (same layouts and alignment, other addresses): a graph made for the
  // first must run the second with its arguments updated.
  std::vector<kernel::UploadedTensor> uploads;
  uploads.reserve(2 * c.inputs.size());
  std::vector<runtime::DeviceValue> inputs[2];
  for (auto& set : inputs) {
    for (const HostValue& v : c.inputs) {
      if (const auto* t = std::get_if<HostTensor>(&v)) {
        set.push_back(uploads.emplace_back(kernel::uploadToDevice(*t)).tensor);
      } else {
        set.push_back(std::get<ScalarValue>(v));
      }
    }
  }
  runtime::FusionCache cache(c.fusion, c.options.plan);
  const std::vector<HostValue> want = evaluate(*c.fusion, c.inputs);
  for (int run = 0; run < 5; ++run) {
    cache.useCudaGraphs(run >= 2);  // runs 2 to 4 launch plans of several kernels as one CUDA graph
    const auto outputs = cache.run(inputs[run == 3 ? 1 : 0]);
    std::vector<HostValue> got;
    for (const auto& out : outputs) got.push_back(kernel::downloadFromDevice(out.tensor));
    testing::expectClose(got, want, "run " + std::to_string(run) + (run >= 2 ? " (CUDA graph)" : ""));
  }
  EXPECT_EQ(cache.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(GpuSmall, GpuFusionCache, ::testing::ValuesIn(testing::smallKernelCorpus()),
                         testing::caseName);
INSTANTIATE_TEST_SUITE_P(GpuLarge, GpuFusionCache, ::testing::ValuesIn(testing::largeKernelCorpus()),
                         testing::caseName);

TEST(GpuFusionCacheErrors, WithoutADriverTheErrorSaysWhy) {
  if (runtime::cudaAvailable()) GTEST_SKIP() << "a CUDA driver and device are present";
  const testing::KernelCase c = testing::indexSelectCase();
  runtime::FusionCache cache(c.fusion);
  runtime::DeviceTensor x{0x1000, DataType::Float, {3}, {1}, 0};
  runtime::DeviceTensor i{0x2000, DataType::Int64, {2}, {1}, 0};
  try {
    cache.run({x, i});
    FAIL() << "ran without a driver";
  } catch (const Error& e) {
    // "no CUDA driver found; ...", or why a driver that is there is unusable (no device, cuInit failed).
    EXPECT_NE(std::string(e.what()).find(runtime::cudaUnavailableReason()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braze
