// The matmul lowering's state and its schedules (lower.cpp: mma.sync, staged or not, and the setup and
// epilogue wgmma shares; wgmma_loop.cpp: wgmma's main loop; persistent_mma.cpp: the persistent
// warp-specialized wgmma kernel; gemv.cpp: GEMV; gemv_mma.cpp: the GEMV on tensor cores), shared by the
// files of the matmul scheduler's folder.
//
// Both read operand values through the ValueBuilder (so a cast, dequantize or broadcast feeding an
// operand is computed as it is loaded, and transposed operands are read through their strides), and put
// each output value through the epilogue (bias, the elementwise ops after the matmul, the output's dtype)
// before storing it.
#pragma once

#include "kernel/shared_tiles.h"
#include "scheduler/lowering_context.h"
#include "scheduler/matmul/heuristics.h"
#include "scheduler/matmul/operands.h"
#include "scheduler/matmul/output_maps.h"

#include <functional>
#include <unordered_map>
#include <vector>

namespace braze::scheduler {

class MatmulLowering {
 public:
  MatmulLowering(LoweringContext& ctx, const MatmulParams& p)
      : ctx_(ctx),
        p_(p),
        mm_(matmulOf(ctx.segment)),
        linear_(mm_.kind() == OpKind::Linear),
        a_(mm_.input(0)),
        b_(mm_.input(1)),
        bias_(linear_ && mm_.inputs().size() > 2 ? mm_.input(2) : nullptr),
        result_(mm_.output(0)),
        s_(extentsOf(ctx.segment)),
        acc_type_(mmaAccumulator(p.gemv ? kernel::mmaShapeFor(a_->dtype()) : p.shape, a_->dtype())),
        kb_(ctx.kernel),
        vb_(kb_, ctx.bound, ctx.segment.exprs, ctx.inputs),
        chains_(resultChains(ctx.segment.exprs, mm_, ctx.bound).chains) {
    ctx.kernel.summary = p.toString();
  }

  void mma();
  void gemv();
  void gemvMma();

 private:
  // One operand's ring of shared tiles (staged schedule).
  struct Staging {
    const Val* operand = nullptr;
    TileOrder order = TileOrder::KMajor;
    bool async = true;           // cp.async of the stored bytes, or loaded and computed in registers
    bool walk_k = true;          // registers: a chunk of `width` elements runs along K (else along M / N)
    int64_t width = 1;
    int64_t k_rows = 1;          // registers, along M / N: consecutive k rows a chunk loads together
    bool k_last = true;          // the operand's last dim is K
    int64_t rows = 0, row_elements = 0, chunks = 0;  // a tile: rows of row_elements (chunks of 16 bytes)
    int64_t mn = 0, mn_extent = 0;  // the tile's M or N span and the problem's extent
    ExprId mn_base = -1;         // the block's first m or n
    VarId tiles = -1;            // stages x rows x row_elements, as stored
    // Every tile of the operand lies inside it (K a multiple of the slice, the extent of the tile's span):
    // no bounds to test, no partial copies.
    bool whole = false;
    bool swizzled = false;       // wgmma's 128-byte swizzled lines (kernel/wgmma.h), else rotated rows
    // TMA (MatmulParams::tma): the kernel's tensor whose map the slices' boxes come from, and the boxes of
    // a slice, each 128 bytes wide and `rows` tall, side by side along the tile rows' contiguous dim.
    TensorId tma_tensor = -1;
    int64_t boxes = 0;
    bool batched_map = false;  // the map is 3D: [batch, rows, columns]
    ExprId tma_batch = -1;  // a 3D map's: the tile's batch along the map's batch dim
    // The cluster's blocks sharing the tiles (MatmulParams::cluster_m for B, else 1): each block loads rows
    // [rank, rank + 1) x rows / multicast of every box and multicasts them to all of them.
    int64_t multicast = 1;
  };
  // `t` for the output tile whose first m or n is `mn_base`, in the batch setBatch set last (persistent
  // blocks place their staging in each tile they walk).
  Staging placed(const Staging& t, ExprId mn_base) {
    Staging at = t;
    at.mn_base = mn_base;
    if (t.batched_map) at.tma_batch = kb_.letValue(t.operand == a_ ? "batch_a" : "batch_b", flatBatch(t.operand));
    return at;
  }
  // Output tile `tile_id` (of batch x blocks_m x blocks_n, in raster groups): its block row and column,
  // with the batch index set to its batch (setBatch). With `rows_per_tile`, a tile of that many block rows
  // (a cluster's): its first block row.
  std::pair<ExprId, ExprId> placeTile(ExprId tile_id, int64_t rows_per_tile = 1);
  Staging staging(const Val* operand, TileOrder order, bool async, bool k_last, int64_t mn, int64_t mn_extent,
                  ExprId mn_base);
  // The element index of tile element (row, chunk, element in the chunk) in stage `stage`.
  ExprId tileIndex(const Staging& t, ExprId stage, ExprId row, ExprId chunk);
  // K slice `slice` of the operand into stage `stage`, spread over the block's threads: cp.asyncs, or
  // (storeSlice) values computed in registers and written to the tile. With `deferred` (whole tiles only),
  // storeSlice emits the loads where it is called and leaves the computing and writing to *deferred, so
  // that the loads are in flight while the block's mmas run.
  // cp.async copies [begin, end) of the thread's ceilDiv(rows x chunks, threads) (end -1: to the last).
  void copySlice(const Staging& t, ExprId slice, ExprId stage, int64_t begin = 0, int64_t end = -1);
  int64_t copiesPerThread(const Staging& t) const { return ceilDiv(t.rows * t.chunks, ctx_.kernel.threadsPerBlock()); }
  void storeSlice(const Staging& t, ExprId slice, ExprId stage, std::vector<Stmt>* deferred = nullptr);
  // Split-K: every block writes its accumulators to a workspace and counts itself in; the block that
  // arrives last sums every split's accumulators in split order (the same sum whichever block is last)
  // into its own and goes on to the epilogue (its `if` stays open), the others stop.
  void combineSplits(const std::vector<VarId>& acc, ExprId tile_id, ExprId split, int values);
  // The GEMVs' loops over a lane's (or warp's) steps 0 .. steps - 1: groups of `unroll` steps, unrolled
  // (their loads in flight together), then the rest, each running step(i).
  void unrolledSteps(int64_t steps, int64_t unroll, const std::function<void(ExprId step)>& step);
  // The GEMV's: lane 0 of each warp writes its sums, and lane 0 of each warp of the last block adds them.
  void combineGemvSplits(const std::vector<VarId>& sums, ExprId group_id, ExprId split);
  // Element kk (along K) of tile row `row` in stage `stage` (k-major tiles).
  ExprId tileElement(const Staging& t, ExprId stage, ExprId row, ExprId kk);
  // The lane's ldmatrix of the fragment at (m or n, k) = (mn_base + mn_offset, k0) of the block's tile in
  // `stage`.
  void loadFragment(const Staging& t, const LdmatrixPattern& pattern, VarId fragment, ExprId stage, ExprId mn_base,
                    int64_t mn_offset, int64_t k0);

  // The wgmma main loop (wgmma_loop.cpp): the slices of K through the staged tiles into `acc`, which
  // the last wait leaves complete.
  void wgmmaLoop(VarId acc, const Staging& ta, const Staging& tb, ExprId count);
  // The same, warp-specialized (MatmulParams::warp_specialized): the producer warpgroup's thread fills
  // the stages, the compute warpgroups empty them, full and empty mbarriers between them. It leaves an
  // `if` of the compute warpgroups open, for the epilogue.
  void warpSpecializedLoop(VarId acc, const Staging& ta, const Staging& tb, ExprId count);
  // The warp-specialized pipeline's mbarriers, initialized (then a block barrier, the last the kernel has):
  // `full` and `empty`, one of each per stage.
  std::pair<VarId, VarId> pipelineBarriers();
  // The producer's part of the slice that is `sequence`-th through the stages (from 0, counted across the
  // tiles a persistent block walks): it waits for the stage's previous slice to be released, then its
  // thread issues K slice `slice`'s boxes. The whole producer warpgroup runs it.
  void produceSlice(const Staging& ta, const Staging& tb, ExprId slice, ExprId sequence, VarId full, VarId empty);
  // The compute warpgroups' part: wait for the slice, issue its wgmmas, wait for the slice before's and
  // (where `release` holds) release that one's stage.
  void consumeSlice(VarId acc, const Staging& ta, const Staging& tb, ExprId sequence, ExprId release, ExprId warpgroup,
                    VarId full, VarId empty);
  // The warpgroup's first thread releases the stage of the slice `sequence`-th through the stages.
  void releaseSlice(ExprId sequence, VarId empty);
  // Persistent warp-specialized wgmma (persistent_mma.cpp): every block walks output tiles blockIdx.x, +
  // grid, ..., both roles in their own tile loops.
  void persistentMma();
  // One stage's wgmmas for the warpgroup `warpgroup` (A's rows 64 warpgroup on), committed as a group.
  void stageWgmmas(VarId acc, const Staging& ta, const Staging& tb, ExprId stage, ExprId warpgroup);
  // TMA: thread 0 announces slice `slice`'s bytes on mbarrier full[stage] and issues its boxes of both
  // operands into stage `stage` (wgmma_loop.cpp).
  void tmaSlice(const Staging& ta, const Staging& tb, ExprId slice, ExprId stage, VarId full);
  // After the main loop: split-K's combine and the epilogue of every accumulator.
  void finishMma(const std::vector<VarId>& acc, ExprId tile_id, ExprId split, ExprId row0, ExprId col0, ExprId g, ExprId t);

  // The GEMV's rows of A: m, or with batch_rows (MatmulParams) every batch's m rows.
  int64_t gemvRows() const { return p_.batch_rows ? s_.batch * s_.m : s_.m; }
  // Row `row` of the GEMV's rows as A's (and the output's) row; with batch_rows it also sets the batch
  // index to the row's batch, for the reads and stores that follow.
  ExprId gemvRow(ExprId row) {
    if (!p_.batch_rows) return row;
    setBatch(kb_.div(row, kb_.index(s_.m)));
    return kb_.mod(row, kb_.index(s_.m));
  }

  // Block index bb of the batch: the batch dims' indices.
  void setBatch(ExprId bb) { batch_index_ = vb_.unflatten(bb, false, s_.batch_sizes); }
  // The operand's batch dims of more than one element, flattened (tmaMatrix's batch dim).
  ExprId flatBatch(const Val* operand) {
    const auto& sizes = ctx_.bound.sizesOf(operand);
    const int64_t nb = static_cast<int64_t>(s_.batch_sizes.size()), lead = static_cast<int64_t>(sizes.size()) - 2;
    ExprId flat = kb_.index(0);
    for (int64_t j = 0; j < lead; ++j) {
      if (sizes[j] != 1) flat = kb_.add(kb_.mul(flat, kb_.index(sizes[j])), batch_index_[j + (nb - lead)].base);
    }
    return flat;
  }

  // An operand's index: its own batch dims (aligned right, size 1 broadcast), then its two matrix dims.
  std::vector<Idx> operandIndex(const Val* operand, Idx r, Idx c) {
    const auto& sizes = ctx_.bound.sizesOf(operand);
    const int64_t nb = static_cast<int64_t>(s_.batch_sizes.size());
    std::vector<Idx> index;
    const int64_t lead = static_cast<int64_t>(sizes.size()) - 2;
    for (int64_t j = 0; j < lead; ++j) {
      index.push_back(sizes[j] == 1 ? Idx{kb_.index(0), false} : batch_index_[j + (nb - lead)]);
    }
    index.push_back(r);
    index.push_back(c);
    return index;
  }
  ExprId valueOfA(Idx m, Idx k) { return vb_.valueAt(a_, operandIndex(a_, m, k)); }
  // B[k][n]; a linear's weight is [N, K], so B[k][n] is weight[n][k].
  ExprId valueOfB(Idx k, Idx n) { return vb_.valueAt(b_, linear_ ? operandIndex(b_, n, k) : operandIndex(b_, k, n)); }

  // Outputs (r, c + lane), lane < width, of the matmul from their accumulated values (accumulated(lane):
  // lane is -1 for a width of 1): plus linear's bias (in the accumulator's domain, as the reference adds:
  // float, or wrapping integers), rounded once to the result's dtype, through the ops after it, stored
  // where `inside` (one vector store of the width where the output's layout allows it).
  // An output reached through index maps is stored where they put the element (output_maps.h): one chunk
  // for the outputs stored for every element, one more for each that a slice keeps only part of. Width 2
  // needs every output at the result's own index (outputsMapped() false).
  void epilogue(ExprId inside, ExprId r, ExprId c, int64_t width, const std::function<ExprId(ExprId lane)>& accumulated);
  // Whether an output is reached from the result through index maps (its stores go one value at a time).
  bool outputsMapped() const;

  ExprId zeroOf(DataType dtype) { return isFloating(dtype) ? kb_.constant(0.0, dtype) : kb_.constantInt(0, dtype); }

  LoweringContext& ctx_;
  const MatmulParams& p_;
  const Expr& mm_;
  const bool linear_;
  const Val *a_, *b_, *bias_, *result_;
  const MatmulExtents s_;
  const DataType acc_type_;
  KernelBuilder kb_;
  ValueBuilder vb_;
  // For each value computed from the result, the index maps between the result and it (the scheduler's
  // check refused the segment otherwise); none for a value of the result's shape computed without it,
  // which the epilogue computes at the result's index.
  const std::unordered_map<const Val*, std::vector<const Expr*>> chains_;
  std::vector<Idx> batch_index_;
};

}  // namespace braze::scheduler
