#include "ir/data_type.h"

#include "support/error.h"

#include <algorithm>
#include <array>
#include <limits>

namespace braze {
namespace {

// DLPack's DLDataTypeCode values (dlpack.h 1.1).
enum DlpackCode : int { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kBool = 6, kE4m3fn = 10, kE4m3fnuz = 11,
                        kE5m2 = 12, kE5m2fnuz = 13 };

// The one dtype table: every other place (Python's dtype mappings, the DLPack and torch bindings)
// reads it through the functions below.
struct TypeInfo {
  DataType dtype;
  std::string_view name;     // nvFuser's spelling
  std::string_view cuda;
  int64_t bytes;
  std::string_view array;    // numpy / ml_dtypes / torch / JAX name
  bool numpy_native;         // numpy has it without ml_dtypes
  int dlpack;
};

constexpr std::array<TypeInfo, 15> kTypeInfo{{
    {DataType::Null, "Null", "void", 0, "", false, -1},
    {DataType::Bool, "Bool", "bool", 1, "bool", true, kBool},
    {DataType::Int8, "Int8", "int8_t", 1, "int8", true, kInt},
    {DataType::UInt8, "UInt8", "uint8_t", 1, "uint8", true, kUInt},
    {DataType::Int16, "Int16", "int16_t", 2, "int16", true, kInt},
    {DataType::Int32, "Int32", "int32_t", 4, "int32", true, kInt},
    {DataType::Int64, "Int64", "int64_t", 8, "int64", true, kInt},
    {DataType::Half, "Half", "__half", 2, "float16", true, kFloat},
    {DataType::BFloat16, "BFloat16", "__nv_bfloat16", 2, "bfloat16", false, kBfloat},
    {DataType::Float, "Float", "float", 4, "float32", true, kFloat},
    {DataType::Double, "Double", "double", 8, "float64", true, kFloat},
    {DataType::Float8_e4m3fn, "Float8_e4m3fn", "__nv_fp8_e4m3", 1, "float8_e4m3fn", false, kE4m3fn},
    {DataType::Float8_e5m2, "Float8_e5m2", "__nv_fp8_e5m2", 1, "float8_e5m2", false, kE5m2},
    {DataType::Float8_e4m3fnuz, "Float8_e4m3fnuz", "__hip_fp8_e4m3_fnuz", 1, "float8_e4m3fnuz", false, kE4m3fnuz},
    {DataType::Float8_e5m2fnuz, "Float8_e5m2fnuz", "__hip_fp8_e5m2_fnuz", 1, "float8_e5m2fnuz", false, kE5m2fnuz},
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

int64_t bufferBytes(int64_t numel, DataType dtype) {
  int64_t bytes = 0;
  BRAZE_CHECK(!__builtin_mul_overflow(std::max<int64_t>(numel, 1), sizeOf(dtype), &bytes),
              "a tensor of {} elements of {} would take more bytes than a 64-bit count holds", numel,
              toString(dtype));
  return bytes;
}

std::string_view arrayTypeName(DataType dtype) { return info(dtype).array; }
bool numpyHasType(DataType dtype) { return info(dtype).numpy_native; }
int dlpackCode(DataType dtype) { return info(dtype).dlpack; }

std::optional<DataType> dataTypeFromArrayName(std::string_view name) {
  for (const auto& entry : kTypeInfo) {
    if (!entry.array.empty() && entry.array == name) return entry.dtype;
  }
  return std::nullopt;
}

std::optional<DataType> dataTypeFromDlpack(int code, int64_t bits) {
  for (const auto& entry : kTypeInfo) {
    if (entry.dlpack == code && entry.bytes * 8 == bits) return entry.dtype;
  }
  return std::nullopt;
}

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
