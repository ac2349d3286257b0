// The persistent warp-specialized wgmma schedule (MatmulParams::persistent): a block per SM walking the
// output tiles, its producer filling the next tile's stages while the compute warpgroups run this tile's
// epilogue, the stages' mbarrier phases running on across tiles. On a described four-SM H100 every block
// walks several tiles, so the simulator (which interleaves the roles' loops and orders the stages only
// through the mbarriers) checks the hand-over between tiles: outputs equal the reference through the whole
// execute path (both tile orders, batched 3D maps whose batch changes within a block's walk, a bias and
// relu epilogue, an epilogue that splits heads, 8-bit operands, four compute warpgroups, K of one slice),
// and the same kernel without the consumers' wait, the producer's wait or the release of a tile's last
// slice is reported. NVRTC compiles it for sm_90a with an empty log into HGMMA fed by UTMALDG without spills.
#include "fusions/wgmma_device.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;

DeviceInfo persistentDevice(const std::string& tuning = "") {
  return testing::fourSmH100("matmul_wgmma=1, matmul_warp_specialized=1, matmul_persistent=1" +
                             (tuning.empty() ? "" : ", " + tuning));
}

TEST(WgmmaPersistent, MatmulsMatchTheReference) {
  struct Case {
    testing::KernelCase c;
    const char* tuning;
    const char* what;  // and the output tiles the 4 blocks walk
  };
  const Case cases[] = {
      {testing::matmulCase({300, 200}, {200, 600}, DataType::BFloat16, false, DataType::Null, 71), "",
       "bf16, B row-major (mn-major boxes), M, N and K past the tiles: 3 x 3 tiles of 128 x 256"},
      {testing::matmulCase({1040, 520}, {520, 130}, DataType::Half, true, DataType::Null, 72), "matmul_stages=3",
       "f16, B k-major, nine slices a tile through three stages: 9 x 1 tiles of 128 x 192"},
      {testing::matmulCase({3, 300, 400}, {3, 400, 72}, DataType::Int8, true, DataType::Null, 73), "",
       "s8, both batched (3D maps), a block's tiles in different batches: 3 x 3 x 1 tiles of 128 x 128"},
      {testing::matmulCase({2100, 320}, {320, 64}, DataType::BFloat16, false, DataType::BFloat16, 74),
       "matmul_block_m=256, matmul_block_n=64",
       "four compute warpgroups, five slices a tile through four stages: 9 x 1 tiles of 256 x 64"},
      {testing::matmulCase({1100, 24}, {24, 72}, DataType::BFloat16, false, DataType::Null, 75), "",
       "one slice a tile, only the last slice's release: 9 x 1 tiles"},
      {testing::linearBiasReluCase(330, 260, 136), "", "linear, bias and relu in the epilogue: 2 x 3 x 2 tiles"},
      // One slice of K: the bf16 result, rounded before its cast to float, then rounds as the reference's sum.
      {testing::headSplitMatmulCase(400, 64, 512, 4, 76), "", "heads split by the epilogue's index maps: 4 x 2 tiles"},
  };
  for (const Case& x : cases) {
    device::SimDeviceOps sim;
    std::unique_ptr<exec::FusionCache> cache;
    const Kernel& k = testing::runOnSimulator(x.c, persistentDevice(x.tuning), cache, sim, x.what);
    EXPECT_NE(k.summary.find("warp-specialized TMA pipeline"), std::string::npos) << x.what << ": " << k.summary;
    EXPECT_NE(k.summary.find("persistent: 4 blocks walking the output tiles"), std::string::npos)
        << x.what << ": " << k.summary;
    EXPECT_EQ(k.grid[0], 4) << x.what;
  }
}

// Drops the releases on `empty` placed straight in a loop's body: a tile's last slice's, in the walk (the
// k loop's releases are inside an `if` of their own). The count dropped.
int dropLastSliceReleases(std::vector<Stmt>& stmts, VarId empty) {
  int dropped = 0;
  for (Stmt& s : stmts) {
    if (s.kind == SKind::For) {
      dropped += static_cast<int>(std::erase_if(s.body, [&](const Stmt& x) {
        return x.kind == SKind::If && x.body.size() == 1 && x.body[0].kind == SKind::MbarrierArriveExpectTx &&
               x.body[0].var == empty;
      }));
    }
    dropped += dropLastSliceReleases(s.body, empty);
    dropped += dropLastSliceReleases(s.orelse, empty);
  }
  return dropped;
}

TEST(WgmmaPersistent, TheSimulatorReportsAStageUsedOutOfTurn) {
  // Nine tiles of 128 x 192, four slices each through three stages: every block's walk crosses tiles with
  // stages in flight, and a slice's stage is not its k slice's.
  const testing::KernelCase c = testing::matmulCase({300, 200}, {200, 520}, DataType::Half, true, DataType::Null, 77);
  const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), persistentDevice("matmul_stages=3"));
  const Kernel& k = testing::onlyKernel(compiled);
  ASSERT_EQ(k.grid[0], 4);
  ASSERT_EQ(testing::simulatedReport(k, c), "");
  const VarId full = testing::varNamed(k, "full"), empty = testing::varNamed(k, "empty");
  // The compute warpgroups read a stage without waiting for its boxes.
  {
    Kernel broken = k;
    testing::dropStatements(broken.body.mut(), [&](const Stmt& s) { return s.kind == SKind::MbarrierWait && s.var == full; });
    const std::string report = testing::simulatedReport(broken, c);
    EXPECT_NE(report.find("while a TMA copy into it is in flight"), std::string::npos) << report;
  }
  // The producer does not wait for a stage's release: it re-arms the stage's `full` mbarrier for the next
  // slice before the compute warpgroups waited for the one there.
  {
    Kernel broken = k;
    testing::dropStatements(broken.body.mut(), [&](const Stmt& s) { return s.kind == SKind::MbarrierWait && s.var == empty; });
    const std::string report = testing::simulatedReport(broken, c);
    EXPECT_NE(report.find("arrives on mbarrier full whose phase has all its 1 arrivals and has not been waited on"),
              std::string::npos)
        << report;
  }
  // A tile's last slice is never released: the producer's wait for its stage never completes.
  {
    Kernel broken = k;
    ASSERT_EQ(dropLastSliceReleases(broken.body.mut(), empty), 1);
    const std::string report = testing::simulatedReport(broken, c);
    EXPECT_NE(report.find("which never completes"), std::string::npos) << report;
  }
}

TEST(WgmmaPersistent, CompilesForSm90aWithoutSpills) {
  const testing::KernelCase cases[] = {
      testing::matmulCase({600, 264}, {264, 1040}, DataType::BFloat16, true, DataType::Null, 78),
      testing::linearBiasReluCase(520, 1040, 256),
  };
  for (const testing::KernelCase& c : cases) {
    const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), persistentDevice());
    const Kernel& k = testing::onlyKernel(compiled);
    ASSERT_NE(k.summary.find("persistent"), std::string::npos) << k.summary;
    std::string missing;
    if (!testing::warpSpecializedSass(k, missing)) GTEST_SKIP() << missing;
  }
}

}  // namespace
}  // namespace braze
