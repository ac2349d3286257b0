// The alias scheduler's row of the scheduler table: meta-op groups that become host-side views, with no
// kernel (no heuristics, no lowering).
#pragma once

#include "scheduler/scheduler.h"

namespace braze {

const SchedulerEntry& aliasScheduler();
Verdict canScheduleAlias(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);

}  // namespace braze
