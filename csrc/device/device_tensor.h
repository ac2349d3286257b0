// Tensors in a device's memory as the execute path sees them (host addresses on the simulated device): what DLPack describes (a pointer to the
// first element, sizes and strides in elements, a dtype, a device), and the outputs it hands back.
#pragma once

#include "ir/data_type.h"
#include "ir/strided_layout.h"
#include "ir/host_tensor.h"
#include "device/device_handles.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

namespace braze::device {

struct DeviceTensor {
  DevicePtr data = 0;  // address of element [0, ..., 0]
  DataType dtype = DataType::Float;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in elements
  int device = 0;                // CUDA device ordinal; -1: host memory (a 0-d CPU scalar input)

  // A row-major tensor at `data` (what DLPack means by a tensor without strides).
  static DeviceTensor contiguous(DevicePtr data, DataType dtype, std::vector<int64_t> sizes, int device = 0) {
    std::vector<int64_t> strides = StridedLayout::rowMajor(sizes).strides;
    return {data, dtype, std::move(sizes), std::move(strides), device};
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

using DeviceValue = std::variant<DeviceTensor, ScalarValue>;

struct DeviceOutput {
  DeviceTensor tensor;
  // Keeps the memory alive; releasing the last reference returns it to the stream-ordered pool. Null
  // for a view of an input (alias_of says which): the caller keeps that input alive.
  std::shared_ptr<void> owner;
  int64_t alias_of = -1;  // index of the fusion input whose memory this output views, or -1
  bool caller_allocated = false;  // written into memory the run's OutputAllocator gave (owner is null)
  std::optional<ScalarValue> scalar;  // a scalar output (tensor is then empty), known from the plan
};

// Memory for an output the caller will own (torch's caching allocator, say): asked for each output that
// is a whole buffer of its own (not a view of an input or of another output), with its dtype, sizes and
// row-major strides; returns the address to write it at (16-byte aligned), which must stay valid until
// the caller's stream has run the kernels, or 0 to leave that output to the stream-ordered pool.
using OutputAllocator = std::function<DevicePtr(size_t output, const DeviceTensor& spec)>;

}  // namespace braze::device
