// A tensor in host memory with any layout: sizes, strides and offset in elements, storage shared
// (views alias it) and either owned or borrowed from the caller (numpy arrays are wrapped, not copied).
#pragma once

#include "ir/data_type.h"
#include "ir/val.h"

#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

namespace braze {

// The most host memory one tensor (or one simulated device buffer) takes: a shape made huge (a size of
// 2^40 in a hand-edited record) is an error that says so, not std::bad_alloc or, under AddressSanitizer,
// an abort (its allocator refuses 2^40 bytes and more).
inline constexpr size_t kMaxHostAllocationBytes = size_t{1} << 39;  // 512 GiB

class HostTensor {
 public:
  HostTensor() = default;
  // A new row-major tensor, zero-filled.
  static HostTensor empty(DataType dtype, std::vector<int64_t> sizes);
  // Borrows caller memory; `keepalive` (may be null) is held as long as any view of it lives.
  static HostTensor wrap(void* data, DataType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                         std::shared_ptr<void> keepalive = nullptr);
  // A view of the same storage with another shape, strides and offset.
  HostTensor view(std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset) const;

  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t rank() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const;
  bool isContiguous() const;  // row-major, no gaps
  // The first element's address (storage + offset).
  const uint8_t* data() const { return base_ + offset_ * sizeOf(dtype_); }
  uint8_t* data() { return base_ + offset_ * sizeOf(dtype_); }
  bool sharesStorageWith(const HostTensor& other) const { return base_ == other.base_; }

  // Element access by storage offset (in elements, from data()). Floating types read and write as
  // double (rounded to the dtype on write, as CUDA rounds); integers and Bool as int64 (wrapped to
  // the dtype's width on write, as a C++ conversion does).
  double readDouble(int64_t element_offset) const;
  int64_t readInt(int64_t element_offset) const;
  void writeDouble(int64_t element_offset, double value);
  void writeInt(int64_t element_offset, int64_t value);
  // Storage offset (from data()) of a multi-index.
  int64_t offsetOf(const std::vector<int64_t>& index) const;

  // A row-major copy (what outputs are returned as).
  HostTensor contiguous() const;

 private:
  DataType dtype_ = DataType::Null;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  int64_t offset_ = 0;
  std::shared_ptr<void> storage_;  // keeps the memory alive
  uint8_t* base_ = nullptr;
};

using HostValue = std::variant<HostTensor, ScalarValue>;

// Calls fn(index) for every multi-index of `sizes` in row-major order (nothing when a size is 0).
template <typename Fn>
void forEachIndex(const std::vector<int64_t>& sizes, Fn&& fn) {
  for (int64_t s : sizes) {
    if (s == 0) return;
  }
  std::vector<int64_t> index(sizes.size(), 0);
  while (true) {
    fn(index);
    int64_t d = static_cast<int64_t>(sizes.size()) - 1;
    for (; d >= 0; --d) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace braze
