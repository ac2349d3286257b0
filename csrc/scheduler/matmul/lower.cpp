// The matmul lowering: block b of the grid takes one batch's block tile of the output; its warps each a
// warp tile of tiles_m x tiles_n mma tiles. Walking K an mma's depth at a time, each lane loads its
// fragment values of A and B straight from global memory (through the ValueBuilder, so a cast or
// broadcast feeding an operand is computed as it is loaded, and transposed operands are read through
// their strides), zero outside the matrices, and issues the warp's mmas. Then each accumulator value
// goes through the epilogue (bias, the elementwise ops after the matmul, the output's dtype) and is
// stored. The operands are not staged in shared memory: every lane reads its own values, so a block
// reads A and B tiles several times from L1/L2.
#include "support/error.h"
#include "scheduler/lower.h"
#include "scheduler/matmul/heuristics.h"

namespace braze::kernel {
namespace {

const Expr& matmulOf(const SegmentToLower& segment) {
  for (const Expr* e : segment.exprs) {
    if (opInfo(e->kind()).category == OpCategory::Matmul) return *e;
  }
  BRAZE_UNREACHABLE("matmul segment {} has no matmul", segment.id);
}

struct Shape {
  std::vector<int64_t> batch_sizes;
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

Shape shapeOf(const SegmentToLower& segment) {
  const Expr& mm = matmulOf(segment);
  const auto& out = segment.bound->sizesOf(mm.output(0));
  const auto& a = segment.bound->sizesOf(mm.input(0));
  Shape s;
  s.batch_sizes.assign(out.begin(), out.end() - 2);
  for (int64_t d : s.batch_sizes) s.batch *= d;
  s.m = out[out.size() - 2];
  s.n = out.back();
  s.k = a.back();
  return s;
}

// An index expression linear in the lane's group g = lane / 4 and its place t = lane % 4, equal to
// `position(lane)` for every lane (the fragment tables are linear in g and t).
ExprId laneLinear(KernelBuilder& kb, ExprId g, ExprId t, const std::function<int(int lane)>& position) {
  const int base = position(0);
  const int per_g = position(4) - base, per_t = position(1) - base;
  return kb.add(kb.index(base), kb.add(kb.mul(g, kb.index(per_g)), kb.mul(t, kb.index(per_t))));
}

}  // namespace

MatmulParams chooseMatmul(LoweringContext& ctx) {
  const Shape s = shapeOf(ctx.segment);
  return matmulHeuristics(ctx.device, {s.batch, s.m, s.n, s.k, matmulOf(ctx.segment).input(0)->dtype()});
}

void lowerMatmul(LoweringContext& ctx, const MatmulParams& p) {
  const Expr& mm = matmulOf(ctx.segment);
  const bool linear = mm.kind() == OpKind::Linear;
  const Val* a = mm.input(0);
  const Val* b = mm.input(1);
  const Val* bias = linear && mm.inputs().size() > 2 ? mm.input(2) : nullptr;
  const Val* result = mm.output(0);
  const Shape s = shapeOf(ctx.segment);
  const DataType operand = a->dtype();
  const DataType acc_type = mmaAccumulator(p.shape, operand);
  const MmaDims dims = mmaDims(p.shape);
  const auto& a_sizes = ctx.bound.sizesOf(a);
  const auto& b_sizes = ctx.bound.sizesOf(b);
  const int64_t nb = static_cast<int64_t>(s.batch_sizes.size());

  Kernel& k = ctx.kernel;
  k.grid = {p.grid, 1};
  k.block = {32 * p.warps_m * p.warps_n, 1};
  k.summary = p.toString();
  KernelBuilder kb(k);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);

  const ExprId block = kb.blockIdx(0);
  const ExprId bn = kb.letValue("bn", kb.mod(block, kb.index(p.blocks_n)));
  const ExprId bm = kb.letValue("bm", kb.mod(kb.div(block, kb.index(p.blocks_n)), kb.index(p.blocks_m)));
  const ExprId bb = kb.letValue("bb", kb.div(block, kb.index(p.blocks_n * p.blocks_m)));
  const ExprId warp = kb.letValue("warp", kb.div(kb.threadIdx(0), kb.index(32)));
  const ExprId lane = kb.letValue("lane", kb.mod(kb.threadIdx(0), kb.index(32)));
  const ExprId g = kb.letValue("g", kb.div(lane, kb.index(4)));
  const ExprId t = kb.letValue("t", kb.mod(lane, kb.index(4)));
  const ExprId row0 = kb.letValue(
      "row0", kb.add(kb.mul(bm, kb.index(p.blockRows())), kb.mul(kb.div(warp, kb.index(p.warps_n)), kb.index(p.tiles_m * 16))));
  const ExprId col0 = kb.letValue(
      "col0", kb.add(kb.mul(bn, kb.index(p.blockCols())), kb.mul(kb.mod(warp, kb.index(p.warps_n)), kb.index(p.tiles_n * 8))));
  const std::vector<Idx> batch_index = vb.unflatten(bb, false, s.batch_sizes);

  // An operand's index: its own batch dims (aligned right, size 1 broadcast), then its two matrix dims.
  auto operandIndex = [&](const std::vector<int64_t>& sizes, ExprId r, ExprId c) {
    std::vector<Idx> index;
    const int64_t lead = static_cast<int64_t>(sizes.size()) - 2;
    for (int64_t j = 0; j < lead; ++j) {
      index.push_back(sizes[j] == 1 ? Idx{kb.index(0), false} : batch_index[j + (nb - lead)]);
    }
    index.push_back({r, false});
    index.push_back({c, false});
    return index;
  };
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
  const ExprId zero = isFloating(operand) ? kb.constant(0.0, operand) : kb.constantInt(0, operand);

  std::vector<VarId> acc, fa, fb;
  for (int64_t i = 0; i < p.tiles_m * p.tiles_n; ++i) acc.push_back(kb.arrayVar("acc", acc_type, dims.c_values));
  for (int64_t i = 0; i < p.tiles_m; ++i) fa.push_back(kb.arrayVar("fa", operand, dims.a_values));
  for (int64_t i = 0; i < p.tiles_n; ++i) fb.push_back(kb.arrayVar("fb", operand, dims.b_values));
  for (VarId v : acc) {
    kb.declare(v);
    for (int64_t i = 0; i < dims.c_values; ++i) {
      kb.localWrite(v, kb.index(i), acc_type == DataType::Float ? kb.constant(0.0, acc_type) : kb.constantInt(0, acc_type));
    }
  }
  for (VarId v : fa) kb.declare(v);
  for (VarId v : fb) kb.declare(v);

  const VarId kk = kb.scalarVar("kk", DataType::Int64, /*is_index=*/true);
  kb.openFor(kk, kb.index(0), kb.index(s.k), kb.index(dims.k), /*unroll=*/false);
  for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
    inChunk([&] {
      for (int i = 0; i < dims.a_values; ++i) {
        const ExprId r = kb.add(kb.add(row0, kb.index(tm * 16)),
                                laneLinear(kb, g, t, [&](int l) { return mmaAPosition(p.shape, l, i).row; }));
        const ExprId c = kb.add(kb.ref(kk), laneLinear(kb, g, t, [&](int l) { return mmaAPosition(p.shape, l, i).col; }));
        const ExprId valid = kb.land(kb.lt(r, kb.index(s.m)), kb.lt(c, kb.index(s.k)));
        const ExprId v = vb.valueAt(a, operandIndex(a_sizes, kb.min(r, kb.index(s.m - 1)), kb.min(c, kb.index(s.k - 1))));
        kb.localWrite(fa[tm], kb.index(i), kb.select(valid, v, zero));
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
        const ExprId rc = kb.min(r, kb.index(s.k - 1)), cc = kb.min(c, kb.index(s.n - 1));
        // linear's weight is [N, K]: B[k][n] is weight[n][k].
        const ExprId v = linear ? vb.valueAt(b, operandIndex(b_sizes, cc, rc)) : vb.valueAt(b, operandIndex(b_sizes, rc, cc));
        kb.localWrite(fb[tn], kb.index(i), kb.select(valid, v, zero));
      }
    });
  }
  for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
    for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
      const VarId d = acc[tm * p.tiles_n + tn];
      kb.mma(p.shape, d, fa[tm], fb[tn], d);
    }
  }
  kb.close();

  // The epilogue: each accumulator value as the matmul's result (plus linear's bias, before the one
  // rounding to the result's dtype), through the ops after it, stored where it is in bounds.
  for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
    for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
      for (int i = 0; i < dims.c_values; ++i) {
        const ExprId r = kb.add(kb.add(row0, kb.index(tm * 16)), laneLinear(kb, g, t, [&](int l) { return mmaCPosition(l, i).row; }));
        const ExprId c = kb.add(kb.add(col0, kb.index(tn * 8)), laneLinear(kb, g, t, [&](int l) { return mmaCPosition(l, i).col; }));
        const ExprId inside = kb.land(kb.lt(r, kb.index(s.m)), kb.lt(c, kb.index(s.n)));
        emitChunk(kb, vb, inside, 1, /*lane_var=*/-1, [&](Chunk& chunk) {
          ExprId value = kb.localRead(acc[tm * p.tiles_n + tn], kb.index(i));
          if (bias != nullptr) {
            // In the accumulator's domain, as the reference adds: float, or wrapping integers.
            const DataType sum = acc_type == DataType::Float ? DataType::Float : DataType::Int64;
            const std::vector<Idx> at = ctx.bound.sizesOf(bias).empty() ? std::vector<Idx>{} : std::vector<Idx>{{c, false}};
            value = kb.elementwise(OpKind::Add, sum, {kb.cast(value, sum), kb.cast(vb.valueAt(bias, at), sum)});
          }
          vb.setResult(result, vb.bind("mm", kb.cast(value, result->dtype())));
          std::vector<Idx> index = batch_index;
          index.push_back({r, false});
          index.push_back({c, false});
          for (const Val* out : ctx.segment.outputs) storeOutput(kb, vb, chunk, ctx.outputs.at(out), index, vb.valueAt(out, index));
        });
      }
    }
  }
}

}  // namespace braze::kernel
