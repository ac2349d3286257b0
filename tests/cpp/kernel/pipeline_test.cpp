// The whole pipeline (plan, heuristics, kernel IR, CPU simulator) against the reference evaluator, on
// the small kernel corpus (fusions/kernel_corpus.h): the acceptance fusions (seed layer_norm, litGPT
// RoPE, softmax) and the layouts that break kernels. gpu_pipeline_test runs the same cases on a GPU.
#include "fusions/kernel_corpus.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

class Pipeline : public ::testing::TestWithParam<testing::KernelCaseMaker> {};

TEST_P(Pipeline, MatchesTheReferenceOnTheSimulator) {
  const testing::KernelCase c = GetParam().make();
  const kernel::CompiledPlan compiled = testing::expectSimulatorMatches(*c.fusion, c.inputs, c.options);
  if (c.expect) c.expect(compiled);
}

INSTANTIATE_TEST_SUITE_P(Simulator, Pipeline, ::testing::ValuesIn(testing::smallKernelCorpus()), testing::caseName);

TEST(Pipeline, OutOfBoundsAccessesAreReportedWithTheKernelName) {
  const testing::KernelCase c = testing::indexSelectCase();
  kernel::CompiledPlan compiled = kernel::compilePlan(explain(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
  testing::expectClose(kernel::runOnSimulator(compiled, c.inputs), evaluate(*c.fusion, c.inputs));
  const std::vector<HostValue> bad{c.inputs[0], testing::tensorOf(DataType::Int64, {2}, {0, 7})};
  try {
    kernel::runOnSimulator(compiled, bad);
    FAIL() << "expected an out-of-bounds report";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("braze_s"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braze
