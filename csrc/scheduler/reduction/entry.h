// The rows of the scheduler table for reductions: inner persistent (the reduced row kept in registers
// or shared memory: layer_norm, rms_norm, softmax) and reduction (inner and outer, split across blocks
// where rows are few), in entries.cpp. Both are lowered by one row lowering (lower.cpp).
#pragma once

#include "scheduler/inner_outer/heuristics.h"
#include "scheduler/reduction/heuristics.h"
#include "scheduler/scheduler.h"

namespace braze {

namespace scheduler {
// The inner-outer persistent scheduler's first kernel is the row lowering's, with the outer reductions
// summed per thread alongside (lower.cpp): its heuristics and its lowering, which adds the finishing
// kernel to ctx.follow_ups.
InnerOuterParams innerOuterRowHeuristics(LoweringContext& ctx);
void lowerInnerOuterRows(LoweringContext& ctx, const InnerOuterParams& params);
}  // namespace scheduler

const SchedulerEntry& innerPersistentScheduler();
const SchedulerEntry& reductionScheduler();
Verdict canScheduleReduction(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);
// The reduction scheduler's check of a group of one reduction domain (canScheduleReduction also takes
// parts side by side: reduction_parts.h).
Verdict canScheduleOneReductionDomain(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);
Verdict canScheduleInnerPersistent(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);
// The inner persistent scheduler's check of a group whose outputs are all rows or per-row results
// (canScheduleInnerPersistent also takes outputs made from scalars beside them: reduction_parts.h).
Verdict canScheduleOneInnerPersistent(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);
// canScheduleOneInnerPersistent (or `check`) of `rows`, a group's rows without some reductions that it also has (outer
// reductions, totals over the rows) and what follows them: those reductions' `operands` are then outputs
// of the rows, but for the group's inputs. A refusal says `without` first ("without its outer reductions").
// `check` is the scheduler's check of such a group (the reduction scheduler's rows, or the inner
// persistent one's).
Verdict canScheduleRowsWithout(Candidate rows, const std::vector<const Val*>& operands, const CandidateFacts& facts,
                               const BoundShapes& bound, const std::string& without,
                               Verdict (*check)(const Candidate&, const CandidateFacts&, const BoundShapes&) =
                                   canScheduleOneInnerPersistent);

}  // namespace braze
