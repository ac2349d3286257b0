// Element types of tensors and scalars, their properties, and PyTorch's type promotion.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace braze {

enum class DataType : uint8_t {
  Null,  // "no dtype given": keyword defaults, e.g. sum(dtype=Null) keeps the input's type
  Bool,
  Int8,
  UInt8,
  Int16,
  Int32,
  Int64,
  Half,
  BFloat16,
  Float,
  Double,
  Float8_e4m3fn,
  Float8_e5m2,
  Float8_e4m3fnuz,
  Float8_e5m2fnuz,
};

inline constexpr DataType kAllDataTypes[] = {
    DataType::Bool,          DataType::Int8,          DataType::UInt8,           DataType::Int16,
    DataType::Int32,         DataType::Int64,         DataType::Half,            DataType::BFloat16,
    DataType::Float,         DataType::Double,        DataType::Float8_e4m3fn,   DataType::Float8_e5m2,
    DataType::Float8_e4m3fnuz, DataType::Float8_e5m2fnuz,
};

// nvFuser's Python spelling ("Float", "BFloat16", "Float8_e4m3fn"); also the printer's.
std::string_view toString(DataType dtype);
std::optional<DataType> dataTypeFromString(std::string_view name);
// The CUDA C++ type name used by kernels ("__nv_bfloat16", "int64_t").
std::string_view cudaTypeName(DataType dtype);
// The name numpy (with ml_dtypes for bf16 and fp8), torch and JAX give the dtype ("float32", "bfloat16").
std::string_view arrayTypeName(DataType dtype);
std::optional<DataType> dataTypeFromArrayName(std::string_view name);
bool numpyHasType(DataType dtype);  // without ml_dtypes
// DLPack's type code for the dtype (its bits are sizeOf(dtype) * 8), and back.
int dlpackCode(DataType dtype);
std::optional<DataType> dataTypeFromDlpack(int code, int64_t bits);

int64_t sizeOf(DataType dtype);  // bytes per element
// The bytes of a buffer of max(numel, 1) elements (an empty tensor still gets one), or a Value error where
// that count passes int64.
int64_t bufferBytes(int64_t numel, DataType dtype);
bool isFloating(DataType dtype);   // includes the fp8 types
bool isFloat8(DataType dtype);
bool isIntegral(DataType dtype);   // excludes Bool
bool isSigned(DataType dtype);
bool isBool(DataType dtype);
// Range of an integer type (Bool is [0, 1]); used by quantize and by integer wrap-around.
int64_t integerMin(DataType dtype);
int64_t integerMax(DataType dtype);

// PyTorch's promote_types for two tensor dtypes: the smallest type that holds both. Mixing bf16
// with half gives Float, fp8 with any other float gives that float (two different fp8 types: Float).
DataType promoteTypes(DataType a, DataType b);

// The category of a type for scalar-vs-tensor promotion: a scalar only changes the result type
// when it is of a higher category than every tensor operand (tensor int8 + python 2.0 -> Float).
enum class TypeCategory { Bool, Integral, Floating };
TypeCategory categoryOf(DataType dtype);

// The default type of a category (Int64 / Float), what torch picks for int tensor + float scalar.
DataType defaultTypeOf(TypeCategory category);

}  // namespace braze
