// What the reduction and inner-persistent schedulers share: every reduction of a group must reduce
// the same dims of same-sized inputs (one "reduction domain"), so one kernel can walk the kept
// (outer) index space and, for each outer index, the reduced elements.
#pragma once

#include "scheduler/registry.h"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace braze {

struct ReductionDomain {
  std::vector<int64_t> input_sizes;  // the reductions' input sizes
  std::vector<int64_t> dims;         // reduced dims, ascending
  int64_t full_numel = 1;            // elements of a reduction input
  int64_t outer_numel = 1;           // elements of a reduction result (kept dims)
  bool inner = false;                // the reduced dims are the innermost ones (a suffix, ignoring size-1 dims)
};

// The group's one reduction domain, or why there is none (an op no kernel handles, no reduction,
// differing domains): the first check of both reduction schedulers.
std::variant<ReductionDomain, std::string> commonReductionDomain(const CandidateFacts& facts, const BoundShapes& bound);
// The same for `reductions`, some of the group's (the rest of `facts` is the group's).
std::variant<ReductionDomain, std::string> commonReductionDomain(const std::vector<const Expr*>& reductions,
                                                                 const CandidateFacts& facts,
                                                                 const BoundShapes& bound);

// A reduction's dims, ascending and each once: its attribute itself (the op builders normalize it so), or a
// sorted copy in `storage` where it is not.
const std::vector<int64_t>& ascendingDims(const Expr& r, std::vector<int64_t>& storage);

// The outputs of `sources` (some of `exprs`) and every value `exprs` compute from them, in `exprs`' order.
ValSet computedFrom(const std::vector<const Expr*>& sources, const std::vector<const Expr*>& exprs);

// A group that reduces rows both ways (layer-norm backward: per row for grad_in, over the rows for the
// weight and bias grads): `inner`, the reductions over a suffix of dims (the rows); `outer`, the others;
// `after_outer`, the outer reductions' results and every value computed from them.
struct InnerOuterSplit {
  std::vector<const Expr*> inner, outer;
  ValSet after_outer;
};
InnerOuterSplit splitInnerOuter(const CandidateFacts& facts, const std::vector<const Expr*>& exprs,
                                const BoundShapes& bound);

// The rows and columns of `r` where it reduces the leading dims of its input and keeps a suffix (an extra
// reduction of an inner-outer group: [rows, columns] summed over the rows); else nothing.
struct ExtraOuterShape {
  int64_t rows = 1;
  int64_t columns = 1;
};
std::optional<ExtraOuterShape> extraOuterShape(const Expr& r, const BoundShapes& bound);

// The dims among `dims` whose size in `sizes` is not 1: what a reduction over `dims` really reduces.
std::vector<int64_t> dimsBeyondOnes(const std::vector<int64_t>& dims, const std::vector<int64_t>& sizes);
// dimsBeyondOnes(a, sizes_a) == dimsBeyondOnes(b, sizes_b), without making either list.
bool sameDimsBeyondOnes(const std::vector<int64_t>& a, const std::vector<int64_t>& sizes_a,
                        const std::vector<int64_t>& b, const std::vector<int64_t>& sizes_b);

// `sizes` without its size-1 dims: what a reshape that only adds or drops such dims keeps.
std::vector<int64_t> withoutOnes(const std::vector<int64_t>& sizes);

// The first output of the group that a kernel over `domain` cannot write (its size is neither a
// row's nor a reduction result's), as a refusal reason; empty when all fit.
std::string outputOutsideDomain(const Candidate& candidate, const ReductionDomain& domain, const BoundShapes& bound);

}  // namespace braze
