#include "ir/shape_rules.h"
#include "ir/size_rules.h"

#include "support/error.h"
#include "ir/val.h"

#include <algorithm>

namespace braze {

std::vector<int64_t> reshapeSizes(const Expr& reshape, const std::vector<int64_t>& in_sizes,
                                  std::vector<int64_t> shape) {
  int64_t numel = 1;
  for (int64_t s : in_sizes) numel *= s;
  int64_t inferred = -1;
  std::vector<int64_t> given;  // new_shape without its -1
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      BRAZE_CHECK(inferred < 0, "reshape: more than one -1 in new_shape [{}]", fmt::join(shape, ", "));
      inferred = static_cast<int64_t>(i);
    } else {
      BRAZE_CHECK(shape[i] >= 0, "reshape: new_shape [{}] has a negative size", fmt::join(shape, ", "));
      given.push_back(shape[i]);
    }
  }
  // A product that wraps could equal the element count: refused before it is taken.
  checkElementCount("reshape", given);
  int64_t known = 1;
  for (int64_t s : given) known *= s;
  if (inferred >= 0) {
    BRAZE_CHECK(known != 0 && numel % known == 0, "reshape: cannot infer the -1 in [{}] for {} elements",
                fmt::join(shape, ", "), numel);
    shape[inferred] = numel / known;
    known *= shape[inferred];
  }
  BRAZE_CHECK(known == numel, "reshape: {} of shape [{}] has {} elements, new_shape [{}] has {}",
              operandName(reshape.input(0)), fmt::join(in_sizes, ", "), numel, fmt::join(shape, ", "), known);
  return shape;
}

std::vector<SliceDim> sliceDims(const Expr& slice, const std::vector<int64_t>& in_sizes,
                                const std::vector<int64_t>& scalars) {
  const size_t rank = in_sizes.size();
  BRAZE_ASSERT(scalars.size() == 3 * rank, "slice: {} scalars for rank {}", scalars.size(), rank);
  const bool manual = slice.attrs().getBool("manual_normalization");
  std::vector<SliceDim> dims(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t extent = in_sizes[d];
    int64_t start = scalars[d];
    int64_t end = scalars[rank + d];
    const int64_t step = scalars[2 * rank + d];
    BRAZE_CHECK(step >= 1, "slice: stride {} of dim {} must be positive", step, d);
    if (!manual) {  // Python slicing: negative from the end, then clamped
      if (start < 0) start += extent;
      if (end < 0) end += extent;
      start = std::clamp<int64_t>(start, 0, extent);
      end = std::clamp<int64_t>(end, start, extent);
    }
    BRAZE_INDEX_CHECK(start >= 0 && start <= end && end <= extent,
                      "slice: dim {} of {}: [{}, {}) is not within [0, {}] (manual_normalization=True)", d,
                      operandName(slice.input(0)), start, end, extent);
    dims[d] = {start, end == start ? 0 : (end - start - 1) / step + 1, step};  // no overflow for a huge step
  }
  return dims;
}

void checkElementCount(std::string_view op, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s == 0) return;
  }
  for (int64_t s : shape) {
    BRAZE_CHECK(!__builtin_mul_overflow(n, s, &n), "{}: shape [{}] has more elements than a 64-bit count holds", op,
                fmt::join(shape, ", "));
  }
}

std::vector<int64_t> expandSizes(const Expr& expand, const std::vector<int64_t>& in_sizes,
                                 std::vector<int64_t> shape) {
  const std::vector<int64_t> requested = shape;
  for (size_t d = 0; d < in_sizes.size(); ++d) {
    if (shape[d] == -1) shape[d] = in_sizes[d];
    BRAZE_CHECK(shape[d] >= 0, "expand: shape [{}] has a negative size in dim {} (-1 keeps a dim's size)",
                fmt::join(requested, ", "), d);
    BRAZE_CHECK(shape[d] == in_sizes[d] || in_sizes[d] == 1,
                "expand: dim {} of {} has size {} and cannot be expanded to {}", d, operandName(expand.input(0)),
                in_sizes[d], shape[d]);
  }
  checkElementCount("expand", shape);
  return shape;
}

void checkBroadcastInDim(const Expr& bid, const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& shape) {
  for (size_t d = 0; d < shape.size(); ++d) {
    BRAZE_CHECK(shape[d] >= 0, "broadcast_in_dim: shape [{}] of {} has a negative size in dim {}", fmt::join(shape, ", "),
                bid.output(0)->name(), d);
  }
  checkElementCount("broadcast_in_dim", shape);
  const auto& bdims = bid.attrs().getInts("broadcast_dims");
  for (size_t i = 0; i < bdims.size(); ++i) {
    const int64_t d = bdims[i];
    BRAZE_CHECK(in_sizes[i] == shape[d] || in_sizes[i] == 1,
                "broadcast_in_dim: input dim {} of {} has size {} but shape[{}] is {} (only size-1 dims expand)", i,
                operandName(bid.input(0)), in_sizes[i], d, shape[d]);
  }
}

}  // namespace braze
