#include "scheduler/reduction/row_inputs.h"

#include <algorithm>
#include <unordered_set>

namespace braze::scheduler {

bool readAtDomainIndex(const Val* val, const std::vector<const Expr*>& exprs, const std::vector<const Expr*>& reductions,
                       const ReductionDomain& domain, const BoundShapes& bound) {
  auto contains = [](const std::vector<const Expr*>& list, const Expr* e) {
    return std::find(list.begin(), list.end(), e) != list.end();
  };
  std::vector<const Val*> pending{val};
  std::unordered_set<const Val*> seen{val};
  while (!pending.empty()) {
    const Val* v = pending.back();
    pending.pop_back();
    for (const Expr* use : v->uses()) {
      if (!contains(exprs, use)) continue;  // another segment's
      if (contains(reductions, use)) {
        if (bound.sizesOf(use->input(0)) != domain.input_sizes) return false;
        continue;
      }
      if (!isElementwise(use->kind()) || bound.sizesOf(use->output(0)) != domain.input_sizes) return false;
      if (seen.insert(use->output(0)).second) pending.push_back(use->output(0));
    }
  }
  return true;
}

bool isPerRowInput(const Val* val, const ReductionDomain& domain, const BoundShapes& bound) {
  const auto& sizes = bound.sizesOf(val);
  if (!val->isTensor() || sizes.size() != domain.input_sizes.size()) return false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const bool reduced =
        std::find(domain.dims.begin(), domain.dims.end(), static_cast<int64_t>(d)) != domain.dims.end();
    if (sizes[d] != (reduced ? 1 : domain.input_sizes[d])) return false;
  }
  return true;
}

}  // namespace braze::scheduler
