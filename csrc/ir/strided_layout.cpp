#include "ir/strided_layout.h"

#include <algorithm>

namespace braze {

StridedLayout StridedLayout::rowMajor(std::vector<int64_t> sizes) {
  StridedLayout layout;
  layout.strides.assign(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d) {
    layout.strides[d] = layout.strides[d + 1] * std::max<int64_t>(sizes[d + 1], 1);
  }
  layout.sizes = std::move(sizes);
  return layout;
}

StridedLayout StridedLayout::inStrideOrder(std::vector<int64_t> sizes, const std::vector<int64_t>& stride_order) {
  if (stride_order.empty()) return rowMajor(std::move(sizes));
  StridedLayout layout;
  layout.strides.assign(sizes.size(), 1);
  std::vector<size_t> inner_first(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) inner_first[static_cast<size_t>(stride_order[d])] = d;
  int64_t stride = 1;
  for (size_t d : inner_first) {
    layout.strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  layout.sizes = std::move(sizes);
  return layout;
}

int64_t StridedLayout::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t vectorizeFactor(DataType dtype, const StridedLayout& layout, int64_t alignment_bytes) {
  const int64_t item = sizeOf(dtype);
  const int64_t widest = std::max<int64_t>(16 / item, 1);
  int64_t inner = -1;
  for (int64_t d = static_cast<int64_t>(layout.sizes.size()) - 1; d >= 0; --d) {
    if (layout.sizes[d] > 1) {
      inner = d;
      break;
    }
  }
  if (inner < 0 || layout.strides[inner] == 0) return widest;  // constant along the vectorized dim
  if (layout.strides[inner] != 1) return 1;
  for (int64_t factor = widest; factor > 1; factor /= 2) {
    bool fits = layout.sizes[inner] % factor == 0 && layout.offset % factor == 0 &&
                alignment_bytes % (factor * item) == 0;
    for (size_t d = 0; d < layout.sizes.size() && fits; ++d) {
      if (static_cast<int64_t>(d) == inner || layout.sizes[d] == 1) continue;
      fits = layout.strides[d] % factor == 0;
    }
    if (fits) return factor;
  }
  return 1;
}

int64_t addressAlignment(uintptr_t address) {
  const uintptr_t lowest_bit = address & (~address + 1);
  return address == 0 ? kMaxAlignmentBytes
                      : static_cast<int64_t>(std::min<uintptr_t>(lowest_bit, static_cast<uintptr_t>(kMaxAlignmentBytes)));
}

}  // namespace braze
