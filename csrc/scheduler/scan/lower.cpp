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
  // Reductions along the lines, ops of a sort's results and values written before it are walked by each
  // line's thread: the sort walks its line too.
  const bool sorts = (scan.kind() == OpKind::TopK || scan.kind() == OpKind::Argsort) &&
                     !walksEachLine(ctx.segment.exprs, ctx.segment.outputs, scan);
  // Integer sums only: they are exact in any order, where a float sum split into chunks rounds otherwise
  // than the reference's one pass (1 + 1e20 - 1e20 keeps its 1 across a chunk's end).
  problem.block_scan = scan.kind() == OpKind::Cumsum && !isFloating(scan.input(0)->dtype()) &&
                       reductionsBefore(ctx.segment.exprs, exprsAfter(ctx.segment.exprs, scan)).empty();
  const DataType key = computeTypeOf(scan.input(0)->dtype());
  if (sorts && key != DataType::Bool && !sizes.empty()) {
    problem.keep = scan.kind() == OpKind::TopK ? ctx.bound.sizesOf(scan.output(0))[dim] : extent;
    problem.key_bytes = sizeOf(key);
    problem.rank_keys = rankKeys(scan.input(0)->dtype());
  }
  return scanHeuristics(ctx.device, problem);
}

namespace {

// At each step of a cumsum's walk: the running sum `sum` (of `sum_type`) plus the element at `index`, and
// the outputs computed there from the cumsum's value, the new sum rounded to its dtype.
void cumsumStep(LoweringContext& ctx, KernelBuilder& kb, ValueBuilder& vb, Chunk& c, const Expr& scan, VarId sum,
                DataType sum_type, const std::vector<Idx>& index) {
  const Val* out = scan.output(0);
  const ExprId value = kb.cast(vb.valueAt(scan.input(0), index), sum_type);
  kb.pushTarget(&c.pre);
  kb.assign(sum, kb.elementwise(OpKind::Add, sum_type, {kb.ref(sum), value}));
  kb.popTarget();
  vb.setWalkedValue(out, vb.bind("running", kb.cast(kb.ref(sum), out->dtype())));
  for (const Val* output : ctx.segment.outputs) {
    storeOutput(kb, vb, c, ctx.outputs.at(output), index, vb.valueAt(output, index));
  }
}

DataType cumsumSumType(const Expr& scan) {
  return isFloating(scan.input(0)->dtype()) ? DataType::Double : DataType::Int64;
}

// An integer cumsum of few long lines (position ids of a batch of sequences) as a block scan
// (ScanParams::scan_chunk): one block per line, thread t sums its chunk, thread 0 replaces each thread's
// sum in shared memory by the sum of the chunks before it, in order, and each thread walks its chunk again
// from there. The wrapping int64 sums are the line walk's, exact in any order.
void lowerBlockCumsum(LoweringContext& ctx, const ScanParams& params) {
  const Expr& scan = scanOpOf(ctx.segment.exprs);
  const auto& sizes = ctx.bound.sizesOf(scan.output(0));
  const auto dim = static_cast<size_t>(scan.attrs().getInt("dim"));
  const int64_t extent = sizes.empty() ? 1 : sizes[dim];
  KernelBuilder kb(ctx.kernel);
  kb.fixBlock(params.block, 1);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  const DataType sum_type = cumsumSumType(scan);
  const LineWalk walk = openBlockLineWalk(ctx.kernel, kb, vb, params, sizes, dim);
  const ExprId thread = kb.threadIdx(0);
  const ExprId first = kb.letValue("first", kb.min(kb.mul(thread, kb.index(params.scan_chunk)), kb.index(extent)));
  // first + chunk may pass the index type's range on a line just short of it: the rest of the line is.
  const ExprId end = kb.letValue("end", kb.add(first, kb.min(kb.index(params.scan_chunk), kb.sub(kb.index(extent), first))));
  const VarId before = kb.arrayVar("before", sum_type, params.block, VarKind::SharedArray);
  kb.declare(before);
  LineInvariants invariants(kb, vb);
  const VarId chunk_sum = kb.scalarVar("chunk_sum", sum_type);
  kb.let(chunk_sum, kb.constantInt(0, sum_type));
  walkRange(kb, vb, first, end, [&](Chunk& c, ExprId step) {
    const ExprId value = kb.cast(vb.valueAt(scan.input(0), lineIndex(walk, step)), sum_type);
    kb.pushTarget(&c.pre);
    kb.assign(chunk_sum, kb.elementwise(OpKind::Add, sum_type, {kb.ref(chunk_sum), value}));
    kb.popTarget();
  });
  kb.localWrite(before, thread, kb.ref(chunk_sum));
  kb.barrier();
  kb.openIf(kb.eq(thread, kb.index(0)));
  const VarId total = kb.scalarVar("total", sum_type);
  kb.let(total, kb.constantInt(0, sum_type));
  const VarId t = kb.scalarVar("t", DataType::Int64, /*is_index=*/true);
  kb.openFor(t, kb.index(0), kb.index(params.block), kb.index(1), /*unroll=*/false);
  const ExprId own = kb.letValue("own", kb.localRead(before, kb.ref(t)));
  kb.localWrite(before, kb.ref(t), kb.ref(total));
  kb.assign(total, kb.elementwise(OpKind::Add, sum_type, {kb.ref(total), own}));
  kb.close();  // for t
  kb.close();  // if thread 0
  kb.barrier();
  const VarId sum = kb.scalarVar("sum", sum_type);
  kb.let(sum, kb.localRead(before, thread));
  walkRange(kb, vb, first, end, [&](Chunk& c, ExprId step) {
    cumsumStep(ctx, kb, vb, c, scan, sum, sum_type, lineIndex(walk, step));
  });
  invariants.place();
}

}  // namespace

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
  if (params.scan_chunk > 0) {
    lowerBlockCumsum(ctx, params);
    return;
  }
  const auto& sizes = ctx.bound.sizesOf(scan.output(0));
  const auto dim = static_cast<size_t>(scan.attrs().getInt("dim"));
  const int64_t extent = sizes.empty() ? 1 : sizes[dim];
  KernelBuilder kb(ctx.kernel);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  const DataType sum_type = cumsumSumType(scan);
  const LineWalk walk = openLineWalk(ctx.kernel, kb, vb, params, sizes, dim);
  reduceAlongLine(kb, vb, walk, reductionsBefore(ctx.segment.exprs, exprsAfter(ctx.segment.exprs, scan)), extent);
  LineInvariants invariants(kb, vb);
  const VarId sum = kb.scalarVar("sum", sum_type);
  kb.let(sum, kb.constantInt(0, sum_type));
  walkSteps(kb, vb, extent, [&](Chunk& c, ExprId step) {
    cumsumStep(ctx, kb, vb, c, scan, sum, sum_type, lineIndex(walk, step));
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
