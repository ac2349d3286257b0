// The persistent warp-specialized wgmma schedule in clusters of two blocks along M (MatmulParams::cluster_m):
// the two blocks of a cluster take neighbouring tiles along M, which read the same B tiles, and each loads
// half of every B box and multicasts it into both blocks' shared memory; a stage is refilled once both
// blocks' compute warpgroups released it. On a described four-SM H100 (two clusters) every cluster walks
// several pairs of tiles, so the simulator (which runs a cluster's blocks together and orders them only
// through mbarriers and cluster barriers) checks the hand-over between the blocks: outputs equal the
// reference through the whole execute path (both B orders, an odd count of tile rows whose last cluster has a
// block past M, batched 3D maps, a bias and relu epilogue), and the same kernel with a block's release to the
// other block dropped, or without its last cluster barrier, is reported. NVRTC compiles it for sm_90a into
// multicast TMA loads and cluster barriers.
#include "fusions/wgmma_device.h"

#include "codegen/source_emitter.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;

DeviceInfo clusterDevice(const std::string& tuning = "") {
  return testing::fourSmH100("matmul_wgmma=1, matmul_warp_specialized=1, matmul_persistent=1, matmul_cluster=2" +
                             (tuning.empty() ? "" : ", " + tuning));
}

TEST(WgmmaCluster, MatmulsMatchTheReference) {
  struct Case {
    testing::KernelCase c;
    const char* tuning;
    const char* what;  // and the pairs of tiles the 2 clusters walk
  };
  const Case cases[] = {
      {testing::matmulCase({500, 200}, {200, 600}, DataType::BFloat16, false, DataType::Null, 81), "",
       "bf16, B row-major (mn-major boxes split along K), 4 x 3 tiles of 128 x 256: 2 x 3 pairs"},
      {testing::matmulCase({650, 520}, {520, 130}, DataType::Half, true, DataType::Null, 82), "matmul_stages=3",
       "f16, B k-major (boxes split along N), 6 x 1 tiles through three stages: 3 pairs"},
      {testing::matmulCase({300, 200}, {200, 520}, DataType::BFloat16, true, DataType::Null, 83), "",
       "3 x 3 tiles: each cluster's last pair of a column has a block past M"},
      {testing::matmulCase({3, 300, 400}, {3, 400, 72}, DataType::Int8, true, DataType::Null, 84), "",
       "s8, both batched (3D maps): 3 x 2 x 1 pairs, the last block of each batch past M"},
      {testing::linearBiasReluCase(530, 260, 136), "", "linear, bias and relu in the epilogue"},
      {testing::matmulCase({1100, 64}, {64, 300}, DataType::BFloat16, true, DataType::Null, 88), "",
       "9 x 2 tiles in raster groups of 8 block rows (4 cluster rows): 5 x 2 pairs, the last past M"},
  };
  for (const Case& x : cases) {
    device::SimDeviceOps sim;
    std::unique_ptr<exec::FusionCache> cache;
    const Kernel& k = testing::runOnSimulator(x.c, clusterDevice(x.tuning), cache, sim, x.what);
    EXPECT_NE(k.summary.find("persistent: 2 clusters of 2 blocks along M walking the output tiles, B's boxes multicast"),
              std::string::npos)
        << x.what << ": " << k.summary;
    EXPECT_EQ(k.grid[0], 4) << x.what;
    EXPECT_EQ(k.cluster, 2) << x.what;
  }
}

TEST(WgmmaCluster, FewTilesAlongMTakeNoClusters) {
  // One tile row: no block would share B's tiles.
  const testing::KernelCase c = testing::matmulCase({100, 200}, {200, 600}, DataType::BFloat16, true, DataType::Null, 85);
  const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), clusterDevice());
  const Kernel& k = testing::onlyKernel(compiled);
  EXPECT_EQ(k.cluster, 1) << k.summary;
  EXPECT_NE(k.summary.find("persistent: 3 blocks walking the output tiles"), std::string::npos) << k.summary;
}

// Drops a block's arrivals on the other block's `empty` mbarriers (rank `rank`'s).
void dropReleasesTo(std::vector<Stmt>& stmts, VarId empty, const Kernel& k, int64_t rank) {
  testing::dropStatements(stmts, [&](const Stmt& s) {
    return s.kind == SKind::MbarrierArriveExpectTx && s.var == empty && s.c >= 0 &&
           k.exprs[s.c].kind == EKind::ConstInt && k.exprs[s.c].i == rank;
  });
}

TEST(WgmmaCluster, TheSimulatorReportsABlockThatDoesNotWaitForTheOther) {
  const testing::KernelCase c = testing::matmulCase({500, 200}, {200, 520}, DataType::Half, true, DataType::Null, 86);
  const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), clusterDevice("matmul_stages=3"));
  const Kernel& k = testing::onlyKernel(compiled);
  ASSERT_EQ(k.cluster, 2);
  ASSERT_EQ(testing::simulatedReport(k, c), "");
  const VarId empty = testing::varNamed(k, "empty");
  // The blocks release their stages to block 0 only: block 1's producer waits for releases that never come.
  {
    Kernel broken = k;
    dropReleasesTo(broken.body.mut(), empty, k, 1);
    const std::string report = testing::simulatedReport(broken, c);
    EXPECT_NE(report.find("which never completes"), std::string::npos) << report;
  }
  // No cluster barrier ends the kernel: a block may exit while the other still arrives on its mbarriers.
  {
    Kernel broken = k;
    ASSERT_EQ(broken.body.back().kind, SKind::ClusterBarrier);
    broken.body.mut().pop_back();
    const std::string report = testing::simulatedReport(broken, c);
    EXPECT_NE(report.find("the cluster's blocks end with no cluster barrier"), std::string::npos) << report;
  }
}

TEST(WgmmaCluster, CompilesForSm90aIntoMulticastLoads) {
  const testing::KernelCase c = testing::matmulCase({600, 264}, {264, 1040}, DataType::BFloat16, true, DataType::Null, 87);
  const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), clusterDevice());
  const Kernel& k = testing::onlyKernel(compiled);
  ASSERT_EQ(k.cluster, 2) << k.summary;
  EXPECT_NE(codegen::emitCuda(k).find("__cluster_dims__(2, 1, 1)"), std::string::npos);
  std::string missing;
  const auto sass = testing::warpSpecializedSass(k, missing);
  if (!sass) GTEST_SKIP() << missing;
  EXPECT_NE(sass->find("MULTICAST"), std::string::npos) << *sass;
  EXPECT_NE(sass->find("UCGABAR_ARV"), std::string::npos) << *sass;
}

}  // namespace
}  // namespace braze
