#include "kernel/mma_fragments.h"

namespace braze::kernel {

std::string_view toString(MmaShape shape) { return shape == MmaShape::M16N8K16 ? "m16n8k16" : "m16n8k32"; }

MmaDims mmaDims(MmaShape shape) {
  return shape == MmaShape::M16N8K16 ? MmaDims{16, 8, 16, 8, 4, 4} : MmaDims{16, 8, 32, 16, 8, 4};
}

MmaShape mmaShapeFor(DataType operand) {
  return operand == DataType::BFloat16 || operand == DataType::Half ? MmaShape::M16N8K16 : MmaShape::M16N8K32;
}

bool mmaTakes(MmaShape shape, DataType operand) {
  if (shape == MmaShape::M16N8K16) return operand == DataType::BFloat16 || operand == DataType::Half;
  return operand == DataType::Int8 || operand == DataType::UInt8 || operand == DataType::Float8_e4m3fn ||
         operand == DataType::Float8_e5m2;
}

DataType mmaAccumulator(MmaShape, DataType operand) {
  return operand == DataType::Int8 || operand == DataType::UInt8 ? DataType::Int32 : DataType::Float;
}

int mmaMinimumSm(DataType operand) {
  return operand == DataType::Float8_e4m3fn || operand == DataType::Float8_e5m2 ? 89 : 80;
}

MatrixPosition mmaAPosition(MmaShape shape, int lane, int i) {
  const int g = lane / 4, t = lane % 4;
  if (shape == MmaShape::M16N8K16) return {g + 8 * (i / 2 % 2), 2 * t + i % 2 + 8 * (i / 4)};
  return {g + 8 * (i / 4 % 2), 4 * t + i % 4 + 16 * (i / 8)};
}

MatrixPosition mmaBPosition(MmaShape shape, int lane, int i) {
  const int g = lane / 4, t = lane % 4;
  if (shape == MmaShape::M16N8K16) return {2 * t + i % 2 + 8 * (i / 2), g};
  return {4 * t + i % 4 + 16 * (i / 4), g};
}

MatrixPosition mmaCPosition(int lane, int i) { return {lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2}; }

}  // namespace braze::kernel
