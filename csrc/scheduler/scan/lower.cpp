// The scan lowering of cumsum (scatter and index_put_accumulate: lower_scatter.cpp; topk and argsort: lower_sort.cpp): thread t of the grid takes line t (an index of every dim but the scanned one) and
// walks the scanned dim in order, adding each element to a running sum (double for floating inputs,
// wrapping int64 for integers, as the reference evaluator sums). At each step the sum, rounded to the
// cumsum's dtype, is the cumsum's value at that element: each output (the cumsum, or elementwise ops of
// it) is computed there and stored. The loads of a thread are strided, but every element is read once.
#include "support/error.h"
#include "scheduler/scan/entry.h"
#include "scheduler/scan/heuristics.h"
#include "scheduler/scan/lower_scatter.h"
#include "scheduler/scan/lower_sort.h"
#include "scheduler/scan/line_walk.h"

namespace braze::scheduler {

ScanParams chooseScan(LoweringContext& ctx) {
  const Expr& scan = scanOpOf(ctx.segment.exprs);
  // The line structure of the op's operand (topk's result is shorter along dim).
  const auto& sizes = ctx.bound.sizesOf(scan.input(0));
  const int64_t dim = scan.kind() == OpKind::IndexPutAccumulate ? 0 : scan.attrs().getInt("dim");
  const int64_t extent = sizes.empty() ? 1 : sizes[dim];
  const int64_t numel = ctx.bound.numel(scan.input(0));
  ScanProblem problem{extent == 0 ? 0 : numel / extent, extent};
  // Reductions along the lines, and ops of a sort's results, are walked by each line's thread: the sort
  // walks its line too.
  const bool sorts = (scan.kind() == OpKind::TopK || scan.kind() == OpKind::Argsort) &&
                     !walksEachLine(ctx.segment.exprs, scan);
  const DataType key = computeTypeOf(scan.input(0)->dtype());
  if (sorts && key != DataType::Bool && !sizes.empty()) {
    problem.keep = scan.kind() == OpKind::TopK ? ctx.bound.sizesOf(scan.output(0))[dim] : extent;
    problem.key_bytes = sizeOf(key);
    problem.rank_keys = rankKeys(scan.input(0)->dtype());
  }
  return scanHeuristics(ctx.device, problem);
}

void lowerScan(LoweringContext& ctx, const ScanParams& params) {
  const Expr& scan = scanOpOf(ctx.segment.exprs);
  if (scan.kind() == OpKind::Scatter || scan.kind() == OpKind::IndexPutAccumulate) {
    lowerScatterLines(ctx, params);
    return;
  }
  if (scan.kind() == OpKind::TopK || scan.kind() == OpKind::Argsort) {
    lowerSortLines(ctx, params);
    return;
  }
  BRAZE_ASSERT(scan.kind() == OpKind::Cumsum, "lowerScan: {} is not a cumsum", scan.name());
  const Val* in = scan.input(0);
  const Val* out = scan.output(0);
  const auto& sizes = ctx.bound.sizesOf(out);
  const auto dim = static_cast<size_t>(scan.attrs().getInt("dim"));
  const int64_t extent = sizes.empty() ? 1 : sizes[dim];
  KernelBuilder kb(ctx.kernel);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  const DataType sum_type = isFloating(in->dtype()) ? DataType::Double : DataType::Int64;
  const LineWalk walk = openLineWalk(ctx.kernel, kb, vb, params, sizes, dim);
  reduceAlongLine(kb, vb, walk, reductionsBefore(ctx.segment.exprs, exprsAfter(ctx.segment.exprs, scan)), extent);
  LineInvariants invariants(kb, vb);
  const VarId sum = kb.scalarVar("sum", sum_type);
  kb.let(sum, kb.constantInt(0, sum_type));
  walkSteps(kb, vb, extent, [&](Chunk& c, ExprId step) {
    const std::vector<Idx> index = lineIndex(walk, step);
    const ExprId value = kb.cast(vb.valueAt(in, index), sum_type);
    kb.pushTarget(&c.pre);
    kb.assign(sum, kb.elementwise(OpKind::Add, sum_type, {kb.ref(sum), value}));
    kb.popTarget();
    vb.setWalkedValue(out, vb.bind("running", kb.cast(kb.ref(sum), out->dtype())));
    for (const Val* output : ctx.segment.outputs) {
      storeOutput(kb, vb, c, ctx.outputs.at(output), index, vb.valueAt(output, index));
    }
  });
  invariants.place();
  kb.close();
}

}  // namespace braze::scheduler

namespace braze {

const SchedulerEntry& scanScheduler() {
  static const SchedulerEntry entry{
      SchedulerKind::Scan, "scan", canScheduleScan, nullptr,
      [](scheduler::LoweringContext& ctx) { return heuristicsOf(scanScheduler(), scheduler::chooseScan(ctx)); },
      [](scheduler::LoweringContext& ctx, const SegmentHeuristics& h) {
        scheduler::lowerScan(ctx, paramsOf<ScanParams>(h));
      }};
  return entry;
}

}  // namespace braze
