#include "kernel/tensor_map.h"

#include "support/error.h"

#include <fmt/format.h>

namespace braze::kernel {

TensorMapSpec tensorMapSpec(const TensorParam& tensor, uint64_t pointer) {
  BRAZE_ASSERT(tensor.tma.has_value(), "a tensor map for {}, which no TMA load reads", tensor.name);
  const TensorParam::TmaBox& box = *tensor.tma;
  const StridedLayout& map = box.map;
  const auto element = static_cast<uint64_t>(sizeOf(tensor.dtype));
  TensorMapSpec spec;
  spec.dtype = tensor.dtype;
  spec.address = pointer + static_cast<uint64_t>(map.offset) * element;
  const size_t r = map.sizes.size() - 2;  // the rows' dim: 1 after a 3D map's batch dim
  spec.rows = static_cast<uint64_t>(map.sizes[r]);
  spec.columns = static_cast<uint64_t>(map.sizes[r + 1]);
  spec.row_stride_bytes = static_cast<uint64_t>(map.strides[r]) * element;
  if (r == 1) {
    spec.batches = static_cast<uint64_t>(map.sizes[0]);
    spec.batch_stride_bytes = static_cast<uint64_t>(map.strides[0]) * element;
  }
  spec.box_rows = static_cast<uint32_t>(box.box_rows);
  spec.box_columns = static_cast<uint32_t>(box.box_columns);
  spec.swizzle = box.swizzle;
  BRAZE_CHECK(spec.address % 16 == 0,
              "{} is read through a TMA tensor map, which needs its start 16-byte aligned, but it starts at {:#x} "
              "(pass a tensor at a 16-byte aligned address)",
              tensor.name, spec.address);
  BRAZE_ASSERT(spec.row_stride_bytes % 16 == 0 && spec.row_stride_bytes >= spec.columns * element,
               "{}'s tensor map rows are {} bytes apart, for {} bytes of columns", tensor.name, spec.row_stride_bytes,
               spec.columns * element);
  BRAZE_ASSERT(r == 0 || (spec.batch_stride_bytes % 16 == 0 && spec.batch_stride_bytes >= spec.rows * spec.row_stride_bytes),
               "{}'s tensor map batches are {} bytes apart, for {} rows of {} bytes", tensor.name,
               spec.batch_stride_bytes, spec.rows, spec.row_stride_bytes);
  return spec;
}

int tensorMapDataType(DataType dtype) {
  switch (dtype) {
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Float8_e4m3fn:
    case DataType::Float8_e5m2: return 0;  // CU_TENSOR_MAP_DATA_TYPE_UINT8: the bytes as they are
    case DataType::Half: return 6;        // FLOAT16
    case DataType::Float: return 7;       // FLOAT32
    case DataType::BFloat16: return 9;    // BFLOAT16
    default: break;
  }
  throwError(ErrorKind::Internal, __FILE__, __LINE__, fmt::format("TMA does not move {} values", toString(dtype)));
}

}  // namespace braze::kernel
