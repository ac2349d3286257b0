// The matmul scheduler's row of the scheduler table: a matmul or linear with its prologues and
// epilogues, on tensor cores (mma.sync, or wgmma on sm_90), or as a GEMV at a few rows. Its device
// check refuses a tensor-core matmul on a device without mma.sync (an AMD GPU, or older than sm_80).
#pragma once

#include "scheduler/scheduler.h"

namespace braze {

const SchedulerEntry& matmulScheduler();
Verdict canScheduleMatmul(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);

}  // namespace braze
