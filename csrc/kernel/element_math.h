// One element of an elementwise op in the terms kernels use: operands as their compute-type values
// (codegen/source_ops.h: floats already rounded to their dtype, integers wrapped to theirs), the result rounded
// or wrapped to the output's dtype. The CPU simulator runs kernels through simElementwise/simCast;
// codegen/source_ops.cpp emits kernel C++ from the same decisions (computesInFloat, integerMathDtype), and both
// reuse the reference's math (reference/pointwise_math.h), so there is one definition of each op.
#pragma once

#include "ir/data_type.h"
#include "ir/op_kind.h"

#include <cstdint>
#include <span>

namespace braze::kernel {

// Whether the reference computes `kind` in float64 (true) or exactly in int64 (false). evalElementwise
// decides it from the promoted operand type, which needs to know which operands are tensors; the
// decision itself needs only dtypes: a float result, a FloatOfPromoted op, or (for ops returning Bool)
// any floating operand. Cast computes in float when its operand is floating.
bool computesInFloat(OpKind kind, DataType result_dtype, std::span<const DataType> operand_dtypes);

// The dtype integer math depends on (shift widths, signedness, bitwise_not of Bool): the promoted
// operand type, which equals the result dtype for every op whose integer math reads it.
DataType integerMathDtype(OpKind kind, DataType result_dtype, std::span<const DataType> operand_dtypes);

// A value as kernels hold it: f for floating dtypes (a double already rounded to the dtype), i for
// integers (wrapped to the dtype) and Bool (0 or 1).
struct SimValue {
  double f = 0;
  int64_t i = 0;
};

// One element of op `kind` (Unary, Binary, Ternary; Cast forwards to simCast), as the reference stores
// it for an output of `result_dtype`. A floating operand of an op computed in int64 (a Python float
// bound of clamp on an integer tensor) truncates toward zero, saturating, as kernels convert it.
// Throws where the reference throws (integer division by zero, silu of an integer).
SimValue simElementwise(OpKind kind, DataType result_dtype, std::span<const SimValue> operands,
                        std::span<const DataType> operand_dtypes);
// cast(value) from `from` to `to`, as the reference's CastOp stores it.
SimValue simCast(SimValue value, DataType from, DataType to);

}  // namespace braze::kernel
