// The mma schedule: block b of the grid takes one batch's block tile of the output (blocks in raster
// groups; with split-K, several blocks per tile; persistent_mma.cpp's blocks walk tiles); its warps each
// a warp tile of tiles_m x tiles_n mma tiles. Staged (sm_80 on): K slices of A and B go through a ring of
// shared tiles (cp.async, or computed in registers) and fragments are read with ldmatrix; with wgmma
// (sm_90), the tiles are swizzled for it and its main loop (wgmma_loop.cpp) replaces the fragments and
// mmas. Otherwise each lane loads its fragment values straight from global memory, zero outside the
// matrices. Then the warp's mmas, and the epilogue (wgmma's accumulators are in the mma tiles' layout, a
// warp per 16 rows).
#include "scheduler/matmul/entry.h"
#include "scheduler/matmul/lowering.h"

#include "support/error.h"

namespace braze::scheduler {
namespace {

// An index expression linear in the lane's group g = lane / 4 and its place t = lane % 4, equal to
// `position(lane)` for every lane (the fragment tables are linear in g and t).
ExprId laneLinear(KernelBuilder& kb, ExprId g, ExprId t, const std::function<int(int lane)>& position) {
  const int base = position(0);
  const int per_g = position(4) - base, per_t = position(1) - base;
  return kb.add(kb.index(base), kb.add(kb.mul(g, kb.index(per_g)), kb.mul(t, kb.index(per_t))));
}

}  // namespace

MatmulParams chooseMatmul(LoweringContext& ctx) {
  const Expr& mm = matmulOf(ctx.segment);
  const MatmulExtents s = extentsOf(ctx.segment);
  const DataType operand = mm.input(0)->dtype();
  MatmulProblem problem{s.batch, s.m, s.n, s.k, operand};
  const bool linear = mm.kind() == OpKind::Linear;
  const auto [b_k, b_mn] = operandDims(ctx, mm.input(1), linear);
  const OperandReads b_reads = probeOperand(ctx, mm.input(1), b_k, b_mn);
  problem.b_k_contiguous = b_reads.k_contiguous;
  problem.b_element_bytes = b_reads.element_bytes;
  const std::optional<OperandStorage> a = operandStorage(ctx, mm.input(0), operand, true);
  const std::optional<OperandStorage> b = operandStorage(ctx, mm.input(1), operand, linear);
  if (a) problem.a_tile = a->order;
  if (b) problem.b_tile = b->order;
  problem.tma_maps = a && b && a->input != b->input && tmaMatrix(*a, operand) && tmaMatrix(*b, operand);
  problem.batch_rows = linear && ctx.bound.sizesOf(mm.input(1)).size() == 2;
  return matmulHeuristics(ctx.device, problem);
}

void MatmulLowering::mma() {
  const MatmulParams& p = p_;
  const DataType operand = a_->dtype();
  const MmaDims dims = mmaDims(p.shape);
  KernelBuilder& kb = kb_;
  ValueBuilder& vb = vb_;
  const MatmulExtents& s = s_;
  ctx_.kernel.grid = {p.grid, 1};
  ctx_.kernel.block = {p.threads(), 1};
  ctx_.kernel.cluster = p.cluster_m;
  BRAZE_ASSERT(p.cluster_m == 1 || p.persistent, "a matmul in clusters that is not persistent");

  if (p.persistent) return persistentMma();
  const ExprId block = kb.blockIdx(0);
  // Split-K: consecutive blocks are the splits of one output tile, each summing its part of K.
  const ExprId split = p.split_k > 1 ? kb.letValue("split", kb.mod(block, kb.index(p.split_k))) : kb.index(0);
  const ExprId tile_id = p.split_k > 1 ? kb.letValue("tile_id", kb.div(block, kb.index(p.split_k))) : block;
  const auto [bm, bn] = placeTile(tile_id);
  const ExprId warp = kb.letValue("warp", kb.div(kb.threadIdx(0), kb.index(32)));
  const ExprId lane = kb.letValue("lane", kb.mod(kb.threadIdx(0), kb.index(32)));
  const ExprId g = kb.letValue("g", kb.div(lane, kb.index(4)));
  const ExprId t = kb.letValue("t", kb.mod(lane, kb.index(4)));
  const ExprId row0 = kb.letValue(
      "row0", kb.add(kb.mul(bm, kb.index(p.blockRows())), kb.mul(kb.div(warp, kb.index(p.warps_n)), kb.index(p.tiles_m * 16))));
  const ExprId col0 = kb.letValue(
      "col0", kb.add(kb.mul(bn, kb.index(p.blockCols())), kb.mul(kb.mod(warp, kb.index(p.warps_n)), kb.index(p.tiles_n * 8))));

  // Statements the ValueBuilder and this lowering add, in order, to the current block.
  auto inChunk = [&](const std::function<void()>& build) {
    std::vector<Stmt> pre;
    vb.beginChunk(&pre, &pre, 1, -1);
    kb.pushTarget(&pre);
    build();
    kb.popTarget();
    auto& target = kb.current();
    target.insert(target.end(), std::make_move_iterator(pre.begin()), std::make_move_iterator(pre.end()));
  };
  const ExprId zero = zeroOf(operand);

  std::vector<VarId> acc;
  // fa[set][tm], fb[set][array]: one set of fragments, or two (fragments_ahead, staged) that alternate.
  std::vector<VarId> fa[2], fb[2];
  const int64_t k_steps = p.stages >= 2 ? p.block_k / dims.k : 0;
  const bool fragments_ahead = p.fragmentsAhead();
  // Staged, an even number of n-tiles: each B array holds two tiles' fragments, which one ldmatrix.x4 loads.
  const int64_t b_per_array = p.stages >= 2 && p.tiles_n % 2 == 0 ? 2 : 1;
  // wgmma: one array of the warp's tiles_n tiles, 4 values each (the wgmma's accumulator registers).
  if (p.wgmma) {
    acc.push_back(kb.arrayVar("acc", acc_type_, p.tiles_n * dims.c_values));
  } else {
    for (int64_t i = 0; i < p.tiles_m * p.tiles_n; ++i) acc.push_back(kb.arrayVar("acc", acc_type_, dims.c_values));
  }
  for (int set = 0; set < (fragments_ahead ? 2 : 1) && !p.wgmma; ++set) {
    for (int64_t i = 0; i < p.tiles_m; ++i) fa[set].push_back(kb.arrayVar("fa", operand, dims.a_values));
    for (int64_t i = 0; i < p.tiles_n / b_per_array; ++i) {
      fb[set].push_back(kb.arrayVar("fb", operand, b_per_array * dims.b_values));
    }
  }
  for (VarId v : acc) {
    kb.declare(v);
    for (int64_t i = 0; i < ctx_.kernel.vars[v].size; ++i) kb.localWrite(v, kb.index(i), zeroOf(acc_type_));
  }
  for (int set = 0; set < 2; ++set) {
    for (VarId v : fa[set]) kb.declare(v);
    for (VarId v : fb[set]) kb.declare(v);
  }

  auto mmas = [&](int set) {
    for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
      for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
        const VarId d = acc[tm * p.tiles_n + tn];
        kb.mma(p.shape, d, fa[set][tm], fb[set][tn / b_per_array], d, static_cast<int32_t>((tn % b_per_array) * dims.b_values));
      }
    }
  };
  if (p.stages >= 2) {
    // Warp (wm, wn)'s first rows of A and columns of B within the block tile.
    const ExprId warp_m = kb.mul(kb.div(warp, kb.index(p.warps_n)), kb.index(p.tiles_m * 16));
    const ExprId warp_n = kb.mul(kb.mod(warp, kb.index(p.warps_n)), kb.index(p.tiles_n * 8));
    const Staging ta = staging(a_, p.a_order, p.a_async, true, p.blockRows(), s.m, kb.mul(bm, kb.index(p.blockRows())));
    const Staging tb =
        staging(b_, p.b_order, p.b_async, linear_, p.blockCols(), s.n, kb.mul(bn, kb.index(p.blockCols())));
    // This block's K slices: all of them, or its split's [first, first + count).
    const int64_t slices = ceilDiv(s.k, p.block_k), per_split = ceilDiv(slices, p.split_k);
    const ExprId first = kb.mul(split, kb.index(per_split));
    const ExprId count = p.split_k > 1 ? kb.letValue("slices", kb.min(kb.index(per_split), kb.sub(kb.index(slices), first)))
                                       : kb.index(slices);
    if (p.wgmma) {  // no split-K: the block's slices are [0, count)
      wgmmaLoop(acc[0], ta, tb, count);
      finishMma(acc, tile_id, split, row0, col0, g, t);
      if (p.warp_specialized) kb.close();  // the compute warpgroups' `if`: the producer's holds no outputs
      return;
    }
    // The first stages - 1 slices, a group each (empty past the last slice, so the count stays uniform).
    for (int64_t slice = 0; slice < p.stages - 1; ++slice) {
      kb.openIf(kb.lt(kb.index(slice), count));
      copySlice(ta, kb.add(first, kb.index(slice)), kb.index(slice));
      copySlice(tb, kb.add(first, kb.index(slice)), kb.index(slice));
      kb.close();
      kb.cpAsyncCommit();
    }
    const LdmatrixPattern pa = ldmatrixPatternA(p.a_order);
    const LdmatrixPattern pb = b_per_array == 2 ? ldmatrixPatternBPair(p.b_order) : ldmatrixPatternB(p.b_order);
    // The warp's fragments of k step ks of the slice in `stage`, into fragment set `set`.
    auto loadFragments = [&](int set, ExprId stage, int64_t ks) {
      for (int64_t tm = 0; tm < p.tiles_m; ++tm) loadFragment(ta, pa, fa[set][tm], stage, warp_m, tm * 16, ks * dims.k);
      for (int64_t f = 0; f < p.tiles_n / b_per_array; ++f) {
        loadFragment(tb, pb, fb[set][f], stage, warp_n, f * b_per_array * 8, ks * dims.k);
      }
    };
    // Slice kt has landed (this thread's copies), and every thread is past reading the stage refilled next.
    auto sliceReady = [&] {
      kb.cpAsyncWait(static_cast<int>(p.stages - 2));
      kb.barrier();
    };
    if (fragments_ahead) {
      // The first slice's first fragments before the loop; each iteration's barrier is then at its last k
      // step, where slice kt + 1 has landed and every warp is past reading slice kt - 1's stage.
      sliceReady();
      kb.openIf(kb.lt(kb.index(0), count));
      loadFragments(0, kb.index(0), 0);
      kb.close();
    }
    const VarId kt = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
    kb.openFor(kt, kb.index(0), count, kb.index(1), /*unroll=*/false);
    if (!fragments_ahead) sliceReady();
    const ExprId next = kb.add(kb.ref(kt), kb.index(p.stages - 1));
    const ExprId refill = kb.mod(next, kb.index(p.stages));
    // An operand staged through registers whose tiles are whole loads its next slice now and writes it to
    // the refilled stage after this slice's mmas (with fragments ahead: before the last k step's barrier),
    // so the loads are in flight meanwhile (cp.async needs no such help). Its loads read slice min(next,
    // count - 1), always inside the operand; the writes happen only for a slice there is (the refilled
    // stage is read by no later iteration otherwise).
    const bool defer_a = p.loads_ahead && !ta.async && ta.whole, defer_b = p.loads_ahead && !tb.async && tb.whole;
    // The refill's copies, one commit group per iteration. With fragments ahead they are spread over the
    // k steps before the last, after each step's mmas: issued at once, they filled the load/store unit's
    // queue and stalled the warps behind them (Nsight Compute's lg_throttle, the largest stall of the s8
    // bmm on an H200), and the mmas waited behind their address arithmetic.
    const int64_t copies_a = defer_a ? 0 : copiesPerThread(ta), copies_b = defer_b ? 0 : copiesPerThread(tb);
    const int64_t most_parts = p.copy_parts > 0 ? std::min(p.copy_parts, k_steps - 1) : k_steps - 1;
    const int64_t refill_parts = fragments_ahead ? std::max<int64_t>(1, std::min(most_parts, copies_a + copies_b)) : 1;
    auto refillPart = [&](int64_t part) {
      const int64_t from = part * (copies_a + copies_b) / refill_parts, to = (part + 1) * (copies_a + copies_b) / refill_parts;
      kb.openIf(kb.lt(next, count));
      if (refill_parts == 1) {
        if (!defer_a) copySlice(ta, kb.add(first, next), refill);
        if (!defer_b) copySlice(tb, kb.add(first, next), refill);
      } else {
        if (from < copies_a) copySlice(ta, kb.add(first, next), refill, from, std::min(to, copies_a));
        if (to > copies_a) copySlice(tb, kb.add(first, next), refill, std::max<int64_t>(from - copies_a, 0), to - copies_a);
      }
      kb.close();
      if (part == refill_parts - 1) kb.cpAsyncCommit();
    };
    if (!fragments_ahead) refillPart(0);
    std::vector<Stmt> deferred;
    const ExprId ahead = kb.add(first, kb.min(next, kb.sub(count, kb.index(1))));
    if (defer_a) storeSlice(ta, ahead, refill, &deferred);
    if (defer_b) storeSlice(tb, ahead, refill, &deferred);
    auto storeDeferred = [&] {
      if (deferred.empty()) return;
      kb.openIf(kb.lt(next, count));
      kb.current() = std::move(deferred);
      kb.close();
    };
    const ExprId stage = kb.letValue("stage", kb.mod(kb.ref(kt), kb.index(p.stages)));
    for (int64_t ks = 0; ks < k_steps; ++ks) {
      if (!fragments_ahead) {
        loadFragments(0, stage, ks);
        mmas(0);
        continue;
      }
      const int set = static_cast<int>(ks % 2);
      if (ks + 1 < k_steps) {
        loadFragments(1 - set, stage, ks + 1);
      } else {
        storeDeferred();
        sliceReady();
        kb.openIf(kb.lt(kb.add(kb.ref(kt), kb.index(1)), count));
        loadFragments(1 - set, kb.mod(kb.add(kb.ref(kt), kb.index(1)), kb.index(p.stages)), 0);
        kb.close();
      }
      mmas(set);
      if (ks < refill_parts) refillPart(ks);
    }
    if (!fragments_ahead) storeDeferred();
    kb.close();
  } else {
    const VarId kk = kb.scalarVar("kk", DataType::Int64, /*is_index=*/true);
    kb.openFor(kk, kb.index(0), kb.index(s.k), kb.index(dims.k), /*unroll=*/false);
    for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
      inChunk([&] {
        for (int i = 0; i < dims.a_values; ++i) {
          const ExprId r = kb.add(kb.add(row0, kb.index(tm * 16)),
                                  laneLinear(kb, g, t, [&](int l) { return mmaAPosition(p.shape, l, i).row; }));
          const ExprId c = kb.add(kb.ref(kk), laneLinear(kb, g, t, [&](int l) { return mmaAPosition(p.shape, l, i).col; }));
          const ExprId valid = kb.land(kb.lt(r, kb.index(s.m)), kb.lt(c, kb.index(s.k)));
          const ExprId v = valueOfA({kb.min(r, kb.index(s.m - 1)), false}, {kb.min(c, kb.index(s.k - 1)), false});
          kb.localWrite(fa[0][tm], kb.index(i), kb.select(valid, v, zero));
        }
      });
    }
    for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
      inChunk([&] {
        for (int i = 0; i < dims.b_values; ++i) {
          const ExprId r = kb.add(kb.ref(kk), laneLinear(kb, g, t, [&](int l) { return mmaBPosition(p.shape, l, i).row; }));
          const ExprId c = kb.add(kb.add(col0, kb.index(tn * 8)),
                                  laneLinear(kb, g, t, [&](int l) { return mmaBPosition(p.shape, l, i).col; }));
          const ExprId valid = kb.land(kb.lt(r, kb.index(s.k)), kb.lt(c, kb.index(s.n)));
          const ExprId v = valueOfB({kb.min(r, kb.index(s.k - 1)), false}, {kb.min(c, kb.index(s.n - 1)), false});
          kb.localWrite(fb[0][tn], kb.index(i), kb.select(valid, v, zero));
        }
      });
    }
    mmas(0);
    kb.close();
  }
  finishMma(acc, tile_id, split, row0, col0, g, t);
}

std::pair<ExprId, ExprId> MatmulLowering::placeTile(ExprId tile_id, int64_t rows_per_tile) {
  const MatmulParams& p = p_;
  KernelBuilder& kb = kb_;
  // Rasterization: blocks launched together take raster_group block rows and walk along N within them, so
  // the A rows and B columns they read are shared while both are in L2 (raster_group 1: row by row). The
  // last group of rows may be shorter. A cluster's tile: rows_per_tile block rows, counted so here.
  const int64_t blocks_m = ceilDiv(p.blocks_m, rows_per_tile), raster_group = std::max<int64_t>(1, p.raster_group / rows_per_tile);
  const int64_t tiles = blocks_m * p.blocks_n, group_tiles = raster_group * p.blocks_n;
  const ExprId bb = kb.letValue("bb", kb.div(tile_id, kb.index(tiles)));
  const ExprId tile = kb.letValue("tile", kb.mod(tile_id, kb.index(tiles)));
  const ExprId first_m = kb.mul(kb.div(tile, kb.index(group_tiles)), kb.index(raster_group));
  const ExprId group_m = kb.letValue("group_m", kb.min(kb.sub(kb.index(blocks_m), first_m), kb.index(raster_group)));
  const ExprId in_group = kb.mod(tile, kb.index(group_tiles));
  const ExprId bm = kb.letValue("bm", kb.add(first_m, kb.mod(in_group, group_m)));
  const ExprId bn = kb.letValue("bn", kb.div(in_group, group_m));
  setBatch(bb);
  return {bm, bn};
}

void MatmulLowering::finishMma(const std::vector<VarId>& acc, ExprId tile_id, ExprId split, ExprId row0, ExprId col0,
                               ExprId g, ExprId t) {
  const MatmulParams& p = p_;
  const MmaDims dims = mmaDims(p.shape);
  KernelBuilder& kb = kb_;
  const MatmulExtents& s = s_;
  if (p.split_k > 1) combineSplits(acc, tile_id, split, dims.c_values);
  // Block tiles that divide the output: every output a lane holds is inside it.
  const bool whole_tiles = s.m % p.blockRows() == 0 && s.n % p.blockCols() == 0;
  // A lane's accumulator values 2j and 2j + 1 are adjacent columns of one row (mmaCPosition): with N even
  // and every output at the result's own index, both are inside or neither, and they go out as one store
  // of two (8 bytes of float where a store a value wrote 4: a warp's stores then fill whole 32-byte
  // sectors).
  const int64_t pair = s.n % 2 == 0 && !outputsMapped() ? 2 : 1;
  for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
    for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
      for (int i = 0; i < dims.c_values; i += static_cast<int>(pair)) {
        const ExprId r = kb.add(kb.add(row0, kb.index(tm * 16)), laneLinear(kb, g, t, [&](int l) { return mmaCPosition(l, i).row; }));
        const ExprId c = kb.add(kb.add(col0, kb.index(tn * 8)), laneLinear(kb, g, t, [&](int l) { return mmaCPosition(l, i).col; }));
        const ExprId inside = whole_tiles ? kb.constantInt(1, DataType::Bool)
                                          : kb.land(kb.lt(r, kb.index(s.m)), kb.lt(c, kb.index(s.n)));
        // wgmma: tile tn's values at 4 tn of the one array.
        const VarId array = p.wgmma ? acc[0] : acc[tm * p.tiles_n + tn];
        const int64_t first = p.wgmma ? tn * dims.c_values + i : i;
        epilogue(inside, r, c, pair, [&](ExprId lane) {
          return kb.localRead(array, lane >= 0 ? kb.add(kb.index(first), lane) : kb.index(first));
        });
      }
    }
  }
  if (p.split_k > 1) kb.close();  // the last split's block
}

void MatmulLowering::combineSplits(const std::vector<VarId>& acc, ExprId tile_id, ExprId split, int values) {
  KernelBuilder& kb = kb_;
  const int64_t threads = ctx_.kernel.threadsPerBlock();
  const int64_t per_thread = static_cast<int64_t>(acc.size()) * values, per_block = threads * per_thread;
  const int64_t tile_count = p_.grid / p_.split_k;
  const TensorId partials = kb.addTensor(workspaceParam("partials", acc_type_, p_.grid * per_block, false));
  const TensorId arrived = kb.addTensor(workspaceParam("arrived", DataType::Int32, tile_count, true));
  // Split s of tile t keeps its accumulators at ((t * split_k + s) * threads + thread) * per_thread.
  auto slot = [&](ExprId s, size_t a, int i) {
    const ExprId block_base = kb.mul(kb.add(kb.mul(tile_id, kb.index(p_.split_k)), s), kb.index(per_block));
    return kb.add(block_base, kb.add(kb.mul(kb.threadIdx(0), kb.index(per_thread)), kb.index(static_cast<int64_t>(a) * values + i)));
  };
  for (size_t a = 0; a < acc.size(); ++a) {
    for (int i = 0; i < values; ++i) kb.store(partials, slot(split, a, i), kb.localRead(acc[a], kb.index(i)));
  }
  kb.fence();
  kb.barrier();
  const VarId flag = kb.arrayVar("last_split", DataType::Bool, 1, VarKind::SharedArray);
  kb.declare(flag);
  const ExprId first_thread = kb.eq(kb.threadIdx(0), kb.index(0));
  kb.openIf(first_thread);
  const VarId before = kb.scalarVar("arrived_before", DataType::Int64, true);
  kb.atomicAdd(before, arrived, tile_id, kb.index(1));
  kb.fence();  // acquire: the other splits' partials are read after their count is seen
  kb.localWrite(flag, kb.index(0), kb.eq(kb.ref(before), kb.index(p_.split_k - 1)));
  kb.close();
  kb.barrier();
  kb.openIf(kb.letValue("is_last", kb.localRead(flag, kb.index(0))));
  // Summed in the accumulator's type: float, or int32 wrapping as the mma's does.
  const DataType sum = acc_type_ == DataType::Float ? DataType::Float : DataType::Int64;
  for (size_t a = 0; a < acc.size(); ++a) {
    for (int i = 0; i < values; ++i) kb.localWrite(acc[a], kb.index(i), zeroOf(acc_type_));
  }
  const VarId s = kb.scalarVar("s", DataType::Int64, true);
  kb.openFor(s, kb.index(0), kb.index(p_.split_k), kb.index(1), /*unroll=*/false);
  for (size_t a = 0; a < acc.size(); ++a) {
    for (int i = 0; i < values; ++i) {
      const ExprId total = kb.elementwise(OpKind::Add, sum, {kb.cast(kb.localRead(acc[a], kb.index(i)), sum),
                                                             kb.cast(kb.load(partials, slot(kb.ref(s), a, i)), sum)});
      kb.localWrite(acc[a], kb.index(i), kb.cast(total, acc_type_));
    }
  }
  kb.close();
  kb.openIf(first_thread);
  kb.store(arrived, tile_id, kb.constantInt(0, DataType::Int32));
  kb.close();
}

MatmulLowering::Staging MatmulLowering::staging(const Val* operand, TileOrder order, bool async, bool k_last,
                                                int64_t mn, int64_t mn_extent, ExprId mn_base) {
  Staging t;
  t.operand = operand;
  t.order = order;
  t.async = async;
  t.k_last = k_last;
  if (!async) {
    // Chunks of 16 bytes of the operand along the dim its largest input is contiguous in (K for a
    // linear's weights, N for a row-major B), where that dim's extent is whole chunks; else one element.
    const auto [k_dim, mn_dim] = operandDims(ctx_, operand, k_last);
    const OperandReads reads = probeOperand(ctx_, operand, k_dim, mn_dim);
    t.walk_k = reads.largest_k_stride == 1 || reads.largest_mn_stride != 1;
    const int64_t chunk = 16 / sizeOf(operand->dtype());
    const int64_t walk_stride = t.walk_k ? reads.largest_k_stride : reads.largest_mn_stride;
    t.width = walk_stride == 1 && (t.walk_k ? s_.k : mn_extent) % chunk == 0 ? chunk : 1;
    // An 8-bit operand read along M / N (a row-major B) goes into k-major rows: a chunk of four k rows lets
    // each lane write its n's four consecutive k bytes together (one 4-byte shared store where the
    // compiler joins them, instead of four 1-byte ones), with a chunk width that keeps every thread busy.
    const int64_t threads = ctx_.kernel.threadsPerBlock();
    if (!t.walk_k && t.width > 1 && sizeOf(operand->dtype()) == 1 && s_.k % 4 == 0 && p_.block_k % 4 == 0) {
      for (int64_t width : {t.width, t.width / 2}) {
        if (width >= 4 && mn % width == 0 && (p_.block_k / 4) * (mn / width) % threads == 0) {
          t.k_rows = 4;
          t.width = width;
          break;
        }
      }
    }
  }
  t.mn = mn;
  t.mn_extent = mn_extent;
  t.mn_base = mn_base;
  t.whole = s_.k % p_.block_k == 0 && mn_extent % mn == 0;
  // k-major: a row per m (or n) of block_k elements; mn-major: a row per k of the block's m (or n) span.
  t.rows = order == TileOrder::KMajor ? mn : p_.block_k;
  t.row_elements = order == TileOrder::KMajor ? p_.block_k : mn;
  t.chunks = t.row_elements * sizeOf(operand->dtype()) / 16;
  t.swizzled = p_.wgmma;
  t.tiles = kb_.sharedStorageArray(operand == a_ ? "tile_a" : "tile_b", operand->dtype(), p_.stages * t.rows * t.row_elements,
                                   t.swizzled ? 1024 : 128);
  kb_.declare(t.tiles);
  if (p_.tma) {
    // The heuristics chose TMA only where both operands' matrices have a tensor map (tmaMatrix).
    const std::optional<OperandStorage> storage = operandStorage(ctx_, operand, operand->dtype(), k_last);
    const std::optional<StridedLayout> map = storage ? tmaMatrix(*storage, operand->dtype()) : std::nullopt;
    BRAZE_ASSERT(map && storage->order == order && ctx_.inputs.count(storage->input) != 0,
                 "matmul operand {} is read by TMA, but has no tensor map of its tiles' order", operand->name());
    t.tma_tensor = ctx_.inputs.at(storage->input);
    const int64_t line = 128 / sizeOf(operand->dtype());
    t.boxes = t.row_elements / line;
    // B in clusters along M: each block loads its part of every box's rows, for all of the cluster's blocks.
    t.multicast = operand == b_ ? p_.cluster_m : 1;
    BRAZE_ASSERT(t.rows % (8 * t.multicast) == 0, "{}'s boxes of {} rows split among {} blocks (whole 1024-byte "
                 "swizzle patterns each)", operand->name(), t.rows, t.multicast);
    auto& box = ctx_.kernel.tensors[t.tma_tensor].tma;
    BRAZE_ASSERT(!box, "{} is read by TMA as two operands", operand->name());
    box = TensorParam::TmaBox{t.rows / t.multicast, line, true, *map};
    t.batched_map = map->sizes.size() == 3;
    // Persistent, the batch is the tile's: placed() sets it in the tile loops.
    if (t.batched_map && !p_.persistent) {
      t.tma_batch = kb_.letValue(operand == a_ ? "batch_a" : "batch_b", flatBatch(operand));
    }
  }
  return t;
}

ExprId MatmulLowering::tileIndex(const Staging& t, ExprId stage, ExprId row, ExprId chunk) {
  KernelBuilder& kb = kb_;
  const int64_t per_chunk = t.row_elements / t.chunks;
  if (t.swizzled) {
    // 128-byte lines of 8 chunks: a row's chunks c go to line (c / 8) * rows + row (a row of more than 8
    // chunks, mn-major, spans rows-long groups of lines), at chunk position (c % 8) ^ (line % 8).
    const ExprId line = kb.add(kb.mul(kb.div(chunk, kb.index(8)), kb.index(t.rows)), row);
    const ExprId placed = kb.bitXor(kb.mod(chunk, kb.index(8)), kb.mod(line, kb.index(8)));
    return kb.add(kb.mul(stage, kb.index(t.rows * t.row_elements)),
                  kb.add(kb.mul(line, kb.index(8 * per_chunk)), kb.mul(placed, kb.index(per_chunk))));
  }
  const ExprId rotated = kb.mod(kb.add(chunk, kb.div(row, kb.index(rowsPerRotation(t.chunks)))), kb.index(t.chunks));
  return kb.add(kb.mul(stage, kb.index(t.rows * t.row_elements)),
                kb.add(kb.mul(row, kb.index(t.row_elements)), kb.mul(rotated, kb.index(per_chunk))));
}

ExprId MatmulLowering::tileElement(const Staging& t, ExprId stage, ExprId row, ExprId kk) {
  const int64_t per_chunk = t.row_elements / t.chunks;
  return kb_.add(tileIndex(t, stage, row, kb_.div(kk, kb_.index(per_chunk))), kb_.mod(kk, kb_.index(per_chunk)));
}

void MatmulLowering::storeSlice(const Staging& t, ExprId slice, ExprId stage, std::vector<Stmt>* deferred) {
  KernelBuilder& kb = kb_;
  BRAZE_ASSERT(deferred == nullptr || t.whole, "a deferred slice store needs whole tiles (no bounds to test)");
  const int64_t threads = ctx_.kernel.threadsPerBlock();
  // The tile as chunks of `width` elements along the walked dim: `across` indexes the other dim.
  const int64_t walk_extent = t.walk_k ? p_.block_k : t.mn;
  const int64_t per_line = walk_extent / t.width, units = (t.walk_k ? t.mn : p_.block_k / t.k_rows) * per_line;
  const VarId lane_var = kb.scalarVar("l", DataType::Int64, /*is_index=*/true);
  for (int64_t first = 0; first < units; first += threads) {
    const ExprId q = kb.add(kb.threadIdx(0), kb.index(first));
    const ExprId across = kb.div(q, kb.index(per_line)), along = kb.mul(kb.mod(q, kb.index(per_line)), kb.index(t.width));
    // The chunk's first tile row and K element in the slice, and its first global k and m / n.
    const ExprId row0 = t.walk_k ? across : along, kk0 = t.walk_k ? along : kb.mul(across, kb.index(t.k_rows));
    const ExprId k0 = kb.add(kb.mul(slice, kb.index(p_.block_k)), kk0), mn0 = kb.add(t.mn_base, row0);
    const ExprId inside =
        t.whole ? kb.constantInt(1, DataType::Bool) : kb.land(kb.lt(k0, kb.index(s_.k)), kb.lt(mn0, kb.index(t.mn_extent)));
    const ExprId used = units % threads != 0 && first + threads > units ? kb.lt(q, kb.index(units)) : -1;
    const bool vector = t.width > 1;
    auto build = [&](Chunk& c) {
      std::vector<ExprId> values;  // one per k row
      for (int64_t i = 0; i < t.k_rows; ++i) {
        const Idx k = {kb.add(k0, kb.index(i)), vector && t.walk_k}, mn = {mn0, vector && !t.walk_k};
        values.push_back(t.k_last ? vb_.valueAt(t.operand, operandIndex(t.operand, mn, k))
                                  : vb_.valueAt(t.operand, operandIndex(t.operand, k, mn)));
      }
      kb.pushTarget(vector ? &c.body : &c.pre);
      const ExprId lane = vector ? kb.ref(lane_var) : kb.index(0);
      // Rows of a k-row group lie in one 16-byte chunk (four k from a multiple of four): consecutive elements.
      const ExprId row = t.walk_k ? row0 : kb.add(row0, lane);
      const ExprId at = tileElement(t, stage, row, t.walk_k ? kb.add(kk0, lane) : kk0);
      for (int64_t i = 0; i < t.k_rows; ++i) kb.localWrite(t.tiles, kb.add(at, kb.index(i)), values[i]);
      kb.popTarget();
    };
    if (deferred != nullptr && used < 0 && vector) {
      // The chunk's loads here, unguarded (the tile is whole); its lanes' values and writes later.
      emitChunk(kb, vb_, inside, t.width, lane_var, build, deferred);
      continue;
    }
    emitChunk(kb, vb_, used >= 0 ? kb.land(used, inside) : inside, t.width, lane_var, build);
    if (t.whole) continue;
    // Past M, N or K: zeros.
    kb.openIf(used >= 0 ? kb.land(used, kb.lnot(inside)) : kb.lnot(inside));
    for (int64_t i = 0; i < t.width; ++i) {
      for (int64_t j = 0; j < t.k_rows; ++j) {
        const ExprId row = t.walk_k ? row0 : kb.add(row0, kb.index(i));
        const ExprId kk = t.walk_k ? kb.add(kk0, kb.index(i)) : kb.add(kk0, kb.index(j));
        kb.localWrite(t.tiles, tileElement(t, stage, row, kk), zeroOf(t.operand->dtype()));
      }
    }
    kb.close();
  }
}

void MatmulLowering::copySlice(const Staging& t, ExprId slice, ExprId stage, int64_t begin, int64_t end) {
  if (!t.async) {
    BRAZE_ASSERT(begin == 0 && end < 0, "a slice staged through registers is stored whole");
    storeSlice(t, slice, stage);
    return;
  }
  KernelBuilder& kb = kb_;
  const int64_t threads = ctx_.kernel.threadsPerBlock();
  const int64_t total = t.rows * t.chunks;
  const int64_t element = sizeOf(t.operand->dtype()), per_chunk = 16 / element;
  const int64_t k_extent = s_.k;
  const int64_t last = end < 0 ? total : std::min(total, end * threads);
  for (int64_t first = begin * threads; first < last; first += threads) {
    const ExprId q = kb.add(kb.threadIdx(0), kb.index(first));
    const ExprId row = kb.div(q, kb.index(t.chunks)), chunk = kb.mod(q, kb.index(t.chunks));
    // The chunk's first (k, m or n) and how many of its elements lie inside the operand.
    ExprId k, mn, left;
    if (t.order == TileOrder::KMajor) {
      k = kb.add(kb.mul(slice, kb.index(p_.block_k)), kb.mul(chunk, kb.index(per_chunk)));
      mn = kb.add(t.mn_base, row);
      left = kb.select(kb.lt(mn, kb.index(t.mn_extent)), kb.sub(kb.index(k_extent), k), kb.index(0));
    } else {
      k = kb.add(kb.mul(slice, kb.index(p_.block_k)), row);
      mn = kb.add(t.mn_base, kb.mul(chunk, kb.index(per_chunk)));
      left = kb.select(kb.lt(k, kb.index(k_extent)), kb.sub(kb.index(t.mn_extent), mn), kb.index(0));
    }
    ExprId bytes = kb.mul(kb.min(kb.index(per_chunk), kb.select(kb.lt(left, kb.index(0)), kb.index(0), left)),
                          kb.index(element));
    // Outside the operand nothing is read, but the address stays inside it (the last chunk start).
    const int64_t last_k = (k_extent - 1) / per_chunk * per_chunk;
    ExprId kc = kb.min(k, kb.index(t.order == TileOrder::KMajor ? last_k : k_extent - 1));
    ExprId mnc =
        kb.min(mn, kb.index(t.order == TileOrder::KMajor ? t.mn_extent - 1 : (t.mn_extent - 1) / per_chunk * per_chunk));
    if (t.whole) {  // every chunk whole and inside
      bytes = kb.index(16);
      kc = k;
      mnc = mn;
    }
    const std::vector<Idx> index = t.k_last ? operandIndex(t.operand, {mnc, false}, {kc, false})
                                            : operandIndex(t.operand, {kc, false}, {mnc, false});
    std::vector<Stmt> lets;
    const auto [tensor, offset] = storedElement(kb, vb_, t.operand, index, &lets);
    BRAZE_ASSERT(tensor >= 0, "staged operand {} is not one stored tensor", t.operand->name());
    auto& target = kb.current();
    target.insert(target.end(), std::make_move_iterator(lets.begin()), std::make_move_iterator(lets.end()));
    const ExprId at = tileIndex(t, stage, row, chunk);
    if (total % threads != 0 && first + threads > total) kb.openIf(kb.lt(q, kb.index(total)));
    kb.cpAsync(t.tiles, at, tensor, offset, static_cast<int>(per_chunk), bytes);
    if (total % threads != 0 && first + threads > total) kb.close();
  }
}

void MatmulLowering::loadFragment(const Staging& t, const LdmatrixPattern& pattern, VarId fragment, ExprId stage,
                                  ExprId mn_base, int64_t mn_offset, int64_t k0) {
  KernelBuilder& kb = kb_;
  const int64_t per_chunk = 16 / sizeOf(t.operand->dtype());
  // k-major tiles have a row per m or n and K along the row; mn-major ones a row per k.
  const bool k_major = t.order == TileOrder::KMajor;
  // Rows a whole number of rotations apart are stored with the same rotation: such an offset is a
  // constant added to the index (an immediate of the ldmatrix address, not another address computation).
  // The rows are m or n (k-major) or k (mn-major).
  const int64_t per_rotation = rowsPerRotation(t.chunks);
  const int64_t row_offset = k_major ? mn_offset : k0;
  const bool constant_rows = row_offset % per_rotation == 0 && (row_offset / per_rotation) % t.chunks == 0;
  const ExprId mn0 = constant_rows && k_major ? mn_base : kb.add(mn_base, kb.index(mn_offset));
  const ExprId row0 = k_major ? mn0 : kb.index(constant_rows ? 0 : k0);
  const ExprId chunk0 = k_major ? kb.index(k0 / per_chunk) : kb.div(mn0, kb.index(per_chunk));
  const TilePlace source = ldmatrixSource(kb, pattern, kb.mod(kb.threadIdx(0), kb.index(32)));
  const ExprId row = kb.add(row0, source.row), chunk = kb.add(chunk0, source.chunk);
  ExprId at = tileIndex(t, stage, row, chunk);
  if (constant_rows) at = kb.add(at, kb.index(row_offset * t.row_elements));
  kb.ldmatrix(fragment, kb.index(0), t.tiles, at, pattern.matrices, pattern.transpose);
}

void lowerMatmul(LoweringContext& ctx, const MatmulParams& p) {
  MatmulLowering lowering(ctx, p);
  if (p.gemv_mma) {
    lowering.gemvMma();
  } else if (p.gemv) {
    lowering.gemv();
  } else {
    lowering.mma();
  }
}

}  // namespace braze::scheduler

namespace braze {

const SchedulerEntry& matmulScheduler() {
  static const SchedulerEntry entry{
      SchedulerKind::Matmul, "matmul", canScheduleMatmul,
      // A GPU without mma.sync (an AMD GPU, or older than sm_80) has no kernel for a tensor-core matmul;
      // the GEMV needs none.
      [](scheduler::LoweringContext& ctx) -> std::optional<std::string> {
        if (scheduler::chooseMatmul(ctx).gemv) return std::nullopt;
        const Expr& mm = scheduler::matmulOf(ctx.segment);
        std::string why = mmaUnavailable(ctx.device, mm.input(0)->dtype());
        return why.empty() ? std::nullopt : std::optional<std::string>(std::move(why));
      },
      [](scheduler::LoweringContext& ctx) { return heuristicsOf(matmulScheduler(), scheduler::chooseMatmul(ctx)); },
      [](scheduler::LoweringContext& ctx, const SegmentHeuristics& h) {
        scheduler::lowerMatmul(ctx, paramsOf<MatmulParams>(h));
      }};
  return entry;
}

}  // namespace braze
