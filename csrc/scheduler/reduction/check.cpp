// The reduction scheduler's structural check: reductions over one domain, with any pointwise
// prologue (read through index maps) and an epilogue that stays at the reduced size. A result that
// is broadcast back over the reduced dims, or reduced again, needs the row kept on chip: that is
// the inner persistent scheduler's job (or two kernels).
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/domain_alignment.h"
#include "scheduler/reduction/reduction_domain.h"

namespace braze {

Verdict canScheduleReduction(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  auto domain_or = commonReductionDomain(facts, bound);
  if (auto* why = std::get_if<std::string>(&domain_or)) return Verdict::no(*why);
  const auto& domain = std::get<ReductionDomain>(domain_or);
  for (const Expr* expr : candidate.exprs) {
    const OpCategory category = opInfo(expr->kind()).category;
    const bool is_reduction = category == OpCategory::Reduction || category == OpCategory::Normalization;
    if (is_reduction) {
      if (facts.after_reduction.count(expr->input(0)) != 0) {
        return Verdict::no(fmt::format("{} reduces a value computed from another reduction (needs the row kept: "
                                       "inner persistent)", exprLabel(*expr)));
      }
      continue;
    }
    const Val* out = expr->output(0);
    if (facts.after_reduction.count(out) == 0) continue;
    if (bound.numel(out) != domain.outer_numel) {
      return Verdict::no(fmt::format("{} broadcasts a reduction result back to {} elements (needs the row kept: "
                                     "inner persistent)", exprLabel(*expr), bound.numel(out)));
    }
    // stride_order copies in place (only the output's strides change), which the epilogue's stores follow.
    if ((category == OpCategory::Data && expr->kind() != OpKind::StrideOrder) || category == OpCategory::Indexing) {
      return Verdict::no(fmt::format("{} moves data after the reduction", exprLabel(*expr)));
    }
  }
  if (std::string why = outputOutsideDomain(candidate, domain, bound); !why.empty()) return Verdict::no(why);
  if (std::string why = misalignedWithDomain(candidate, facts, domain, bound); !why.empty()) return Verdict::no(why);
  return Verdict::yes();
}

}  // namespace braze
