// Warp-level matrix multiply-accumulate (PTX mma.sync.aligned.<shape>.row.col): D = A B + C on one
// 16 x 8 tile, the 32 lanes of a warp each holding a fragment of A, B, C and D. Which element of which
// matrix a lane's fragment value i is, is fixed by the PTX ISA ("Matrix Fragments for mma.m16n8k16 /
// mma.m16n8k32"); these functions are that table, shared by the simulator (which gathers the matrices
// from the lanes) and the lowering that loads fragments. With g = lane / 4 and t = lane % 4:
//   m16n8k16 (bf16/f16 A and B, f32 C and D): A value i at row g + 8 * (i / 2 % 2), col 2t + i % 2 + 8 * (i / 4);
//     B value i at row 2t + i % 2 + 8 * (i / 2), col g.
//   m16n8k32 (s8/u8 A and B with s32 C and D, or e4m3/e5m2 with f32 C and D, sm_89 on): A value i at row
//     g + 8 * (i / 4 % 2), col 4t + i % 4 + 16 * (i / 8);
//     B value i at row 4t + i % 4 + 16 * (i / 4), col g.
//   C and D (both): value i at row g + 8 * (i / 2), col 2t + i % 2.
#pragma once

#include "ir/data_type.h"

#include <cstdint>
#include <string_view>

namespace braze::kernel {

enum class MmaShape : uint8_t {
  M16N8K16,  // bf16 or f16 operands, f32 accumulators: per lane 8 values of A, 4 of B, 4 of C and D
  M16N8K32,  // s8/u8 (s32 accumulators) or e4m3/e5m2 (f32): per lane 16 values of A, 8 of B, 4 of C and D
};
std::string_view toString(MmaShape shape);  // "m16n8k16"

struct MmaDims {
  int m, n, k;
  int a_values, b_values, c_values;  // per lane
};
MmaDims mmaDims(MmaShape shape);

// The mma.sync shape for an operand dtype: k16 for 16-bit operands, k32 for 8-bit ones.
MmaShape mmaShapeFor(DataType operand);
// Whether `operand` is one of a shape's operand dtypes, and the accumulator dtype it takes (Float, Int32).
bool mmaTakes(MmaShape shape, DataType operand);
DataType mmaAccumulator(MmaShape shape, DataType operand);
// The first compute capability (major * 10 + minor) with that mma: 80, or 89 for fp8 operands.
int mmaMinimumSm(DataType operand);

struct MatrixPosition {
  int row, col;
};
MatrixPosition mmaAPosition(MmaShape shape, int lane, int i);
MatrixPosition mmaBPosition(MmaShape shape, int lane, int i);
MatrixPosition mmaCPosition(int lane, int i);  // C and D

}  // namespace braze::kernel
