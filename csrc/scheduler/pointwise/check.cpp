// The pointwise scheduler's structural check. A pointwise kernel iterates over each output's index
// space and reads every tensor through the composed index maps of the meta ops between them, so
// meta ops, pad, cat, gathers, creation and per-tensor/channel/block (de)quantization all fit, and so
// do reductions over a few elements a result (reducedPerElement) whose results no op reads at more
// than one element: each element computes its own. Other reductions (a reduction scheduler's), matmul
// (the matmul scheduler's) and the line walks (cumsum, topk, argsort, scatter, index_put_accumulate:
// the scan scheduler's) do not.
#include "scheduler/pointwise/entry.h"

#include "scheduler/value_builder.h"

#include <optional>
#include <string>

namespace braze {
namespace {

// Whether `e`, reading a value computed from a per-element reduction, reads each of its elements for one
// element of its own at most: ops at the value's shape, meta ops that move, drop or only add dims of size
// 1, pads, cats and other per-element reductions.
bool readsEachElementOnce(const Expr& e, const ValSet& from_reductions, const BoundShapes& bound) {
  switch (opInfo(e.kind()).category) {
    case OpCategory::Reduction: return scheduler::reducedPerElement(e, bound);
    case OpCategory::Data: return e.kind() == OpKind::Pad || e.kind() == OpKind::Cat || e.kind() == OpKind::StrideOrder;
    case OpCategory::Meta: return bound.numel(e.output(0)) <= bound.numel(e.input(0));
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast:
      for (const Val* in : e.inputs()) {
        if (from_reductions.count(in) != 0 && in->isTensor() && bound.numel(in) != bound.numel(e.output(0))) return false;
      }
      return true;
    default: return false;
  }
}

// A reduction the kernel would compute again for several elements (x - sum(x) over a few rows, the sum
// broadcast back): each would read the reduction's operand anew, where a reduction kernel reads it once.
std::optional<std::string> resultReadAtSeveralElements(const Candidate& candidate, const BoundShapes& bound) {
  ValSet from_reductions;
  for (const Expr* e : candidate.exprs) {
    const bool reads = std::any_of(e->inputs().begin(), e->inputs().end(),
                                   [&](const Val* v) { return from_reductions.count(v) != 0; });
    if (reads && !readsEachElementOnce(*e, from_reductions, bound)) {
      return fmt::format("{} reads a reduction's result at several elements (each would compute it again)", exprLabel(*e));
    }
    if (reads || opInfo(e->kind()).category == OpCategory::Reduction) {
      for (const Val* out : e->outputs()) from_reductions.insert(out);
    }
  }
  return std::nullopt;
}

}  // namespace

Verdict canSchedulePointwise(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  if (facts.unsupported != nullptr) return Verdict::no(unsupportedReason(*facts.unsupported));
  if (facts.reductions.empty()) return Verdict::yes();
  for (const Expr* reduction : facts.reductions) {
    if (!scheduler::reducedPerElement(*reduction, bound)) {
      return Verdict::no(fmt::format("{} is a reduction", exprLabel(*reduction)));
    }
  }
  if (auto why = resultReadAtSeveralElements(candidate, bound)) return Verdict::no(*why);
  return Verdict::yes();
}

}  // namespace braze
