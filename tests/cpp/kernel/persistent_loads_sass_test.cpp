// A persistent kernel's loads of a row leave together: in the SASS NVRTC makes of it, the 128-bit loads
// of a row's chunks (and of the rows an inner-outer kernel's extra reduction walks) stand between the
// same two branches, so their round trips to memory overlap. A branch between two of them means the
// second waits for the first's data (the lowering guarded each chunk on its own, or walked the extra rows
// one at a time: a dozen round trips for one). Checked on a described H100 (sm_90); no GPU needed.
#include "fusions/backward_cases.h"
#include "fusions/kernel_util.h"
#include "fusions/layer_norm.h"
#include "codegen/source_emitter.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

namespace braze {
namespace {

// The 128-bit global loads between consecutive branches (or exits) of the SASS, per stretch that has
// any, in code order.
std::vector<int> wideLoadRuns(const std::string& sass) {
  std::istringstream lines(sass);
  std::string line;
  std::vector<int> runs;
  int run = 0;
  while (std::getline(lines, line)) {
    if (line.find(" BRA ") != std::string::npos || line.find("EXIT") != std::string::npos) {
      if (run > 0) runs.push_back(run);
      run = 0;
    } else if (line.find("LDG.E.128") != std::string::npos) {
      ++run;
    }
  }
  if (run > 0) runs.push_back(run);
  return runs;
}
int most(const std::vector<int>& runs) { return runs.empty() ? 0 : *std::max_element(runs.begin(), runs.end()); }

// The SASS of the plan's kernel whose name ends with `suffix`, or nullopt without NVRTC or cuobjdump.
std::optional<std::string> sassOf(const LoweredPlan& plan, const std::string& suffix) {
  for (const auto& k : plan.kernels) {
    if (!k || k->name.size() < suffix.size() || k->name.compare(k->name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const auto cubin = device::compileCuda(codegen::emitCuda(*k), k->name, {.arch = "sm_90"});
    return device::disassemble(cubin.cubin);
  }
  ADD_FAILURE() << "no kernel named *" << suffix << " in\n" << plan.plan.toString();
  return std::nullopt;
}

TEST(PersistentLoadsSass, TheChunksOfALayerNormRowAreLoadedTogether) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  // bf16 rows of 4096: 128 threads per row, 4 chunks of 8 each, the row kept in registers.
  Fusion f;
  testing::defineLayerNorm(f, {.batch = 2, .seq = 64, .hidden = 4096});
  const auto plan = lowerPlan(planSegments(f, testing::randomInputs(f, 3, {{2, 64, 4096}, {4096}, {4096}})),
                              DeviceInfo::h100Sxm());
  const kernel::Kernel& k = testing::onlyKernel(plan);
  ASSERT_NE(k.summary.find("4 chunks per thread (row kept in registers"), std::string::npos) << k.summary;
  const auto sass = sassOf(plan, "inner_persistent");
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  const std::vector<int> runs = wideLoadRuns(*sass);
  ASSERT_FALSE(runs.empty()) << *sass;
  EXPECT_GE(runs.front(), 4) << *sass;  // the first pass's loads: the whole row
}

TEST(PersistentLoadsSass, ALayerNormBackwardLoadsItsRowsAndItsExtraRowsTogether) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  // nanoGPT's layer-norm backward with the bias grad of the next linear (the compare.py row): a row of
  // grad_out and of x in 3 chunks each per thread (6 loads), and the linear's [2048, 3072] rows walked
  // 4 at a time in 3 chunks each (12 loads).
  const testing::KernelCase c = testing::normBackwardCase({.rows = 2048, .hidden = 768, .extra_width = 3072}, 5);
  const auto plan = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
  const auto sass = sassOf(plan, "inner_outer_persistent");
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  bool found = false;
  for (const auto& k : plan.kernels) {
    if (!k || k->summary.find("3 chunks per thread (row kept in registers") == std::string::npos) continue;
    found = true;
    EXPECT_NE(k->summary.find("3072 more columns over the rows: vectorize 8, 3 chunks per thread, 4 rows in flight"),
              std::string::npos)
        << k->summary;
  }
  EXPECT_TRUE(found) << plan.plan.toString();
  const std::vector<int> runs = wideLoadRuns(*sass);
  ASSERT_FALSE(runs.empty()) << *sass;
  EXPECT_GE(runs.front(), 6) << *sass;  // a row group's first loads: both rows whole
  EXPECT_GE(most(runs), 12) << *sass;   // the extra rows, 4 in flight
}

}  // namespace
}  // namespace braze
