// Warpgroup matrix multiply-accumulate (PTX wgmma.mma_async, sm_90a): the four warps of a warpgroup
// compute D += A B on a 64 x n tile (n a multiple of 8, at most 256; of 16 above 32 for 8-bit operands),
// k = 32 bytes of operand (16 bf16 or f16 values, 32 s8, u8, e4m3 or e5m2), A and B read straight from
// shared memory through 64-bit matrix descriptors. D is f32, or s32 for integer operands. These functions are the PTX ISA's
// tables ("Matrix Descriptor Format", "Shared Memory Matrix Layout", "Register Fragments"), shared by the
// simulator, which reads the operands where the hardware would, and the lowering, which stores them there.
//
// Only the 128-byte swizzle is used. An operand is a grid of 16-byte chunks in 128-byte lines, eight
// lines to a 1024-byte pattern; the chunk at byte address x is stored at x with bits 4-6 exclusive-ored
// with bits 7-9 (its line within the pattern), so patterns start at multiples of 1024 bytes.
//   k-major (a line per m or n, K along it): element (mn, k) at start + (mn / 8) * SBO + (mn % 8) * 128 + k * e
//   mn-major (a line per k, M or N along it; 16-bit operands only, PTX's transposed form): element (mn, k) at
//     start + (mn / L) * LBO + (k / 8) * SBO + (k % 8) * 128 + (mn % L) * e,  L = 128 / e elements per line
// (e: element bytes; LBO, SBO: the descriptor's leading and stride byte offsets). A k step within a line
// advances the start by 16 e bytes.
//   D: thread t of the warpgroup holds n / 2 values; value i is at row 16 (t / 32) + (t % 32) / 4 +
//     8 ((i / 2) % 2), column 8 (i / 4) + 2 (t % 4) + i % 2 (the mma.m16n8 C layout, a warp per 16 rows).
#pragma once

#include "ir/data_type.h"
#include "kernel/mma_fragments.h"

#include <cstdint>

namespace braze::kernel {

struct WgmmaOperand {
  bool mn_major = false;         // lines along M or N (transposed) or along K
  int32_t leading_bytes = 0;     // LBO: mn-major, between groups of L elements along M / N; unused k-major
  int32_t stride_bytes = 0;      // SBO: between groups of 8 lines (m or n k-major, k mn-major)
  bool operator==(const WgmmaOperand&) const = default;
};

constexpr int kWgmmaM = 64;
// K of one wgmma: 32 bytes of operand.
constexpr int64_t wgmmaK(int64_t element_bytes) { return 32 / element_bytes; }
// Whether wgmma takes operands of `dtype` (bf16, f16, s8, u8, e4m3fn, e5m2), and whether in mn-major order.
bool wgmmaTakes(DataType dtype);
bool wgmmaTakesMnMajor(DataType dtype);

// The shared byte address the hardware reads element (mn, k) of an operand at, `start` its descriptor's
// start address.
int64_t wgmmaElementByte(const WgmmaOperand& op, int64_t start, int64_t mn, int64_t k, int64_t element_bytes);
// The swizzled address of logical byte address x (bits 4-6 ^= bits 7-9).
int64_t swizzle128(int64_t x);
// The descriptor of the operand starting at shared byte `start` (128-byte swizzle, base offset 0).
uint64_t wgmmaDescriptor(const WgmmaOperand& op, int64_t start);
// D value i of warpgroup thread t (0..127).
MatrixPosition wgmmaDPosition(int t, int i);

}  // namespace braze::kernel
