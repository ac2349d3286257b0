// Totals over the rows: a plain reduction over every row of a value with one element per row (a cross
// entropy's mean loss: the rows' losses summed, and the rows that are not ignored counted), and the
// elementwise math on such totals that follows (the sum divided by the count). The rows' kernel (inner
// persistent, or a plain reduction's: a cosine loss's dot products and norms) computes each row's value
// where it writes its per-row results and adds the values up per block; the last block to finish (an
// atomic count) combines the blocks' partial totals and writes what is computed from them
// (row_total_passes.cpp). One launch for the rows and their totals, where a second kernel would read
// every row's value back from memory.
#pragma once

#include "scheduler/registry.h"

#include <vector>

namespace braze {

struct RowTotals {
  std::vector<const Expr*> totals;  // the reductions over the rows, in the group's order
  ValSet after;                     // their results and every value computed from them
};

// The group's totals over the rows: its plain reductions of a value with an element per row to one
// element, where the group's other reductions share one domain of rows (the reduced dims innermost) and
// those do not. None where all the reductions share one domain already, or where the others do not.
RowTotals splitRowTotals(const CandidateFacts& facts, const std::vector<const Expr*>& exprs, const BoundShapes& bound);

// The inner persistent scheduler's check of a group of rows, with totals over them or not: without its
// totals and what follows them (their operands then outputs of the rows), a group that
// canScheduleOneInnerPersistent takes; what follows the totals, elementwise math on their results and
// scalars, of one element each.
Verdict canScheduleRowsWithTotals(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);
// The reduction scheduler's the same way, its rows a group that canScheduleOneReductionDomain takes (plain
// reductions of the rows: a cosine loss's dot products and norms, then their mean over the rows).
Verdict canScheduleReductionWithTotals(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);

}  // namespace braze
