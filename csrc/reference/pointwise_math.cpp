#include "reference/pointwise_math.h"

#include "support/error.h"
#include "ir/numerics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace braze::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // erf'(0)

// x >= 0 with erf(x) = a, for a in [0, 0.5]: Newton steps on erf, whose value near 0 is accurate
// relative to itself (on erfc, 1 - a would drop a's low bits: a relative error of 1e-16 / a). The
// first guess, the tangent at 0, lies below the root (erfinv is convex there): the steps rise to it.
double erfinvNearZero(double a) {
  double x = a / kTwoOverSqrtPi;
  for (int i = 0; i < 100; ++i) {
    const double step = (std::erf(x) - a) / (kTwoOverSqrtPi * std::exp(-x * x));
    x -= step;
    if (std::abs(step) <= 0x1p-54 * x) break;
  }
  return x;
}

// x > 0 with erfc(x) = t, for t in (0, 0.5]: Newton steps on erfc, accurate in the tail where erf
// rounds to 1. The first guess lies below the root (the tangent at 0 of erfinv(1 - t)) or, deep in
// the tail, above it (sqrt(-log(t / 2))), from where one step lands below it.
double erfcinvOfTail(double t) {
  double x = t >= 0.1 ? (1.0 - t) / kTwoOverSqrtPi : std::sqrt(-std::log(t / 2.0));
  for (int i = 0; i < 100; ++i) {
    const double step = (std::erfc(x) - t) / (-kTwoOverSqrtPi * std::exp(-x * x));
    x -= step;
    if (std::abs(step) <= 0x1p-54 * x) break;
  }
  return x;
}

// There is no std::erfinv: each side of 0.5 solved where its residual keeps full precision (1 - |y|
// is exact for |y| >= 0.5).
double erfinv(double y) {
  if (std::isnan(y) || y < -1.0 || y > 1.0) return kNaN;
  if (y == 1.0 || y == -1.0) return std::copysign(std::numeric_limits<double>::infinity(), y);
  const double a = std::abs(y);
  return std::copysign(a <= 0.5 ? erfinvNearZero(a) : erfcinvOfTail(1.0 - a), y);
}

// erfcinv(z) = erfinv(1 - z), solved on z itself where 1 - z would round (z near 0 or 2).
double erfcinv(double z) {
  if (std::isnan(z) || z < 0.0 || z > 2.0) return kNaN;
  if (z == 0.0) return std::numeric_limits<double>::infinity();
  if (z > 1.0) return -erfcinv(2.0 - z);  // exact for z in [1, 2]
  return z <= 0.5 ? erfcinvOfTail(z) : erfinvNearZero(1.0 - z);  // 1 - z exact for z in [0.5, 1]
}

// The neighbour of `a` toward `b` in a binary format of `fraction_bits` fraction bits, smallest normal
// exponent `min_exponent` and largest finite value `largest` (Half, BFloat16), `a` and `b` values of
// it: a step of a's ulp (the ulp below where |a| is a power of two and shrinks). Past `largest` the sum
// is out of the format's range, which its rounding makes infinite. The kernels' braze_nextafter_narrow
// is the same steps.
double narrowNextAfter(double a, double b, int fraction_bits, int min_exponent, double largest) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  if (a == b) return b;
  if (std::isinf(a)) return std::copysign(largest, a);
  if (a == 0.0) return std::copysign(std::ldexp(1.0, min_exponent - fraction_bits), b);
  int exponent = 0;
  std::frexp(a, &exponent);
  --exponent;  // |a| in [2^exponent, 2^(exponent + 1))
  const bool shrinks = (b > a) != (a > 0.0);
  int step = std::max(exponent, min_exponent) - fraction_bits;
  if (shrinks && std::abs(a) == std::ldexp(1.0, exponent) && exponent > min_exponent) --step;
  const double next = a + (b > a ? std::ldexp(1.0, step) : -std::ldexp(1.0, step));
  return next == 0.0 ? std::copysign(0.0, a) : next;  // from the smallest subnormal to a zero of a's sign
}

int widthOf(DataType dtype) { return static_cast<int>(sizeOf(dtype) * 8); }

// Integer power by squaring with wrap-around; negative exponents give 0 except for bases 1 and -1,
// as torch and nvFuser define it.
int64_t intPow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    BRAZE_CHECK(base != 0, "pow: 0 raised to the negative integer power {} is undefined", exp);
    return 0;
  }
  uint64_t result = 1;
  uint64_t b = static_cast<uint64_t>(base);
  while (exp > 0) {
    if (exp & 1) result *= b;
    b *= b;
    exp >>= 1;
  }
  return static_cast<int64_t>(result);
}

double pythonRemainder(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

double unaryFloat(OpKind kind, double x, DataType dtype) {
  switch (kind) {
    case OpKind::Abs: return std::abs(x);
    case OpKind::Acos: return std::acos(x);
    case OpKind::Acosh: return std::acosh(x);
    case OpKind::Asin: return std::asin(x);
    case OpKind::Asinh: return std::asinh(x);
    case OpKind::Atan: return std::atan(x);
    case OpKind::Atanh: return std::atanh(x);
    case OpKind::Ceil: return std::ceil(x);
    case OpKind::Cos: return std::cos(x);
    case OpKind::Cosh: return std::cosh(x);
    case OpKind::Erf: return std::erf(x);
    case OpKind::Erfc: return std::erfc(x);
    case OpKind::Erfcinv: return erfcinv(x);
    case OpKind::Erfinv: return erfinv(x);
    case OpKind::Exp: return std::exp(x);
    case OpKind::Exp2: return std::exp2(x);
    case OpKind::Expm1: return std::expm1(x);
    case OpKind::Floor: return std::floor(x);
    case OpKind::Frac: return x - std::trunc(x);
    case OpKind::IsFinite: return std::isfinite(x);
    case OpKind::IsInf: return std::isinf(x);
    case OpKind::IsNan: return std::isnan(x);
    case OpKind::IsNegInf: return std::isinf(x) && x < 0;
    case OpKind::IsPosInf: return std::isinf(x) && x > 0;
    case OpKind::IsReal: return 1.0;  // no complex types yet: every value is real
    case OpKind::Lgamma: return std::lgamma(x);
    case OpKind::Log: return std::log(x);
    case OpKind::Log10: return std::log10(x);
    case OpKind::Log1p: return std::log1p(x);
    case OpKind::Log2: return std::log2(x);
    case OpKind::LogicalNot: return x == 0.0;
    case OpKind::Neg: return -x;
    case OpKind::Real: return x;
    case OpKind::Reciprocal: return 1.0 / x;
    case OpKind::Relu: return x > 0 ? x : (std::isnan(x) ? x : 0.0);
    case OpKind::Round: return std::nearbyint(x);  // half to even, like torch.round
    case OpKind::Rsqrt: return 1.0 / std::sqrt(x);
    case OpKind::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case OpKind::Sign: return static_cast<double>((x > 0) - (x < 0));  // NaN: 0, as torch's sign
    case OpKind::SignBit: return std::signbit(x);
    case OpKind::Silu: return x / (1.0 + std::exp(-x));
    case OpKind::Sin: return std::sin(x);
    case OpKind::Sinh: return std::sinh(x);
    case OpKind::Sqrt: return std::sqrt(x);
    case OpKind::Tan: return std::tan(x);
    case OpKind::Tanh: return std::tanh(x);
    case OpKind::Trunc: return std::trunc(x);
    default: BRAZE_UNREACHABLE("{} has no floating unary math (dtype {})", opName(kind), toString(dtype));
  }
}

int64_t unaryInt(OpKind kind, int64_t x, DataType dtype) {
  switch (kind) {
    case OpKind::Abs: return x < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(x)) : x;
    case OpKind::BitwiseNot: return isBool(dtype) ? !x : ~x;
    case OpKind::Ceil:
    case OpKind::Floor:
    case OpKind::Round:
    case OpKind::Trunc:
    case OpKind::Real: return x;
    case OpKind::Frac: return 0;
    case OpKind::IsFinite:
    case OpKind::IsReal: return 1;
    case OpKind::IsInf:
    case OpKind::IsNan:
    case OpKind::IsNegInf:
    case OpKind::IsPosInf: return 0;
    case OpKind::LogicalNot: return x == 0;
    case OpKind::Neg: return static_cast<int64_t>(0 - static_cast<uint64_t>(x));
    case OpKind::Relu: return x > 0 ? x : 0;
    case OpKind::Sign: return (x > 0) - (x < 0);
    case OpKind::SignBit: return x < 0;
    default: BRAZE_UNREACHABLE("{} has no integer unary math (dtype {})", opName(kind), toString(dtype));
  }
}

double binaryFloat(OpKind kind, double a, double b, DataType dtype) {
  switch (kind) {
    case OpKind::Add: return a + b;
    case OpKind::Sub: return a - b;
    case OpKind::Mul: return a * b;
    case OpKind::Div:
    case OpKind::TrueDiv: return a / b;
    case OpKind::Atan2: return std::atan2(a, b);
    case OpKind::Fmod:
    case OpKind::Mod: return std::fmod(a, b);
    case OpKind::Remainder: return pythonRemainder(a, b);
    case OpKind::Pow: return std::pow(a, b);
    case OpKind::Maximum: return (std::isnan(a) || std::isnan(b)) ? kNaN : std::max(a, b);
    case OpKind::Minimum: return (std::isnan(a) || std::isnan(b)) ? kNaN : std::min(a, b);
    case OpKind::NextAfter:
      // The next representable value of the result's type, not of float64.
      if (dtype == DataType::Double) return std::nextafter(a, b);
      if (dtype == DataType::Half) return narrowNextAfter(a, b, 10, -14, 65504.0);
      if (dtype == DataType::BFloat16) return narrowNextAfter(a, b, 7, -126, 0x1.fep127);
      return std::nextafter(static_cast<float>(a), static_cast<float>(b));
    case OpKind::Eq: return a == b;
    case OpKind::Ne: return a != b;
    case OpKind::Lt: return a < b;
    case OpKind::Le: return a <= b;
    case OpKind::Gt: return a > b;
    case OpKind::Ge: return a >= b;
    case OpKind::LogicalAnd: return a != 0.0 && b != 0.0;
    case OpKind::LogicalOr: return a != 0.0 || b != 0.0;
    default: BRAZE_UNREACHABLE("{} has no floating binary math", opName(kind));
  }
}

int64_t binaryInt(OpKind kind, int64_t a, int64_t b, DataType dtype) {
  const auto ua = static_cast<uint64_t>(a);
  const auto ub = static_cast<uint64_t>(b);
  const int width = widthOf(dtype);
  switch (kind) {
    case OpKind::Add: return static_cast<int64_t>(ua + ub);
    case OpKind::Sub: return static_cast<int64_t>(ua - ub);
    case OpKind::Mul: return static_cast<int64_t>(ua * ub);
    case OpKind::Div:
      BRAZE_CHECK(b != 0, "div: integer division by zero (undefined in C++ and CUDA)");
      if (a == std::numeric_limits<int64_t>::min() && b == -1) return a;  // wraps
      return a / b;                                                      // truncates toward zero, as C++
    case OpKind::Fmod:
    case OpKind::Mod:
      BRAZE_CHECK(b != 0, "{}: integer modulo by zero (undefined in C++ and CUDA)", opName(kind));
      if (b == -1) return 0;
      return a % b;  // the sign of the dividend
    case OpKind::Remainder: {
      BRAZE_CHECK(b != 0, "remainder: integer modulo by zero (undefined in C++ and CUDA)");
      if (b == -1) return 0;
      int64_t r = a % b;
      if (r != 0 && ((r < 0) != (b < 0))) r += b;  // the sign of the divisor, as Python
      return r;
    }
    case OpKind::Pow: return intPow(a, b);
    case OpKind::Maximum: return std::max(a, b);
    case OpKind::Minimum: return std::min(a, b);
    case OpKind::Eq: return a == b;
    case OpKind::Ne: return a != b;
    case OpKind::Lt: return a < b;
    case OpKind::Le: return a <= b;
    case OpKind::Gt: return a > b;
    case OpKind::Ge: return a >= b;
    case OpKind::LogicalAnd: return a != 0 && b != 0;
    case OpKind::LogicalOr: return a != 0 || b != 0;
    case OpKind::BitwiseAnd: return a & b;
    case OpKind::BitwiseOr: return a | b;
    case OpKind::BitwiseXor: return a ^ b;
    case OpKind::Gcd: return std::gcd(a, b);
    // Shifts by the type's width or more are undefined in C++; braze defines them as shifting out every bit.
    case OpKind::BitwiseLeftShift:
      return (b < 0 || b >= width) ? 0 : static_cast<int64_t>(ua << b);
    case OpKind::BitwiseRightShift:
      if (b < 0 || b >= width) return (a < 0 && isSigned(dtype)) ? -1 : 0;
      return a >> b;  // arithmetic: sign-filling for signed types
    case OpKind::LogicalRightShift: {
      if (b < 0 || b >= width) return 0;
      const uint64_t mask = width == 64 ? ~uint64_t{0} : ((uint64_t{1} << width) - 1);
      return static_cast<int64_t>((ua & mask) >> b);  // zero-filling, on the type's own width
    }
    default: BRAZE_UNREACHABLE("{} has no integer binary math", opName(kind));
  }
}

double ternaryFloat(OpKind kind, double a, double b, double c) {
  switch (kind) {
    case OpKind::Where: return a != 0.0 ? b : c;
    case OpKind::Lerp:  // torch's form: exact at both ends
      return std::abs(c) < 0.5 ? a + c * (b - a) : b - (b - a) * (1.0 - c);
    case OpKind::Clamp:  // a NaN value or bound gives NaN, as torch's clamp
      return std::isnan(a) || std::isnan(b) || std::isnan(c) ? kNaN : std::min(std::max(a, b), c);
    case OpKind::Threshold: return a <= b ? c : a;
    default: BRAZE_UNREACHABLE("ternaryFloat({})", opName(kind));
  }
}

int64_t ternaryInt(OpKind kind, int64_t a, int64_t b, int64_t c) {
  switch (kind) {
    case OpKind::Where: return a != 0 ? b : c;
    case OpKind::Clamp: return std::min(std::max(a, b), c);
    case OpKind::Threshold: return a <= b ? c : a;
    default: BRAZE_UNREACHABLE("ternaryInt({})", opName(kind));
  }
}

double elementwiseFloat(OpKind kind, std::span<const double> x, DataType dtype) {
  switch (opInfo(kind).category) {
    case OpCategory::Unary: return unaryFloat(kind, x[0], dtype);
    case OpCategory::Binary: return binaryFloat(kind, x[0], x[1], dtype);
    case OpCategory::Ternary:
      if (kind == OpKind::Addcmul) return x[0] + x[3] * x[1] * x[2];
      return ternaryFloat(kind, x[0], x[1], x[2]);
    default: BRAZE_UNREACHABLE("elementwiseFloat({})", opName(kind));
  }
}

int64_t elementwiseInt(OpKind kind, std::span<const int64_t> x, DataType dtype) {
  switch (opInfo(kind).category) {
    case OpCategory::Unary: return unaryInt(kind, x[0], dtype);
    case OpCategory::Binary: return binaryInt(kind, x[0], x[1], dtype);
    case OpCategory::Ternary:
      if (kind == OpKind::Addcmul) {
        const auto p = static_cast<uint64_t>(x[3]) * static_cast<uint64_t>(x[1]) * static_cast<uint64_t>(x[2]);
        return static_cast<int64_t>(static_cast<uint64_t>(x[0]) + p);
      }
      return ternaryInt(kind, x[0], x[1], x[2]);
    default: BRAZE_UNREACHABLE("elementwiseInt({})", opName(kind));
  }
}

DataType floatMathType(DataType result_dtype, std::span<const DataType> operand_dtypes) {
  const bool wide = result_dtype == DataType::Double ||
                    std::any_of(operand_dtypes.begin(), operand_dtypes.end(), [](DataType d) { return d == DataType::Double; });
  return wide ? DataType::Double : DataType::Float;
}

}  // namespace braze::reference
