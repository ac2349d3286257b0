// The inner-outer persistent scheduler's row in the scheduler table: a group that reduces the rows of
// one tensor both ways (layer-norm and RMS-norm backward: per row for grad_in, over the rows for the
// weight and bias grads), with pointwise math around, as one pass over the rows kept on chip (the row
// lowering's, reduction/lower.cpp) that leaves per-block partial sums of the outer reductions, and a
// small follow-up kernel (finish.cpp) that sums them per column and writes what is computed from them.
// Sums over some of the row dims (RowGrouping) change the walk's order (reduction/row_grouped_walk.cpp).
#pragma once

#include "scheduler/inner_outer/heuristics.h"
#include "scheduler/reduction/reduction_domain.h"
#include "scheduler/reduction/row_cats.h"
#include "scheduler/scheduler.h"

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace braze {

const SchedulerEntry& innerOuterPersistentScheduler();

// A reduction of the domain's own tensor over some of its row dims (those of size > 1), not all of them: a
// position embedding's grad, the rows' grad summed over the batch and kept per position (grouped_rows.cpp).
struct RowGrouping {
  std::vector<bool> summed;  // per row dim of the domain (its dims the inner reductions keep), in order
  int64_t groups = 1;        // elements of the row dims it keeps: its results per column
  int64_t group_rows = 1;    // rows summed into each
};
// The grouping of `r`, or nothing where it reduces another tensor, a dim of the rows themselves, or every
// row dim (a plain outer reduction).
std::optional<RowGrouping> rowGroupingOf(const Expr& r, const ReductionDomain& domain, const BoundShapes& bound);
Verdict canScheduleInnerOuter(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);
// The outputs the finish writes as cats (row_cats.h, with casts) of column values: a DiT block's adaLN grad,
// its shift and scale grads (summed over each image's tokens) padded into the grad of the modulation's
// output beside the other pieces, which are inputs. Every part of a cat is a value computed from the outer
// results at one of their widths (`widths`), or an input of that width, all parts of one width, at least one
// computed. `after_outer`: the outer results and what is computed from them.
std::vector<RowCat> finishCats(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs,
                               const std::vector<const Val*>& inputs, const ValSet& after_outer,
                               const std::vector<int64_t>& widths, const BoundShapes& bound);
// The table's check: the group whole, or its rows (canScheduleInnerOuter) with pointwise parts that share
// nothing with them beside (parts.cpp).
Verdict canScheduleInnerOuterOrParts(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);

namespace scheduler {
// The heuristics and lowering of a segment, with its pointwise parts beside the rows where it has some
// (InnerOuterParams::parts).
InnerOuterParams innerOuterSegmentHeuristics(LoweringContext& ctx);
void lowerInnerOuterSegment(LoweringContext& ctx, const InnerOuterParams& params);
// The shared workspace of outer reduction `o`'s partial sums (both kernels name it alike).
std::string innerOuterPartialsName(size_t o);
// The finishing kernel: per column, the partial sums of every outer reduction combined, then the
// segment's outputs computed from them.
// One outer reduction's partial sums as the first kernel leaves them: `rows` x `columns` floats in
// workspace innerOuterPartialsName(its position), `rows` the launch argument named `rows_name`.
struct OuterPartials {
  const Expr* reduction = nullptr;
  int64_t columns = 1;
  int64_t rows = 1;
  std::string rows_name;
};
// One outer reduction's partial sums in the first kernel: each thread's (a local array of chunks x
// vectorize values, its columns of the rows it walked) and the workspace they go to.
struct ThreadPartials {
  VarId sums = -1;
  TensorId workspace = -1;
  DataType acc = DataType::Float;
  ReduceOp op = ReduceOp::Sum;
};
// Stores one chunk of a thread's sums, `vectorize` consecutive columns from column `first` of a row of
// `columns` (sums[slot ..] to ws[row_start + first ..]), in whole vectors where the row length allows.
void storeChunkOfSums(KernelBuilder& kb, TensorId ws, DataType acc, VarId sums, ExprId slot, ExprId row_start,
                      ExprId first, int64_t vectorize, int64_t columns);
// Stores them (partials.cpp): a partial row per block where the heuristics combine in the block, else one
// per thread row; `chunk` a loop variable of the kernel's to use.
void storePartialRows(KernelBuilder& kb, const std::vector<ThreadPartials>& partials, const InnerOuterParams& io,
                      int64_t row_length, VarId chunk);
// Declares, where the builder is, the shared arrays in which the block's thread rows add up their sums
// (threads_y x row_length each, one per element of `partials`).
std::vector<VarId> declareCombineArrays(KernelBuilder& kb, const std::vector<ThreadPartials>& partials,
                                       const ReductionParams& rows, int64_t row_length);
// Writes each thread row's sums (its columns of each of `partials`) into its row of the `shared` arrays
// (declareCombineArrays), then waits for the block: every thread may read any thread row's sums after.
void shareThreadRowSums(KernelBuilder& kb, const std::vector<ThreadPartials>& partials, const std::vector<VarId>& shared,
                        const ReductionParams& rows, int64_t row_length, VarId chunk);
// Stores the block's sums of a grouped item as partial row `partial_row` of each workspace: the thread
// rows' sums added up in `shared` first (declareCombineArrays) where the block has several.
void storeGroupItem(KernelBuilder& kb, const std::vector<ThreadPartials>& partials, const std::vector<VarId>& shared,
                    const ReductionParams& rows, int64_t row_length, VarId chunk, ExprId partial_row);
// An extra reduction of the inner-outer kernel (over the same rows of another tensor: the bias grad of
// the linear next to a norm) as the kernel walks it after its row groups (extra_rows.cpp).
struct ExtraRowsWalk {
  const Expr* reduction = nullptr;  // a plain reduction over the leading dims of its operand
  ExtraOuterParams params;
  ReductionParams rows;             // the kernel's per-row part: its block and row count
  int64_t blocks = 1;               // the grid (the launch argument "blocks")
  size_t workspace = 0;             // the block's partial row goes to innerOuterPartialsName(workspace)
};
// The block walks rows blockIdx.x, + blocks, ... of the operand, every thread summing the same columns
// of each, then stores its partial row (blocks x columns). `lane`: the kernel's lane loop variable.
void walkExtraRows(KernelBuilder& kb, ValueBuilder& vb, LoweringContext& ctx, const BoundShapes& bound,
                   const ExtraRowsWalk& walk, VarId lane);
// `after_outer`: the outer results and every value computed from them (InnerOuterSplit).
Kernel lowerInnerOuterFinish(const LoweringContext& ctx, const std::vector<OuterPartials>& partials,
                             const ValSet& after_outer, const InnerOuterParams& params);
}  // namespace scheduler

}  // namespace braze
