#include "segmenter/group_reductions.h"

#include <algorithm>

namespace braze {
namespace {

bool isReduction(const Expr& e) {
  const OpCategory category = opInfo(e.kind()).category;
  return category == OpCategory::Reduction || category == OpCategory::Normalization;
}

}  // namespace

bool reducesOuterDimsOnly(const std::vector<const Expr*>& exprs, const BoundShapes& bound) {
  for (const Expr* e : exprs) {
    if (!isReduction(*e)) continue;
    const std::vector<int64_t>& sizes = bound.sizesOf(e->input(0));
    auto last = static_cast<int64_t>(sizes.size()) - 1;
    while (last >= 0 && sizes[static_cast<size_t>(last)] == 1) --last;
    const std::vector<int64_t> dims = e->attrs().getInts("dims");
    if (last < 0 || std::find(dims.begin(), dims.end(), last) != dims.end()) return false;
  }
  return true;
}

std::set<int64_t> leadingRowCounts(const std::vector<const Expr*>& exprs, const BoundShapes& bound) {
  std::set<int64_t> counts;
  for (const Expr* e : exprs) {
    for (const Val* out : e->outputs()) {
      if (!out->isTensor()) continue;
      const std::vector<int64_t>& sizes = bound.sizesOf(out);
      int64_t rows = 1;
      for (size_t d = 0; d + 1 < sizes.size(); ++d) counts.insert(rows *= sizes[d]);
    }
  }
  return counts;
}

std::optional<int64_t> reducedPerResult(const std::vector<const Expr*>& exprs, const BoundShapes& bound) {
  std::optional<int64_t> count;
  for (const Expr* e : exprs) {
    if (!isReduction(*e)) continue;
    const int64_t results = bound.numel(e->output(0));
    const int64_t n = results == 0 ? 0 : bound.numel(e->input(0)) / results;
    if (count && *count != n) return std::nullopt;
    count = n;
  }
  return count;
}

std::vector<std::string> reductionDomainKeys(const std::vector<const Expr*>& exprs, const BoundShapes& bound) {
  std::vector<std::string> keys;
  for (const Expr* e : exprs) {
    if (!isReduction(*e)) continue;
    std::string k;
    for (int64_t size : bound.sizesOf(e->input(0))) k += std::to_string(size) + ",";
    k += ":";
    for (int64_t d : e->attrs().getInts("dims")) k += std::to_string(d) + ",";
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(std::move(k));
  }
  return keys;
}

}  // namespace braze
