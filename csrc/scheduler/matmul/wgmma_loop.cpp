// The wgmma main loop: K slices go through a ring of `stages` shared tiles, by cp.async or (an operand
// computed as it is loaded) through registers, stored in wgmma's 128-byte swizzled layout
// (Staging::swizzled), and each warpgroup issues one wgmma per k step of a slice, reading A's 64 rows of
// its own and all of B's columns straight from the tiles. An operand through registers is loaded and
// stored after the slice's wgmmas are issued, so its loads run while they compute.
//
// A slice's wgmmas run while the next slice's are issued: after committing slice kt's group a warpgroup
// waits only for slice kt - 1's. So the stage refilled at iteration kt is slice kt - 2's, which every
// warpgroup finished with before the barrier of iteration kt (it waited for it at iteration kt - 1), and
// the copies run stages - 2 slices ahead of the wgmmas. The copies' and stores' writes go through the
// generic proxy and wgmma reads through the async one: each thread fences its writes before the barrier.
#include "scheduler/matmul/lowering.h"

#include "support/error.h"

namespace braze::scheduler {

void MatmulLowering::wgmmaLoop(VarId acc, const Staging& ta, const Staging& tb, ExprId count) {
  const MatmulParams& p = p_;
  KernelBuilder& kb = kb_;
  BRAZE_ASSERT(p.stages >= 3, "a wgmma pipeline of {} stages (a slice in flight, one computed and one arriving: 3 at least)",
               p.stages);
  const int64_t ahead = p.stages - 2;
  for (int64_t slice = 0; slice < ahead; ++slice) {
    kb.openIf(kb.lt(kb.index(slice), count));
    copySlice(ta, kb.index(slice), kb.index(slice));
    copySlice(tb, kb.index(slice), kb.index(slice));
    kb.close();
    kb.cpAsyncCommit();
  }
  const ExprId warpgroup = kb.letValue("warpgroup", kb.div(kb.threadIdx(0), kb.index(128)));
  // Where an operand's k step `ks` of stage `stage` starts (an element of its tiles), for the warpgroup's
  // first m (A) or n 0 (B), and how its lines are laid out (kernel/wgmma.h).
  const int64_t element = sizeOf(a_->dtype()), depth = wgmmaK(element);
  const int64_t line = 128 / element;  // elements of a 128-byte line
  auto start = [&](const Staging& t, ExprId stage, ExprId mn_first, int64_t ks) {
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
  const VarId kt = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
  kb.openFor(kt, kb.index(0), count, kb.index(1), /*unroll=*/false);
  kb.cpAsyncWait(static_cast<int>(ahead - 1));
  kb.proxyFence();
  kb.barrier();
  const ExprId stage = kb.letValue("stage", kb.mod(kb.ref(kt), kb.index(p.stages)));
  const ExprId a_first = kb.mul(warpgroup, kb.index(kWgmmaM));
  kb.wgmmaFence(acc);
  for (int64_t ks = 0; ks < p.block_k / depth; ++ks) {
    kb.wgmma(acc, static_cast<int>(p.blockCols()), ta.tiles, start(ta, stage, a_first, ks), operand(ta), tb.tiles,
             start(tb, stage, kb.index(0), ks), operand(tb));
  }
  kb.wgmmaCommit();
  kb.wgmmaWait(1);
  const ExprId next = kb.add(kb.ref(kt), kb.index(ahead));
  kb.openIf(kb.lt(next, count));
  const ExprId refill = kb.mod(next, kb.index(p.stages));
  copySlice(ta, next, refill);
  copySlice(tb, next, refill);
  kb.close();
  kb.cpAsyncCommit();
  kb.close();
  kb.wgmmaWait(0, acc);
}

}  // namespace braze::scheduler
