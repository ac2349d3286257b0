// Every operation braze knows, with its category, result-type rule and nvFuser's Python name.
// One table (op_kind.cpp) drives the builders' type inference, the printer, JSON and the evaluator's
// dispatch, so adding an elementwise op is one row plus its math in reference/pointwise_math.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace braze {

enum class OpCategory : uint8_t {
  Unary,      // elementwise, 1 operand
  Binary,     // elementwise, 2 operands
  Ternary,    // elementwise, 3 operands (where, lerp, clamp, threshold, addcmul)
  Cast,       // elementwise dtype conversion
  Reduction,  // sum, prod, max, min, any, all over dims
  Normalization,  // var, var_mean, welford: several outputs over reduced dims
  Meta,       // changes only how memory is viewed: broadcast, expand, reshape, permute, squeeze, slice, set
  Data,       // moves data with new layout or content: pad, cat, stride_order
  Creation,   // full, iota: no tensor operands
  Indexing,   // index_select, gather, take_along_axis
  Matmul,     // matmul, linear
  Quantize,   // quantize, dequantize
  Scan,       // cumsum, topk, argsort: each element depends on every element of its line along a dim
  Scatter,    // scatter, index_put_accumulate: writes at positions an index tensor gives
  Random,     // uniform, normal: counter-based random numbers of (seed, offset, element)
  ScalarQuery,  // size(t, dim): a scalar from a tensor's shape
};

// How an elementwise op derives its result dtype from the promoted operand dtype.
enum class ResultType : uint8_t {
  SameAsInput,     // the operand's type, even Half/BFloat16 (ceil, relu, abs)
  Promoted,        // the promoted type, Half/BFloat16/fp8 computed and returned as Float (add, neg)
  FloatOfPromoted, // like Promoted, and integers and bools become Float too (exp, sin, truediv)
  Bool,            // comparisons and predicates (eq, isnan, logical_and)
  IntegerOnly,     // the promoted type, which must be integral or bool (bitwise_and, shifts)
  NotApplicable,   // not elementwise
};

enum class OpKind : uint16_t {
  // Unary
  Abs, Acos, Acosh, Asin, Asinh, Atan, Atanh, BitwiseNot, Ceil, Cos, Cosh, Erf, Erfc, Erfcinv, Erfinv,
  Exp, Exp2, Expm1, Floor, Frac, IsFinite, IsInf, IsNan, IsNegInf, IsPosInf, IsReal, Lgamma, Log,
  Log10, Log1p, Log2, LogicalNot, Neg, Real, Reciprocal, Relu, Round, Rsqrt, Sigmoid, Sign, SignBit,
  Silu, Sin, Sinh, Sqrt, Tan, Tanh, Trunc,
  // Binary
  Add, Atan2, BitwiseAnd, BitwiseLeftShift, BitwiseOr, BitwiseRightShift, BitwiseXor, Div, Eq, Fmod, Ge,
  Gcd, Gt, Le, LogicalAnd, LogicalOr, LogicalRightShift, Lt, Maximum, Minimum, Mod, Mul, Ne, NextAfter,
  Pow, Remainder, Sub, TrueDiv,
  // Ternary
  Where, Lerp, Clamp, Threshold, Addcmul,
  // Cast
  CastOp,
  // Reductions
  Sum, Prod, Max, Min, Any, All,
  // Normalizations
  Var, VarMean, Welford,
  // Meta ops
  Broadcast, BroadcastInDim, Expand, Reshape, Permute, Squeeze, Slice, Set, SegmentSet,
  // Data movement
  Pad, Cat, StrideOrder,
  // Creation
  Full, Iota,
  // Indexing
  IndexSelect, Gather, TakeAlongAxis,
  // Matmul
  Matmul, Linear,
  // Quantization
  Quantize, Dequantize,
  // Scans, scatters, random numbers
  Cumsum, TopK, Argsort, Scatter, IndexPutAccumulate, Uniform, Normal,
  // Scalar queries
  Size,
};

struct OpInfo {
  OpKind kind;
  std::string_view name;  // nvFuser's fd.ops name ("add", "broadcast_in_dim")
  OpCategory category;
  ResultType result;
};

const OpInfo& opInfo(OpKind kind);
std::string_view opName(OpKind kind);
std::optional<OpKind> opKindFromName(std::string_view name);
std::span<const OpInfo> allOps();

// A meta op changes only the view of memory; bookending may turn chains of them into host views.
inline bool isMetaOp(OpKind kind) { return opInfo(kind).category == OpCategory::Meta; }
inline bool isElementwise(OpKind kind) {
  const OpCategory c = opInfo(kind).category;
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary || c == OpCategory::Cast;
}

}  // namespace braze
