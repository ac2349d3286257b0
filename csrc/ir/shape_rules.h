// Concrete shape rules of the meta ops whose result sizes need arithmetic (reshape's -1, Python
// slicing, expand's -1): one place, shared by the reference evaluator and the planner, so the two
// can never disagree about a shape or report a bad one differently.
#pragma once

#include "ir/expr.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace braze {

// new_shape with its -1 inferred; checks the element count against the operand's sizes.
std::vector<int64_t> reshapeSizes(const Expr& reshape, const std::vector<int64_t>& in_sizes,
                                  std::vector<int64_t> new_shape);

// One dim of a slice after normalization: elements start, start + step, ... (size of them).
struct SliceDim {
  int64_t start = 0;
  int64_t size = 0;
  int64_t step = 1;
};
// scalars: starts, ends, strides (rank each). Negative indices count from the end and are clamped
// unless the slice was built with manual_normalization, as nvFuser does.
std::vector<SliceDim> sliceDims(const Expr& slice, const std::vector<int64_t>& in_sizes,
                                const std::vector<int64_t>& scalars);

// Throws a Value error naming `op` when `shape` has more elements than an int64_t counts (sizes >= 0).
void checkElementCount(std::string_view op, const std::vector<int64_t>& shape);

// expand's shape with -1 replaced by the operand's extent; only size-1 dims may grow.
std::vector<int64_t> expandSizes(const Expr& expand, const std::vector<int64_t>& in_sizes,
                                 std::vector<int64_t> shape);

// broadcast_in_dim: checks each operand dim against the dim it maps to (equal, or 1 to expand).
void checkBroadcastInDim(const Expr& bid, const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& shape);

}  // namespace braze
