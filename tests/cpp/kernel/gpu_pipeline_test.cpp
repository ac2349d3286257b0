// The whole pipeline on a real GPU against the reference evaluator: every case of the kernel corpus
// (fusions/kernel_corpus.h), small and large, compiled with NVRTC for the device and launched through
// the driver. Where the simulator passes and the GPU fails, the emitted CUDA (not the kernel IR) is
// wrong. Skips, saying why, on machines without a CUDA driver, a GPU or NVRTC.
#include "fusions/kernel_corpus.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

class GpuPipeline : public ::testing::TestWithParam<testing::KernelCaseMaker> {};

TEST_P(GpuPipeline, MatchesTheReference) {
  BRAZE_SKIP_WITHOUT_GPU();
  const testing::KernelCase c = GetParam().make();
  const kernel::CompiledPlan compiled = testing::expectGpuMatches(*c.fusion, c.inputs, c.options);
  if (c.expect) c.expect(compiled);
}

INSTANTIATE_TEST_SUITE_P(GpuSmall, GpuPipeline, ::testing::ValuesIn(testing::smallKernelCorpus()), testing::caseName);
INSTANTIATE_TEST_SUITE_P(GpuLarge, GpuPipeline, ::testing::ValuesIn(testing::largeKernelCorpus()), testing::caseName);

TEST(GpuRun, ARunIsRepeatableAndLeavesTheInputsAlone) {
  BRAZE_SKIP_WITHOUT_GPU();
  // The second run finds its kernels in the module cache; both must give the same bits.
  const testing::KernelCase c = testing::ropeCase({.batch = 2, .seq = 5, .heads = 4, .groups = 2, .head = 16}, 3);
  const std::vector<double> before = testing::valuesOf(testing::asTensor(c.inputs[0]));
  const auto first = kernel::executeOnGpu(*c.fusion, c.inputs);
  const auto second = kernel::executeOnGpu(*c.fusion, c.inputs);
  testing::expectSameValues(second, first);
  EXPECT_EQ(testing::valuesOf(testing::asTensor(c.inputs[0])), before);
}

TEST(GpuRun, WithoutADriverSaysSoAndPointsToTheSimulator) {
  if (runtime::cudaAvailable()) GTEST_SKIP() << "a CUDA driver and device are present";
  const testing::KernelCase c = testing::indexSelectCase();
  try {
    kernel::executeOnGpu(*c.fusion, c.inputs);
    FAIL() << "executeOnGpu ran without a driver";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("host inputs run on the CPU simulator"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braze
