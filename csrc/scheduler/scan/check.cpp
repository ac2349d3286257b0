// The scan scheduler takes a segment that is one cumsum: each thread walks one line along the scanned
// dim, carrying the running sum. Other ops around it stay in segments of their own.
#include "scheduler/scan/entry.h"

namespace braze {

Verdict canScheduleScan(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  (void)facts;
  (void)bound;
  if (candidate.exprs.size() != 1 || candidate.exprs[0]->kind() != OpKind::Cumsum) {
    return Verdict::no("the group is not a lone cumsum");
  }
  return Verdict::yes();
}

}  // namespace braze
