// The pointwise scheduler's structural check. A pointwise kernel iterates over each output's index
// space and reads every tensor through the composed index maps of the meta ops between them, so
// meta ops, pad, cat, gathers, creation and per-tensor/channel/block (de)quantization all fit; only
// reductions (which need a reduction scheduler), matmul (the matmul scheduler's) and the line walks
// (cumsum, topk, argsort, scatter, index_put_accumulate: the scan scheduler's) do not.
#include "scheduler/pointwise/entry.h"

namespace braze {

Verdict canSchedulePointwise(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  (void)candidate;
  (void)bound;
  if (facts.unsupported != nullptr) return Verdict::no(unsupportedReason(*facts.unsupported));
  if (!facts.reductions.empty()) return Verdict::no(fmt::format("{} is a reduction", exprLabel(*facts.reductions[0])));
  return Verdict::yes();
}

}  // namespace braze
