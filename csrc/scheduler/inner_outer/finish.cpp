// The inner-outer persistent scheduler's follow-up kernel and its row in the scheduler table. Threads in
// x take consecutive columns (coalesced), threads in y split the partial rows; a block reduction across
// y combines them, then the first thread row computes what the segment makes of the outer results (a
// cast to the grad's dtype, a scale) and stores the outputs, and its elements of cats of them
// (finishCats). The partial row count is a launch argument.
#include "scheduler/inner_outer/entry.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduce_values.h"
#include "scheduler/reduction/row_launch.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace braze {
namespace scheduler {

std::string innerOuterPartialsName(size_t o) { return o == 0 ? "partials" : fmt::format("partials{}", o); }

Kernel lowerInnerOuterFinish(const LoweringContext& ctx, const std::vector<OuterPartials>& partials,
                             const ValSet& after_outer, const InnerOuterParams& params) {
  Kernel k = followUpKernel(ctx, "_finish");
  KernelBuilder kb(k);
  std::vector<TensorId> workspaces;
  int64_t columns = 0;  // the widest reduction's: the grid covers it
  for (size_t o = 0; o < partials.size(); ++o) {
    const OuterPartials& p = partials[o];
    TensorParam ws = workspaceParam(innerOuterPartialsName(o), accumulatorType(p.reduction->output(0)->dtype()),
                                    p.rows * p.columns, false);
    ws.shared = true;
    workspaces.push_back(kb.addTensor(std::move(ws)));
    columns = std::max(columns, p.columns);
  }
  // The outputs computed from the outer results, with the parameters the first kernel has for them: those
  // at a column each, and the cats (with the inputs their other parts read).
  std::vector<int64_t> widths;
  for (const OuterPartials& p : partials) {
    if (std::find(widths.begin(), widths.end(), p.columns) == widths.end()) widths.push_back(p.columns);
  }
  const std::vector<RowCat> cats = finishCats(ctx.segment.exprs, ctx.segment.outputs, ctx.segment.inputs, after_outer,
                                              widths, ctx.bound);
  std::vector<std::pair<const Val*, TensorId>> outputs;
  std::vector<TensorId> cat_outputs;
  std::unordered_map<const Val*, TensorId> inputs;
  for (const RowCat& cat : cats) {
    cat_outputs.push_back(kb.addTensor(ctx.kernel.tensors[ctx.outputs.at(cat.output)]));
    for (const Expr* e : cat.exprs) {
      for (const Val* in : e->inputs()) {
        auto param = ctx.inputs.find(in);
        if (param != ctx.inputs.end() && inputs.count(in) == 0) {
          inputs.emplace(in, kb.addTensor(ctx.kernel.tensors[param->second]));
        }
      }
    }
  }
  for (const Val* out : ctx.segment.outputs) {
    const bool cat = std::any_of(cats.begin(), cats.end(), [&](const RowCat& c) { return c.output == out; });
    if (after_outer.count(out) != 0 && !cat) {
      outputs.emplace_back(out, kb.addTensor(ctx.kernel.tensors[ctx.outputs.at(out)]));
    }
  }
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, inputs);
  const ExprId col = kb.letValue("col", kb.add(kb.mul(kb.blockIdx(0), kb.index(params.finish_threads_x)),
                                               kb.threadIdx(0)));
  std::vector<VarId> totals;
  for (size_t o = 0; o < partials.size(); ++o) {
    const OuterPartials& p = partials[o];
    const DataType acc = accumulatorType(p.reduction->output(0)->dtype());
    const ReduceOp op = reduceOpOf(p.reduction->kind());
    const VarId total = kb.scalarVar("total", acc);
    kb.let(total, identity(kb, op, acc));
    // A block past a narrower reduction's columns takes no trip (the grid covers the widest reduction's).
    ExprId rows = kb.extent(p.rows_name, p.rows);
    if (p.columns < columns) {
      const ExprId first_col = kb.mul(kb.blockIdx(0), kb.index(params.finish_threads_x));
      rows = kb.select(kb.lt(first_col, kb.index(p.columns)), rows, kb.index(0));
    }
    const VarId j = kb.scalarVar("j", DataType::Int64, true);
    kb.openFor(j, kb.threadIdx(1), rows, kb.index(params.finish_threads_y), false);
    kb.openIf(kb.lt(col, kb.index(p.columns)));
    const ExprId part = kb.load(workspaces[o], kb.add(kb.mul(kb.ref(j), kb.index(p.columns)), col));
    kb.assign(total, kb.elementwise(combineOf(op), acc, {kb.ref(total), part}));
    kb.close();
    kb.close();
    kb.blockReduce(total, op, 1);
    totals.push_back(total);
  }
  // Each output has the columns of the reductions it is computed from; a cat's parts have one width, and
  // the thread of a column stores each part's element of that column.
  const VarId lane = kb.scalarVar("lane", DataType::Int64, true);
  for (int64_t width : widths) {
    const ExprId writer = kb.land(kb.lt(col, kb.index(width)), kb.eq(kb.threadIdx(1), kb.index(0)));
    emitChunk(kb, vb, writer, 1, lane, [&](Chunk& c) {
      for (size_t o = 0; o < partials.size(); ++o) {
        const Val* result = partials[o].reduction->output(0);
        if (partials[o].columns == width) vb.setResult(result, kb.cast(kb.ref(totals[o]), result->dtype()));
      }
      for (const auto& [out, tensor] : outputs) {
        if (ctx.bound.numel(out) != width) continue;
        const std::vector<Idx> at = vb.unflatten(col, false, ctx.bound.sizesOf(out));
        storeOutput(kb, vb, c, tensor, at, vb.valueAt(out, at));
      }
      for (size_t i = 0; i < cats.size(); ++i) {
        if (ctx.bound.numel(cats[i].parts.front().row_value) == width) {
          storeRowCat(kb, vb, c, ctx.bound, cats[i], cat_outputs[i], col);
        }
      }
    });
  }
  k.grid = {ceilDiv(columns, params.finish_threads_x), 1};
  k.block = {params.finish_threads_x, params.finish_threads_y};
  k.summary = fmt::format("inner-outer persistent finish: {} outer reductions of partial rows, block {}x{} (columns x "
                          "partial rows)",
                          partials.size(), params.finish_threads_x, params.finish_threads_y);
  return k;
}

}  // namespace scheduler

const SchedulerEntry& innerOuterPersistentScheduler() {
  static const SchedulerEntry entry{
      SchedulerKind::InnerOuterPersistent, "inner_outer_persistent", canScheduleInnerOuterOrParts, nullptr,
      [](scheduler::LoweringContext& ctx) {
        return heuristicsOf(innerOuterPersistentScheduler(), scheduler::innerOuterSegmentHeuristics(ctx));
      },
      [](scheduler::LoweringContext& ctx, const SegmentHeuristics& heuristics) {
        scheduler::lowerInnerOuterSegment(ctx, paramsOf<InnerOuterParams>(heuristics));
      },
      scheduler::relaunchInnerOuter, scheduler::innerOuterHeuristicsAtRows};
  return entry;
}

}  // namespace braze
