#include "scheduler/registry.h"

#include "support/error.h"
#include "ir/fusion.h"

#include <array>

namespace braze {

std::string_view toString(SchedulerKind kind) {
  switch (kind) {
    case SchedulerKind::Alias: return "alias";
    case SchedulerKind::InnerPersistent: return "inner_persistent";
    case SchedulerKind::Reduction: return "reduction";
    case SchedulerKind::Transpose: return "transpose";
    case SchedulerKind::Scan: return "scan";
    case SchedulerKind::Pointwise: return "pointwise";
    case SchedulerKind::Matmul: return "matmul";
  }
  BRAZE_UNREACHABLE("SchedulerKind {}", static_cast<int>(kind));
}

std::span<const SchedulerKind> schedulersInPriorityOrder() {
  static constexpr std::array kOrder{SchedulerKind::Alias, SchedulerKind::InnerPersistent, SchedulerKind::Reduction,
                                     SchedulerKind::Transpose, SchedulerKind::Scan, SchedulerKind::Pointwise,
                                     SchedulerKind::Matmul};
  return kOrder;
}

CandidateFacts analyzeCandidate(const Candidate& candidate) {
  CandidateFacts facts;
  for (const Expr* expr : candidate.exprs) {
    const OpCategory category = opInfo(expr->kind()).category;
    facts.all_meta = facts.all_meta && category == OpCategory::Meta;
    const bool no_kernel =
        category == OpCategory::Matmul || category == OpCategory::Scan || category == OpCategory::Scatter;
    if (no_kernel && facts.unsupported == nullptr) facts.unsupported = expr;
    bool after = category == OpCategory::Reduction || category == OpCategory::Normalization;
    if (after) facts.reductions.push_back(expr);
    for (const Val* in : expr->inputs()) after = after || facts.after_reduction.count(in) != 0;
    if (after) {
      for (const Val* out : expr->outputs()) facts.after_reduction.insert(out);
    }
  }
  return facts;
}

std::string unsupportedReason(const Expr& unsupported) {
  const OpCategory category = opInfo(unsupported.kind()).category;
  if (category == OpCategory::Scan) return exprLabel(unsupported) + " is a scan (the scan scheduler takes it alone)";
  if (category == OpCategory::Matmul) return exprLabel(unsupported) + " is a matmul (the matmul scheduler's)";
  return exprLabel(unsupported) + " has no kernel scheduler yet";
}

Verdict canSchedule(SchedulerKind kind, const Candidate& candidate, const CandidateFacts& facts,
                    const BoundShapes& bound) {
  switch (kind) {
    case SchedulerKind::Alias: return canScheduleAlias(candidate, facts, bound);
    case SchedulerKind::InnerPersistent: return canScheduleInnerPersistent(candidate, facts, bound);
    case SchedulerKind::Reduction: return canScheduleReduction(candidate, facts, bound);
    case SchedulerKind::Transpose: return canScheduleTranspose(candidate, facts, bound);
    case SchedulerKind::Scan: return canScheduleScan(candidate, facts, bound);
    case SchedulerKind::Pointwise: return canSchedulePointwise(candidate, facts, bound);
    case SchedulerKind::Matmul: return canScheduleMatmul(candidate, facts, bound);
  }
  BRAZE_UNREACHABLE("SchedulerKind {}", static_cast<int>(kind));
}

SchedulerChoice chooseScheduler(const Candidate& candidate, const BoundShapes& bound) {
  const CandidateFacts facts = analyzeCandidate(candidate);
  SchedulerChoice choice;
  for (SchedulerKind kind : schedulersInPriorityOrder()) {
    Verdict v = canSchedule(kind, candidate, facts, bound);
    if (v.ok) {
      choice.kind = kind;
      return choice;
    }
    choice.refusals.emplace_back(kind, std::move(v.reason));
  }
  return choice;
}

}  // namespace braze

namespace braze {

std::string exprLabel(const Expr& expr) {
  std::vector<std::string> outs, ins;
  for (const Val* v : expr.outputs()) outs.push_back(v->name());
  for (const Val* v : expr.inputs()) {
    if (v->isTensor()) ins.push_back(v->name());
  }
  return fmt::format("{} = {}({})", fmt::join(outs, ", "), expr.name(), fmt::join(ins, ", "));
}

}  // namespace braze
