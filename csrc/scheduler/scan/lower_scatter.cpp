// scatter and index_put_accumulate as line walks, the scan scheduler's shape: thread t takes line t of
// the output (a position of every dim but the written one), copies the line from the op's first operand
// (unless the output is that operand's own memory, updated in place), then applies the index's entries
// for that line in order. Entries that name the same element apply in
// the order the reference evaluator applies them (scatter: the last write wins; index_put_accumulate:
// each add rounds to the output's dtype, in index order), so the kernels are deterministic and exact
// against it. The walk is sequential per line: an index_put_accumulate of K rows into an [R, C] tensor
// has C threads, each walking R + K rows (adjacent threads read adjacent columns).
#include "scheduler/scan/lower_scatter.h"

#include "scheduler/scan/entry.h"
#include "scheduler/scan/line_walk.h"

#include "support/error.h"

namespace braze::scheduler {

void lowerScatterLines(LoweringContext& ctx, const ScanParams& params) {
  const Expr& op = scanOpOf(ctx.segment.exprs);
  const bool accumulate = op.kind() == OpKind::IndexPutAccumulate;
  BRAZE_ASSERT(accumulate || op.kind() == OpKind::Scatter, "lowerScatterLines: {} is not a scatter", op.name());
  const Val* x = op.input(0);
  const Val* index = op.input(1);
  const Val* src = op.input(2);
  const Val* out = op.output(0);
  const auto& sizes = ctx.bound.sizesOf(out);
  const auto& index_sizes = ctx.bound.sizesOf(index);
  const auto dim = static_cast<size_t>(accumulate ? 0 : op.attrs().getInt("dim"));
  Kernel& k = ctx.kernel;
  KernelBuilder kb(k);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  const TensorId out_param = ctx.outputs.at(out);
  const LineWalk line = openLineWalk(k, kb, vb, params, sizes, dim);
  const std::vector<Idx>& position = line.position;
  // Written into the operand's own memory (updatesWrittenByKernels): the line already holds it.
  const auto view = ctx.segment.output_views.find(out);
  if (view == ctx.segment.output_views.end() || view->second.storage != x) {
    walkSteps(kb, vb, sizes[dim], [&](Chunk& c, ExprId step) {
      const std::vector<Idx> at = lineIndex(line, step);
      storeOutput(kb, vb, c, out_param, at, vb.valueAt(x, at));
    });
  }

  // The index's entries for this line: index_put_accumulate's index is 1-D (an entry per row of the
  // value); a scatter's has the operand's rank and may be shorter than the line's other dims.
  const int64_t entries = accumulate ? index_sizes[0] : index_sizes[dim];
  ExprId covered = kb.boolean(true);
  if (!accumulate) {
    for (size_t d = 0, p = 0; d < sizes.size(); ++d) {
      if (d == dim) continue;
      if (index_sizes[d] < sizes[d]) covered = kb.land(covered, kb.lt(vb.materialize(position[p]), kb.index(index_sizes[d])));
      ++p;
    }
  }
  kb.openIf(covered);
  const std::string site = fmt::format("{} {} (dim {} of {}, size {})", op.name(), out->name(), dim, x->name(), sizes[dim]);
  walkSteps(kb, vb, entries, [&](Chunk& c, ExprId step) {
    const std::vector<Idx> entry = lineIndex(line, step);
    ExprId target = vb.valueAt(index, accumulate ? std::vector<Idx>{Idx{step, false}} : entry);
    if (accumulate) {
      // torch's index_put counts a negative index from the end.
      const DataType t = index->dtype();
      const ExprId negative = kb.elementwise(OpKind::Lt, DataType::Bool, {target, kb.constantInt(0, t)});
      target = kb.elementwise(OpKind::Where, t,
                              {negative, kb.elementwise(OpKind::Add, t, {target, kb.constantInt(sizes[0], t)}), target});
    }
    kb.pushTarget(&c.pre);  // after the loads of the index, which the chunk binds there
    const std::vector<Idx> to = lineIndex(line, kb.letValue("to", kb.checkedIndex(target, kb.index(sizes[dim]), site)));
    kb.popTarget();
    ExprId value = vb.valueAt(src, entry);
    if (accumulate) {
      // What the line holds there now (this thread wrote it), plus the entry, rounded to the dtype.
      int64_t coefficient = 0;
      const ExprId offset = vb.flatOffset(k.tensors[out_param].layout, to, &coefficient);
      const DataType compute = computeTypeOf(out->dtype());
      const ExprId sum = kb.elementwise(OpKind::Add, compute, {kb.cast(kb.load(out_param, offset), compute),
                                                                kb.cast(value, compute)});
      value = kb.cast(sum, out->dtype());
    }
    storeOutput(kb, vb, c, out_param, to, value);
  });
  kb.close();
  kb.close();
}

}  // namespace braze::scheduler
