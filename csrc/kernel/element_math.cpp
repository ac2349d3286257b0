#include "kernel/element_math.h"

#include "support/error.h"
#include "reference/pointwise_math.h"

#include <algorithm>
#include <array>

namespace braze::kernel {
namespace {

constexpr size_t kMaxOperands = 4;  // addcmul: x, t1, t2, value

size_t operandCount(OpKind kind) {
  switch (opInfo(kind).category) {
    case OpCategory::Unary:
    case OpCategory::Cast: return 1;
    case OpCategory::Binary: return 2;
    case OpCategory::Ternary: return kind == OpKind::Addcmul ? 4 : 3;
    default: BRAZE_UNREACHABLE("{} is not elementwise", opName(kind));
  }
}

bool anyFloating(std::span<const DataType> dtypes) { return std::any_of(dtypes.begin(), dtypes.end(), isFloating); }

// The result as the reference stores it: evalElementwise's storeFloat / writeInt, or scalarResult
// for a scalar output (the two agree).
SimValue fromFloat(double v, DataType dtype) {
  if (isFloating(dtype)) return {.f = reference::roundToType(v, dtype)};
  return {.i = reference::floatToInt(v, dtype)};
}

SimValue fromInt(int64_t v, DataType dtype) {
  if (isFloating(dtype)) return {.f = reference::roundToType(static_cast<double>(v), dtype)};
  return {.i = reference::wrapToType(v, dtype)};
}

}  // namespace

bool computesInFloat(OpKind kind, DataType result_dtype, std::span<const DataType> operand_dtypes) {
  if (kind == OpKind::CastOp) return isFloating(operand_dtypes[0]);
  switch (opInfo(kind).result) {
    case ResultType::FloatOfPromoted: return true;
    // A Bool result says nothing of the operands: the promoted type is floating iff one operand is
    // (a float scalar with integer tensors promotes to Float).
    case ResultType::Bool: return anyFloating(operand_dtypes);
    // Otherwise the result is the promoted type (where: of its values; clamp, threshold: x's type,
    // which the builder also makes the result): floating iff the result is.
    default: return isFloating(result_dtype);
  }
}

DataType integerMathDtype(OpKind kind, DataType result_dtype, std::span<const DataType> operand_dtypes) {
  if (opInfo(kind).result != ResultType::Bool) return result_dtype;
  // Comparisons and predicates ignore the width; promote anyway so the dtype is the honest one.
  DataType dtype = operand_dtypes[0];
  for (DataType d : operand_dtypes.subspan(1)) dtype = promoteTypes(dtype, d);
  return dtype;
}

SimValue simElementwise(OpKind kind, DataType result_dtype, std::span<const SimValue> operands,
                        std::span<const DataType> operand_dtypes) {
  BRAZE_ASSERT(isElementwise(kind), "simElementwise: {} is not elementwise", opName(kind));
  const size_t n = operandCount(kind);
  BRAZE_ASSERT(operands.size() == n && operand_dtypes.size() == n,
               "simElementwise: {} takes {} operands, got {} ({} dtypes)", opName(kind), n, operands.size(),
               operand_dtypes.size());
  if (kind == OpKind::CastOp) return simCast(operands[0], operand_dtypes[0], result_dtype);

  if (computesInFloat(kind, result_dtype, operand_dtypes)) {
    std::array<double, kMaxOperands> x{};
    const DataType math = reference::floatMathType(result_dtype, operand_dtypes);
    for (size_t k = 0; k < n; ++k) {
      x[k] = isFloating(operand_dtypes[k]) ? operands[k].f : reference::roundToType(static_cast<double>(operands[k].i), math);
    }
    // The reference hands the float math the OUTPUT dtype: nextafter steps in the result's type.
    const double v = reference::elementwiseFloat(kind, std::span<const double>(x.data(), n), result_dtype);
    return fromFloat(v, result_dtype);
  }
  std::array<int64_t, kMaxOperands> x{};
  for (size_t k = 0; k < n; ++k) {
    x[k] = isFloating(operand_dtypes[k]) ? reference::floatToInt(operands[k].f, DataType::Int64) : operands[k].i;
  }
  const DataType dtype = integerMathDtype(kind, result_dtype, operand_dtypes);
  return fromInt(reference::elementwiseInt(kind, std::span<const int64_t>(x.data(), n), dtype), result_dtype);
}

SimValue simCast(SimValue value, DataType from, DataType to) {
  return isFloating(from) ? fromFloat(value.f, to) : fromInt(value.i, to);
}

}  // namespace braze::kernel
