// The alias "scheduler": a group of meta ops whose every output is a strided view of the group's
// inputs runs on the host as views (no kernel, no copy), per the alias analysis.
#include "ir/fusion.h"
#include "scheduler/alias/entry.h"

#include <unordered_map>

namespace braze {

Verdict canScheduleAlias(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  if (!facts.all_meta) {
    for (const Expr* expr : candidate.exprs) {
      if (isMetaOp(expr->kind())) continue;
      return Verdict::no(facts.reasons ? fmt::format("{} computes (not a meta op)", exprLabel(*expr)) : "computes");
    }
  }
  // Fusion inputs come with their real layouts; tensors written by a kernel are as it allocates them
  // (row-major, or the stride order their definition asks for).
  std::unordered_map<const Val*, StridedLayout> layouts;
  for (const Val* in : candidate.inputs) {
    if (!in->isTensor()) continue;
    layouts[in] = in->fusion()->isInput(in) ? bound.inputLayout(in).layout : bound.allocatedLayout(in);
  }
  for (const Expr* expr : candidate.exprs) {
    ViewResult view = viewThrough(*expr, layouts.at(expr->input(0)), bound.intOperands(*expr));
    if (!view.is_view) return Verdict::no(std::move(view.reason));
    layouts[expr->output(0)] = std::move(view.layout);
  }
  return Verdict::yes();
}

const SchedulerEntry& aliasScheduler() {
  static const SchedulerEntry entry{SchedulerKind::Alias, "alias", canScheduleAlias};
  return entry;
}

}  // namespace braze
