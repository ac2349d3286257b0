#include "codegen/source_ops.h"

#include "support/error.h"
#include "kernel/element_math.h"
#include "reference/pointwise_math.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace braze::codegen {

using namespace kernel;  // the emitter prints kernel IR
namespace {


// An expression and the dtype of the value it holds (an operand's dtype, or the compute type an op
// produced it in: Float, Double, Int64 or Bool).
struct Value {
  std::string text;
  DataType dtype;
};

std::string paren(std::string_view s) { return fmt::format("({})", s); }

// Holds every value of `dtype` exactly in float (so float math on it rounds only where the reference does).
bool fitsFloat(DataType dtype) {
  return dtype != DataType::Double && dtype != DataType::Int32 && dtype != DataType::Int64;
}

// `v` as a float or double (`math`), exactly unless a Double or a wide integer meets float math.
std::string asMath(const Value& v, DataType math) {
  const DataType held = computeTypeOf(v.dtype);
  if (held == math) return paren(v.text);
  if (math == DataType::Float && held == DataType::Double) return fmt::format("__double2float_rn({})", v.text);
  // 8- and 16-bit integers are held in long long. Into float, an 8-bit one goes by float arithmetic on its
  // bits (no conversion instruction: a dequantize converts every weight); others convert through int,
  // exact, and a 32-bit conversion instead of the much slower 64-bit one.
  if (math == DataType::Float && v.dtype == DataType::Int8) return fmt::format("braze_i8_to_float((int){})", paren(v.text));
  if (math == DataType::Float && v.dtype == DataType::UInt8) return fmt::format("braze_u8_to_float((int){})", paren(v.text));
  const bool narrow_int = v.dtype == DataType::Int8 || v.dtype == DataType::UInt8 || v.dtype == DataType::Int16;
  if (narrow_int && isFloating(math)) return fmt::format("(({})(int){})", computeTypeName(math), paren(v.text));
  return fmt::format("(({}){})", computeTypeName(math), paren(v.text));
}

// floatToInt of a float or double into the range of integer `dtype`.
std::string floatToInt(const Value& v, DataType dtype) {
  return fmt::format("braze_float_to_int((double){}, {}, {})", paren(v.text),
                     literalExpr(integerMin(dtype), DataType::Int64), literalExpr(integerMax(dtype), DataType::Int64));
}

std::string asInt(const Value& v) {
  switch (computeTypeOf(v.dtype)) {
    case DataType::Int64: return paren(v.text);
    case DataType::Bool: return fmt::format("((long long){})", paren(v.text));
    default: return floatToInt(v, DataType::Int64);  // a Python float bound of integer math: truncated, saturating
  }
}

std::string asBool(const Value& v) {
  if (computeTypeOf(v.dtype) == DataType::Bool) return paren(v.text);
  return fmt::format("({} != 0)", paren(v.text));
}

// The narrow float types' rounding helper ("braze_round_bf16"), empty for Float and Double.
std::string_view roundHelper(DataType dtype) {
  switch (dtype) {
    case DataType::Half: return "braze_round_half";
    case DataType::BFloat16: return "braze_round_bf16";
    case DataType::Float8_e4m3fn: return "braze_round_e4m3fn";
    case DataType::Float8_e5m2: return "braze_round_e5m2";
    case DataType::Float8_e4m3fnuz: return "braze_round_e4m3fnuz";
    case DataType::Float8_e5m2fnuz: return "braze_round_e5m2fnuz";
    default: return "";
  }
}

// A value as the reference stores it in `dtype`: rounding a float (once, from the value's own type),
// floatToInt for a float to an integer, wrapping an integer, != 0 for Bool.
std::string toResult(const Value& v, DataType dtype) {
  if (v.dtype == dtype) return v.text;
  const DataType held = computeTypeOf(v.dtype);
  if (isBool(dtype)) return asBool(v);
  if (isIntegral(dtype)) {
    if (held == DataType::Bool) return fmt::format("((long long){})", paren(v.text));
    if (held != DataType::Int64) return floatToInt(v, dtype);
    switch (dtype) {
      case DataType::Int8: return fmt::format("braze_wrap_i8({})", v.text);
      case DataType::UInt8: return fmt::format("braze_wrap_u8({})", v.text);
      case DataType::Int16: return fmt::format("braze_wrap_i16({})", v.text);
      case DataType::Int32: return fmt::format("braze_wrap_i32({})", v.text);
      default: return v.text;
    }
  }
  // A floating result, rounded once from the value's own type, or from an integer converted exactly
  // (through double when wider than float's 24 bits: the reference rounds an int64 to double, then to the dtype).
  const DataType from = (held == DataType::Double || !fitsFloat(v.dtype)) ? DataType::Double : DataType::Float;
  auto as = [&](DataType math) { return held == math ? v.text : asMath(v, math); };
  switch (dtype) {
    case DataType::Double: return as(DataType::Double);
    case DataType::Float: return from == DataType::Float ? as(from) : fmt::format("__double2float_rn({})", as(from));
    case DataType::Float8_e4m3fnuz:
    case DataType::Float8_e5m2fnuz: return fmt::format("{}({})", roundHelper(dtype), as(DataType::Double));  // software
    default: return fmt::format("{}({})", roundHelper(dtype), as(from));
  }
}

std::string_view mathSuffix(DataType math) { return math == DataType::Float ? "f" : ""; }

// A libm function of the math type: "sinf(x)" or "sin(x)".
std::string libm(std::string_view name, DataType math, std::span<const std::string> args) {
  return fmt::format("{}{}({})", name, mathSuffix(math), fmt::join(args, ", "));
}

std::string call(std::string_view name, std::span<const std::string> args) {
  return fmt::format("{}({})", name, fmt::join(args, ", "));
}

Value floatUnary(OpKind kind, DataType math, const std::string& x) {
  const std::array<std::string, 1> a{x};
  const std::string one = math == DataType::Float ? "1.0f" : "1.0";
  auto m = [&](std::string_view name) { return Value{libm(name, math, a), math}; };
  auto h = [&](std::string_view name) { return Value{call(name, a), math}; };
  auto b = [&](std::string text) { return Value{std::move(text), DataType::Bool}; };
  switch (kind) {
    case OpKind::Abs: return m("fabs");
    case OpKind::Acos: return m("acos");
    case OpKind::Acosh: return m("acosh");
    case OpKind::Asin: return m("asin");
    case OpKind::Asinh: return m("asinh");
    case OpKind::Atan: return m("atan");
    case OpKind::Atanh: return m("atanh");
    case OpKind::Ceil: return m("ceil");
    case OpKind::Cos: return m("cos");
    case OpKind::Cosh: return m("cosh");
    case OpKind::Erf: return m("erf");
    case OpKind::Erfc: return m("erfc");
    case OpKind::Erfcinv: return m("erfcinv");
    case OpKind::Erfinv: return m("erfinv");
    case OpKind::Exp: return m("exp");
    case OpKind::Exp2: return m("exp2");
    case OpKind::Expm1: return m("expm1");
    case OpKind::Floor: return m("floor");
    case OpKind::Frac: return h("braze_frac");
    case OpKind::IsFinite: return b(fmt::format("((bool)isfinite({}))", x));
    case OpKind::IsInf: return b(fmt::format("((bool)isinf({}))", x));
    case OpKind::IsNan: return b(fmt::format("((bool)isnan({}))", x));
    case OpKind::IsNegInf: return b(call("braze_isneginf", a));
    case OpKind::IsPosInf: return b(call("braze_isposinf", a));
    case OpKind::IsReal: return b(fmt::format("((void){}, true)", x));  // no complex types: every value is real
    case OpKind::Lgamma: return m("lgamma");
    case OpKind::Log: return m("log");
    case OpKind::Log10: return m("log10");
    case OpKind::Log1p: return m("log1p");
    case OpKind::Log2: return m("log2");
    case OpKind::LogicalNot: return b(fmt::format("({} == 0)", x));
    case OpKind::Neg: return {fmt::format("(-{})", x), math};
    case OpKind::Real: return {x, math};
    case OpKind::Reciprocal: return {fmt::format("braze_div({}, {})", one, x), math};
    case OpKind::Relu: return h("braze_relu");
    case OpKind::Round: return m("rint");  // half to even, as std::nearbyint
    // 1 / sqrt as the reference computes it, each correctly rounded (rsqrtf is off by up to 2 ulp).
    case OpKind::Rsqrt: return {fmt::format("braze_div({}, braze_sqrt({}))", one, x), math};
    case OpKind::Sigmoid: return h("braze_sigmoid");
    case OpKind::Sign: return h("braze_sign");
    case OpKind::SignBit: return b(fmt::format("((bool)signbit({}))", x));
    case OpKind::Silu: return h("braze_silu");
    case OpKind::Sin: return m("sin");
    case OpKind::Sinh: return m("sinh");
    case OpKind::Sqrt: return h("braze_sqrt");
    case OpKind::Tan: return m("tan");
    case OpKind::Tanh: return m("tanh");
    case OpKind::Trunc: return m("trunc");
    default: BRAZE_UNREACHABLE("{} has no floating unary math", opName(kind));
  }
}

Value floatBinary(OpKind kind, DataType math, DataType result_dtype, const std::string& x, const std::string& y) {
  const std::array<std::string, 2> a{x, y};
  auto m = [&](std::string_view name) { return Value{libm(name, math, a), math}; };
  auto h = [&](std::string_view name) { return Value{call(name, a), math}; };
  auto cmp = [&](std::string_view op) { return Value{fmt::format("({} {} {})", x, op, y), DataType::Bool}; };
  switch (kind) {
    case OpKind::Add: return h("braze_add");
    case OpKind::Sub: return h("braze_sub");
    case OpKind::Mul: return h("braze_mul");
    case OpKind::Div:
    case OpKind::TrueDiv: return h("braze_div");
    case OpKind::Atan2: return m("atan2");
    case OpKind::Fmod:
    case OpKind::Mod: return m("fmod");
    case OpKind::Remainder: return h("braze_remainder");
    case OpKind::Pow: return m("pow");
    case OpKind::Maximum: return h("braze_maximum");
    case OpKind::Minimum: return h("braze_minimum");
    case OpKind::NextAfter: {
      // The next value of the result's type, not of the math type (the reference passes the output dtype).
      if (result_dtype == DataType::Double) return {fmt::format("nextafter({}, {})", x, y), DataType::Double};
      auto f = [&](const std::string& s) {
        return math == DataType::Float ? s : fmt::format("__double2float_rn({})", s);
      };
      // Half and BFloat16 operands are Float values the narrow type holds: the step is the narrow type's.
      if (result_dtype == DataType::Half) {
        return {fmt::format("braze_nextafter_narrow({}, {}, 10, -14, 65504.0f)", f(x), f(y)), DataType::Float};
      }
      if (result_dtype == DataType::BFloat16) {
        return {fmt::format("braze_nextafter_narrow({}, {}, 7, -126, 0x1.fep127f)", f(x), f(y)), DataType::Float};
      }
      return {fmt::format("nextafterf({}, {})", f(x), f(y)), DataType::Float};
    }
    case OpKind::Eq: return cmp("==");
    case OpKind::Ne: return cmp("!=");
    case OpKind::Lt: return cmp("<");
    case OpKind::Le: return cmp("<=");
    case OpKind::Gt: return cmp(">");
    case OpKind::Ge: return cmp(">=");
    case OpKind::LogicalAnd: return {fmt::format("({} != 0 && {} != 0)", x, y), DataType::Bool};
    case OpKind::LogicalOr: return {fmt::format("({} != 0 || {} != 0)", x, y), DataType::Bool};
    default: BRAZE_UNREACHABLE("{} has no floating binary math", opName(kind));
  }
}

Value intUnary(OpKind kind, DataType dtype, const std::string& x) {
  const DataType i64 = DataType::Int64;
  auto b = [&](std::string text) { return Value{std::move(text), DataType::Bool}; };
  switch (kind) {
    case OpKind::Abs: return {fmt::format("braze_abs_i({})", x), i64};
    case OpKind::BitwiseNot:
      if (isBool(dtype)) return {fmt::format("((long long)({} == 0))", x), i64};
      return {fmt::format("(~{})", x), i64};
    case OpKind::Ceil:
    case OpKind::Floor:
    case OpKind::Round:
    case OpKind::Trunc:
    case OpKind::Real: return {x, i64};
    // Constant results still name the operand, discarded, so a kernel that loads it into a variable
    // has no unused variable (nvcc warns).
    case OpKind::Frac: return {fmt::format("((void){}, 0LL)", x), i64};
    case OpKind::IsFinite:
    case OpKind::IsReal: return b(fmt::format("((void){}, true)", x));
    case OpKind::IsInf:
    case OpKind::IsNan:
    case OpKind::IsNegInf:
    case OpKind::IsPosInf: return b(fmt::format("((void){}, false)", x));
    case OpKind::LogicalNot: return b(fmt::format("({} == 0)", x));
    case OpKind::Neg: return {fmt::format("braze_neg_i({})", x), i64};
    case OpKind::Relu: return {fmt::format("braze_relu_i({})", x), i64};
    case OpKind::Sign: return {fmt::format("braze_sign_i({})", x), i64};
    case OpKind::SignBit: return b(fmt::format("({} < 0)", x));
    default:
      BRAZE_TYPE_CHECK(false, "{}: no integer math for an operand of dtype {} (the reference has none either)",
                       opName(kind), toString(dtype));
      return {};
  }
}

Value intBinary(OpKind kind, DataType dtype, const std::string& x, const std::string& y) {
  const DataType i64 = DataType::Int64;
  const std::array<std::string, 2> a{x, y};
  auto h = [&](std::string_view name) { return Value{call(name, a), i64}; };
  auto op = [&](std::string_view o) { return Value{fmt::format("({} {} {})", x, o, y), i64}; };
  auto cmp = [&](std::string_view o) { return Value{fmt::format("({} {} {})", x, o, y), DataType::Bool}; };
  const int width = static_cast<int>(sizeOf(dtype) * 8);
  switch (kind) {
    case OpKind::Add: return h("braze_add_i");
    case OpKind::Sub: return h("braze_sub_i");
    case OpKind::Mul: return h("braze_mul_i");
    case OpKind::Div: return h("braze_div_i");
    case OpKind::Fmod:
    case OpKind::Mod: return h("braze_fmod_i");
    case OpKind::Remainder: return h("braze_remainder_i");
    case OpKind::Pow: return h("braze_pow_i");
    case OpKind::Maximum: return h("braze_max<long long>");
    case OpKind::Minimum: return h("braze_min<long long>");
    case OpKind::Eq: return cmp("==");
    case OpKind::Ne: return cmp("!=");
    case OpKind::Lt: return cmp("<");
    case OpKind::Le: return cmp("<=");
    case OpKind::Gt: return cmp(">");
    case OpKind::Ge: return cmp(">=");
    case OpKind::LogicalAnd: return {fmt::format("({} != 0 && {} != 0)", x, y), DataType::Bool};
    case OpKind::LogicalOr: return {fmt::format("({} != 0 || {} != 0)", x, y), DataType::Bool};
    case OpKind::BitwiseAnd: return op("&");
    case OpKind::BitwiseOr: return op("|");
    case OpKind::BitwiseXor: return op("^");
    case OpKind::Gcd: return h("braze_gcd_i");
    case OpKind::BitwiseLeftShift: return {fmt::format("braze_shl_i({}, {}, {})", x, y, width), i64};
    case OpKind::BitwiseRightShift:
      return {fmt::format("braze_shr_i({}, {}, {}, {})", x, y, width, isSigned(dtype) ? "true" : "false"), i64};
    case OpKind::LogicalRightShift: return {fmt::format("braze_lshr_i({}, {}, {})", x, y, width), i64};
    default:
      BRAZE_TYPE_CHECK(false, "{}: no integer math for operands of dtype {} (the reference has none either)",
                       opName(kind), toString(dtype));
      return {};
  }
}

size_t operandCount(OpKind kind) {
  switch (opInfo(kind).category) {
    case OpCategory::Unary:
    case OpCategory::Cast: return 1;
    case OpCategory::Binary: return 2;
    case OpCategory::Ternary: return kind == OpKind::Addcmul ? 4 : 3;
    default: BRAZE_UNREACHABLE("{} is not elementwise", opName(kind));
  }
}

std::string floatLiteral(double value, DataType compute) {
  const bool is_float = compute == DataType::Float;
  if (std::isnan(value)) return is_float ? "__int_as_float(0x7fc00000)" : "__longlong_as_double(0x7ff8000000000000LL)";
  if (std::isinf(value)) {
    if (is_float) return value > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
    return value > 0 ? "__longlong_as_double(0x7ff0000000000000LL)" : "__longlong_as_double(0xfff0000000000000LL)";
  }
  // The shortest text that reads back as the same value, with a '.' or an exponent so it reads as floating.
  std::string text = is_float ? fmt::format("{}", static_cast<float>(value)) : fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  if (is_float) text += "f";
  return std::signbit(value) ? paren(text) : text;
}

}  // namespace

std::string_view computeTypeName(DataType dtype) {
  switch (computeTypeOf(dtype)) {
    case DataType::Float: return "float";
    case DataType::Double: return "double";
    case DataType::Bool: return "bool";
    default: return "long long";
  }
}

std::string_view storageTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::Bool: return "bool";
    case DataType::Int8: return "signed char";
    case DataType::UInt8: return "unsigned char";
    case DataType::Int16: return "short";
    case DataType::Int32: return "int";
    case DataType::Int64: return "long long";
    case DataType::Half: return "braze_half";
    case DataType::BFloat16: return "braze_bf16";
    case DataType::Float: return "float";
    case DataType::Double: return "double";
    case DataType::Float8_e4m3fn: return "braze_e4m3fn";
    case DataType::Float8_e5m2: return "braze_e5m2";
    case DataType::Float8_e4m3fnuz: return "braze_e4m3fnuz";
    case DataType::Float8_e5m2fnuz: return "braze_e5m2fnuz";
    case DataType::Null: break;
  }
  BRAZE_UNREACHABLE("storageTypeName({})", toString(dtype));
}

std::string elementwiseExpr(OpKind kind, DataType result_dtype, std::span<const Operand> operands) {
  BRAZE_ASSERT(isElementwise(kind), "elementwiseExpr: {} is not elementwise", opName(kind));
  const size_t n = operandCount(kind);
  BRAZE_ASSERT(operands.size() == n, "elementwiseExpr: {} takes {} operands, got {}", opName(kind), n, operands.size());
  if (kind == OpKind::CastOp) return castExpr(operands[0], result_dtype);

  std::vector<DataType> dtypes;
  std::vector<Value> in;
  for (const Operand& op : operands) {
    dtypes.push_back(op.dtype);
    in.push_back({op.expr, op.dtype});
  }
  const OpCategory category = opInfo(kind).category;
  Value out;
  if (computesInFloat(kind, result_dtype, dtypes)) {
    const DataType math = reference::floatMathType(result_dtype, dtypes);
    std::vector<std::string> x;
    for (const Value& v : in) x.push_back(asMath(v, math));
    if (category == OpCategory::Unary) {
      out = floatUnary(kind, math, x[0]);
    } else if (category == OpCategory::Binary) {
      out = floatBinary(kind, math, result_dtype, x[0], x[1]);
    } else {
      switch (kind) {
        case OpKind::Where: out = {fmt::format("({} ? {} : {})", asBool(in[0]), x[1], x[2]), math}; break;
        case OpKind::Lerp: out = {call("braze_lerp", x), math}; break;
        case OpKind::Clamp: out = {call("braze_clamp", x), math}; break;
        case OpKind::Threshold: out = {call("braze_threshold", x), math}; break;
        case OpKind::Addcmul: out = {call("braze_addcmul", x), math}; break;
        default: BRAZE_UNREACHABLE("elementwiseExpr({})", opName(kind));
      }
    }
  } else {
    const DataType dtype = integerMathDtype(kind, result_dtype, dtypes);
    std::vector<std::string> x;
    for (const Value& v : in) x.push_back(asInt(v));
    if (category == OpCategory::Unary) {
      out = intUnary(kind, dtype, x[0]);
    } else if (category == OpCategory::Binary) {
      out = intBinary(kind, dtype, x[0], x[1]);
    } else {
      switch (kind) {
        case OpKind::Where: out = {fmt::format("({} ? {} : {})", asBool(in[0]), x[1], x[2]), DataType::Int64}; break;
        case OpKind::Clamp:
          out = {fmt::format("braze_min<long long>(braze_max<long long>({}, {}), {})", x[0], x[1], x[2]),
                 DataType::Int64};
          break;
        case OpKind::Threshold: out = {call("braze_threshold_i", x), DataType::Int64}; break;
        case OpKind::Addcmul: out = {call("braze_addcmul_i", x), DataType::Int64}; break;
        default:
          BRAZE_TYPE_CHECK(false, "{}: no integer math for a result of dtype {} (the reference has none either)",
                           opName(kind), toString(result_dtype));
      }
    }
  }
  // Negating a value the result's narrow type holds exactly (a bf16 load), taking its absolute value,
  // or choosing between two such values gives one it holds too: no rounding (RoPE's rotate-half).
  const bool symmetric = result_dtype == DataType::Half || result_dtype == DataType::BFloat16 ||
                         result_dtype == DataType::Float8_e4m3fn || result_dtype == DataType::Float8_e5m2;
  const bool exact = (kind == OpKind::Neg || kind == OpKind::Abs)
                         ? dtypes[0] == result_dtype
                         : kind == OpKind::Where && dtypes[1] == result_dtype && dtypes[2] == result_dtype;
  if (symmetric && exact && (out.dtype == DataType::Float || out.dtype == DataType::Double)) return out.text;
  return toResult(out, result_dtype);
}

std::string castExpr(const Operand& value, DataType to) {
  BRAZE_ASSERT(value.dtype != DataType::Null && to != DataType::Null, "castExpr: a Null dtype");
  return toResult({value.expr, value.dtype}, to);
}

std::string fromStorageExpr(std::string_view stored, DataType dtype) {
  switch (dtype) {
    case DataType::Bool:
    case DataType::Float:
    case DataType::Double:
    case DataType::Int64: return paren(stored);
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Int16:
    case DataType::Int32: return fmt::format("((long long){})", paren(stored));
    case DataType::Half: return fmt::format("braze_load_half({})", stored);
    case DataType::BFloat16: return fmt::format("braze_load_bf16({})", stored);
    case DataType::Float8_e4m3fn: return fmt::format("braze_load_e4m3fn({})", stored);
    case DataType::Float8_e5m2: return fmt::format("braze_load_e5m2({})", stored);
    case DataType::Float8_e4m3fnuz: return fmt::format("braze_load_e4m3fnuz({})", stored);
    case DataType::Float8_e5m2fnuz: return fmt::format("braze_load_e5m2fnuz({})", stored);
    case DataType::Null: break;
  }
  BRAZE_UNREACHABLE("fromStorageExpr({})", toString(dtype));
}

std::string toStorageExpr(std::string_view value, DataType dtype) {
  switch (dtype) {
    case DataType::Bool:
    case DataType::Float:
    case DataType::Double:
    case DataType::Int64: return paren(value);
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Int16:
    case DataType::Int32: return fmt::format("(({}){})", storageTypeName(dtype), paren(value));
    case DataType::Half: return fmt::format("braze_store_half({})", value);
    case DataType::BFloat16: return fmt::format("braze_store_bf16({})", value);
    case DataType::Float8_e4m3fn: return fmt::format("braze_store_e4m3fn({})", value);
    case DataType::Float8_e5m2: return fmt::format("braze_store_e5m2({})", value);
    case DataType::Float8_e4m3fnuz: return fmt::format("braze_store_e4m3fnuz({})", value);
    case DataType::Float8_e5m2fnuz: return fmt::format("braze_store_e5m2fnuz({})", value);
    case DataType::Null: break;
  }
  BRAZE_UNREACHABLE("toStorageExpr({})", toString(dtype));
}

std::string literalExpr(double value, DataType dtype) {
  const DataType compute = computeTypeOf(dtype);
  if (compute == DataType::Bool) return value != 0.0 ? "true" : "false";  // NaN is true, as a C++ conversion gives
  if (compute == DataType::Int64) return literalExpr(reference::floatToInt(value, dtype), dtype);
  return floatLiteral(reference::roundToType(value, dtype), compute);
}

std::string literalExpr(int64_t value, DataType dtype) {
  const DataType compute = computeTypeOf(dtype);
  if (compute == DataType::Bool) return value != 0 ? "true" : "false";
  if (compute != DataType::Int64) {
    return floatLiteral(reference::roundToType(static_cast<double>(value), dtype), compute);
  }
  const int64_t v = reference::wrapToType(value, dtype);
  // -9223372036854775808LL would be the negation of a literal too large for long long.
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
  return v < 0 ? fmt::format("({}LL)", v) : fmt::format("{}LL", v);
}

}  // namespace braze::codegen
