#include "scheduler/registry.h"
#include "scheduler/scheduler.h"

#include "support/error.h"
#include "ir/fusion.h"

#include <fmt/format.h>


namespace braze {

std::string_view toString(SchedulerKind kind) { return schedulerFor(kind).name; }

bool readsAsScalar(const Val* v) { return !v->isTensor() || v->asTensor()->rank() == 0; }

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
  if (category == OpCategory::Matmul) return exprLabel(unsupported) + " is a matmul (the matmul scheduler's)";
  // Scans and scatters: line walks, the scan scheduler's.
  return exprLabel(unsupported) + " walks lines along a dim (the scan scheduler's)";
}

namespace {
// A kernel takes each tensor as an 8-byte pointer, and CUDA's parameter space holds 32764 bytes: past
// this many tensors (the rest left to scalar arguments), NVRTC refuses the kernel, so no group is one.
constexpr size_t kMaxKernelTensors = 3840;
}  // namespace

SchedulerChoice chooseScheduler(const Candidate& candidate, const BoundShapes& bound, bool reasons) {
  SchedulerChoice choice;
  size_t tensors = 0;
  for (const auto* list : {&candidate.inputs, &candidate.outputs}) {
    for (const Val* v : *list) tensors += v->isTensor() ? 1 : 0;
  }
  if (tensors > kMaxKernelTensors) {
    const std::string why = fmt::format("{} tensors in and out: a kernel's parameters hold at most {} (8 bytes each, "
                                        "in CUDA's 32764)", tensors, kMaxKernelTensors);
    for (const SchedulerEntry& entry : schedulers()) choice.refusals.emplace_back(entry.kind, why);
    return choice;
  }
  CandidateFacts facts = analyzeCandidate(candidate);
  facts.reasons = reasons;
  for (const SchedulerEntry& entry : schedulers()) {
    Verdict v = entry.accepts(candidate, facts, bound);
    if (v.ok) {
      choice.kind = entry.kind;
      return choice;
    }
    choice.refusals.emplace_back(entry.kind, std::move(v.reason));
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
