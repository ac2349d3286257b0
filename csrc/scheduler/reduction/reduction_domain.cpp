#include "scheduler/reduction/reduction_domain.h"

#include <algorithm>
#include <functional>

namespace braze {

const std::vector<int64_t>& ascendingDims(const Expr& r, std::vector<int64_t>& storage) {
  const std::vector<int64_t>& dims = r.attrs().getInts("dims");
  if (std::adjacent_find(dims.begin(), dims.end(), std::greater_equal<>()) == dims.end()) return dims;
  storage = dims;
  std::sort(storage.begin(), storage.end());
  storage.erase(std::unique(storage.begin(), storage.end()), storage.end());
  return storage;
}

bool sameDimsBeyondOnes(const std::vector<int64_t>& a, const std::vector<int64_t>& sizes_a,
                        const std::vector<int64_t>& b, const std::vector<int64_t>& sizes_b) {
  const auto beyond = [](const std::vector<int64_t>& sizes, int64_t d) {
    return d < 0 || d >= static_cast<int64_t>(sizes.size()) || sizes[static_cast<size_t>(d)] != 1;
  };
  size_t i = 0, j = 0;
  while (true) {
    while (i < a.size() && !beyond(sizes_a, a[i])) ++i;
    while (j < b.size() && !beyond(sizes_b, b[j])) ++j;
    if (i == a.size() || j == b.size()) return i == a.size() && j == b.size();
    if (a[i++] != b[j++]) return false;
  }
}

namespace {

// Whether `r` reduces only innermost dims: no kept dim of size > 1 after a reduced dim of size > 1. A
// reduction of the leading dims (not all of them) is an outer one whatever their sizes: over a single row
// ([1, n] summed over dim 0) or of a single column ([rows, 1] summed over dim 0), the column sums of a
// norm's backward or a linear's bias grad, which only sizes of 1 make look like a row's.
bool reducesInnerDims(const Expr& r, const BoundShapes& bound) {
  const std::vector<int64_t>& sizes = bound.sizesOf(r.input(0));
  std::vector<int64_t> storage;
  const std::vector<int64_t>& dims = ascendingDims(r, storage);
  const bool leading = !dims.empty() && dims.size() < sizes.size() && dims.front() == 0 &&
                       dims.back() == static_cast<int64_t>(dims.size()) - 1;
  if (leading) return false;
  bool seen_reduced = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const bool reduced = std::binary_search(dims.begin(), dims.end(), static_cast<int64_t>(i));
    if (reduced && sizes[i] > 1) seen_reduced = true;
    if (!reduced && sizes[i] > 1 && seen_reduced) return false;
  }
  return true;
}

}  // namespace

InnerOuterSplit splitInnerOuter(const CandidateFacts& facts, const std::vector<const Expr*>& exprs,
                                const BoundShapes& bound) {
  InnerOuterSplit split;
  for (const Expr* r : facts.reductions) (reducesInnerDims(*r, bound) ? split.inner : split.outer).push_back(r);
  split.after_outer = computedFrom(split.outer, exprs);
  return split;
}

ValSet computedFrom(const std::vector<const Expr*>& sources, const std::vector<const Expr*>& exprs) {
  ValSet computed;
  for (const Expr* e : exprs) {
    bool after = std::find(sources.begin(), sources.end(), e) != sources.end();
    for (const Val* in : e->inputs()) after = after || computed.count(in) != 0;
    if (after) {
      for (const Val* out : e->outputs()) computed.insert(out);
    }
  }
  return computed;
}

std::optional<ExtraOuterShape> extraOuterShape(const Expr& r, const BoundShapes& bound) {
  const std::vector<int64_t>& sizes = bound.sizesOf(r.input(0));
  std::vector<int64_t> storage;
  const std::vector<int64_t>& dims = ascendingDims(r, storage);
  if (dims.empty() || dims.size() >= sizes.size()) return std::nullopt;
  ExtraOuterShape shape;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i < dims.size() && dims[i] != static_cast<int64_t>(i)) return std::nullopt;  // not the leading dims
    (i < dims.size() ? shape.rows : shape.columns) *= sizes[i];
  }
  return shape;
}

namespace {

ReductionDomain domainOf(const std::vector<int64_t>& sizes, const std::vector<int64_t>& ascending_dims) {
  ReductionDomain d;
  d.input_sizes = sizes;
  d.dims = ascending_dims;
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
  return d;
}

}  // namespace

std::variant<ReductionDomain, std::string> commonReductionDomain(const CandidateFacts& facts, const BoundShapes& bound) {
  return commonReductionDomain(facts.reductions, facts, bound);
}

std::variant<ReductionDomain, std::string> commonReductionDomain(const std::vector<const Expr*>& reductions,
                                                                 const CandidateFacts& facts,
                                                                 const BoundShapes& bound) {
  if (facts.unsupported != nullptr) return unsupportedReason(*facts.unsupported);
  if (reductions.empty()) return std::string("the group has no reduction");
  std::optional<ReductionDomain> domain;
  std::vector<int64_t> storage;
  for (const Expr* r : reductions) {
    const std::vector<int64_t>& sizes = bound.sizesOf(r->input(0));
    const std::vector<int64_t>& dims = ascendingDims(*r, storage);
    if (!domain) {
      domain = domainOf(sizes, dims);
      continue;
    }
    // Dims of size 1 reduce nothing: [0, 2] and [2] of [1, 16, 64] are one domain (Thunder reduces a
    // batch of 1 with the row).
    if (sizes != domain->input_sizes || !sameDimsBeyondOnes(dims, sizes, domain->dims, domain->input_sizes)) {
      if (!facts.reasons) return std::string("reductions over different domains");
      return fmt::format("{} reduces dims [{}] of [{}] but {} reduces dims [{}] of [{}]", exprLabel(*r),
                         fmt::join(dims, ", "), fmt::join(sizes, ", "), exprLabel(*reductions[0]),
                         fmt::join(domain->dims, ", "), fmt::join(domain->input_sizes, ", "));
    }
  }
  return *domain;
}

std::vector<int64_t> dimsBeyondOnes(const std::vector<int64_t>& dims, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> out;
  std::copy_if(dims.begin(), dims.end(), std::back_inserter(out),
               [&](int64_t d) { return d < 0 || d >= static_cast<int64_t>(sizes.size()) || sizes[d] != 1; });
  return out;
}

std::vector<int64_t> withoutOnes(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> out;
  std::copy_if(sizes.begin(), sizes.end(), std::back_inserter(out), [](int64_t s) { return s != 1; });
  return out;
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
