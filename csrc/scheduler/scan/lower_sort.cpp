// topk and argsort as line walks, the scan scheduler's shape: thread t takes line t (a position of every
// dim but the sorted one) and keeps the line's first `keep` elements in order in its outputs (topk: k
// values and indices; argsort: every index), inserting each element of the line in turn: it moves past
// the kept ones it beats, and an element never beats an equal one kept before it, so ties keep index
// order (a stable sort, as the reference evaluator sorts); NaN beats every number. An argsort line of n
// elements costs n^2 / 2 compares and a topk one n * k at most: fine for the lines models sort (vocab
// top-k at decode, MoE routing over experts), slow for long ones, which would want a block-wide sort.
#include "scheduler/scan/lower_sort.h"

#include "scheduler/scan/line_walk.h"

#include "support/error.h"

namespace braze::scheduler {

void lowerSortLines(LoweringContext& ctx, const ScanParams& params) {
  const Expr& op = *ctx.segment.exprs.at(0);
  const bool is_topk = op.kind() == OpKind::TopK;
  BRAZE_ASSERT(is_topk || op.kind() == OpKind::Argsort, "lowerSortLines: {} is not a topk or argsort", op.name());
  const Val* x = op.input(0);
  const auto& x_sizes = ctx.bound.sizesOf(x);
  const auto dim = static_cast<size_t>(op.attrs().getInt("dim"));
  const bool descending = op.attrs().getBool(is_topk ? "largest" : "descending");
  const int64_t extent = x_sizes[dim];
  const int64_t keep = ctx.bound.sizesOf(op.output(0))[dim];
  KernelBuilder kb(ctx.kernel);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  const TensorId x_param = ctx.inputs.at(x);
  // Either of topk's results may be unused (not a segment output): the walk keeps what is written.
  auto paramOf = [&](const Val* out) { return ctx.outputs.count(out) != 0 ? ctx.outputs.at(out) : TensorId{-1}; };
  const TensorId values_param = is_topk ? paramOf(op.output(0)) : -1;
  const TensorId indices_param = paramOf(op.output(is_topk ? 1 : 0));
  const bool has_values = values_param >= 0, has_indices = indices_param >= 0;
  BRAZE_ASSERT(has_values || has_indices, "{}: no result is used", op.name());
  const DataType compute = computeTypeOf(x->dtype());
  auto offsetIn = [&](TensorId tensor, const std::vector<Idx>& index) {
    int64_t coefficient = 0;
    return vb.flatOffset(kb.kernel().tensors[tensor].layout, index, &coefficient);
  };
  // Whether a (new, later in the line) beats b (kept): strictly larger (descending) or smaller, a NaN
  // beating every number and nothing beating a NaN kept first.
  auto beats = [&](ExprId a, ExprId b) {
    const ExprId ordered = kb.elementwise(descending ? OpKind::Gt : OpKind::Lt, DataType::Bool, {a, b});
    if (!isFloating(x->dtype())) return ordered;
    const ExprId a_nan = kb.elementwise(OpKind::IsNan, DataType::Bool, {a});
    const ExprId b_nan = kb.elementwise(OpKind::IsNan, DataType::Bool, {b});
    const ExprId nan_first = kb.elementwise(OpKind::LogicalAnd, DataType::Bool,
                                            {descending ? a_nan : b_nan,
                                             kb.elementwise(OpKind::LogicalNot, DataType::Bool, {descending ? b_nan : a_nan})});
    return kb.elementwise(OpKind::LogicalOr, DataType::Bool, {ordered, nan_first});
  };

  const LineWalk line = openLineWalk(ctx.kernel, kb, vb, params, x_sizes, dim);
  // The value kept at slot `slot` of the line: in the values output where there is one; else x at the
  // index kept there, or at `fallback` where `valid` is false (the slot may not be written yet, and x
  // must not be read at what it holds).
  auto keptValue = [&](ExprId slot, ExprId valid, ExprId fallback) {
    const std::vector<Idx> at = lineIndex(line, slot);
    if (has_values) return kb.cast(kb.load(values_param, offsetIn(values_param, at)), compute);
    const ExprId index = kb.select(valid, kb.valueToIndex(kb.load(indices_param, offsetIn(indices_param, at))), fallback);
    return kb.cast(kb.load(x_param, offsetIn(x_param, lineIndex(line, index))), compute);
  };
  if (keep == 0) {  // k = 0: nothing to keep
    kb.close();
    return;
  }

  const VarId i_var = kb.scalarVar("i", DataType::Int64, /*is_index=*/true);
  kb.openFor(i_var, kb.index(0), kb.index(extent), kb.index(1), /*unroll=*/false);
  const ExprId i = kb.ref(i_var);
  const ExprId v = kb.letValue("v", kb.cast(kb.load(x_param, offsetIn(x_param, lineIndex(line, i))), compute));
  const ExprId last = kb.letValue("last", kb.min(i, kb.index(keep - 1)));  // the slot it starts from
  // Past the first `keep` elements, only one that beats the last kept element enters.
  if (keep < extent) {
    // The last slot holds an element only once `keep` have entered (both sides are evaluated).
    const ExprId full = kb.le(kb.index(keep), i);
    kb.openIf(kb.lor(kb.lt(i, kb.index(keep)), beats(v, keptValue(kb.index(keep - 1), full, i))));
  }
  const VarId placed = kb.scalarVar("placed", DataType::Bool);
  kb.let(placed, kb.boolean(false));
  const VarId t_var = kb.scalarVar("t", DataType::Int64, /*is_index=*/true);
  kb.openFor(t_var, kb.index(0), kb.index(keep), kb.index(1), /*unroll=*/false);
  const ExprId t = kb.ref(t_var);
  kb.openIf(kb.land(kb.lnot(kb.ref(placed)), kb.le(t, last)));
  const ExprId slot = kb.letValue("slot", kb.sub(last, t));
  const ExprId above = kb.letValue("above", kb.select(kb.lt(t, last), kb.sub(slot, kb.index(1)), kb.index(0)));
  const std::vector<Idx> at = lineIndex(line, slot);
  const std::vector<Idx> from = lineIndex(line, above);
  kb.openIf(kb.land(kb.lt(t, last), beats(v, kb.letValue("w", keptValue(above, kb.lt(t, last), i)))));
  // v goes above the element kept there: that one moves down a slot.
  if (has_values) kb.store(values_param, offsetIn(values_param, at), kb.load(values_param, offsetIn(values_param, from)));
  if (has_indices) kb.store(indices_param, offsetIn(indices_param, at), kb.load(indices_param, offsetIn(indices_param, from)));
  kb.openElse();
  if (has_values) kb.store(values_param, offsetIn(values_param, at), kb.cast(v, x->dtype()));
  if (has_indices) kb.store(indices_param, offsetIn(indices_param, at), kb.indexToValue(i, DataType::Int64));
  kb.assign(placed, kb.boolean(true));
  kb.close();  // if beats
  kb.close();  // if not placed
  kb.close();  // for t
  if (keep < extent) kb.close();
  kb.close();  // for i
  kb.close();  // if line
}

}  // namespace braze::scheduler
