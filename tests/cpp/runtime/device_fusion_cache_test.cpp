// The FusionCache on the test device (fusions/test_device.h: the simulated device here, the GPU with
// BRAZE_TEST_DEVICE=cuda): every case of the kernel corpus, its inputs placed in device memory with
// their layouts and alignment, run five times through one cache (later runs are cache hits, on
// stream-ordered pool allocations; the last three launch multi-kernel plans as a graph, one of them on a
// second placement whose other addresses the graph must be updated with), outputs compared with the
// reference evaluator.
#include "fusions/kernel_corpus.h"
#include "exec/fusion_cache.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

class DeviceFusionCache : public ::testing::TestWithParam<testing::KernelCaseMaker> {};

TEST_P(DeviceFusionCache, CachedRunsMatchTheReference) {
  const testing::KernelCase c = GetParam().make();
  testing::TestDevice& device = testing::testDevice();
  const testing::TestDevice::Placed placed[2] = {device.place(c.inputs), device.place(c.inputs)};
  const auto cache = testing::testFusionCache(c.fusion, c.options.plan, c.options.device);
  const std::vector<HostValue> want = evaluate(*c.fusion, c.inputs);
  for (int run = 0; run < 5; ++run) {
    cache->useCudaGraphs(run >= 2);  // runs 2 to 4 launch plans of several kernels as one graph
    const auto outputs = cache->run(placed[run == 3 ? 1 : 0].values, nullptr, /*wait=*/true);
    std::vector<HostValue> got;
    for (const auto& out : outputs) got.push_back(device.fetch(out.tensor));
    testing::expectClose(got, want, device.name() + " run " + std::to_string(run) + (run >= 2 ? " (graph)" : ""));
  }
  EXPECT_EQ(cache->size(), 1u);
  if (c.expect) c.expect(cache->lastPlan()->compiled());
}

INSTANTIATE_TEST_SUITE_P(Small, DeviceFusionCache, ::testing::ValuesIn(testing::smallKernelCorpus()),
                         testing::caseName);
INSTANTIATE_TEST_SUITE_P(Large, DeviceFusionCache, ::testing::ValuesIn(testing::largeKernelCorpus()),
                         testing::caseName);

TEST(DeviceFusionCacheErrors, WithoutADriverTheErrorSaysWhy) {
  if (device::cudaAvailable()) GTEST_SKIP() << "a CUDA driver and device are present";
  const testing::KernelCase c = testing::indexSelectCase();
  exec::FusionCache cache(c.fusion);  // no device named: the driver's GPU of the inputs
  device::DeviceTensor x{0x1000, DataType::Float, {3}, {1}, 0};
  device::DeviceTensor i{0x2000, DataType::Int64, {2}, {1}, 0};
  try {
    cache.run({x, i});
    FAIL() << "ran without a driver";
  } catch (const Error& e) {
    // "no CUDA driver found; ...", or why a driver that is there is unusable (no device, cuInit failed).
    EXPECT_NE(std::string(e.what()).find(device::cudaUnavailableReason()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braze
