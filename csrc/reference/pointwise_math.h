// The math of every elementwise op on one element, in the two domains the reference computes in:
// float64 for floating results, exact int64 (wrapped to the dtype on store) for integers and bools.
#pragma once

#include "ir/data_type.h"
#include "ir/numerics.h"
#include "ir/op_kind.h"

#include <cstdint>
#include <span>

namespace braze::reference {

// `dtype` is the type the op computes in (the promoted operand type): some ops depend on its width
// (shifts, nextafter) or on whether it is signed.
double unaryFloat(OpKind kind, double x, DataType dtype);
int64_t unaryInt(OpKind kind, int64_t x, DataType dtype);
double binaryFloat(OpKind kind, double a, double b, DataType dtype);
int64_t binaryInt(OpKind kind, int64_t a, int64_t b, DataType dtype);
// where(cond, a, b), lerp(start, end, weight), clamp(x, lo, hi), threshold(x, threshold, value).
double ternaryFloat(OpKind kind, double a, double b, double c);
int64_t ternaryInt(OpKind kind, int64_t a, int64_t b, int64_t c);

// One element of any unary, binary or ternary op (addcmul's operands: x, t1, t2, value), dispatched
// on the op's category: what evalElementwise computes per element and the kernel simulator reuses.
double elementwiseFloat(OpKind kind, std::span<const double> x, DataType dtype);
// The type float math is done in: Double where the result or an operand is Double, else Float. An integer
// operand is converted to it first, rounding as torch and nvFuser convert it (an Int32 16777217 beside a
// Float is 16777216.0); the math itself is float64 rounded once to the result, as everywhere here.
DataType floatMathType(DataType result_dtype, std::span<const DataType> operand_dtypes);
int64_t elementwiseInt(OpKind kind, std::span<const int64_t> x, DataType dtype);

// The conversions to a dtype (ir/numerics.h), which constants are stored as too.
using numerics::floatToInt;
using numerics::roundToType;
using numerics::wrapToType;

}  // namespace braze::reference
