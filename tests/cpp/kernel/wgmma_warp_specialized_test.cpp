// The warp-specialized wgmma schedule (MatmulParams::warp_specialized): a producer warpgroup whose thread
// issues each stage's TMA boxes once the stage is released on its `empty` mbarrier, and compute
// warpgroups that wait on the stage's `full` mbarrier, issue its wgmmas and release the stage before
// last; each role in a loop of its own, no block barrier in the main loop, registers moved from the
// producer to the compute warpgroups (setmaxnreg). On the simulator, which interleaves the two roles'
// loops, through the whole execute path, it equals the reference (2D and 3D maps, both tile orders, 8-bit
// operands, K of many more slices than stages, four compute warpgroups); the simulator orders the
// stages' accesses only through the mbarriers, so the same kernel with the consumers' wait, the
// producer's wait or the consumers' release taken out is reported (a read of a stage in flight, a stage
// re-armed before its slice was waited for, a wait that never completes). NVRTC compiles it for sm_90a
// with an empty log (no wgmma serialized, no wait the compiler had to insert, no setmaxnreg ignored) into
// HGMMA fed by UTMALDG, the registers moved by USETMAXREG, and no LDGSTS.
#include "fusions/wgmma_device.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;

DeviceInfo warpSpecializedDevice(const std::string& tuning = "") {
  return testing::fourSmH100("matmul_wgmma=1, matmul_warp_specialized=1" + (tuning.empty() ? "" : ", " + tuning));
}

TEST(WgmmaWarpSpecialized, MatmulsMatchTheReference) {
  struct Case {
    testing::KernelCase c;
    const char* tuning;
    const char* what;
  };
  const Case cases[] = {
      {testing::matmulCase({97, 200}, {200, 72}, DataType::BFloat16, false, DataType::Null, 61), "",
       "bf16, B row-major (mn-major boxes), M, N and K past the tiles"},
      {testing::matmulCase({70, 520}, {520, 130}, DataType::Half, true, DataType::Null, 62), "matmul_stages=3",
       "f16, B k-major, nine slices through three stages"},
      {testing::matmulCase({2, 70, 400}, {2, 400, 72}, DataType::Int8, true, DataType::Null, 63), "",
       "s8, both batched (3D maps), four slices of 128"},
      {testing::matmulCase({200, 320}, {320, 64}, DataType::BFloat16, false, DataType::BFloat16, 64),
       "matmul_block_m=256, matmul_block_n=64", "four compute warpgroups of 64 x 64"},
      {testing::matmulCase({40, 24}, {24, 72}, DataType::BFloat16, false, DataType::Null, 65), "",
       "one slice: the consumers release nothing"},
  };
  for (const Case& x : cases) {
    device::SimDeviceOps sim;
    std::unique_ptr<exec::FusionCache> cache;
    const Kernel& k = testing::runOnSimulator(x.c, warpSpecializedDevice(x.tuning), cache, sim, x.what);
    EXPECT_NE(k.summary.find("warp-specialized TMA pipeline"), std::string::npos) << x.what << ": " << k.summary;
    EXPECT_EQ(k.threadsPerBlock() % 128, 0);
    EXPECT_EQ(k.threadsPerBlock(), (k.summary.find("4 warpgroups") != std::string::npos ? 4 : 2) * 128 + 128) << k.summary;
  }
}

TEST(WgmmaWarpSpecialized, TheSimulatorReportsAStageUsedOutOfTurn) {
  const testing::KernelCase c = testing::matmulCase({70, 520}, {520, 130}, DataType::Half, true, DataType::Null, 62);
  const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), warpSpecializedDevice("matmul_stages=3"));
  const Kernel& k = testing::onlyKernel(compiled);
  ASSERT_EQ(testing::simulatedReport(k, c), "");
  const VarId full = testing::varNamed(k, "full"), empty = testing::varNamed(k, "empty");
  auto without = [&](SKind kind, VarId var) {
    Kernel broken = k;
    testing::dropStatements(broken.body.mut(), [&](const Stmt& s) { return s.kind == kind && s.var == var; });
    return testing::simulatedReport(broken, c);
  };
  // The compute warpgroups read a stage without waiting for its boxes.
  EXPECT_NE(without(SKind::MbarrierWait, full).find("while a TMA copy into it is in flight"), std::string::npos)
      << without(SKind::MbarrierWait, full);
  // The producer does not wait for a stage's release: running ahead of the compute warpgroups, it
  // re-arms the stage's `full` mbarrier for the next slice before they waited for the one there.
  const std::string refill = without(SKind::MbarrierWait, empty);
  EXPECT_NE(refill.find("arrives on mbarrier full whose phase has all its 1 arrivals and has not been waited on"),
            std::string::npos)
      << refill;
  // The compute warpgroups never release a stage: the producer's wait never completes.
  const std::string hang = without(SKind::MbarrierArriveExpectTx, empty);
  EXPECT_NE(hang.find("which never completes"), std::string::npos) << hang;
}

TEST(WgmmaWarpSpecialized, CompilesForSm90aWithItsWgmmasAsynchronous) {
  // 128 x 192 and 128 x 256 tiles (128 accumulators a thread, within the compute warpgroups' 232 registers:
  // no spills).
  const testing::KernelCase cases[] = {
      testing::matmulCase({300, 264}, {264, 520}, DataType::BFloat16, true, DataType::Null, 66),
      testing::matmulCase({256, 256}, {256, 512}, DataType::BFloat16, false, DataType::Null, 67),
  };
  for (const testing::KernelCase& c : cases) {
    const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), warpSpecializedDevice());
    const Kernel& k = testing::onlyKernel(compiled);
    ASSERT_NE(k.summary.find("warp-specialized"), std::string::npos) << k.summary;
    std::string missing;
    const auto sass = testing::warpSpecializedSass(k, missing);
    if (!sass) GTEST_SKIP() << missing;
    EXPECT_EQ(sass->find("LDGSTS"), std::string::npos);
  }
}

}  // namespace
}  // namespace braze
