// The tensor map a launch passes for each tensor a kernel reads through TMA (TensorParam::tma): what the
// driver's cuTensorMapEncodeTiled is asked to encode, from the map's layout in the kernel IR and the
// pointer bound to the tensor. One pure function, so that the CUDA driver encodes what the kernel was
// lowered for and the simulated device can check each map a plan passes against the same.
#pragma once

#include "kernel/kernel_ir.h"

#include <cstdint>

namespace braze::kernel {

struct TensorMapSpec {
  DataType dtype = DataType::BFloat16;
  uint64_t address = 0;             // the map's element (0, 0): 16-byte aligned
  uint64_t columns = 0, rows = 0;   // columns contiguous
  uint64_t row_stride_bytes = 0;    // a multiple of 16, at least a row's bytes
  uint64_t batches = 1;             // a 3D map's batch dim (1 and stride 0 for a 2D map)
  uint64_t batch_stride_bytes = 0;  // a multiple of 16, at least a batch's rows
  uint32_t box_columns = 0, box_rows = 0;
  bool swizzle = false;             // 128-byte swizzle
  bool operator==(const TensorMapSpec&) const = default;
  unsigned rank() const { return batch_stride_bytes == 0 ? 2 : 3; }
};

// The map of `tensor` (which has a TMA box) bound at `pointer`. Throws, naming the tensor, where the
// pointer leaves the map's start unaligned (a caller's tensor at an odd address).
TensorMapSpec tensorMapSpec(const TensorParam& tensor, uint64_t pointer);

// A tensor map parameter's 128 bytes (CUtensorMap's size and alignment), as the launch passes them.
struct alignas(64) TensorMapBytes {
  uint64_t words[16] = {};
};

// CUtensorMapDataType of `dtype` (the driver's enum value); throws for a dtype TMA does not move.
int tensorMapDataType(DataType dtype);

}  // namespace braze::kernel
