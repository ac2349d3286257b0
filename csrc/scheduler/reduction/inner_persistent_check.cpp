// The inner persistent scheduler's structural check (layer_norm, rms_norm, softmax, var_mean): the
// reductions reduce the innermost dims; each row stays on chip, so results may be broadcast back
// over the row and reduced again, and outputs are rows or per-row results. After a reduction only
// elementwise math and broadcasts are allowed: a slice or permute of a value computed from a row
// statistic would need other rows' (or other threads') elements. Whether a row fits in registers or
// shared memory is a size question for the heuristic (schedulers issue).
#include "scheduler/reduction/domain_alignment.h"
#include "scheduler/reduction/reduction_domain.h"

#include <algorithm>

namespace braze {
namespace {

// Ops that keep every element in its row and position (up to broadcasting).
bool keepsRowPositions(const Expr& expr, const BoundShapes& bound) {
  if (isElementwise(expr.kind())) return true;
  switch (expr.kind()) {
    case OpKind::Broadcast:
    case OpKind::BroadcastInDim:
    case OpKind::Expand:
    case OpKind::Set:
    case OpKind::StrideOrder:  // a copy at the same index; only the output's strides differ
    case OpKind::Squeeze: return true;
    case OpKind::Reshape:  // only adding or removing size-1 dims
      return withoutOnes(bound.sizesOf(expr.input(0))) == withoutOnes(bound.sizesOf(expr.output(0)));
    default: return false;
  }
}

}  // namespace

Verdict canScheduleInnerPersistent(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  auto domain_or = commonReductionDomain(facts, bound);
  if (auto* why = std::get_if<std::string>(&domain_or)) return Verdict::no(*why);
  const auto& domain = std::get<ReductionDomain>(domain_or);
  if (!domain.inner) {
    return Verdict::no(fmt::format("the reduced dims [{}] of [{}] are not the innermost (an outer reduction)",
                                   fmt::join(domain.dims, ", "), fmt::join(domain.input_sizes, ", ")));
  }
  bool keeps_row = false;
  for (const Expr* expr : candidate.exprs) {
    const OpCategory category = opInfo(expr->kind()).category;
    if (category == OpCategory::Reduction || category == OpCategory::Normalization) {
      keeps_row = keeps_row || facts.after_reduction.count(expr->input(0)) != 0;
      continue;
    }
    const Val* out = expr->output(0);
    if (facts.after_reduction.count(out) == 0) continue;
    const int64_t n = bound.numel(out);
    if (n != domain.outer_numel && n != domain.full_numel) {
      return Verdict::no(fmt::format("{} has {} elements: neither a row ({}) nor a per-row result ({})",
                                     exprLabel(*expr), n, domain.full_numel, domain.outer_numel));
    }
    if (!keepsRowPositions(*expr, bound)) {
      return Verdict::no(fmt::format("{} moves elements of a value computed from a row statistic", exprLabel(*expr)));
    }
    keeps_row = keeps_row || (n == domain.full_numel && domain.full_numel != domain.outer_numel);
  }
  if (!keeps_row) return Verdict::no("no reduction result is broadcast back over the row (a plain reduction)");
  if (std::string why = outputOutsideDomain(candidate, domain, bound); !why.empty()) return Verdict::no(why);
  if (std::string why = misalignedWithDomain(candidate, facts, domain, bound); !why.empty()) return Verdict::no(why);
  return Verdict::yes();
}

}  // namespace braze
