// The scan scheduler's row of the scheduler table: a cumsum, scatter or index_put_accumulate, alone in its segment.
#pragma once

#include "scheduler/scheduler.h"

namespace braze {

const SchedulerEntry& scanScheduler();
Verdict canScheduleScan(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);

}  // namespace braze
