// The scan scheduler takes a segment that is one cumsum, topk, argsort, scatter or index_put_accumulate,
// after meta ops on its operands: each thread walks one line along the op's dim (carrying a running sum,
// or applying the index's entries in order), or a block sorts it. Other ops stay in segments of their own.
#include "scheduler/scan/entry.h"

#include <fmt/format.h>

#include <algorithm>

namespace braze {

Verdict canScheduleScan(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  (void)bound;
  // The op may read its operands through meta ops (an input's slice or permute, inlined into the
  // segment): the lowerings read them through the ValueBuilder, which follows those.
  const OpKind kind = candidate.exprs.empty() ? OpKind::Set : candidate.exprs.back()->kind();
  const bool alone = std::all_of(candidate.exprs.begin(), candidate.exprs.end() - (candidate.exprs.empty() ? 0 : 1),
                                 [](const Expr* e) { return isMetaOp(e->kind()); });
  if (!alone || (kind != OpKind::Cumsum && kind != OpKind::TopK && kind != OpKind::Argsort && kind != OpKind::Scatter &&
                 kind != OpKind::IndexPutAccumulate)) {
    return Verdict::no("the group is not a lone cumsum, topk, argsort, scatter or index_put_accumulate (with meta ops on its operands)");
  }
  // The lowerings write the op's outputs and nothing else: a meta op's result the segment must also write
  // (a permuted or reshaped copy of the operand, returned beside the scan) belongs to another segment.
  const Expr* op = candidate.exprs.back();
  for (const Val* out : candidate.outputs) {
    if (std::find(op->outputs().begin(), op->outputs().end(), out) == op->outputs().end()) {
      return Verdict::no(facts.reasons ? fmt::format("{} is written beside the {}, which is all a scan kernel writes",
                                                     out->name(), opName(kind))
                                       : std::string());
    }
  }
  return Verdict::yes();
}

}  // namespace braze
