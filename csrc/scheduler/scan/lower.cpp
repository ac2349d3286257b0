// The scan lowering: thread t of the grid takes line t (an index of every dim but the scanned one) and
// walks the scanned dim in order, adding each element to a running sum (double for floating inputs,
// wrapping int64 for integers, as the reference evaluator sums) and storing the sum rounded to the
// output's dtype at each step. The loads of a thread are strided, but every element is read once.
#include "support/error.h"
#include "scheduler/scan/entry.h"
#include "scheduler/scan/heuristics.h"

namespace braze::scheduler {

ScanParams chooseScan(LoweringContext& ctx) {
  const Expr& scan = *ctx.segment.exprs.at(0);
  const auto& sizes = ctx.bound.sizesOf(scan.output(0));
  const int64_t dim = scan.attrs().getInt("dim");
  const int64_t extent = sizes.empty() ? 1 : sizes[dim];
  const int64_t numel = ctx.bound.numel(scan.output(0));
  return scanHeuristics(ctx.device, {extent == 0 ? 0 : numel / extent, extent});
}

void lowerScan(LoweringContext& ctx, const ScanParams& params) {
  const Expr& scan = *ctx.segment.exprs.at(0);
  BRAZE_ASSERT(scan.kind() == OpKind::Cumsum, "lowerScan: {} is not a cumsum", scan.name());
  const Val* in = scan.input(0);
  const Val* out = scan.output(0);
  const auto& sizes = ctx.bound.sizesOf(out);
  const auto dim = static_cast<size_t>(scan.attrs().getInt("dim"));
  const int64_t extent = sizes.empty() ? 1 : sizes[dim];
  std::vector<int64_t> line_sizes = sizes;
  if (!line_sizes.empty()) line_sizes.erase(line_sizes.begin() + static_cast<int64_t>(dim));
  int64_t lines = 1;
  for (int64_t s : line_sizes) lines *= s;

  Kernel& k = ctx.kernel;
  k.grid = {params.grid, 1};
  k.block = {params.block, 1};
  k.summary = params.toString();
  KernelBuilder kb(k);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  const DataType sum_type = isFloating(in->dtype()) ? DataType::Double : DataType::Int64;
  const ExprId line = kb.letValue("line", kb.add(kb.mul(kb.blockIdx(0), kb.index(params.block)), kb.threadIdx(0)));
  kb.openIf(kb.lt(line, kb.index(lines)));
  const VarId sum = kb.scalarVar("sum", sum_type);
  kb.let(sum, kb.constantInt(0, sum_type));
  const VarId step = kb.scalarVar("k", DataType::Int64, /*is_index=*/true);
  const VarId lane = kb.scalarVar("lane", DataType::Int64, /*is_index=*/true);
  kb.openFor(step, kb.index(0), kb.index(extent), kb.index(1), /*unroll=*/false);
  emitChunk(kb, vb, kb.boolean(true), 1, lane, [&](Chunk& c) {
    std::vector<Idx> index = vb.unflatten(line, false, line_sizes);
    if (!sizes.empty()) index.insert(index.begin() + static_cast<int64_t>(dim), Idx{kb.ref(step), false});
    const ExprId value = kb.cast(vb.valueAt(in, index), sum_type);
    kb.pushTarget(&c.pre);
    kb.assign(sum, kb.elementwise(OpKind::Add, sum_type, {kb.ref(sum), value}));
    kb.popTarget();
    storeOutput(kb, vb, c, ctx.outputs.at(out), index, kb.cast(kb.ref(sum), out->dtype()));
  });
  kb.close();
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
