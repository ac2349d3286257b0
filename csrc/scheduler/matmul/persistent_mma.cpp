// The persistent warp-specialized wgmma schedule (MatmulParams::persistent): a block per SM, each walking
// the output tiles blockIdx.x, blockIdx.x + grid, ... (in clusters of cluster_m blocks, MatmulParams::cluster_m:
// each cluster walks tiles of cluster_m block tiles along M, cluster c taking c, c + clusters, ..., and its
// block of rank r the tile's r-th block row). Both roles walk the same tiles in loops of their
// own. The producer goes on to the next tile's slices as soon as stages are released, so while the compute
// warpgroups run a tile's epilogue (bias, the ops after the matmul, the stores) the next tile's first
// slices are already landing, where a block per tile starts its pipeline empty after the previous block's
// epilogue. The stages and their mbarrier phases run on across tiles: a slice's place in the walk
// (tile walked x slices + k slice) picks its stage and phase. The compute warpgroups release a tile's last
// slice once its wgmmas are complete, before the epilogue, so that every stage can be refilled meanwhile.
#include "scheduler/matmul/lowering.h"

#include "support/error.h"

namespace braze::scheduler {

void MatmulLowering::persistentMma() {
  const MatmulParams& p = p_;
  KernelBuilder& kb = kb_;
  const MatmulExtents& s = s_;
  BRAZE_ASSERT(p.wgmma && p.warp_specialized && p.split_k == 1,
               "a persistent matmul that is not warp-specialized wgmma");
  const int64_t consumers = p.warps_m / 4, cluster = p.cluster_m;
  BRAZE_ASSERT(p.grid % cluster == 0, "a persistent matmul of {} blocks in clusters of {}", p.grid, cluster);
  // A cluster's tile is `cluster` block tiles along M (the last may reach past M: its block loads zeros and
  // stores nothing); the clusters walk them as blocks walk tiles.
  const int64_t tiles = s.batch * ceilDiv(p.blocks_m, cluster) * p.blocks_n, slices = ceilDiv(s.k, p.block_k);
  const int64_t walkers = p.grid / cluster;
  const MmaDims dims = mmaDims(p.shape);
  const ExprId walker = cluster == 1 ? kb.blockIdx(0) : kb.letValue("cluster_id", kb.div(kb.blockIdx(0), kb.index(cluster)));
  const ExprId rank = cluster == 1 ? kb.index(0) : kb.letValue("rank", kb.clusterRank());
  // The tiles this block (or cluster) walks: those below `tiles` of walker + walkers x walk.
  const ExprId walked = kb.letValue(
      "walked", kb.div(kb.add(kb.sub(kb.index(tiles), walker), kb.index(walkers - 1)), kb.index(walkers)));
  const ExprId warp = kb.letValue("warp", kb.div(kb.threadIdx(0), kb.index(32)));
  const ExprId lane = kb.letValue("lane", kb.mod(kb.threadIdx(0), kb.index(32)));
  const ExprId g = kb.letValue("g", kb.div(lane, kb.index(4)));
  const ExprId t = kb.letValue("t", kb.mod(lane, kb.index(4)));
  const VarId acc = kb.arrayVar("acc", acc_type_, p.tiles_n * dims.c_values);
  kb.declare(acc);
  // The shared tiles and tensor maps; each loop places them in its tile.
  const Staging ta = staging(a_, p.a_order, true, true, p.blockRows(), s.m, kb.index(0));
  const Staging tb = staging(b_, p.b_order, true, linear_, p.blockCols(), s.n, kb.index(0));
  const auto [full, empty] = pipelineBarriers();
  const ExprId warpgroup = kb.letValue("warpgroup", kb.warpUniform(kb.div(kb.threadIdx(0), kb.index(128))));
  // The walk's tile `walk` and, in it, the first place through the stages of its slices; the block's tile
  // of it (block row and column).
  auto tileOf = [&](VarId walk) {
    return kb.letValue("tile_id", kb.add(walker, kb.mul(kb.ref(walk), kb.index(walkers))));
  };
  auto blockTile = [&](ExprId tile_id) -> std::pair<ExprId, ExprId> {
    const auto [bm, bn] = placeTile(tile_id, cluster);
    if (cluster == 1) return {bm, bn};
    return {kb.letValue("bm_block", kb.add(kb.mul(bm, kb.index(cluster)), rank)), bn};
  };
  auto sequenceOf = [&](VarId walk, ExprId slice) { return kb.add(kb.mul(kb.ref(walk), kb.index(slices)), slice); };

  kb.openConcurrentIf(kb.eq(warpgroup, kb.index(consumers)));
  if (p.producer_registers > 0) kb.setMaxNReg(static_cast<int>(p.producer_registers), false);
  {
    const VarId walk = kb.scalarVar("walk", DataType::Int64, /*is_index=*/true);
    kb.openFor(walk, kb.index(0), walked, kb.index(1), /*unroll=*/false);
    const auto [bm, bn] = blockTile(tileOf(walk));
    const Staging pa = placed(ta, kb.mul(bm, kb.index(p.blockRows())));
    const Staging pb = placed(tb, kb.mul(bn, kb.index(p.blockCols())));
    const VarId kt = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
    kb.openFor(kt, kb.index(0), kb.index(slices), kb.index(1), /*unroll=*/false);
    produceSlice(pa, pb, kb.ref(kt), sequenceOf(walk, kb.ref(kt)), full, empty);
    kb.close();
    kb.close();
  }
  kb.openElse();
  if (p.consumer_registers > 0) kb.setMaxNReg(static_cast<int>(p.consumer_registers), true);
  {
    const VarId walk = kb.scalarVar("walk", DataType::Int64, /*is_index=*/true);
    kb.openFor(walk, kb.index(0), walked, kb.index(1), /*unroll=*/false);
    const ExprId tile_id = tileOf(walk);
    const auto [bm, bn] = blockTile(tile_id);
    for (int64_t i = 0; i < p.tiles_n * dims.c_values; ++i) kb.localWrite(acc, kb.index(i), zeroOf(acc_type_));
    const VarId kt = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
    kb.openFor(kt, kb.index(0), kb.index(slices), kb.index(1), /*unroll=*/false);
    consumeSlice(acc, ta, tb, sequenceOf(walk, kb.ref(kt)), kb.le(kb.index(1), kb.ref(kt)), warpgroup, full, empty);
    kb.close();
    kb.wgmmaWait(0, acc);
    if (slices > 0) releaseSlice(sequenceOf(walk, kb.index(slices - 1)), empty);
    const ExprId row0 = kb.letValue("row0", kb.add(kb.mul(bm, kb.index(p.blockRows())), kb.mul(warp, kb.index(16))));
    const ExprId col0 = kb.letValue("col0", kb.mul(bn, kb.index(p.blockCols())));
    // A cluster's last tile may have a block row past M, whose outputs are none of the result's.
    const bool past_m = p.blocks_m % cluster != 0;
    if (past_m) kb.openIf(kb.lt(bm, kb.index(p.blocks_m)));
    finishMma({acc}, tile_id, kb.index(0), row0, col0, g, t);
    if (past_m) kb.close();
    kb.close();
  }
  kb.close();
  // No block of a cluster exits while another may still arrive on its mbarriers.
  if (cluster > 1) kb.clusterBarrier();
}

}  // namespace braze::scheduler
