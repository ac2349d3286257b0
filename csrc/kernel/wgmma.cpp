#include "kernel/wgmma.h"

namespace braze::kernel {

bool wgmmaTakes(DataType dtype) {
  switch (dtype) {
    case DataType::BFloat16:
    case DataType::Half:
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Float8_e4m3fn:
    case DataType::Float8_e5m2: return true;
    default: return false;
  }
}

bool wgmmaTakesMnMajor(DataType dtype) { return dtype == DataType::BFloat16 || dtype == DataType::Half; }

int64_t swizzle128(int64_t x) { return x ^ (((x >> 7) & 7) << 4); }

int64_t wgmmaElementByte(const WgmmaOperand& op, int64_t start, int64_t mn, int64_t k, int64_t element_bytes) {
  int64_t logical;
  if (op.mn_major) {
    const int64_t line = 128 / element_bytes;
    logical = start + (mn / line) * op.leading_bytes + (k / 8) * op.stride_bytes + (k % 8) * 128 + (mn % line) * element_bytes;
  } else {
    logical = start + (mn / 8) * op.stride_bytes + (mn % 8) * 128 + k * element_bytes;
  }
  return swizzle128(logical);
}

uint64_t wgmmaDescriptor(const WgmmaOperand& op, int64_t start) {
  auto encode = [](int64_t bytes) { return static_cast<uint64_t>((bytes & 0x3FFFF) >> 4); };
  // A k-major swizzled operand has no leading offset; PTX asks for 1 there.
  const uint64_t leading = op.mn_major ? encode(op.leading_bytes) : 1;
  return encode(start) | (leading << 16) | (encode(op.stride_bytes) << 32) | (uint64_t{1} << 62);
}

MatrixPosition wgmmaDPosition(int t, int i) {
  const int lane = t % 32;
  return {16 * (t / 32) + lane / 4 + 8 * ((i / 2) % 2), 8 * (i / 4) + 2 * (lane % 4) + i % 2};
}

}  // namespace braze::kernel
