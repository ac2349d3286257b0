#include "ir/data_type.h"

#include "support/error.h"

#include <array>
#include <limits>

namespace braze {
namespace {

struct TypeInfo {
  DataType dtype;
  std::string_view name;
  std::string_view cuda;
  int64_t bytes;
};

constexpr std::array<TypeInfo, 15> kTypeInfo{{
    {DataType::Null, "Null", "void", 0},
    {DataType::Bool, "Bool", "bool", 1},
    {DataType::Int8, "Int8", "int8_t", 1},
    {DataType::UInt8, "UInt8", "uint8_t", 1},
    {DataType::Int16, "Int16", "int16_t", 2},
    {DataType::Int32, "Int32", "int32_t", 4},
    {DataType::Int64, "Int64", "int64_t", 8},
    {DataType::Half, "Half", "__half", 2},
    {DataType::BFloat16, "BFloat16", "__nv_bfloat16", 2},
    {DataType::Float, "Float", "float", 4},
    {DataType::Double, "Double", "double", 8},
    {DataType::Float8_e4m3fn, "Float8_e4m3fn", "__nv_fp8_e4m3", 1},
    {DataType::Float8_e5m2, "Float8_e5m2", "__nv_fp8_e5m2", 1},
    {DataType::Float8_e4m3fnuz, "Float8_e4m3fnuz", "__hip_fp8_e4m3_fnuz", 1},
    {DataType::Float8_e5m2fnuz, "Float8_e5m2fnuz", "__hip_fp8_e5m2_fnuz", 1},
}};

const TypeInfo& info(DataType dtype) {
  const auto index = static_cast<size_t>(dtype);
  BRAZE_ASSERT(index < kTypeInfo.size(), "unknown DataType {}", index);
  return kTypeInfo[index];
}

}  // namespace

std::string_view toString(DataType dtype) { return info(dtype).name; }
std::string_view cudaTypeName(DataType dtype) { return info(dtype).cuda; }
int64_t sizeOf(DataType dtype) { return info(dtype).bytes; }

std::optional<DataType> dataTypeFromString(std::string_view name) {
  for (const auto& entry : kTypeInfo) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

bool isFloat8(DataType dtype) {
  return dtype == DataType::Float8_e4m3fn || dtype == DataType::Float8_e5m2 ||
         dtype == DataType::Float8_e4m3fnuz || dtype == DataType::Float8_e5m2fnuz;
}

bool isFloating(DataType dtype) {
  return dtype == DataType::Half || dtype == DataType::BFloat16 || dtype == DataType::Float ||
         dtype == DataType::Double || isFloat8(dtype);
}

bool isIntegral(DataType dtype) {
  return dtype == DataType::Int8 || dtype == DataType::UInt8 || dtype == DataType::Int16 ||
         dtype == DataType::Int32 || dtype == DataType::Int64;
}

bool isSigned(DataType dtype) { return isFloating(dtype) || (isIntegral(dtype) && dtype != DataType::UInt8); }
bool isBool(DataType dtype) { return dtype == DataType::Bool; }

int64_t integerMin(DataType dtype) {
  switch (dtype) {
    case DataType::Bool: return 0;
    case DataType::Int8: return std::numeric_limits<int8_t>::min();
    case DataType::UInt8: return 0;
    case DataType::Int16: return std::numeric_limits<int16_t>::min();
    case DataType::Int32: return std::numeric_limits<int32_t>::min();
    case DataType::Int64: return std::numeric_limits<int64_t>::min();
    default: BRAZE_UNREACHABLE("integerMin of non-integer type {}", toString(dtype));
  }
}

int64_t integerMax(DataType dtype) {
  switch (dtype) {
    case DataType::Bool: return 1;
    case DataType::Int8: return std::numeric_limits<int8_t>::max();
    case DataType::UInt8: return std::numeric_limits<uint8_t>::max();
    case DataType::Int16: return std::numeric_limits<int16_t>::max();
    case DataType::Int32: return std::numeric_limits<int32_t>::max();
    case DataType::Int64: return std::numeric_limits<int64_t>::max();
    default: BRAZE_UNREACHABLE("integerMax of non-integer type {}", toString(dtype));
  }
}

TypeCategory categoryOf(DataType dtype) {
  if (isBool(dtype)) return TypeCategory::Bool;
  if (isIntegral(dtype)) return TypeCategory::Integral;
  BRAZE_ASSERT(isFloating(dtype), "categoryOf({})", toString(dtype));
  return TypeCategory::Floating;
}

DataType defaultTypeOf(TypeCategory category) {
  switch (category) {
    case TypeCategory::Bool: return DataType::Bool;
    case TypeCategory::Integral: return DataType::Int64;
    case TypeCategory::Floating: return DataType::Float;
  }
  BRAZE_UNREACHABLE("bad TypeCategory");
}

DataType promoteTypes(DataType a, DataType b) {
  BRAZE_ASSERT(a != DataType::Null && b != DataType::Null, "promoteTypes with Null");
  if (a == b) return a;
  if (isBool(a)) return b;
  if (isBool(b)) return a;
  const bool a_float = isFloating(a);
  const bool b_float = isFloating(b);
  if (a_float != b_float) return a_float ? a : b;  // float wins over any integer, whatever its width
  if (a_float) {
    // fp8 mixed with a wider float gives the wider one; two different fp8 types meet at Float
    // (PyTorch refuses that pair; Float is the smallest type holding both and is what users mean).
    if (isFloat8(a) && isFloat8(b)) return DataType::Float;
    if (isFloat8(a)) return b;
    if (isFloat8(b)) return a;
    // Half and BFloat16 each have range or precision the other lacks.
    if ((a == DataType::Half && b == DataType::BFloat16) || (a == DataType::BFloat16 && b == DataType::Half)) {
      return DataType::Float;
    }
    return sizeOf(a) >= sizeOf(b) ? a : b;
  }
  // Integers: UInt8 with a signed type needs the next wider signed type (uint8 + int8 -> int16).
  if (a == DataType::UInt8 || b == DataType::UInt8) {
    const DataType other = a == DataType::UInt8 ? b : a;
    return other == DataType::Int8 ? DataType::Int16 : other;
  }
  return sizeOf(a) >= sizeOf(b) ? a : b;
}

}  // namespace braze
