// codegen/narrow_floats.inc, the kernel text every kernel's preamble embeds for the fnuz fp8 formats (and a
// HIP kernel's for every narrow float), compiled here for the host: each format's encode from a double
// and decode of every bit pattern must equal ir/numerics.cpp's, bit for bit, NaN, inf, -0, subnormals,
// ties and saturation included. So must its float arithmetic that replaces conversions: 8-bit integers to
// float, and quantize's quotient rounded to fp8 from float math as from the double quotient.
#include "ir/numerics.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace braze::kernel {
namespace {

// The device functions the text calls, as the host spells them.
#define __device__
#define __forceinline__ inline
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
inline int __clzll(long long x) { return std::countl_zero(static_cast<unsigned long long>(x)); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline unsigned int __float_as_uint(float x) { return std::bit_cast<unsigned int>(x); }
inline float __uint_as_float(unsigned int x) { return std::bit_cast<float>(x); }
inline float __fdiv_rn(float a, float b) { return a / b; }  // IEEE float division on the host (SSE)
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
using std::isfinite;
using std::isinf;
using std::isnan;
#include "codegen/narrow_floats.inc"
#undef __device__
#undef __forceinline__

struct Format {
  const char* name;
  int bits;
  uint32_t (*kernel_encode)(double);
  float (*kernel_decode)(uint32_t);
  uint32_t (*reference_encode)(double);
  double (*reference_decode)(uint32_t);
};

const Format kFormats[] = {
    {"half", 16, [](double x) -> uint32_t { return braze_half_bits(x); },
     [](uint32_t b) { return braze_half_value(static_cast<unsigned short>(b)); },
     [](double x) -> uint32_t { return numerics::toHalfBits(x); },
     [](uint32_t b) { return numerics::fromHalfBits(static_cast<uint16_t>(b)); }},
    {"bfloat16", 16, [](double x) -> uint32_t { return braze_bf16_bits(x); },
     [](uint32_t b) { return braze_bf16_value(static_cast<unsigned short>(b)); },
     [](double x) -> uint32_t { return numerics::toBFloat16Bits(x); },
     [](uint32_t b) { return numerics::fromBFloat16Bits(static_cast<uint16_t>(b)); }},
    {"e4m3fn", 8, [](double x) -> uint32_t { return braze_e4m3fn_bits(x); },
     [](uint32_t b) { return braze_e4m3fn_value(static_cast<unsigned char>(b)); },
     [](double x) -> uint32_t { return numerics::toFloat8E4M3FnBits(x); },
     [](uint32_t b) { return numerics::fromFloat8E4M3FnBits(static_cast<uint8_t>(b)); }},
    {"e5m2", 8, [](double x) -> uint32_t { return braze_e5m2_bits(x); },
     [](uint32_t b) { return braze_e5m2_value(static_cast<unsigned char>(b)); },
     [](double x) -> uint32_t { return numerics::toFloat8E5M2Bits(x); },
     [](uint32_t b) { return numerics::fromFloat8E5M2Bits(static_cast<uint8_t>(b)); }},
    {"e4m3fnuz", 8, [](double x) -> uint32_t { return braze_e4m3fnuz_bits(x); },
     [](uint32_t b) { return braze_e4m3fnuz_value(static_cast<unsigned char>(b)); },
     [](double x) -> uint32_t { return numerics::toFloat8E4M3FnuzBits(x); },
     [](uint32_t b) { return numerics::fromFloat8E4M3FnuzBits(static_cast<uint8_t>(b)); }},
    {"e5m2fnuz", 8, [](double x) -> uint32_t { return braze_e5m2fnuz_bits(x); },
     [](uint32_t b) { return braze_e5m2fnuz_value(static_cast<unsigned char>(b)); },
     [](double x) -> uint32_t { return numerics::toFloat8E5M2FnuzBits(x); },
     [](uint32_t b) { return numerics::fromFloat8E5M2FnuzBits(static_cast<uint8_t>(b)); }},
};

// Equal as values, NaN included (with its sign, which a later encode keeps).
bool sameValue(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) && std::signbit(a) == std::signbit(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

TEST(NarrowFloats, DecodeOfEveryBitPatternEqualsTheReference) {
  for (const Format& f : kFormats) {
    for (uint32_t bits = 0; bits < (1u << f.bits); ++bits) {
      ASSERT_TRUE(sameValue(f.kernel_decode(bits), f.reference_decode(bits))) << f.name << " bits " << bits;
    }
  }
}

// Every representable value, the midpoints between neighbours (ties), a hair either side of each, values
// past the largest finite one, specials, and random doubles of every magnitude.
std::vector<double> encodeProbes(const Format& f) {
  std::vector<double> probes = {0.0, -0.0, std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
                                -std::numeric_limits<double>::quiet_NaN(), 1e300, -1e300, 1e-300, -1e-300,
                                std::numeric_limits<double>::denorm_min(), 65504.0, 65520.0, 448.0, 464.0, 240.0,
                                248.0, 57344.0, 61440.0, 3.4e38, 3.40282357e38};
  std::vector<double> values;
  for (uint32_t bits = 0; bits < (1u << f.bits); ++bits) {
    const double v = f.reference_decode(bits);
    if (std::isfinite(v)) values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    probes.insert(probes.end(), {v, std::nextafter(v, 1e308), std::nextafter(v, -1e308)});
    if (i + 1 < values.size() && values[i + 1] != v) {
      const double mid = v + (values[i + 1] - v) / 2;
      probes.insert(probes.end(), {mid, std::nextafter(mid, 1e308), std::nextafter(mid, -1e308)});
    }
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) probes.push_back(std::bit_cast<double>(rng()));
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (int e = -160; e <= 140; ++e) probes.push_back(std::ldexp(unit(rng), e));
  return probes;
}

TEST(NarrowFloats, EncodeEqualsTheReferenceOnTiesNeighboursAndRandomValues) {
  for (const Format& f : kFormats) {
    for (double v : encodeProbes(f)) {
      ASSERT_EQ(f.kernel_encode(v), f.reference_encode(v)) << f.name << " of " << v << " (bits "
                                                           << std::bit_cast<uint64_t>(v) << ")";
    }
  }
}

// bfloat16 from a float takes the top bits (the fast path HIP kernels store with): one rounding, as
// from the float's exact double.
TEST(NarrowFloats, Bfloat16FromAFloatEqualsTheReference) {
  std::mt19937 rng(11);
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x3f808000u, 0x3f818000u, 0x3f80c000u};
  for (int i = 0; i < 200000; ++i) bits.push_back(rng());
  for (uint32_t b : bits) {
    const float x = std::bit_cast<float>(b);
    ASSERT_EQ(braze_bf16_bits(x), numerics::toBFloat16Bits(static_cast<double>(x))) << "float bits " << b;
  }
}

TEST(NarrowFloats, EightBitIntegersBecomeTheirFloats) {
  for (int v = -128; v < 128; ++v) ASSERT_EQ(braze_i8_to_float(v), static_cast<float>(v)) << v;
  for (int v = 0; v < 256; ++v) ASSERT_EQ(braze_u8_to_float(v), static_cast<float>(v)) << v;
}

// Quantize to e4m3fn / e5m2 divides in double and rounds once; the kernels divide in float and move a
// quotient that is a possible fp8 tie one ulp toward the exact one. Both must give the same fp8 value for
// float and bf16 x and float scales, on quotients that land on or a few float ulps from every tie and
// every representable value, and on random ones. Rounding the plain float quotient would not (the test
// counts its misses, so that the probes do reach the case the adjustment is for).
TEST(NarrowFloats, QuotientForFp8RoundsAsTheDoubleQuotient) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  auto randomScale = [&] {
    std::uniform_int_distribution<int> exponent(-12, 6);
    return std::ldexp(mantissa(rng), exponent(rng)) * (rng() % 8 == 0 ? -1.0f : 1.0f);
  };
  for (const Format& f : kFormats) {
    if (std::string_view(f.name) != "e4m3fn" && std::string_view(f.name) != "e5m2") continue;
    std::vector<double> targets;  // every finite value and the midpoints between neighbours
    std::vector<double> values;
    for (uint32_t bits = 0; bits < (1u << f.bits); ++bits) {
      const double v = f.reference_decode(bits);
      if (std::isfinite(v)) values.push_back(v);
    }
    std::sort(values.begin(), values.end());
    for (size_t i = 0; i + 1 < values.size(); ++i) targets.insert(targets.end(), {values[i], (values[i] + values[i + 1]) / 2});
    int64_t plain_misses = 0, probes = 0;
    auto check = [&](float x, float s) {
      const uint32_t want = f.reference_encode(static_cast<double>(x) / static_cast<double>(s));
      ASSERT_EQ(f.reference_encode(braze_quotient_for_fp8(x, s)), want) << f.name << ": " << x << " / " << s;
      plain_misses += f.reference_encode(x / s) != want;
      ++probes;
    };
    for (double target : targets) {
      for (int trial = 0; trial < 24; ++trial) {
        const float s = randomScale();
        float x = static_cast<float>(target * s);
        if (trial % 2 == 1) x = static_cast<float>(numerics::fromBFloat16Bits(numerics::toBFloat16Bits(x)));  // bf16 x
        for (int step = 0; step < 4; ++step) {
          check(x, s);
          check(std::nextafter(x, 0.0f), s);
          x = std::nextafter(x, std::numeric_limits<float>::infinity());
        }
      }
    }
    std::uniform_real_distribution<float> any(-600.0f, 600.0f);
    for (int i = 0; i < 200000; ++i) check(any(rng), randomScale());
    for (float x : {0.0f, -0.0f, 1e-45f, -1e-45f, 3.4e38f, -3.4e38f, std::numeric_limits<float>::infinity()}) {
      check(x, 0.05f);
      check(x, 1e-30f);
    }
    EXPECT_GT(plain_misses, 0) << f.name << ": no probe separated the float quotient from the double one ("
                               << probes << " probes)";
  }
}

}  // namespace
}  // namespace braze::kernel
