// The scan scheduler's row of the scheduler table: a cumsum, topk, argsort, scatter or index_put_accumulate,
// with the ops check.cpp lets it take around it.
#pragma once

#include "scheduler/scheduler.h"

namespace braze {

const SchedulerEntry& scanScheduler();
Verdict canScheduleScan(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);
// The longest line whose reductions a scan kernel computes before its cumsum, topk or argsort, and whose
// topk's results it computes ops of: one thread walks it once per reduction (and sorts it by insertion),
// which pays for a router's experts (8 to 256) but not for a vocabulary, whose topk is a block sort
// between reduction kernels and the kernels of its results' ops.
constexpr int64_t kMaxReducedLine = 256;
// The exprs of `exprs` (in their order) that read `op`'s results, directly or through one another.
std::vector<const Expr*> exprsAfter(const std::vector<const Expr*>& exprs, const Expr& op);
// The outputs among `outputs` that neither `op` nor an op of `later` (exprsAfter's) computes: values of the
// line's elements before the op, which a sort's line walk writes.
std::vector<const Val*> linePrologueOutputs(const std::vector<const Val*>& outputs, const Expr& op,
                                            const std::vector<const Expr*>& later);
// The segment's one op that walks lines (a scan or a scatter).
const Expr& scanOpOf(const std::vector<const Expr*>& exprs);

}  // namespace braze
