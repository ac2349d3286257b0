#include "codegen/source_preamble.h"

#include "codegen/integer_ops_text.h"    // generated from integer_ops.inc (CMakeLists.txt)
#include "codegen/narrow_floats_text.h"  // generated from narrow_floats.inc (CMakeLists.txt)
#include "kernel/index_errors.h"

#include <fmt/format.h>

#include <string>

namespace braze::codegen {

using namespace kernel;  // the emitter prints kernel IR
namespace {

// What differs between the dialects: the headers, the storage types of the narrow floats and how they
// convert, a warp's shuffle and a load that bypasses the non-coherent L1. Every name a kernel body uses
// (braze_half, braze_load_bf16, braze_shfl_xor ...) is defined by both, so the body is the same text.
constexpr std::string_view kCudaDialect = R"CUDA(#include <cuda_fp16.h>
#include <cuda_bf16.h>
#ifdef BRAZE_FP8
#include <cuda_fp8.h>
#endif
#define BRAZE_WARP_LANES 32
typedef __half braze_half;
typedef __nv_bfloat16 braze_bf16;
__device__ __forceinline__ float braze_sqrt(float a) { return __fsqrt_rn(a); }
// Every lane of the warp takes part (the whole block runs each reduction).
template <typename T> __device__ __forceinline__ T braze_shfl_xor(T v, int offset, int width) {
  return __shfl_xor_sync(0xffffffffu, v, offset, width);
}
// A value another block of this launch wrote: read from L2, never a stale L1 line.
template <typename T> __device__ __forceinline__ T braze_load_l2(const T* p) { return __ldcg(p); }
)CUDA";

// The narrow types with CUDA's conversions (the fnuz pair has none: narrow_floats.inc's, as in HIP).
constexpr std::string_view kCudaNarrowFloats = R"CUDA(
// ---- rounding to the narrow float types (numerics.cpp), from float or directly from double (one rounding)
__device__ __forceinline__ float braze_round_half(float x) { return __half2float(__float2half_rn(x)); }
__device__ __forceinline__ float braze_round_half(double x) { return __half2float(__double2half(x)); }
__device__ __forceinline__ float braze_round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ float braze_round_bf16(double x) { return __bfloat162float(__double2bfloat16(x)); }
__device__ __forceinline__ float braze_load_half(braze_half x) { return __half2float(x); }
__device__ __forceinline__ braze_half braze_store_half(float x) { return __float2half_rn(x); }
__device__ __forceinline__ float braze_load_bf16(braze_bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ braze_bf16 braze_store_bf16(float x) { return __float2bfloat16_rn(x); }
// round_bf16(a * b) for a and b that bf16 holds exactly (their float product is exact): one bf16 multiply,
// which rounds the exact product once, instead of a float product and a float-to-bf16 conversion (a
// quarter-rate instruction on sm_90: a dequantize does one per weight). Such a float's high half is its
// bf16 and its low half zero, so a bf16x2 multiply of the two floats' bits gives the product's bf16 in the
// high half and 0 * 0 in the low: the rounded product as a float. (Below bf16's smallest normal, 2^-126,
// the float product is rounded first where the bf16 multiply is not: the two can differ by an ulp of a
// subnormal there.)
__device__ __forceinline__ float braze_mul_bf16(float a, float b) {
  const __nv_bfloat162 product = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const float*>(&product);
}

#ifdef BRAZE_FP8
// e4m3fn and e5m2: CUDA's conversions, saturating to the largest finite value (inf included).
typedef __nv_fp8_e4m3 braze_e4m3fn;
typedef __nv_fp8_e5m2 braze_e5m2;
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
__device__ __forceinline__ float braze_load_e4m3fn(braze_e4m3fn x) { return braze_e4m3fn_to_float(x.__x); }
__device__ __forceinline__ float braze_load_e5m2(braze_e5m2 x) { return braze_e5m2_to_float(x.__x); }
__device__ __forceinline__ braze_e4m3fn braze_store_e4m3fn(float x) {
  braze_e4m3fn r;
  r.__x = braze_to_e4m3fn(x);
  return r;
}
// A store keeps an infinity, which e5m2 holds (a value moved, not computed): a cast has saturated it
// already (braze_round_e5m2), as the reference's HostTensor::writeDouble does.
__device__ __forceinline__ braze_e5m2 braze_store_e5m2(float x) {
  braze_e5m2 r;
  r.__x = isinf(x) ? __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2) : braze_to_e5m2(x);
  return r;
}
#endif  // BRAZE_FP8
)CUDA";

// HIP (hiprtc): no vendor header for a narrow type is needed (Debian's HIP 5.2 has no hip_bf16.h, and
// none has the fnuz pair), so each is stored as its bits and converted by narrow_floats.inc.
constexpr std::string_view kHipDialect = R"HIP(#define BRAZE_WARP_LANES __AMDGCN_WAVEFRONT_SIZE
// HIP's __fadd_rn, __fmul_rn, __fdiv_rn are the plain operators (kept apart by -ffp-contract=off; float
// division compiles to the correctly rounded div_scale/div_fmas/div_fixup sequence). Its float sqrt is the
// hardware's approximation (v_sqrt_f32): sqrt runs in double, where HIP's is correctly rounded, and is
// rounded to float once, which gives the correctly rounded float (53 bits >= 2 * 24 + 2).
__device__ __forceinline__ float braze_sqrt(float a) { return __double2float_rn(__dsqrt_rn((double)a)); }
typedef unsigned short braze_half;
typedef unsigned short braze_bf16;
typedef unsigned char braze_e4m3fn;
typedef unsigned char braze_e5m2;
// A shuffle within groups of `width` lanes of the wavefront.
template <typename T> __device__ __forceinline__ T braze_shfl_xor(T v, int offset, int width) {
  return __shfl_xor(v, offset, width);
}
// A value another block of this launch wrote: an agent-scope load, which no CU's L1 serves stale.
template <typename T> __device__ __forceinline__ T braze_load_l2(const T* p) {
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
)HIP";

constexpr std::string_view kHipNarrowFloats = R"HIP(
// ---- rounding to the narrow float types (numerics.cpp), from float or directly from double (one rounding)
__device__ __forceinline__ float braze_round_half(double x) { return braze_half_value(braze_half_bits(x)); }
__device__ __forceinline__ float braze_round_bf16(float x) { return braze_bf16_value(braze_bf16_bits(x)); }
__device__ __forceinline__ float braze_round_bf16(double x) { return braze_bf16_value(braze_bf16_bits(x)); }
__device__ __forceinline__ float braze_round_e4m3fn(double x) { return braze_e4m3fn_value(braze_e4m3fn_bits(x)); }
__device__ __forceinline__ float braze_round_e5m2(double x) { return braze_e5m2_value(braze_e5m2_bits(x)); }
__device__ __forceinline__ float braze_load_half(braze_half x) { return braze_half_value(x); }
__device__ __forceinline__ braze_half braze_store_half(double x) { return braze_half_bits(x); }
__device__ __forceinline__ float braze_load_bf16(braze_bf16 x) { return braze_bf16_value(x); }
__device__ __forceinline__ braze_bf16 braze_store_bf16(float x) { return braze_bf16_bits(x); }
__device__ __forceinline__ float braze_mul_bf16(float a, float b) { return braze_round_bf16(a * b); }
__device__ __forceinline__ float braze_load_e4m3fn(braze_e4m3fn x) { return braze_e4m3fn_value(x); }
__device__ __forceinline__ braze_e4m3fn braze_store_e4m3fn(double x) { return braze_e4m3fn_bits(x); }
__device__ __forceinline__ float braze_load_e5m2(braze_e5m2 x) { return braze_e5m2_value(x); }
__device__ __forceinline__ braze_e5m2 braze_store_e5m2(double x) {
  return isinf(x) ? (x > 0 ? 0x7C : 0xFC) : braze_e5m2_bits(x);  // an infinity stays one (as the CUDA store)
}
)HIP";

// Both dialects: the fnuz pair through narrow_floats.inc.
constexpr std::string_view kFnuz = R"(
typedef unsigned char braze_e4m3fnuz;
typedef unsigned char braze_e5m2fnuz;
__device__ __forceinline__ float braze_round_e4m3fnuz(double x) { return braze_e4m3fnuz_value(braze_e4m3fnuz_bits(x)); }
__device__ __forceinline__ float braze_round_e5m2fnuz(double x) { return braze_e5m2fnuz_value(braze_e5m2fnuz_bits(x)); }
__device__ __forceinline__ float braze_load_e4m3fnuz(braze_e4m3fnuz x) { return braze_e4m3fnuz_value(x); }
__device__ __forceinline__ braze_e4m3fnuz braze_store_e4m3fnuz(double x) { return braze_e4m3fnuz_bits(x); }
__device__ __forceinline__ float braze_load_e5m2fnuz(braze_e5m2fnuz x) { return braze_e5m2fnuz_value(x); }
__device__ __forceinline__ braze_e5m2fnuz braze_store_e5m2fnuz(double x) { return braze_e5m2fnuz_bits(x); }
)";

// Every helper mirrors one function of reference/pointwise_math.cpp or numerics.cpp; the comment on
// each says which, and the GPU results are compared with the simulator's (element_math.h).
constexpr std::string_view kCommon = R"(
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

// The order key of a float (EKind::OrderKey): its bits as an unsigned number that grows with the float, NaN
// (any sign, any payload) above +inf, -0 taken as +0 (they compare equal).
__device__ __forceinline__ long long braze_order_key(float x) {
  if (isnan(x)) return 0xffffffffLL;
  const unsigned bits = x == 0.0f ? 0u : __float_as_uint(x);
  return (long long)((bits >> 31) != 0u ? ~bits : (bits | 0x80000000u));
}

// std::max / std::min exactly: a NaN second operand is ignored and max(-0.0, 0.0) is -0.0 (fmaxf differs).
template <typename T> __device__ __forceinline__ T braze_max(T a, T b) { return (a < b) ? b : a; }
template <typename T> __device__ __forceinline__ T braze_min(T a, T b) { return (b < a) ? b : a; }

// ---- float ops (unaryFloat, binaryFloat, ternaryFloat)
template <typename T> __device__ __forceinline__ T braze_relu(T x) {
  return x > T(0) ? x : (isnan(x) ? x : T(0));
}
template <typename T> __device__ __forceinline__ T braze_sign(T x) {
  return T(int(x > T(0)) - int(x < T(0)));  // NaN: 0, as torch's sign
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
  // A NaN value or bound gives NaN, as torch's clamp.
  return isnan(x) || isnan(lo) || isnan(hi) ? braze_nan_of(x) : braze_min(braze_max(x, lo), hi);
}
template <typename T> __device__ __forceinline__ T braze_addcmul(T x, T t1, T t2, T value) {
  return braze_add(x, braze_mul(braze_mul(value, t1), t2));
}
// nextafter in Half or BFloat16 (fraction bits, smallest normal exponent, largest finite value), of
// floats the format holds: the reference's narrowNextAfter, step for step.
__device__ __forceinline__ float braze_nextafter_narrow(float a, float b, int fraction_bits, int min_exponent,
                                                        float largest) {
  if (isnan(a) || isnan(b)) return a + b;
  if (a == b) return b;
  if (isinf(a)) return copysignf(largest, a);
  if (a == 0.0f) return copysignf(ldexpf(1.0f, min_exponent - fraction_bits), b);
  int exponent = 0;
  frexpf(a, &exponent);
  --exponent;
  const bool shrinks = (b > a) != (a > 0.0f);
  int step = max(exponent, min_exponent) - fraction_bits;
  if (shrinks && fabsf(a) == ldexpf(1.0f, exponent) && exponent > min_exponent) --step;
  const float next = a + (b > a ? ldexpf(1.0f, step) : -ldexpf(1.0f, step));
  return next == 0.0f ? copysignf(0.0f, a) : next;
}

)";

}  // namespace

std::string_view toString(SourceDialect dialect) { return dialect == SourceDialect::Hip ? "HIP" : "CUDA"; }

std::string opsPreamble(SourceDialect dialect, bool fp8) {
  std::string out;
  // cuda_fp8.h is a quarter of an otherwise empty kernel's NVRTC time: only kernels that move e4m3fn
  // or e5m2 values include it (HIP's fp8 conversions need no header).
  if (dialect == SourceDialect::Cuda && fp8) out += "#define BRAZE_FP8 1\n";
  out += dialect == SourceDialect::Hip ? kHipDialect : kCudaDialect;
  out += "\n";
  out += kNarrowFloatsText;
  out += dialect == SourceDialect::Hip ? kHipNarrowFloats : kCudaNarrowFloats;
  out += kFnuz;
  out += kCommon;
  out += kIntegerOpsText;
  return out;
}

std::string randomPreamble() {
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

std::string indexCheckPreamble() {
  // kernel/index_errors.h's word: the site above the value's bits, the value saturated. One aligned
  // 64-bit store to the mapped record, so the host reads a whole report or none.
  return fmt::format(R"(
__device__ __noinline__ long long braze_index_error(long long* record, long long site, long long value) {{
  const long long limit = {}ll;
  const long long v = value > limit ? limit : (value < -limit ? -limit : value);
  volatile long long* word = record;
  if (*word == 0) *word = static_cast<long long>(static_cast<unsigned long long>(site) << {} |
                                                 (static_cast<unsigned long long>(v) & {}ull));
  return 0;
}}
__device__ __forceinline__ long long braze_checked_index(long long value, long long extent, long long* record,
                                                         long long site) {{
  return static_cast<unsigned long long>(value) < static_cast<unsigned long long>(extent)
             ? value : braze_index_error(record, site, value);
}}
)", kIndexErrorValueLimit, 64 - kIndexErrorSiteBits, (uint64_t{1} << (64 - kIndexErrorSiteBits)) - 1);
}

}  // namespace braze::codegen
