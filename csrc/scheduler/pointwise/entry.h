// The pointwise scheduler's row of the scheduler table, and its heuristics and lowering, which the
// transpose scheduler falls back to.
#pragma once

#include "scheduler/pointwise/heuristics.h"
#include "scheduler/scheduler.h"

namespace braze {

const SchedulerEntry& pointwiseScheduler();
Verdict canSchedulePointwise(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);

namespace scheduler {
PointwiseParams choosePointwise(LoweringContext& ctx);
void lowerPointwise(LoweringContext& ctx, const PointwiseParams& params);
}  // namespace scheduler

}  // namespace braze
