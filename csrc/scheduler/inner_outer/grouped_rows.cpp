// Which outer reductions of an inner-outer group are grouped ones: over some of the rows' dims of the
// domain's tensor, keeping the others, so each result sums the rows that share the kept dims' index.
#include "scheduler/inner_outer/entry.h"

#include <algorithm>

namespace braze {

std::optional<RowGrouping> rowGroupingOf(const Expr& r, const ReductionDomain& domain, const BoundShapes& bound) {
  const std::vector<int64_t>& sizes = domain.input_sizes;
  if (opInfo(r.kind()).category != OpCategory::Reduction || bound.sizesOf(r.input(0)) != sizes) return std::nullopt;
  std::vector<int64_t> storage;
  const std::vector<int64_t>& dims = ascendingDims(r, storage);
  RowGrouping grouping;
  bool keeps_one = false, sums_one = false;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    const bool summed = std::binary_search(dims.begin(), dims.end(), d) && sizes[d] != 1;
    if (std::binary_search(domain.dims.begin(), domain.dims.end(), d)) {
      if (summed) return std::nullopt;  // along the rows: not an outer reduction
      continue;
    }
    grouping.summed.push_back(summed);
    (summed ? grouping.group_rows : grouping.groups) *= sizes[d];
    keeps_one = keeps_one || (!summed && sizes[d] != 1);
    sums_one = sums_one || summed;
  }
  if (!keeps_one) return std::nullopt;  // over every row: a plain outer reduction
  // Over dims of size 1 only (a batch of 1 of a definition without sizes): a copy of each row, which a
  // walk of one row per item would make slow; it stays a kernel of its own.
  if (!sums_one) return std::nullopt;
  return grouping;
}

}  // namespace braze
