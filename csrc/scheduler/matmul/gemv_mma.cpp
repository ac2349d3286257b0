// The GEMV on tensor cores (MatmulParams::gemv_mma): mma.sync with A and B swapped (out^T = B^T A^T), so
// that B's columns (a linear's weight rows, read along K) fill an mma's 16 rows and A's few rows its 8
// columns. Block b takes tiles_m tiles of 16 of B's columns against every row of A (tiles_n tiles of 8);
// its warps split K, warp w taking groups w, w + warps, ... of 4 x gemv_vector K elements (of its split's
// part of K, where split_k blocks share a tile).
//
// In a group, lane (g, t) = (lane / 4, lane % 4) loads the gemv_vector consecutive K elements from
// t * gemv_vector on of B's columns g and g + 8 of each tile and of A's row g of each tile: one 16-byte
// load per weight column, no shared memory. The mmas take K in another order, chosen so that those loads
// are the lane's fragments: a fragment value at K position run * t + e + (k / 2) * h of mma step s (the
// lane's runs of `run` consecutive K, e < run, h the half; mmaAPosition, mmaBPosition) is the loaded
// element t * gemv_vector + 2 * run * s + run * h + e. That maps the group's K one to one, the same for
// both operands, so the mmas sum every product once.
//
// The warps' accumulators meet in shared memory; the warp owning a tile sums them in warp order (the same
// sum whichever warp finished first) and runs its epilogue.
#include "scheduler/matmul/lowering.h"

#include "support/error.h"

namespace braze::scheduler {

void MatmulLowering::gemvMma() {
  const MatmulParams& p = p_;
  KernelBuilder& kb = kb_;
  ValueBuilder& vb = vb_;
  const MatmulExtents& s = s_;
  const DataType operand = a_->dtype();
  const MmaDims dims = mmaDims(p.shape);
  const int64_t width = p.gemv_vector, group = 4 * width, run = dims.k / 8, steps = width / (2 * run);
  const int64_t warps = p.gemv_warps, rows = gemvRows();
  BRAZE_ASSERT(steps >= 1 && width % (2 * run) == 0, "a GEMV chunk of {} elements is not whole mma runs of {}", width, run);
  ctx_.kernel.grid = {p.grid, 1};
  ctx_.kernel.block = {32 * warps, 1};

  // With split-K, consecutive blocks are the splits of one tile.
  const ExprId block = kb.blockIdx(0);
  const int64_t splits = p.split_k;
  const ExprId split = splits > 1 ? kb.letValue("split", kb.mod(block, kb.index(splits))) : kb.index(0);
  const ExprId tile_id = splits > 1 ? kb.letValue("tile_id", kb.div(block, kb.index(splits))) : block;
  const ExprId bn = kb.letValue("bn", kb.mod(tile_id, kb.index(p.blocks_n)));
  setBatch(kb.letValue("bb", kb.div(tile_id, kb.index(p.blocks_n))));
  const ExprId warp = kb.letValue("warp", kb.div(kb.threadIdx(0), kb.index(32)));
  const ExprId lane = kb.letValue("lane", kb.mod(kb.threadIdx(0), kb.index(32)));
  const ExprId g = kb.letValue("g", kb.div(lane, kb.index(4)));
  const ExprId t = kb.letValue("t", kb.mod(lane, kb.index(4)));
  const ExprId col0 = kb.letValue("col0", kb.mul(bn, kb.index(p.tiles_m * 16)));
  // The lane's columns of B (g and g + 8 of each tile) and rows of A (g of each tile); past N or past the
  // rows, the last one (inside the operand; its outputs are not stored).
  std::vector<ExprId> cols, a_rows;
  for (int64_t c = 0; c < 2 * p.tiles_m; ++c) {
    cols.push_back(kb.letValue("n", kb.min(kb.add(col0, kb.add(kb.index(8 * c), g)), kb.index(s.n - 1))));
  }
  for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
    a_rows.push_back(kb.letValue("r", kb.min(kb.add(kb.index(8 * tn), g), kb.index(rows - 1))));
  }
  const int64_t tiles = p.tiles_m * p.tiles_n;
  std::vector<VarId> acc;  // tile (tm, tn) at tm * tiles_n + tn
  for (int64_t i = 0; i < tiles; ++i) {
    acc.push_back(kb.arrayVar("acc", acc_type_, dims.c_values));
    kb.declare(acc.back());
    for (int64_t v = 0; v < dims.c_values; ++v) kb.localWrite(acc.back(), kb.index(v), zeroOf(acc_type_));
  }
  const VarId lane_var = kb.scalarVar("l", DataType::Int64, /*is_index=*/true);
  const ExprId zero = zeroOf(operand);

  // The lane's chunk of one operand row in group q: its elements from k0 on, into a fresh buffer. A whole
  // group lies inside K (a vector load where the layout allows); the last group of a K that is not whole
  // groups reads element by element, zero past K.
  auto loadChunk = [&](ExprId k0, bool whole, const std::function<ExprId(Idx k)>& value) {
    const VarId buffer = kb.arrayVar("chunk", operand, width);
    kb.declare(buffer);
    if (whole) {
      emitChunk(kb, vb, kb.constantInt(1, DataType::Bool), width, lane_var, [&](Chunk& c) {
        const ExprId v = value({k0, true});
        kb.pushTarget(&c.body);
        kb.localWrite(buffer, kb.ref(lane_var), v);
        kb.popTarget();
      });
      return buffer;
    }
    for (int64_t e = 0; e < width; ++e) {
      const ExprId k = kb.add(k0, kb.index(e));
      emitChunk(kb, vb, kb.constantInt(1, DataType::Bool), 1, -1, [&](Chunk& c) {
        const ExprId v = value({kb.min(k, kb.index(s.k - 1)), false});
        kb.pushTarget(&c.pre);
        kb.localWrite(buffer, kb.index(e), kb.select(kb.lt(k, kb.index(s.k)), v, zero));
        kb.popTarget();
      });
    }
    return buffer;
  };
  // The chunk element of fragment K position `at` (lane 0's) in step `step`.
  auto elementOf = [&](int64_t step, int at) {
    const int64_t h = at / (dims.k / 2), e = at % (dims.k / 2);
    return 2 * run * step + run * h + e;
  };
  // A's rows are the mma's B: a step's B fragment is the chunk's elements 2 run step on, in order
  // (mmaBPosition's K positions map to them so). Where A is stored as it is read (a k-major tensor of the
  // operand's type, 16-byte aligned rows), whole groups load those fragments straight into the registers
  // the mma takes, two steps' fragments per 16-byte load, instead of values unpacked and packed again.
  for (int64_t step = 0; step < steps; ++step) {
    for (int i = 0; i < dims.b_values; ++i) {
      BRAZE_ASSERT(elementOf(step, mmaBPosition(p.shape, 0, i).row) == 2 * run * step + i,
                   "B fragment {} of step {} is not in order", i, step);
    }
  }
  const std::optional<OperandStorage> a_storage = operandStorage(ctx_, a_, operand, true);
  const bool a_stored = a_storage && a_storage->order == TileOrder::KMajor;
  const int64_t per_load = steps % 2 == 0 ? 2 : 1;  // steps' fragments per load of A
  // Group q's loads and mmas.
  auto groupStep = [&](ExprId q, bool whole) {
    const ExprId k0 = kb.letValue("k0", kb.add(kb.mul(q, kb.index(group)), kb.mul(t, kb.index(width))));
    std::vector<VarId> b_chunks, a_chunks, a_loaded;  // a_loaded[tn * steps / per_load + step / per_load]
    for (ExprId n : cols) b_chunks.push_back(loadChunk(k0, whole, [&](Idx k) { return valueOfB(k, {n, false}); }));
    for (ExprId r : a_rows) {
      if (!(whole && a_stored)) {
        a_chunks.push_back(loadChunk(k0, whole, [&](Idx k) { return valueOfA({gemvRow(r), false}, k); }));
        continue;
      }
      for (int64_t step = 0; step < steps; step += per_load) {
        a_loaded.push_back(kb.arrayVar("fb", operand, per_load * dims.b_values));
        kb.declare(a_loaded.back());
        const ExprId k = kb.add(k0, kb.index(2 * run * step));
        std::vector<Stmt> lets;
        const auto [tensor, offset] = storedElement(kb, vb, a_, operandIndex(a_, {gemvRow(r), false}, {k, false}), &lets);
        BRAZE_ASSERT(tensor >= 0, "matmul operand {} is stored as read, yet not one tensor's element", a_->name());
        kb.current().insert(kb.current().end(), std::make_move_iterator(lets.begin()), std::make_move_iterator(lets.end()));
        kb.vecLoad(a_loaded.back(), kb.index(0), tensor, offset, static_cast<int>(per_load * dims.b_values));
      }
    }
    auto element = [&](int64_t step, int at) { return kb.index(elementOf(step, at)); };
    for (int64_t step = 0; step < steps; ++step) {
      std::vector<VarId> fa, fb;
      for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
        fa.push_back(kb.arrayVar("fa", operand, dims.a_values));
        kb.declare(fa.back());
        for (int i = 0; i < dims.a_values; ++i) {
          const MatrixPosition at = mmaAPosition(p.shape, 0, i);
          kb.localWrite(fa.back(), kb.index(i), kb.localRead(b_chunks[2 * tm + at.row / 8], element(step, at.col)));
        }
      }
      for (int64_t tn = 0; tn < p.tiles_n && a_loaded.empty(); ++tn) {
        fb.push_back(kb.arrayVar("fb", operand, dims.b_values));
        kb.declare(fb.back());
        for (int i = 0; i < dims.b_values; ++i) {
          kb.localWrite(fb.back(), kb.index(i), kb.localRead(a_chunks[tn], element(step, mmaBPosition(p.shape, 0, i).row)));
        }
      }
      for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
        for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
          const VarId d = acc[tm * p.tiles_n + tn];
          if (a_loaded.empty()) {
            kb.mma(p.shape, d, fa[tm], fb[tn], d);
          } else {
            const VarId loaded = a_loaded[tn * (steps / per_load) + step / per_load];
            kb.mma(p.shape, d, fa[tm], loaded, d, static_cast<int32_t>((step % per_load) * dims.b_values));
          }
        }
      }
    }
  };
  // The block's whole groups (its split's [first, first + count)), warp w taking groups w, w + warps, ...
  // of them in steps of gemv_unroll groups (unrolled, so their loads are in flight together); the last,
  // partial group by the last split's warp whose turn it is.
  const int64_t whole_groups = s.k / group, per_split = ceilDiv(whole_groups, splits);
  const int64_t per_warp = ceilDiv(per_split, warps);
  const int64_t unroll = std::min(p.gemv_unroll, std::max<int64_t>(per_warp, 1));
  const ExprId first = kb.mul(split, kb.index(per_split));
  const bool even_splits = whole_groups % splits == 0;
  const ExprId count = even_splits ? kb.index(per_split)
                                    : kb.letValue("groups", kb.min(kb.index(per_split), kb.sub(kb.index(whole_groups), first)));
  auto warpGroup = [&](ExprId i) {
    const ExprId q = kb.letValue("q", kb.add(kb.mul(i, kb.index(warps)), warp));
    const bool exact = even_splits && per_split % warps == 0;
    if (!exact) kb.openIf(kb.lt(q, count));
    groupStep(kb.add(first, q), true);
    if (!exact) kb.close();
  };
  unrolledSteps(per_warp, unroll, warpGroup);
  if (s.k % group != 0) {
    const int64_t last_first = (splits - 1) * per_split;
    const ExprId turn = kb.eq(warp, kb.index((whole_groups - last_first) % warps));
    kb.openIf(splits > 1 ? kb.land(kb.eq(split, kb.index(splits - 1)), turn) : turn);
    groupStep(kb.index(whole_groups), false);
    kb.close();
  }
  // Split-K: the last block of the tile to arrive adds the splits' accumulators, thread by thread in split
  // order, and goes on (its `if` stays open to the end).
  if (splits > 1) combineSplits(acc, tile_id, split, dims.c_values);

  // The tile's outputs: its value i at the mma's row g + 8 (i / 2) (B's column) and column 2t + i % 2
  // (A's row).
  auto tileEpilogue = [&](int64_t a, const std::function<ExprId(int i)>& value) {
    const int64_t tm = a / p.tiles_n, tn = a % p.tiles_n;
    for (int i = 0; i < dims.c_values; ++i) {
      const MatrixPosition at = mmaCPosition(0, i);
      const ExprId n = kb.add(col0, kb.add(kb.index(tm * 16 + at.row), g));
      const ExprId r = kb.add(kb.index(tn * 8 + at.col), kb.mul(t, kb.index(2)));
      const ExprId inside = kb.land(kb.lt(n, kb.index(s.n)), kb.lt(r, kb.index(rows)));
      const ExprId total = value(i);
      epilogue(inside, gemvRow(r), n, 1, [&](ExprId) { return total; });
    }
  };
  if (warps == 1) {
    for (int64_t a = 0; a < tiles; ++a) tileEpilogue(a, [&](int i) { return kb.localRead(acc[a], kb.index(i)); });
    if (splits > 1) kb.close();  // the last split's block
    return;
  }
  // Warp w's value v of a lane at (w * values + v) * 32 + lane: a warp's stores are 32 consecutive words.
  const int64_t values = tiles * dims.c_values;
  const VarId partial = kb.arrayVar("partial", acc_type_, warps * values * 32, VarKind::SharedArray);
  kb.declare(partial);
  auto slot = [&](ExprId w, int64_t v) {
    return kb.add(kb.mul(kb.add(kb.mul(w, kb.index(values)), kb.index(v)), kb.index(32)), lane);
  };
  for (int64_t a = 0; a < tiles; ++a) {
    for (int i = 0; i < dims.c_values; ++i) {
      kb.localWrite(partial, slot(warp, a * dims.c_values + i), kb.localRead(acc[a], kb.index(i)));
    }
  }
  kb.barrier();
  // Summed in the accumulator's type: float, or int32 wrapping as the mma's does.
  const DataType sum_type = acc_type_ == DataType::Float ? DataType::Float : DataType::Int64;
  for (int64_t a = 0; a < tiles; ++a) {
    kb.openIf(kb.eq(warp, kb.index(a % warps)));
    tileEpilogue(a, [&](int i) {
      ExprId total = kb.cast(kb.localRead(partial, slot(kb.index(0), a * dims.c_values + i)), sum_type);
      for (int64_t w = 1; w < warps; ++w) {
        total = kb.elementwise(OpKind::Add, sum_type,
                               {total, kb.cast(kb.localRead(partial, slot(kb.index(w), a * dims.c_values + i)), sum_type)});
      }
      return kb.letValue("total", kb.cast(total, acc_type_));
    });
    kb.close();
  }
  if (splits > 1) kb.close();  // the last split's block
}

}  // namespace braze::scheduler
