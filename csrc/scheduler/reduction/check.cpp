// The reduction scheduler's structural check: reductions over one domain, with any pointwise
// prologue (read through index maps) and an epilogue that stays at the reduced size, or concatenates
// per-row results (row_cats.h); or outer reductions over as many rows side by side (reduction_parts.h). A result that is broadcast back over the reduced dims, or reduced
// again, needs the row kept on chip: that is the inner persistent scheduler's job (or two kernels).
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/domain_alignment.h"
#include "scheduler/reduction/reduction_domain.h"
#include "scheduler/reduction/reduction_parts.h"
#include "scheduler/reduction/row_cats.h"
#include "scheduler/reduction/row_totals.h"

#include <unordered_set>

namespace braze {

Verdict canScheduleReduction(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  // Totals over the rows finish in the last block (row_totals.h); parts that compute nothing for one another
  // run side by side, each in its own blocks.
  return wholeOrParts(candidate, facts, bound, canScheduleReductionWithTotals, canScheduleReductionParts);
}

Verdict canScheduleOneReductionDomain(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  auto domain_or = commonReductionDomain(facts, bound);
  if (auto* why = std::get_if<std::string>(&domain_or)) return Verdict::no(*why);
  const auto& domain = std::get<ReductionDomain>(domain_or);
  // The row cats' exprs and outputs are checked by findRowCats; the rest as any group's.
  const std::vector<RowCat> cats = findRowCats(
      candidate.exprs, candidate.outputs,
      [&](const Val* v) { return facts.after_reduction.count(v) != 0 && bound.numel(v) == domain.outer_numel; }, bound);
  Candidate rest = candidate;
  if (!cats.empty()) {
    std::unordered_set<const Expr*> in_cat;
    std::unordered_set<const Val*> cat_outputs;
    for (const RowCat& cat : cats) {
      in_cat.insert(cat.exprs.begin(), cat.exprs.end());
      cat_outputs.insert(cat.output);
    }
    std::erase_if(rest.exprs, [&](const Expr* e) { return in_cat.count(e) != 0; });
    std::erase_if(rest.outputs, [&](const Val* v) { return cat_outputs.count(v) != 0; });
  }
  for (const Expr* expr : rest.exprs) {
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
  if (std::string why = outputOutsideDomain(rest, domain, bound); !why.empty()) return Verdict::no(why);
  if (std::string why = misalignedWithDomain(rest, facts, domain, bound); !why.empty()) return Verdict::no(why);
  return Verdict::yes();
}

}  // namespace braze
