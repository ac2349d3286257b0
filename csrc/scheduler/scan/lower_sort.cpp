// topk and argsort as line walks, the scan scheduler's shape: thread t takes line t (a position of every
// dim but the sorted one) and keeps the line's first `keep` elements in order in its outputs (topk: k
// values and indices; argsort: every index), inserting each element of the line in turn: it moves past
// the kept ones it beats, and an element never beats an equal one kept before it, so ties keep index
// order (a stable sort, as the reference evaluator sorts); NaN ranks above every number, as torch sorts.
// An argsort line of n elements costs n^2 / 4 compares on average and a topk one about n: the shape for
// many short lines (MoE routing over experts); long lines are block sorts (lower_block_sort.cpp).
#include "scheduler/scan/lower_sort.h"

#include "scheduler/scan/entry.h"
#include "scheduler/scan/line_walk.h"

#include "support/error.h"

#include <algorithm>

namespace braze::scheduler {

SortOp sortOpOf(LoweringContext& ctx) {
  SortOp s;
  const Expr& op = scanOpOf(ctx.segment.exprs);
  const bool is_topk = op.kind() == OpKind::TopK;
  BRAZE_ASSERT(is_topk || op.kind() == OpKind::Argsort, "a sort lowering: {} is not a topk or argsort", op.name());
  s.x = op.input(0);
  s.dim = static_cast<size_t>(op.attrs().getInt("dim"));
  s.descending = op.attrs().getBool(is_topk ? "largest" : "descending");
  const auto& x_sizes = ctx.bound.sizesOf(s.x);
  s.extent = x_sizes.empty() ? 1 : x_sizes[s.dim];
  s.keep = x_sizes.empty() ? 1 : ctx.bound.sizesOf(op.output(0))[s.dim];
  // Either of topk's results may be unused (not a segment output): the lowering keeps what is written.
  auto paramOf = [&](const Val* out) { return ctx.outputs.count(out) != 0 ? ctx.outputs.at(out) : TensorId{-1}; };
  s.values = is_topk ? op.output(0) : nullptr;
  s.values_param = is_topk ? paramOf(op.output(0)) : -1;
  s.indices_param = paramOf(op.output(is_topk ? 1 : 0));
  s.compute = computeTypeOf(s.x->dtype());
  return s;
}

ExprId sortKeyAt(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort, const std::vector<Idx>& index) {
  std::vector<Stmt> reads;
  vb.beginChunk(&reads, &reads, 1, -1);
  const ExprId value = vb.valueAt(sort.x, index);
  std::vector<Stmt>& target = kb.current();
  target.insert(target.end(), std::make_move_iterator(reads.begin()), std::make_move_iterator(reads.end()));
  return kb.cast(value, sort.compute);
}

ExprId sortBeats(KernelBuilder& kb, const SortOp& sort, ExprId a, ExprId b) {
  const ExprId ordered = kb.elementwise(sort.descending ? OpKind::Gt : OpKind::Lt, DataType::Bool, {a, b});
  if (!isFloating(sort.x->dtype())) return ordered;
  const ExprId a_nan = kb.elementwise(OpKind::IsNan, DataType::Bool, {a});
  const ExprId b_nan = kb.elementwise(OpKind::IsNan, DataType::Bool, {b});
  const ExprId nan_first = kb.elementwise(
      OpKind::LogicalAnd, DataType::Bool,
      {sort.descending ? a_nan : b_nan, kb.elementwise(OpKind::LogicalNot, DataType::Bool, {sort.descending ? b_nan : a_nan})});
  return kb.elementwise(OpKind::LogicalOr, DataType::Bool, {ordered, nan_first});
}

namespace {

TensorId keptIndicesWorkspace(KernelBuilder& kb, const LoweringContext& ctx, const Expr& topk) {
  const Val* indices = topk.output(1);
  TensorParam kept = workspaceParam("kept_at", DataType::Int64, ctx.bound.numel(indices), /*zeroed=*/false);
  kept.layout = StridedLayout::rowMajor(ctx.bound.sizesOf(indices));
  return kb.addTensor(kept);
}

// The ops of a topk's results, once its line is sorted (check.cpp): the kept slots walked once per
// reduction among them (a router's sum of its k weights), then once more to compute and store the outputs
// (those of the line walk before the sort aside).
void lowerKeptSlotOps(LoweringContext& ctx, KernelBuilder& kb, ValueBuilder& vb, const LineWalk& line, const SortOp& sort,
                      TensorId indices_param, const std::vector<const Expr*>& later) {
  const Expr& topk = scanOpOf(ctx.segment.exprs);
  auto loadAt = [&](TensorId tensor, const std::vector<Idx>& at) {
    int64_t coefficient = 0;
    return kb.load(tensor, vb.flatOffset(kb.kernel().tensors[tensor].layout, at, &coefficient));
  };
  // The results at slot `slot`: the kept index, and the value kept there (read back, or x at that index).
  auto bindSlot = [&](ExprId slot) {
    const std::vector<Idx> at = lineIndex(line, slot);
    const ExprId kept_at = indices_param >= 0 ? vb.bind("kept_index", loadAt(indices_param, at)) : -1;
    if (kept_at >= 0) vb.setWalkedValue(topk.output(1), kept_at);  // else no op reads them (lowerSortLines)
    const ExprId value = sort.values_param >= 0 ? loadAt(sort.values_param, at)
                                                : vb.valueAt(sort.x, lineIndex(line, kb.valueToIndex(kept_at)));
    vb.setWalkedValue(topk.output(0), vb.bind("kept", value));
  };
  const std::vector<const Expr*> reductions = reductionsAmong(later);
  const std::vector<const Val*> prologue = linePrologueOutputs(ctx.segment.outputs, topk, later);
  reduceAlongLine(kb, vb, line, reductions, sort.keep, bindSlot);
  // A reduction over the kept slots that the fusion returns (or another kernel reads): once per line.
  for (const Expr* r : reductions) {
    const Val* result = r->output(0);
    if (ctx.outputs.count(result) == 0) continue;
    const TensorId param = ctx.outputs.at(result);
    // One element per line, in the lines' order (the line's dim, and any other size-1 dims it reduces,
    // kept as size 1 or dropped).
    int64_t coefficient = 0;
    const ExprId offset = vb.flatOffset(kb.kernel().tensors[param].layout,
                                        vb.unflatten(line.line, false, ctx.bound.sizesOf(result)), &coefficient);
    kb.store(param, offset, kb.cast(vb.valueAt(result, {}), result->dtype()));  // the line's result, set above
  }
  LineInvariants invariants(kb, vb);
  walkSteps(kb, vb, sort.keep, [&](Chunk& c, ExprId slot) {
    bindSlot(slot);
    const std::vector<Idx> at = lineIndex(line, slot);
    for (const Val* out : ctx.segment.outputs) {
      const bool line_result = std::any_of(reductions.begin(), reductions.end(), [&](const Expr* r) { return r->output(0) == out; });
      const bool before = std::find(prologue.begin(), prologue.end(), out) != prologue.end();
      if (out != topk.output(0) && out != topk.output(1) && !line_result && !before) {
        storeOutput(kb, vb, c, ctx.outputs.at(out), at, vb.valueAt(out, at));
      }
    }
  });
  invariants.place();
}

// The outputs computed before the sort (linePrologueOutputs): a walk of the line over the operand's `sizes`
// stores each at every element, its reductions known; a reshape of such a value (the check's reshapedFrom)
// at the element's linear position.
void writeLinePrologue(LoweringContext& ctx, KernelBuilder& kb, ValueBuilder& vb, const LineWalk& line,
                       const std::vector<const Val*>& outputs, const std::vector<int64_t>& sizes, int64_t extent) {
  if (outputs.empty()) return;
  const StridedLayout operand = StridedLayout::rowMajor(sizes);
  LineInvariants invariants(kb, vb);
  walkSteps(kb, vb, extent, [&](Chunk& c, ExprId step) {
    const std::vector<Idx> at = lineIndex(line, step);
    for (const Val* out : outputs) {
      std::vector<Idx> out_at = at;
      if (ctx.bound.sizesOf(out) != sizes) {
        int64_t unused = 0;
        out_at = vb.unflatten(vb.flatOffset(operand, at, &unused), false, ctx.bound.sizesOf(out));
      }
      storeOutput(kb, vb, c, ctx.outputs.at(out), out_at, vb.valueAt(out, out_at));
    }
  });
  invariants.place();
}

}  // namespace

void lowerSortLines(LoweringContext& ctx, const ScanParams& params) {
  if (params.sort_slots > 0) {
    lowerBlockSortLines(ctx, params);
    return;
  }
  const SortOp sort = sortOpOf(ctx);
  const Val* x = sort.x;
  const auto& x_sizes = ctx.bound.sizesOf(x);
  const size_t dim = sort.dim;
  const int64_t extent = sort.extent;
  const int64_t keep = sort.keep;
  KernelBuilder kb(ctx.kernel);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  const Expr& op = scanOpOf(ctx.segment.exprs);
  const std::vector<const Expr*> later = exprsAfter(ctx.segment.exprs, op);
  const TensorId values_param = sort.values_param;
  // Where ops of the results need the kept indices (to read them, or the values at them) and the fusion
  // does not return them, they are kept in a workspace of the indices' shape.
  const bool indices_read = std::any_of(later.begin(), later.end(), [&](const Expr* e) {
    return std::find(e->inputs().begin(), e->inputs().end(), op.output(1)) != e->inputs().end();
  });
  const bool keep_indices = sort.indices_param < 0 && !later.empty() && (indices_read || sort.values_param < 0);
  const TensorId indices_param = keep_indices ? keptIndicesWorkspace(kb, ctx, op) : sort.indices_param;
  const bool has_values = values_param >= 0, has_indices = indices_param >= 0;
  const DataType compute = sort.compute;
  auto offsetIn = [&](TensorId tensor, const std::vector<Idx>& index) {
    int64_t coefficient = 0;
    return vb.flatOffset(kb.kernel().tensors[tensor].layout, index, &coefficient);
  };
  auto beats = [&](ExprId a, ExprId b) { return sortBeats(kb, sort, a, b); };

  const LineWalk line = openLineWalk(ctx.kernel, kb, vb, params, x_sizes, dim);
  reduceAlongLine(kb, vb, line, reductionsBefore(ctx.segment.exprs, later), extent);
  writeLinePrologue(ctx, kb, vb, line, linePrologueOutputs(ctx.segment.outputs, op, later), x_sizes,
                    extent);
  LineInvariants invariants(kb, vb);
  // The value kept at slot `slot` of the line: in the values output where there is one; else x at the
  // index kept there, or at `fallback` where `valid` is false (the slot may not be written yet, and x
  // must not be read at what it holds).
  auto keptValue = [&](ExprId slot, ExprId valid, ExprId fallback) {
    const std::vector<Idx> at = lineIndex(line, slot);
    if (has_values) return kb.cast(kb.load(values_param, offsetIn(values_param, at)), compute);
    const ExprId index = kb.select(valid, kb.valueToIndex(kb.load(indices_param, offsetIn(indices_param, at))), fallback);
    return sortKeyAt(kb, vb, sort, lineIndex(line, index));
  };
  if (keep == 0) {  // k = 0: nothing to keep (a sum over the kept elements is still written: 0)
    invariants.place();
    if (!later.empty()) lowerKeptSlotOps(ctx, kb, vb, line, sort, indices_param, later);
    kb.close();
    return;
  }

  const VarId i_var = kb.scalarVar("i", DataType::Int64, /*is_index=*/true);
  kb.openFor(i_var, kb.index(0), kb.index(extent), kb.index(1), /*unroll=*/false);
  const ExprId i = kb.ref(i_var);
  const ExprId v = kb.letValue("v", sortKeyAt(kb, vb, sort, lineIndex(line, i)));
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
  invariants.place();
  if (!later.empty()) lowerKeptSlotOps(ctx, kb, vb, line, sort, indices_param, later);
  kb.close();  // if line
}

}  // namespace braze::scheduler
