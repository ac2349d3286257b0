#include "codegen/cuda_ops.h"

#include "support/error.h"
#include "kernel/element_math.h"
#include "reference/pointwise_math.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace braze::kernel {
namespace {

// Every helper mirrors one function of reference/pointwise_math.cpp or numerics.cpp; the comment on
// each says which, and the GPU results are compared with the simulator's (element_math.h).
constexpr std::string_view kPreamble = R"CUDA(#include <cuda_fp16.h>
#include <cuda_bf16.h>
#ifdef BRAZE_FP8
#include <cuda_fp8.h>
#endif

// ---- float arithmetic: one IEEE rounding per op, never contracted into an FMA (the reference rounds
// ---- the result of every op to its dtype)
__device__ __forceinline__ float braze_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double braze_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float braze_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double braze_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float braze_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double braze_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float braze_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double braze_div(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float braze_sqrt(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double braze_sqrt(double a) { return __dsqrt_rn(a); }
__device__ __forceinline__ float braze_abs(float a) { return fabsf(a); }
__device__ __forceinline__ double braze_abs(double a) { return fabs(a); }
__device__ __forceinline__ float braze_exp(float a) { return expf(a); }
__device__ __forceinline__ double braze_exp(double a) { return exp(a); }
__device__ __forceinline__ float braze_trunc(float a) { return truncf(a); }
__device__ __forceinline__ double braze_trunc(double a) { return trunc(a); }
__device__ __forceinline__ float braze_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double braze_fmod(double a, double b) { return fmod(a, b); }
__device__ __forceinline__ float braze_nan_of(float) { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ double braze_nan_of(double) { return __longlong_as_double(0x7ff8000000000000LL); }

// std::max / std::min exactly: a NaN second operand is ignored and max(-0.0, 0.0) is -0.0 (fmaxf differs).
template <typename T> __device__ __forceinline__ T braze_max(T a, T b) { return (a < b) ? b : a; }
template <typename T> __device__ __forceinline__ T braze_min(T a, T b) { return (b < a) ? b : a; }

// ---- float ops (unaryFloat, binaryFloat, ternaryFloat)
template <typename T> __device__ __forceinline__ T braze_relu(T x) {
  return x > T(0) ? x : (isnan(x) ? x : T(0));
}
template <typename T> __device__ __forceinline__ T braze_sign(T x) {
  return isnan(x) ? x : T(int(x > T(0)) - int(x < T(0)));
}
template <typename T> __device__ __forceinline__ T braze_frac(T x) { return braze_sub(x, braze_trunc(x)); }
template <typename T> __device__ __forceinline__ T braze_sigmoid(T x) {
  return braze_div(T(1), braze_add(T(1), braze_exp(-x)));
}
template <typename T> __device__ __forceinline__ T braze_silu(T x) {
  return braze_div(x, braze_add(T(1), braze_exp(-x)));
}
template <typename T> __device__ __forceinline__ bool braze_isposinf(T x) { return isinf(x) && x > T(0); }
template <typename T> __device__ __forceinline__ bool braze_isneginf(T x) { return isinf(x) && x < T(0); }
// Python's remainder: the sign of the divisor.
template <typename T> __device__ __forceinline__ T braze_remainder(T a, T b) {
  T r = braze_fmod(a, b);
  if (r != T(0) && ((r < T(0)) != (b < T(0)))) r = braze_add(r, b);
  return r;
}
template <typename T> __device__ __forceinline__ T braze_maximum(T a, T b) {
  return (isnan(a) || isnan(b)) ? braze_nan_of(a) : braze_max(a, b);
}
template <typename T> __device__ __forceinline__ T braze_minimum(T a, T b) {
  return (isnan(a) || isnan(b)) ? braze_nan_of(a) : braze_min(a, b);
}
// torch's lerp: exact at both ends.
template <typename T> __device__ __forceinline__ T braze_lerp(T a, T b, T w) {
  return braze_abs(w) < T(0.5) ? braze_add(a, braze_mul(w, braze_sub(b, a)))
                               : braze_sub(b, braze_mul(braze_sub(b, a), braze_sub(T(1), w)));
}
template <typename T> __device__ __forceinline__ T braze_clamp(T x, T lo, T hi) {
  return isnan(x) ? x : braze_min(braze_max(x, lo), hi);
}
template <typename T> __device__ __forceinline__ T braze_addcmul(T x, T t1, T t2, T value) {
  return braze_add(x, braze_mul(braze_mul(value, t1), t2));
}
// The reference's erfcinv is erfinv(1 - x) in double (so x below 2^-53 gives inf, as it does there).
__device__ __forceinline__ double braze_erfcinv(double x) { return erfinv(__dsub_rn(1.0, x)); }

// ---- integer ops on long long (unaryInt, binaryInt): wrap-around through unsigned arithmetic
__device__ __forceinline__ long long braze_add_i(long long a, long long b) {
  return (long long)((unsigned long long)a + (unsigned long long)b);
}
__device__ __forceinline__ long long braze_sub_i(long long a, long long b) {
  return (long long)((unsigned long long)a - (unsigned long long)b);
}
__device__ __forceinline__ long long braze_mul_i(long long a, long long b) {
  return (long long)((unsigned long long)a * (unsigned long long)b);
}
__device__ __forceinline__ long long braze_neg_i(long long a) { return (long long)(0ULL - (unsigned long long)a); }
__device__ __forceinline__ long long braze_abs_i(long long a) { return a < 0 ? braze_neg_i(a) : a; }
__device__ __forceinline__ long long braze_relu_i(long long a) { return a > 0 ? a : 0LL; }
__device__ __forceinline__ long long braze_sign_i(long long a) { return (long long)(int(a > 0) - int(a < 0)); }
// Division truncates toward zero; the reference rejects a zero divisor, kernels give 0.
__device__ __forceinline__ long long braze_div_i(long long a, long long b) {
  if (b == 0) return 0;
  if (b == -1) return braze_neg_i(a);  // INT64_MIN / -1 wraps
  return a / b;
}
// fmod and mod: the sign of the dividend.
__device__ __forceinline__ long long braze_fmod_i(long long a, long long b) {
  if (b == 0 || b == -1) return 0;
  return a % b;
}
// remainder: the sign of the divisor, as Python.
__device__ __forceinline__ long long braze_remainder_i(long long a, long long b) {
  if (b == 0 || b == -1) return 0;
  long long r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
// Power by squaring, wrapping; a negative exponent gives 0 except for bases 1 and -1 (torch's rule;
// the reference rejects 0 ** negative, kernels give 0).
__device__ __forceinline__ long long braze_pow_i(long long base, long long exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;
  }
  unsigned long long result = 1;
  unsigned long long b = (unsigned long long)base;
  while (exp > 0) {
    if (exp & 1) result *= b;
    b *= b;
    exp >>= 1;
  }
  return (long long)result;
}
// std::gcd: the gcd of the magnitudes (gcd(INT64_MIN, 0) wraps to INT64_MIN, as libstdc++ gives).
__device__ __forceinline__ long long braze_gcd_i(long long a, long long b) {
  unsigned long long x = a < 0 ? 0ULL - (unsigned long long)a : (unsigned long long)a;
  unsigned long long y = b < 0 ? 0ULL - (unsigned long long)b : (unsigned long long)b;
  while (y != 0) {
    const unsigned long long t = x % y;
    x = y;
    y = t;
  }
  return (long long)x;
}
// Shifts by the type's width or more shift out every bit (undefined in C++, defined by braze).
__device__ __forceinline__ long long braze_shl_i(long long a, long long b, int width) {
  return (b < 0 || b >= width) ? 0LL : (long long)((unsigned long long)a << b);
}
__device__ __forceinline__ long long braze_shr_i(long long a, long long b, int width, bool is_signed) {
  if (b < 0 || b >= width) return (a < 0 && is_signed) ? -1LL : 0LL;
  return a >> b;
}
__device__ __forceinline__ long long braze_lshr_i(long long a, long long b, int width) {
  if (b < 0 || b >= width) return 0;
  const unsigned long long mask = width == 64 ? ~0ULL : ((1ULL << width) - 1);
  return (long long)(((unsigned long long)a & mask) >> b);
}
__device__ __forceinline__ long long braze_threshold_i(long long x, long long t, long long v) { return x <= t ? v : x; }
template <typename T> __device__ __forceinline__ T braze_threshold(T x, T t, T v) { return x <= t ? v : x; }
__device__ __forceinline__ long long braze_addcmul_i(long long x, long long t1, long long t2, long long value) {
  const unsigned long long p = (unsigned long long)value * (unsigned long long)t1 * (unsigned long long)t2;
  return (long long)((unsigned long long)x + p);
}

// ---- conversions to integer types
__device__ __forceinline__ long long braze_wrap_i8(long long v) { return (long long)(signed char)v; }
__device__ __forceinline__ long long braze_wrap_u8(long long v) { return (long long)(unsigned char)v; }
__device__ __forceinline__ long long braze_wrap_i16(long long v) { return (long long)(short)v; }
__device__ __forceinline__ long long braze_wrap_i32(long long v) { return (long long)(int)v; }
// floatToInt: truncate toward zero, saturate to [lo, hi], NaN -> 0 (what CUDA's cvt.rzi does).
__device__ __forceinline__ long long braze_float_to_int(double x, long long lo, long long hi) {
  if (isnan(x)) return 0;
  const double t = trunc(x);
  if (t <= (double)lo) return lo;
  if (t >= (double)hi) return hi;
  return (long long)t;
}

// ---- rounding to the narrow float types (numerics.cpp), from float or directly from double (one rounding)
__device__ __forceinline__ float braze_round_half(float x) { return __half2float(__float2half_rn(x)); }
__device__ __forceinline__ float braze_round_half(double x) { return __half2float(__double2half(x)); }
__device__ __forceinline__ float braze_round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ float braze_round_bf16(double x) { return __bfloat162float(__double2bfloat16(x)); }

#ifdef BRAZE_FP8
// e4m3fn and e5m2: CUDA's conversions, saturating to the largest finite value (inf included).
__device__ __forceinline__ float braze_e4m3fn_to_float(__nv_fp8_storage_t bits) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(bits, __NV_E4M3)));
}
__device__ __forceinline__ float braze_e5m2_to_float(__nv_fp8_storage_t bits) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(bits, __NV_E5M2)));
}
__device__ __forceinline__ __nv_fp8_storage_t braze_to_e4m3fn(float x) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ __nv_fp8_storage_t braze_to_e4m3fn(double x) {
  return __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ __nv_fp8_storage_t braze_to_e5m2(float x) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
}
__device__ __forceinline__ __nv_fp8_storage_t braze_to_e5m2(double x) {
  return __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
}
__device__ __forceinline__ float braze_round_e4m3fn(float x) { return braze_e4m3fn_to_float(braze_to_e4m3fn(x)); }
__device__ __forceinline__ float braze_round_e4m3fn(double x) { return braze_e4m3fn_to_float(braze_to_e4m3fn(x)); }
__device__ __forceinline__ float braze_round_e5m2(float x) { return braze_e5m2_to_float(braze_to_e5m2(x)); }
__device__ __forceinline__ float braze_round_e5m2(double x) { return braze_e5m2_to_float(braze_to_e5m2(x)); }
__device__ __forceinline__ __nv_fp8_e4m3 braze_store_e4m3fn(float x) {
  __nv_fp8_e4m3 r;
  r.__x = braze_to_e4m3fn(x);
  return r;
}
__device__ __forceinline__ __nv_fp8_e5m2 braze_store_e5m2(float x) {
  __nv_fp8_e5m2 r;
  r.__x = braze_to_e5m2(x);
  return r;
}
#endif  // BRAZE_FP8

// e4m3fnuz (bias 8) and e5m2fnuz (bias 16): no inf, no -0, the one NaN is 0x80; saturating. CUDA has
// no type for them: numerics.cpp's encode/decode in software, stored as unsigned char.
__device__ __forceinline__ unsigned char braze_to_fnuz(double v, int man_bits, int bias) {
  if (isnan(v)) return 0x80;
  const unsigned long long bits = (unsigned long long)__double_as_longlong(v);
  const unsigned long long sign = (bits >> 63) != 0 ? 0x80ULL : 0ULL;
  const unsigned long long max_code = 0x7f;  // every exponent and mantissa bit set is finite
  unsigned long long code = ~0ULL;  // inf saturates
  if (!isinf(v)) {
    // roundMagnitude: the code the value rounds to with an unbounded exponent field.
    const unsigned long long abs_bits = bits & 0x7fffffffffffffffULL;
    const unsigned long long exp_field = abs_bits >> 52;
    const unsigned long long fraction = abs_bits & ((1ULL << 52) - 1);
    if (exp_field == 0 && fraction == 0) return 0;
    const unsigned long long sig = exp_field != 0 ? (fraction | (1ULL << 52)) : fraction;
    const int sig_exp = (int)(exp_field != 0 ? exp_field : 1) - 1075;
    const int floor_log2 = (63 - __clzll((long long)sig)) + sig_exp;
    const int qmin = 1 - bias - man_bits;
    const int q = floor_log2 - man_bits > qmin ? floor_log2 - man_bits : qmin;
    const int shift = q - sig_exp;
    unsigned long long n = 0;
    if (shift <= 0) {
      n = sig << -shift;
    } else if (shift <= 53) {
      n = sig >> shift;
      const unsigned long long rest = sig & ((1ULL << shift) - 1);
      const unsigned long long half = 1ULL << (shift - 1);
      if (rest > half || (rest == half && (n & 1) != 0)) ++n;
    }
    code = ((unsigned long long)(q - qmin) << man_bits) + n;
  }
  if (code > max_code) return (unsigned char)(sign | max_code);
  if (code == 0) return 0;  // -0 (or a tiny negative) would land on the NaN code
  return (unsigned char)(sign | code);
}
__device__ __forceinline__ float braze_from_fnuz(unsigned char bits, int man_bits, int bias) {
  if (bits == 0x80) return __int_as_float(0x7fc00000);
  const int code = bits & 0x7f;
  const int exp_field = code >> man_bits;
  const int mantissa = code & ((1 << man_bits) - 1);
  const int qmin = 1 - bias - man_bits;
  const float magnitude = exp_field == 0 ? ldexpf((float)mantissa, qmin)
                                         : ldexpf((float)(mantissa | (1 << man_bits)), qmin + exp_field - 1);
  return (bits & 0x80) != 0 ? -magnitude : magnitude;
}
__device__ __forceinline__ unsigned char braze_to_e4m3fnuz(double x) { return braze_to_fnuz(x, 3, 8); }
__device__ __forceinline__ unsigned char braze_to_e5m2fnuz(double x) { return braze_to_fnuz(x, 2, 16); }
__device__ __forceinline__ float braze_e4m3fnuz_to_float(unsigned char bits) { return braze_from_fnuz(bits, 3, 8); }
__device__ __forceinline__ float braze_e5m2fnuz_to_float(unsigned char bits) { return braze_from_fnuz(bits, 2, 16); }
__device__ __forceinline__ float braze_round_e4m3fnuz(double x) {
  return braze_e4m3fnuz_to_float(braze_to_e4m3fnuz(x));
}
__device__ __forceinline__ float braze_round_e5m2fnuz(double x) {
  return braze_e5m2fnuz_to_float(braze_to_e5m2fnuz(x));
}
)CUDA";

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
  return fmt::format("(({}){})", cudaComputeTypeName(math), paren(v.text));
}

// floatToInt of a float or double into the range of integer `dtype`.
std::string floatToInt(const Value& v, DataType dtype) {
  return fmt::format("braze_float_to_int((double){}, {}, {})", paren(v.text),
                     cudaLiteral(integerMin(dtype), DataType::Int64), cudaLiteral(integerMax(dtype), DataType::Int64));
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
    case OpKind::Erfcinv:  // in double whatever the math type: 1 - x must not round in float
      return {fmt::format("braze_erfcinv({})", math == DataType::Double ? x : fmt::format("((double){})", x)),
              DataType::Double};
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

std::string_view cudaComputeTypeName(DataType dtype) {
  switch (computeTypeOf(dtype)) {
    case DataType::Float: return "float";
    case DataType::Double: return "double";
    case DataType::Bool: return "bool";
    default: return "long long";
  }
}

std::string_view cudaStorageTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::Bool: return "bool";
    case DataType::Int8: return "signed char";
    case DataType::UInt8: return "unsigned char";
    case DataType::Int16: return "short";
    case DataType::Int32: return "int";
    case DataType::Int64: return "long long";
    case DataType::Half: return "__half";
    case DataType::BFloat16: return "__nv_bfloat16";
    case DataType::Float: return "float";
    case DataType::Double: return "double";
    case DataType::Float8_e4m3fn: return "__nv_fp8_e4m3";
    case DataType::Float8_e5m2: return "__nv_fp8_e5m2";
    case DataType::Float8_e4m3fnuz:
    case DataType::Float8_e5m2fnuz: return "unsigned char";
    case DataType::Null: break;
  }
  BRAZE_UNREACHABLE("cudaStorageTypeName({})", toString(dtype));
}

std::string cudaOpsPreamble(bool fp8) {
  // cuda_fp8.h is a quarter of an otherwise empty kernel's NVRTC time: only kernels that move e4m3fn
  // or e5m2 values include it (the fnuz types are converted in software and need no header).
  return fp8 ? "#define BRAZE_FP8 1\n" + std::string(kPreamble) : std::string(kPreamble);
}

std::string cudaRandomPreamble() {
  // The same words and the same double arithmetic as ir/random_numbers.cpp: a kernel's random tensor
  // equals the reference's (normal to the last bit of CUDA's log, sin and cos, which may differ by an
  // ulp from the host's in double, before the rounding to the output's dtype).
  return R"(
__device__ __forceinline__ uint4 braze_philox(unsigned long long seed, unsigned long long offset,
                                              unsigned long long call) {
  unsigned int c0 = (unsigned int)call, c1 = (unsigned int)(call >> 32);
  unsigned int c2 = (unsigned int)offset, c3 = (unsigned int)(offset >> 32);
  unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const unsigned int n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return make_uint4(c0, c1, c2, c3);
}
__device__ __forceinline__ unsigned int braze_philox_word(uint4 w, unsigned long long k) {
  return k == 0 ? w.x : k == 1 ? w.y : k == 2 ? w.z : w.w;
}
__device__ __forceinline__ double braze_unit(unsigned int word) {
  return ((double)word + 0.5) * 2.3283064365386962890625e-10;
}
__device__ __forceinline__ double braze_uniform_unit(long long seed, long long offset, long long i) {
  const unsigned long long n = (unsigned long long)i;
  return braze_unit(braze_philox_word(braze_philox(seed, offset, n / 4), n % 4));
}
__device__ __forceinline__ double braze_standard_normal(long long seed, long long offset, long long i) {
  const unsigned long long n = (unsigned long long)i;
  const uint4 w = braze_philox(seed, offset, n / 4);
  const unsigned long long pair = (n % 4) / 2 * 2;
  const double radius = sqrt(-2.0 * log(braze_unit(braze_philox_word(w, pair))));
  const double angle = 6.283185307179586 * braze_unit(braze_philox_word(w, pair + 1));
  return n % 2 == 0 ? radius * cos(angle) : radius * sin(angle);
}
)";
}

std::string cudaElementwise(OpKind kind, DataType result_dtype, std::span<const Operand> operands) {
  BRAZE_ASSERT(isElementwise(kind), "cudaElementwise: {} is not elementwise", opName(kind));
  const size_t n = operandCount(kind);
  BRAZE_ASSERT(operands.size() == n, "cudaElementwise: {} takes {} operands, got {}", opName(kind), n, operands.size());
  if (kind == OpKind::CastOp) return cudaCast(operands[0], result_dtype);

  std::vector<DataType> dtypes;
  std::vector<Value> in;
  for (const Operand& op : operands) {
    dtypes.push_back(op.dtype);
    in.push_back({op.expr, op.dtype});
  }
  const OpCategory category = opInfo(kind).category;
  Value out;
  if (computesInFloat(kind, result_dtype, dtypes)) {
    const bool wide = result_dtype == DataType::Double ||
                      std::any_of(dtypes.begin(), dtypes.end(), [](DataType d) { return !fitsFloat(d); });
    const DataType math = wide ? DataType::Double : DataType::Float;
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
        default: BRAZE_UNREACHABLE("cudaElementwise({})", opName(kind));
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

std::string cudaCast(const Operand& value, DataType to) {
  BRAZE_ASSERT(value.dtype != DataType::Null && to != DataType::Null, "cudaCast: a Null dtype");
  return toResult({value.expr, value.dtype}, to);
}

std::string cudaFromStorage(std::string_view stored, DataType dtype) {
  switch (dtype) {
    case DataType::Bool:
    case DataType::Float:
    case DataType::Double:
    case DataType::Int64: return paren(stored);
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Int16:
    case DataType::Int32: return fmt::format("((long long){})", paren(stored));
    case DataType::Half: return fmt::format("__half2float({})", stored);
    case DataType::BFloat16: return fmt::format("__bfloat162float({})", stored);
    case DataType::Float8_e4m3fn: return fmt::format("braze_e4m3fn_to_float({}.__x)", paren(stored));
    case DataType::Float8_e5m2: return fmt::format("braze_e5m2_to_float({}.__x)", paren(stored));
    case DataType::Float8_e4m3fnuz: return fmt::format("braze_e4m3fnuz_to_float({})", stored);
    case DataType::Float8_e5m2fnuz: return fmt::format("braze_e5m2fnuz_to_float({})", stored);
    case DataType::Null: break;
  }
  BRAZE_UNREACHABLE("cudaFromStorage({})", toString(dtype));
}

std::string cudaToStorage(std::string_view value, DataType dtype) {
  switch (dtype) {
    case DataType::Bool:
    case DataType::Float:
    case DataType::Double:
    case DataType::Int64: return paren(value);
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Int16:
    case DataType::Int32: return fmt::format("(({}){})", cudaStorageTypeName(dtype), paren(value));
    case DataType::Half: return fmt::format("__float2half_rn({})", value);
    case DataType::BFloat16: return fmt::format("__float2bfloat16_rn({})", value);
    case DataType::Float8_e4m3fn: return fmt::format("braze_store_e4m3fn({})", value);
    case DataType::Float8_e5m2: return fmt::format("braze_store_e5m2({})", value);
    case DataType::Float8_e4m3fnuz: return fmt::format("braze_to_e4m3fnuz((double){})", paren(value));
    case DataType::Float8_e5m2fnuz: return fmt::format("braze_to_e5m2fnuz((double){})", paren(value));
    case DataType::Null: break;
  }
  BRAZE_UNREACHABLE("cudaToStorage({})", toString(dtype));
}

std::string cudaLiteral(double value, DataType dtype) {
  const DataType compute = computeTypeOf(dtype);
  if (compute == DataType::Bool) return value != 0.0 ? "true" : "false";  // NaN is true, as a C++ conversion gives
  if (compute == DataType::Int64) return cudaLiteral(reference::floatToInt(value, dtype), dtype);
  return floatLiteral(reference::roundToType(value, dtype), compute);
}

std::string cudaLiteral(int64_t value, DataType dtype) {
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

}  // namespace braze::kernel
