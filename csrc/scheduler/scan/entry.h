// The scan scheduler's row of the scheduler table: a cumsum, topk, argsort, scatter or index_put_accumulate,
// with the ops check.cpp lets it take around it.
#pragma once

#include "scheduler/scheduler.h"

namespace braze {

const SchedulerEntry& scanScheduler();
Verdict canScheduleScan(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);
// The segment's one op that walks lines (a scan or a scatter).
const Expr& scanOpOf(const std::vector<const Expr*>& exprs);

}  // namespace braze
