// The scan scheduler takes a segment that is one cumsum, scatter or index_put_accumulate: each thread
// walks one line along the op's dim (carrying a running sum, or applying the index's entries in order).
// Other ops around it stay in segments of their own.
#include "scheduler/scan/entry.h"

namespace braze {

Verdict canScheduleScan(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  (void)facts;
  (void)bound;
  const OpKind kind = candidate.exprs.size() == 1 ? candidate.exprs[0]->kind() : OpKind::Set;
  if (kind != OpKind::Cumsum && kind != OpKind::TopK && kind != OpKind::Argsort && kind != OpKind::Scatter &&
      kind != OpKind::IndexPutAccumulate) {
    return Verdict::no("the group is not a lone cumsum, topk, argsort, scatter or index_put_accumulate");
  }
  return Verdict::yes();
}

}  // namespace braze
