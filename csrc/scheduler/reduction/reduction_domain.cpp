#include "scheduler/reduction/reduction_domain.h"

#include <algorithm>

namespace braze {

std::variant<ReductionDomain, std::string> commonReductionDomain(const CandidateFacts& facts, const BoundShapes& bound) {
  if (facts.unsupported != nullptr) return unsupportedReason(*facts.unsupported);
  if (facts.reductions.empty()) return std::string("the group has no reduction");
  std::optional<ReductionDomain> domain;
  for (const Expr* r : facts.reductions) {
    ReductionDomain d;
    d.input_sizes = bound.sizesOf(r->input(0));
    d.dims = r->attrs().getInts("dims");
    std::sort(d.dims.begin(), d.dims.end());
    for (size_t i = 0; i < d.input_sizes.size(); ++i) {
      const bool reduced = std::binary_search(d.dims.begin(), d.dims.end(), static_cast<int64_t>(i));
      d.full_numel *= d.input_sizes[i];
      if (!reduced) d.outer_numel *= d.input_sizes[i];
    }
    // Inner: no kept dim of size > 1 comes after a reduced dim.
    d.inner = true;
    bool seen_reduced = false;
    for (size_t i = 0; i < d.input_sizes.size(); ++i) {
      const bool reduced = std::binary_search(d.dims.begin(), d.dims.end(), static_cast<int64_t>(i));
      if (reduced && d.input_sizes[i] > 1) seen_reduced = true;
      if (!reduced && d.input_sizes[i] > 1 && seen_reduced) d.inner = false;
    }
    if (!domain) {
      domain = std::move(d);
      continue;
    }
    if (d.input_sizes != domain->input_sizes || d.dims != domain->dims) {
      return fmt::format("{} reduces dims [{}] of [{}] but {} reduces dims [{}] of [{}]", exprLabel(*r),
                         fmt::join(d.dims, ", "), fmt::join(d.input_sizes, ", "), exprLabel(*facts.reductions[0]),
                         fmt::join(domain->dims, ", "), fmt::join(domain->input_sizes, ", "));
    }
  }
  return *domain;
}

std::string outputOutsideDomain(const Candidate& candidate, const ReductionDomain& domain, const BoundShapes& bound) {
  for (const Val* out : candidate.outputs) {
    if (!out->isTensor()) continue;
    const int64_t n = bound.numel(out);
    if (n != domain.full_numel && n != domain.outer_numel) {
      return fmt::format("output {} has {} elements: neither a reduction input ({}) nor a reduction result ({})",
                         out->name(), n, domain.full_numel, domain.outer_numel);
    }
  }
  return "";
}

}  // namespace braze
