// The transpose scheduler's row of the scheduler table: shared-memory tiles for segments that read an
// input across the output's inner dim; lowered as pointwise (saying why) where no load can be staged.
#pragma once

#include "scheduler/scheduler.h"

namespace braze {

const SchedulerEntry& transposeScheduler();
Verdict canScheduleTranspose(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);

}  // namespace braze
