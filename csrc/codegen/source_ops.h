// The kernel C++ of every elementwise op, the same text for CUDA and HIP (source_preamble.h defines the
// helpers it calls in each dialect): expressions that compute in a kernel what the reference evaluator
// computes for one element (reference/eval_elementwise.cpp), up to the last-ulp differences of the
// vendor's float math functions (sinf, expf, powf ...) from float64 libm.
//
// Kernels hold the value of a Val in its compute type (computeTypeOf): `float` for Half, BFloat16,
// Float and the fp8 types (already rounded to the dtype), `double` for Double, `long long` for every
// integer type (wrapped to the dtype) and `bool` for Bool. Tensor elements are stored in
// storageTypeName and converted on load and store. The decisions of which domain an op computes
// in are shared with the simulator's twin, kernel/element_math.h.
//
// Float math runs in `float`, unless the result or an operand is Double or an operand is Int32/Int64
// (values float cannot hold: eq(int32 x, 16777216.0) must not round x), then in `double`. add, sub, mul,
// div, sqrt round once each (__fadd_rn ...), so a product is never contracted into an FMA with a later
// op: the reference rounds every op's result. Integer math runs on long long and wraps like the
// reference; where the reference throws per element (integer division by zero, 0 ** -1), kernels
// cannot, and give 0.
#pragma once

#include "codegen/source_preamble.h"
#include "ir/data_type.h"
#include "kernel/kernel_ir.h"
#include "ir/op_kind.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace braze::codegen {

// The C++ name of computeTypeOf(dtype): "float", "double", "long long" or "bool".
std::string_view computeTypeName(DataType dtype);
// How a tensor element is stored: the preamble's "braze_half", "braze_bf16", "braze_e4m3fn", "braze_e5m2",
// "braze_e4m3fnuz", "braze_e5m2fnuz" for the narrow floats (each dialect says what they are), "signed char",
// "unsigned char", "short", "int", "long long", "bool", "float", "double".
std::string_view storageTypeName(DataType dtype);

// An operand: a C++ expression of type computeTypeName(dtype), where dtype is the Val's dtype.
struct Operand {
  std::string expr;
  DataType dtype;
};

// A C++ expression equal to what the reference stores for one element of op `kind` (Unary, Binary,
// Ternary with addcmul's operands x, t1, t2, value; Cast forwards to castExpr) whose output Val has
// dtype `result_dtype`. The expression has type computeTypeName(result_dtype) and is already
// rounded or wrapped to result_dtype. Each operand's expression appears in it exactly once. Throws a type
// error where the reference has no math for the op (silu of an integer).
std::string elementwiseExpr(OpKind kind, DataType result_dtype, std::span<const Operand> operands);

// cast(value) to `to` as the reference's CastOp: floats round to nearest even (fp8 saturating to
// the largest finite value), float -> integer truncates and saturates (NaN -> 0), integers wrap.
std::string castExpr(const Operand& value, DataType to);

// A loaded element (an expression of storageTypeName(dtype)) as its compute type, and a
// compute-type value as the element to store, rounded as HostTensor::writeDouble rounds.
std::string fromStorageExpr(std::string_view stored, DataType dtype);
std::string toStorageExpr(std::string_view value, DataType dtype);

// A constant of `dtype` as a C++ expression of its compute type, rounded or wrapped to the dtype
// (floats to nearest even, float -> integer saturating). inf, NaN and -0.0 are spelled exactly.
// The reference keeps a scalar constant's double unrounded whatever its dtype, so a kernel matches it
// exactly when such constants are passed as Double operands.
std::string literalExpr(double value, DataType dtype);
std::string literalExpr(int64_t value, DataType dtype);

}  // namespace braze::codegen
