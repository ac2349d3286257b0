// The CUDA C++ of every elementwise op: expressions that compute in a kernel what the reference
// evaluator computes for one element (reference/eval_elementwise.cpp), up to the last-ulp differences
// of CUDA's float math functions (sinf, expf, powf ...) from float64 libm.
//
// Kernels hold the value of a Val in its compute type (computeTypeOf): `float` for Half, BFloat16,
// Float and the fp8 types (already rounded to the dtype), `double` for Double, `long long` for every
// integer type (wrapped to the dtype) and `bool` for Bool. Tensor elements are stored in
// cudaStorageTypeName and converted on load and store. The decisions of which domain an op computes
// in are shared with the simulator's twin, kernel/element_math.h.
//
// Float math runs in `float`, unless the result or an operand is Double or an operand is Int32/Int64
// (values float cannot hold: eq(int32 x, 16777216.0) must not round x), then in `double`. add, sub, mul,
// div, sqrt round once each (__fadd_rn ...), so a product is never contracted into an FMA with a later
// op: the reference rounds every op's result. Integer math runs on long long and wraps like the
// reference; where the reference throws per element (integer division by zero, 0 ** -1), kernels
// cannot, and give 0.
#pragma once

#include "ir/data_type.h"
#include "kernel/kernel_ir.h"
#include "ir/op_kind.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace braze::kernel {

// The C++ name of computeTypeOf(dtype): "float", "double", "long long" or "bool".
std::string_view cudaComputeTypeName(DataType dtype);
// How a tensor element is stored: "__nv_bfloat16", "__half", "__nv_fp8_e4m3", "__nv_fp8_e5m2",
// "unsigned char" for the two fnuz fp8 types (CUDA has no type for them), "signed char", "unsigned char",
// "short", "int", "long long", "bool", "float", "double".
std::string_view cudaStorageTypeName(DataType dtype);

// The includes (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h) and `__device__ __forceinline__ braze_*`
// helpers every kernel source starts with: once-rounded float arithmetic, Python remainder, integer pow
// and gcd, shifts of a given width, fp8 fnuz conversions in software (bit for bit numerics.cpp),
// CUDA-style saturating float -> integer conversion, rounding to each narrow float type.
// `fp8`: also CUDA's e4m3fn/e5m2 conversions and cuda_fp8.h, which only kernels with those dtypes need.
std::string cudaOpsPreamble(bool fp8);
// braze_uniform_unit and braze_standard_normal: ir/random_numbers.cpp's Philox numbers, in CUDA.
std::string cudaRandomPreamble();

// An operand: a C++ expression of type cudaComputeTypeName(dtype), where dtype is the Val's dtype.
struct Operand {
  std::string expr;
  DataType dtype;
};

// A C++ expression equal to what the reference stores for one element of op `kind` (Unary, Binary,
// Ternary with addcmul's operands x, t1, t2, value; Cast forwards to cudaCast) whose output Val has
// dtype `result_dtype`. The expression has type cudaComputeTypeName(result_dtype) and is already
// rounded or wrapped to result_dtype. Each operand's expression appears in it exactly once. Throws a type
// error where the reference has no math for the op (silu of an integer).
std::string cudaElementwise(OpKind kind, DataType result_dtype, std::span<const Operand> operands);

// cast(value) to `to` as the reference's CastOp: floats round to nearest even (fp8 saturating to
// the largest finite value), float -> integer truncates and saturates (NaN -> 0), integers wrap.
std::string cudaCast(const Operand& value, DataType to);

// A loaded element (an expression of cudaStorageTypeName(dtype)) as its compute type, and a
// compute-type value as the element to store, rounded as HostTensor::writeDouble rounds.
std::string cudaFromStorage(std::string_view stored, DataType dtype);
std::string cudaToStorage(std::string_view value, DataType dtype);

// A constant of `dtype` as a C++ expression of its compute type, rounded or wrapped to the dtype
// (floats to nearest even, float -> integer saturating). inf, NaN and -0.0 are spelled exactly.
// The reference keeps a scalar constant's double unrounded whatever its dtype, so a kernel matches it
// exactly when such constants are passed as Double operands.
std::string cudaLiteral(double value, DataType dtype);
std::string cudaLiteral(int64_t value, DataType dtype);

}  // namespace braze::kernel
