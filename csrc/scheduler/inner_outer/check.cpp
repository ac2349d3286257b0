// The inner-outer persistent scheduler's structural check. The reductions split into inner ones (over
// the innermost dims: the rows) and outer ones (over every other dim of the same tensor: down the
// columns). Without the outer reductions and what follows them, the group must be one the inner
// persistent scheduler takes (a row statistic broadcast back over the row). The outer reductions are
// plain ones; what is computed from their results is elementwise math on those results and scalars
// only, ending in outputs of a row's size: the finishing kernel computes it per column.
#include "scheduler/inner_outer/entry.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduction_domain.h"

#include <algorithm>

namespace braze {
namespace {

// Threads per row at most (a block's), times the partial sums a thread keeps per outer reduction.
constexpr int64_t kMaxRowLength = 1024 * 32;

}  // namespace

Verdict canScheduleInnerOuter(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  if (facts.unsupported != nullptr) return Verdict::no(unsupportedReason(*facts.unsupported));
  const InnerOuterSplit split = splitInnerOuter(facts, candidate.exprs, bound);
  if (split.inner.empty() || split.outer.empty()) {
    return Verdict::no("the group does not reduce one tensor both over its rows and along them");
  }
  CandidateFacts inner_facts = facts;
  inner_facts.reductions = split.inner;
  auto domain_or = commonReductionDomain(inner_facts, bound);
  if (auto* why = std::get_if<std::string>(&domain_or)) return Verdict::no(*why);
  const auto& domain = std::get<ReductionDomain>(domain_or);
  const int64_t row_length = domain.outer_numel == 0 ? 0 : domain.full_numel / domain.outer_numel;
  for (const Expr* r : split.outer) {
    std::vector<int64_t> dims = r->attrs().getInts("dims");
    std::sort(dims.begin(), dims.end());
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < static_cast<int64_t>(domain.input_sizes.size()); ++d) {
      if (!std::binary_search(domain.dims.begin(), domain.dims.end(), d)) kept.push_back(d);
    }
    if (bound.sizesOf(r->input(0)) != domain.input_sizes || dims != kept) {
      return Verdict::no(fmt::format("{} does not reduce the rows of [{}] that {} reduces along", exprLabel(*r),
                                     fmt::join(domain.input_sizes, ", "), exprLabel(*split.inner.front())));
    }
    if (opInfo(r->kind()).category != OpCategory::Reduction) {
      return Verdict::no(fmt::format("{} is a statistic over the rows (two passes), not a plain reduction",
                                     exprLabel(*r)));
    }
  }
  if (row_length > kMaxRowLength) {
    return Verdict::no(fmt::format("rows of {} elements: more than the {} whose partial sums a block keeps",
                                   row_length, kMaxRowLength));
  }
  // What follows the outer reductions: elementwise on their results, at a row's size, read by nothing else.
  Candidate rows{{}, candidate.inputs, {}};
  for (const Expr* e : candidate.exprs) {
    const bool outer = std::find(split.outer.begin(), split.outer.end(), e) != split.outer.end();
    bool reads_outer = false, reads_other = false;
    for (const Val* in : e->inputs()) {
      const bool from_outer = split.after_outer.count(in) != 0;
      reads_outer = reads_outer || from_outer;
      reads_other = reads_other || (in->isTensor() && !from_outer);
    }
    if (!outer && !reads_outer) {
      rows.exprs.push_back(e);
      continue;
    }
    if (outer) continue;
    if (!isElementwise(e->kind()) || reads_other || bound.numel(e->output(0)) != row_length) {
      return Verdict::no(fmt::format("{} uses an outer reduction's result other than elementwise with scalars",
                                     exprLabel(*e)));
    }
  }
  for (const Val* out : candidate.outputs) {
    if (split.after_outer.count(out) == 0) rows.outputs.push_back(out);
  }
  // The outer reductions' operands are read per row element: values of the row part.
  for (const Expr* r : split.outer) {
    if (std::find(rows.outputs.begin(), rows.outputs.end(), r->input(0)) == rows.outputs.end() &&
        std::find(candidate.inputs.begin(), candidate.inputs.end(), r->input(0)) == candidate.inputs.end()) {
      rows.outputs.push_back(r->input(0));
    }
  }
  const Verdict row_part = canScheduleInnerPersistent(rows, analyzeCandidate(rows), bound);
  if (!row_part.ok) return Verdict::no("without its outer reductions, " + row_part.reason);
  return Verdict::yes();
}

}  // namespace braze
