#include "ir/op_kind.h"

#include "support/error.h"

#include <array>

namespace braze {
namespace {

using C = OpCategory;
using R = ResultType;
using K = OpKind;

// Order must match the OpKind enum; checked once at first use.
constexpr OpInfo kOps[] = {
    {K::Abs, "abs", C::Unary, R::SameAsInput},
    {K::Acos, "acos", C::Unary, R::FloatOfPromoted},
    {K::Acosh, "acosh", C::Unary, R::FloatOfPromoted},
    {K::Asin, "asin", C::Unary, R::FloatOfPromoted},
    {K::Asinh, "asinh", C::Unary, R::FloatOfPromoted},
    {K::Atan, "atan", C::Unary, R::FloatOfPromoted},
    {K::Atanh, "atanh", C::Unary, R::FloatOfPromoted},
    {K::BitwiseNot, "bitwise_not", C::Unary, R::IntegerOnly},
    {K::Ceil, "ceil", C::Unary, R::SameAsInput},
    {K::Cos, "cos", C::Unary, R::FloatOfPromoted},
    {K::Cosh, "cosh", C::Unary, R::FloatOfPromoted},
    {K::Erf, "erf", C::Unary, R::FloatOfPromoted},
    {K::Erfc, "erfc", C::Unary, R::FloatOfPromoted},
    {K::Erfcinv, "erfcinv", C::Unary, R::FloatOfPromoted},
    {K::Erfinv, "erfinv", C::Unary, R::FloatOfPromoted},
    {K::Exp, "exp", C::Unary, R::FloatOfPromoted},
    {K::Exp2, "exp2", C::Unary, R::FloatOfPromoted},
    {K::Expm1, "expm1", C::Unary, R::FloatOfPromoted},
    {K::Floor, "floor", C::Unary, R::SameAsInput},
    {K::Frac, "frac", C::Unary, R::SameAsInput},
    {K::IsFinite, "isfinite", C::Unary, R::Bool},
    {K::IsInf, "isinf", C::Unary, R::Bool},
    {K::IsNan, "isnan", C::Unary, R::Bool},
    {K::IsNegInf, "isneginf", C::Unary, R::Bool},
    {K::IsPosInf, "isposinf", C::Unary, R::Bool},
    {K::IsReal, "isreal", C::Unary, R::Bool},
    {K::Lgamma, "lgamma", C::Unary, R::FloatOfPromoted},
    {K::Log, "log", C::Unary, R::FloatOfPromoted},
    {K::Log10, "log10", C::Unary, R::FloatOfPromoted},
    {K::Log1p, "log1p", C::Unary, R::FloatOfPromoted},
    {K::Log2, "log2", C::Unary, R::FloatOfPromoted},
    {K::LogicalNot, "logical_not", C::Unary, R::Bool},
    {K::Neg, "neg", C::Unary, R::Promoted},
    {K::Real, "real", C::Unary, R::SameAsInput},
    {K::Reciprocal, "reciprocal", C::Unary, R::FloatOfPromoted},
    {K::Relu, "relu", C::Unary, R::SameAsInput},
    {K::Round, "round", C::Unary, R::SameAsInput},
    {K::Rsqrt, "rsqrt", C::Unary, R::FloatOfPromoted},
    {K::Sigmoid, "sigmoid", C::Unary, R::FloatOfPromoted},
    {K::Sign, "sign", C::Unary, R::SameAsInput},
    {K::SignBit, "signbit", C::Unary, R::Bool},
    {K::Silu, "silu", C::Unary, R::SameAsInput},
    {K::Sin, "sin", C::Unary, R::FloatOfPromoted},
    {K::Sinh, "sinh", C::Unary, R::FloatOfPromoted},
    {K::Sqrt, "sqrt", C::Unary, R::FloatOfPromoted},
    {K::Tan, "tan", C::Unary, R::FloatOfPromoted},
    {K::Tanh, "tanh", C::Unary, R::FloatOfPromoted},
    {K::Trunc, "trunc", C::Unary, R::SameAsInput},
    {K::Add, "add", C::Binary, R::Promoted},
    {K::Atan2, "atan2", C::Binary, R::FloatOfPromoted},
    {K::BitwiseAnd, "bitwise_and", C::Binary, R::IntegerOnly},
    {K::BitwiseLeftShift, "bitwise_left_shift", C::Binary, R::IntegerOnly},
    {K::BitwiseOr, "bitwise_or", C::Binary, R::IntegerOnly},
    {K::BitwiseRightShift, "bitwise_right_shift", C::Binary, R::IntegerOnly},
    {K::BitwiseXor, "bitwise_xor", C::Binary, R::IntegerOnly},
    {K::Div, "div", C::Binary, R::Promoted},
    {K::Eq, "eq", C::Binary, R::Bool},
    {K::Fmod, "fmod", C::Binary, R::Promoted},
    {K::Ge, "ge", C::Binary, R::Bool},
    {K::Gcd, "gcd", C::Binary, R::IntegerOnly},
    {K::Gt, "gt", C::Binary, R::Bool},
    {K::Le, "le", C::Binary, R::Bool},
    {K::LogicalAnd, "logical_and", C::Binary, R::Bool},
    {K::LogicalOr, "logical_or", C::Binary, R::Bool},
    {K::LogicalRightShift, "logical_right_shift", C::Binary, R::IntegerOnly},
    {K::Lt, "lt", C::Binary, R::Bool},
    {K::Maximum, "maximum", C::Binary, R::Promoted},
    {K::Minimum, "minimum", C::Binary, R::Promoted},
    {K::Mod, "mod", C::Binary, R::Promoted},
    {K::Mul, "mul", C::Binary, R::Promoted},
    {K::Ne, "ne", C::Binary, R::Bool},
    {K::NextAfter, "nextafter", C::Binary, R::FloatOfPromoted},
    {K::Pow, "pow", C::Binary, R::Promoted},
    {K::Remainder, "remainder", C::Binary, R::Promoted},
    {K::Sub, "sub", C::Binary, R::Promoted},
    {K::TrueDiv, "truediv", C::Binary, R::FloatOfPromoted},
    {K::Where, "where", C::Ternary, R::Promoted},
    {K::Lerp, "lerp", C::Ternary, R::Promoted},
    {K::Clamp, "clamp", C::Ternary, R::Promoted},
    {K::Threshold, "threshold", C::Ternary, R::Promoted},
    {K::Addcmul, "addcmul", C::Ternary, R::Promoted},
    {K::CastOp, "cast", C::Cast, R::NotApplicable},
    {K::Sum, "sum", C::Reduction, R::NotApplicable},
    {K::Prod, "prod", C::Reduction, R::NotApplicable},
    {K::Max, "max", C::Reduction, R::NotApplicable},
    {K::Min, "min", C::Reduction, R::NotApplicable},
    {K::Any, "any", C::Reduction, R::NotApplicable},
    {K::All, "all", C::Reduction, R::NotApplicable},
    {K::Var, "var", C::Normalization, R::NotApplicable},
    {K::VarMean, "var_mean", C::Normalization, R::NotApplicable},
    {K::Welford, "welford", C::Normalization, R::NotApplicable},
    {K::Broadcast, "broadcast", C::Meta, R::NotApplicable},
    {K::BroadcastInDim, "broadcast_in_dim", C::Meta, R::NotApplicable},
    {K::Expand, "expand", C::Meta, R::NotApplicable},
    {K::Reshape, "reshape", C::Meta, R::NotApplicable},
    {K::Permute, "permute", C::Meta, R::NotApplicable},
    {K::Squeeze, "squeeze", C::Meta, R::NotApplicable},
    {K::Slice, "slice", C::Meta, R::NotApplicable},
    {K::Set, "set", C::Meta, R::NotApplicable},
    {K::SegmentSet, "segment_set", C::Meta, R::NotApplicable},
    {K::Pad, "pad", C::Data, R::NotApplicable},
    {K::Cat, "cat", C::Data, R::NotApplicable},
    {K::StrideOrder, "stride_order", C::Data, R::NotApplicable},
    {K::Full, "full", C::Creation, R::NotApplicable},
    {K::Iota, "iota", C::Creation, R::NotApplicable},
    {K::IndexSelect, "index_select", C::Indexing, R::NotApplicable},
    {K::Gather, "gather", C::Indexing, R::NotApplicable},
    {K::TakeAlongAxis, "take_along_axis", C::Indexing, R::NotApplicable},
    {K::Matmul, "matmul", C::Matmul, R::NotApplicable},
    {K::Linear, "linear", C::Matmul, R::NotApplicable},
    {K::Quantize, "quantize", C::Quantize, R::NotApplicable},
    {K::Dequantize, "dequantize", C::Quantize, R::NotApplicable},
    {K::Cumsum, "cumsum", C::Scan, R::NotApplicable},
    {K::TopK, "topk", C::Scan, R::NotApplicable},
    {K::Argsort, "argsort", C::Scan, R::NotApplicable},
    {K::Scatter, "scatter", C::Scatter, R::NotApplicable},
    {K::IndexPutAccumulate, "index_put_accumulate", C::Scatter, R::NotApplicable},
    {K::Uniform, "uniform", C::Random, R::NotApplicable},
    {K::Normal, "normal", C::Random, R::NotApplicable},
    {K::Size, "size", C::ScalarQuery, R::NotApplicable},
};

constexpr bool tableMatchesEnum() {
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (static_cast<size_t>(kOps[i].kind) != i) return false;
  }
  return static_cast<size_t>(OpKind::Size) + 1 == std::size(kOps);
}
static_assert(tableMatchesEnum(), "kOps rows must follow the OpKind enum order");

}  // namespace

const OpInfo& opInfo(OpKind kind) { return kOps[static_cast<size_t>(kind)]; }
std::string_view opName(OpKind kind) { return opInfo(kind).name; }
std::span<const OpInfo> allOps() { return kOps; }

std::optional<OpKind> opKindFromName(std::string_view name) {
  for (const auto& op : kOps) {
    if (op.name == name) return op.kind;
  }
  return std::nullopt;
}

}  // namespace braze
