// A tensor's view of its storage: sizes, strides and offset in elements, like a torch tensor's. Every
// stage after the IR reads layouts: alias analysis makes views, kernels index through them, and the
// widest vector access a layout allows is a property of the layout and the pointer's alignment.
#pragma once

#include "ir/data_type.h"

#include <cstdint>
#include <vector>

namespace braze {

struct StridedLayout {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;

  static StridedLayout rowMajor(std::vector<int64_t> sizes);
  // Dense, with dim d's stride rank given by nvFuser's stride_order[d] (0 innermost); empty: row-major.
  static StridedLayout inStrideOrder(std::vector<int64_t> sizes, const std::vector<int64_t>& stride_order);
  int64_t numel() const;
  bool operator==(const StridedLayout&) const = default;
};

// The widest power-of-two vector (at most 16 bytes, in elements) a kernel can load or store a tensor
// with along its last dim; a kernel's factor is the minimum over the tensors it accesses along the
// vectorized dim. Stride-0 dims (broadcast or expanded) never limit it: an expanded broadcast must not
// look discontiguous (that is what dropped nvFuser's vectorize factor to 1). Otherwise the factor
// divides the last non-trivial dim's extent (which must have stride 1), every other stride, the offset,
// and the data pointer's alignment.
int64_t vectorizeFactor(DataType dtype, const StridedLayout& layout, int64_t alignment_bytes);

// The alignment of a tensor's first element: the largest power of two, up to 256 bytes, dividing its
// address (256 for a null pointer, an empty tensor's). Planning reads it (vectorizeFactor, the matmul's
// copies); an input signature keeps it up to 16 bytes, all that vector accesses depend on.
inline constexpr int64_t kMaxAlignmentBytes = 256;
int64_t addressAlignment(uintptr_t address);

}  // namespace braze
