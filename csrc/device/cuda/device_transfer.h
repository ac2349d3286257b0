// Host tensors copied into a GPU's memory and back, for tests and tools that feed a FusionCache from
// host data: the copy keeps the tensor's layout (strides, offset) and its first element's address
// modulo 256, which plans depend on (a misaligned input is planned with narrow accesses, an aligned one
// with 16-byte vectors).
#pragma once

#include "ir/host_tensor.h"
#include "device/cuda/device_buffer.h"
#include "device/device_tensor.h"

namespace braze::device {

struct UploadedTensor {
  DeviceBuffer buffer;
  DeviceTensor tensor;
};
// On device `ordinal`: only the elements the tensor can reach are copied (an expanded dim once).
UploadedTensor uploadToDevice(const HostTensor& t, int ordinal = 0);
// Any device tensor (strided, a view) as a new row-major host tensor, after the device's queued work.
HostTensor downloadFromDevice(const DeviceTensor& t);

// The elements a tensor can touch, in elements from its first one: [lo, hi). Stride-0 dims add nothing.
struct ElementSpan {
  int64_t lo = 0;
  int64_t hi = 0;
};
ElementSpan elementSpan(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);

// Where a copy of a tensor goes in a fresh 256-byte aligned buffer so that its first element keeps its
// address modulo 256: the buffer's size, and the first element's byte offset in it.
struct AlignedPlacement {
  int64_t bytes = 0;
  int64_t first = 0;
};
AlignedPlacement alignedPlacement(const void* first_element, const ElementSpan& span, int64_t item);

}  // namespace braze::device
