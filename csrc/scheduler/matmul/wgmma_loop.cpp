// The wgmma main loop: K slices go through a ring of `stages` shared tiles, stored in wgmma's 128-byte
// swizzled layout (Staging::swizzled), and each warpgroup issues one wgmma per k step of a slice, reading
// A's 64 rows of its own and all of B's columns straight from the tiles. A slice arrives by cp.async, or
// (an operand computed as it is loaded) through registers, or, with TMA, as boxes of both operands that
// one thread issues and every thread waits for on the stage's mbarrier. An operand through registers is
// loaded and stored after the slice's wgmmas are issued, so its loads run while they compute.
//
// A slice's wgmmas run while the next slice's are issued: after committing slice kt's group a warpgroup
// waits only for slice kt - 1's. So the stage refilled at iteration kt is slice kt - 2's, which every
// warpgroup finished with before the barrier of iteration kt (it waited for it at iteration kt - 1), and
// the copies run stages - 2 slices ahead of the wgmmas. cp.async's writes and the stores go through the
// generic proxy and wgmma reads through the async one: each thread fences its writes before the barrier.
// TMA writes through the async proxy itself; its stage's mbarrier completes phase kt / stages of the
// stage when slice kt has landed, so the wait is for that phase's parity. warpSpecializedLoop hands the
// stages between a producer warpgroup and the compute warpgroups through mbarriers instead of barriers.
#include "scheduler/matmul/lowering.h"

#include "support/error.h"

namespace braze::scheduler {

void MatmulLowering::tmaSlice(const Staging& ta, const Staging& tb, ExprId slice, ExprId stage, VarId full) {
  KernelBuilder& kb = kb_;
  const int64_t element = sizeOf(a_->dtype()), line = 128 / element;
  // A box counts all its bytes, zeros filled outside the matrix included.
  const int64_t bytes = (ta.boxes * ta.rows + tb.boxes * tb.rows) * 128;
  kb.mbarrierArriveExpectTx(full, stage, kb.index(bytes));
  for (const Staging* t : {&ta, &tb}) {
    const ExprId k0 = kb.mul(slice, kb.index(p_.block_k));
    for (int64_t box = 0; box < t->boxes; ++box) {
      // Box `box` covers the tile rows' elements [box * line, (box + 1) * line): lines box * rows on
      // (Staging::tileIndex), k for k-major tiles and m / n for mn-major ones.
      const ExprId along = kb.index(box * line);
      const bool k_major = t->order == TileOrder::KMajor;
      const ExprId column = k_major ? kb.add(k0, along) : kb.add(t->mn_base, along);
      ExprId row = k_major ? t->mn_base : k0;
      ExprId at = kb.add(kb.mul(stage, kb.index(t->rows * t->row_elements)), kb.index(box * t->rows * line));
      if (t->multicast == 1) {
        kb.tmaLoad(t->tiles, at, t->tma_tensor, column, row, full, stage, t->tma_batch);
        continue;
      }
      // This block's part of the box's rows, into the same place in every block of the cluster.
      const ExprId part = kb.mul(kb.clusterRank(), kb.index(t->rows / t->multicast));
      row = kb.add(row, part);
      at = kb.add(at, kb.mul(part, kb.index(line)));
      kb.tmaLoad(t->tiles, at, t->tma_tensor, column, row, full, stage, t->tma_batch,
                 static_cast<int32_t>((1 << t->multicast) - 1));
    }
  }
}

void MatmulLowering::stageWgmmas(VarId acc, const Staging& ta, const Staging& tb, ExprId stage, ExprId warpgroup) {
  const MatmulParams& p = p_;
  KernelBuilder& kb = kb_;
  // Where an operand's k step `ks` of stage `stage` starts (an element of its tiles), for the warpgroup's
  // first m (A) or n 0 (B), and how its lines are laid out (kernel/wgmma.h).
  const int64_t element = sizeOf(a_->dtype()), depth = wgmmaK(element);
  const int64_t line = 128 / element;  // elements of a 128-byte line
  auto start = [&](const Staging& t, ExprId mn_first, int64_t ks) {
    const ExprId base = kb.mul(stage, kb.index(t.rows * t.row_elements));
    if (t.order == TileOrder::KMajor) {
      return kb.add(base, kb.add(kb.mul(mn_first, kb.index(line)), kb.index(ks * depth)));
    }
    // mn-major: groups of p.block_k lines per `line` m or n; a k step is `depth` lines.
    return kb.add(base, kb.add(kb.mul(kb.div(mn_first, kb.index(line)), kb.index(p.block_k * line)),
                               kb.index(ks * depth * line)));
  };
  auto operand = [&](const Staging& t) {
    return WgmmaOperand{t.order == TileOrder::MnMajor, static_cast<int32_t>(p.block_k * 128), 1024};
  };
  const ExprId a_first = kb.mul(warpgroup, kb.index(kWgmmaM));
  kb.wgmmaFence(acc);
  for (int64_t ks = 0; ks < p.block_k / depth; ++ks) {
    kb.wgmma(acc, static_cast<int>(p.blockCols()), ta.tiles, start(ta, a_first, ks), operand(ta), tb.tiles,
             start(tb, kb.index(0), ks), operand(tb));
  }
  kb.wgmmaCommit();
}

void MatmulLowering::wgmmaLoop(VarId acc, const Staging& ta, const Staging& tb, ExprId count) {
  const MatmulParams& p = p_;
  KernelBuilder& kb = kb_;
  BRAZE_ASSERT(p.stages >= 3, "a wgmma pipeline of {} stages (a slice in flight, one computed and one arriving: 3 at least)",
               p.stages);
  BRAZE_ASSERT(!p.tma || (ta.tma_tensor >= 0 && tb.tma_tensor >= 0), "a TMA pipeline with an operand not read by TMA");
  if (p.warp_specialized) return warpSpecializedLoop(acc, ta, tb, count);
  const int64_t ahead = p.stages - 2;
  const ExprId first_thread = kb.eq(kb.threadIdx(0), kb.index(0));
  VarId full = -1;
  if (p.tma) {
    full = kb.arrayVar("full", DataType::Int64, p.stages, VarKind::Mbarriers);
    kb.declare(full);
    kb.openIf(first_thread);
    for (int64_t stage = 0; stage < p.stages; ++stage) kb.mbarrierInit(full, kb.index(stage), 1);
    kb.close();
    kb.barrier();  // every thread sees the barriers initialized
  }
  // Slice `slice` into stage `stage`: by cp.async or registers (then a cp.async group), or by TMA.
  auto fill = [&](ExprId slice, ExprId stage) {
    if (p.tma) {
      kb.openIf(first_thread);
      tmaSlice(ta, tb, slice, stage, full);
      kb.close();
      return;
    }
    copySlice(ta, slice, stage);
    copySlice(tb, slice, stage);
  };
  for (int64_t slice = 0; slice < ahead; ++slice) {
    kb.openIf(kb.lt(kb.index(slice), count));
    fill(kb.index(slice), kb.index(slice));
    kb.close();
    if (!p.tma) kb.cpAsyncCommit();
  }
  const ExprId warpgroup = kb.letValue("warpgroup", kb.div(kb.threadIdx(0), kb.index(128)));
  const VarId kt = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
  kb.openFor(kt, kb.index(0), count, kb.index(1), /*unroll=*/false);
  const ExprId stage = kb.letValue("stage", kb.mod(kb.ref(kt), kb.index(p.stages)));
  if (p.tma) {
    kb.mbarrierWait(full, stage, kb.mod(kb.div(kb.ref(kt), kb.index(p.stages)), kb.index(2)));
  } else {
    kb.cpAsyncWait(static_cast<int>(ahead - 1));
    kb.proxyFence();
  }
  kb.barrier();
  stageWgmmas(acc, ta, tb, stage, warpgroup);
  kb.wgmmaWait(1);
  const ExprId next = kb.add(kb.ref(kt), kb.index(ahead));
  kb.openIf(kb.lt(next, count));
  fill(next, kb.mod(next, kb.index(p.stages)));
  kb.close();
  if (!p.tma) kb.cpAsyncCommit();
  kb.close();
  kb.wgmmaWait(0, acc);
}

std::pair<VarId, VarId> MatmulLowering::pipelineBarriers() {
  KernelBuilder& kb = kb_;
  const int64_t consumers = p_.warps_m / 4;
  const VarId full = kb.arrayVar("full", DataType::Int64, p_.stages, VarKind::Mbarriers);
  const VarId empty = kb.arrayVar("empty", DataType::Int64, p_.stages, VarKind::Mbarriers);
  kb.declare(full);
  kb.declare(empty);
  kb.openIf(kb.eq(kb.threadIdx(0), kb.index(0)));
  for (int64_t stage = 0; stage < p_.stages; ++stage) {
    kb.mbarrierInit(full, kb.index(stage), 1);  // the producer's arrival, with the stage's bytes
    // Each compute warpgroup's, of every block of the cluster: this block's producer multicasts into all of
    // them, so a stage is free only once each of them released it.
    kb.mbarrierInit(empty, kb.index(stage), static_cast<int>(consumers * p_.cluster_m));
  }
  kb.close();
  // The last block-wide barrier: every thread sees the mbarriers initialized (with clusters, every thread
  // of the cluster: the other blocks copy to and arrive on them).
  if (p_.cluster_m > 1) {
    kb.clusterBarrier();
  } else {
    kb.barrier();
  }
  return {full, empty};
}

void MatmulLowering::produceSlice(const Staging& ta, const Staging& tb, ExprId slice, ExprId sequence, VarId full,
                                  VarId empty) {
  KernelBuilder& kb = kb_;
  const int64_t stages = p_.stages;
  const ExprId stage = kb.letValue("stage", kb.mod(sequence, kb.index(stages)));
  // The whole warpgroup waits (its first thread alone would spin in a branch diverging within a warp).
  kb.openIf(kb.le(kb.index(stages), sequence));
  // The release of the stage's previous slice completed its phase sequence / stages - 1, of the parity of
  // sequence / stages + 1 (which, unlike the former, is never negative where the compiler folds the
  // division).
  kb.mbarrierWait(empty, stage, kb.mod(kb.add(kb.div(sequence, kb.index(stages)), kb.index(1)), kb.index(2)));
  kb.close();
  kb.openIf(kb.eq(kb.threadIdx(0), kb.index(p_.warps_m / 4 * 128)));
  tmaSlice(ta, tb, slice, stage, full);
  kb.close();
}

void MatmulLowering::releaseSlice(ExprId sequence, VarId empty) {
  KernelBuilder& kb = kb_;
  kb.openIf(kb.eq(kb.mod(kb.threadIdx(0), kb.index(128)), kb.index(0)));
  const ExprId stage = kb.mod(sequence, kb.index(p_.stages));
  if (p_.cluster_m == 1) {
    kb.mbarrierArriveExpectTx(empty, stage, kb.index(0));
  } else {
    // Every block of the cluster may refill the stage here (its multicast parts): each is told.
    for (int64_t rank = 0; rank < p_.cluster_m; ++rank) {
      kb.mbarrierArriveExpectTx(empty, stage, kb.index(0), kb.index(rank));
    }
  }
  kb.close();
}

void MatmulLowering::consumeSlice(VarId acc, const Staging& ta, const Staging& tb, ExprId sequence, ExprId release,
                                  ExprId warpgroup, VarId full, VarId empty) {
  KernelBuilder& kb = kb_;
  const int64_t stages = p_.stages;
  const ExprId stage = kb.letValue("stage", kb.mod(sequence, kb.index(stages)));
  kb.mbarrierWait(full, stage, kb.mod(kb.div(sequence, kb.index(stages)), kb.index(2)));
  stageWgmmas(acc, ta, tb, stage, warpgroup);
  kb.wgmmaWait(1);
  // The slice before is done with: the warpgroup's first thread (which its wgmmas read for) releases it.
  kb.openIf(release);
  releaseSlice(kb.sub(sequence, kb.index(1)), empty);
  kb.close();
}

void MatmulLowering::warpSpecializedLoop(VarId acc, const Staging& ta, const Staging& tb, ExprId count) {
  const MatmulParams& p = p_;
  KernelBuilder& kb = kb_;
  const int64_t consumers = p.warps_m / 4;
  const auto [full, empty] = pipelineBarriers();
  // Warp-uniform (lane 0's): the compiler then sees the roles' branches as not diverging within a warp,
  // and keeps the compute warpgroups' wgmmas asynchronous.
  const ExprId warpgroup = kb.letValue("warpgroup", kb.warpUniform(kb.div(kb.threadIdx(0), kb.index(128))));
  // Each role in a loop of its own, the two running at once: the producer fills slice kt once the
  // consumers released the stage's previous slice, up to `stages` slices ahead of them; the consumers
  // compute each slice once it landed and release the one before it. The producer gives back the
  // registers it does not need (its loop holds a few indices), which the consumers' accumulators take.
  kb.openConcurrentIf(kb.eq(warpgroup, kb.index(consumers)));
  if (p.producer_registers > 0) kb.setMaxNReg(static_cast<int>(p.producer_registers), false);
  const VarId fill = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
  kb.openFor(fill, kb.index(0), count, kb.index(1), /*unroll=*/false);
  produceSlice(ta, tb, kb.ref(fill), kb.ref(fill), full, empty);
  kb.close();
  kb.openElse();
  if (p.consumer_registers > 0) kb.setMaxNReg(static_cast<int>(p.consumer_registers), true);
  const VarId kt = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
  kb.openFor(kt, kb.index(0), count, kb.index(1), /*unroll=*/false);
  consumeSlice(acc, ta, tb, kb.ref(kt), kb.le(kb.index(1), kb.ref(kt)), warpgroup, full, empty);
  kb.close();
  // The compute warpgroups go on to the epilogue: the else branch stays open for it.
  kb.wgmmaWait(0, acc);
}

}  // namespace braze::scheduler
