#include "ir/numerics.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace braze::numerics {
namespace {

struct GoldenCase {
  double input;
  uint32_t bits;
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

#include "reference/numerics_golden_bfloat16.inc"
#include "reference/numerics_golden_half.inc"
#include "reference/numerics_golden_float8_e4m3fn.inc"
#include "reference/numerics_golden_float8_e5m2.inc"
#include "reference/numerics_golden_float8_e4m3fnuz.inc"
#include "reference/numerics_golden_float8_e5m2fnuz.inc"

// One view of a format, so the checks that hold for every format are written once.
struct FormatApi {
  const char* name;
  int width;
  uint32_t (*to)(double);
  double (*from)(uint32_t);
  uint32_t canonicalNaN;          // what a positive NaN converts to
  uint32_t canonicalNegativeNaN;  // what a negative NaN converts to
  bool hasNegativeZero;
};

const std::vector<FormatApi>& allFormats() {
  static const std::vector<FormatApi> formats = {
      {"bfloat16", 16, [](double v) -> uint32_t { return toBFloat16Bits(v); },
       [](uint32_t b) { return fromBFloat16Bits(static_cast<uint16_t>(b)); }, 0x7FC0, 0xFFC0, true},
      {"half", 16, [](double v) -> uint32_t { return toHalfBits(v); },
       [](uint32_t b) { return fromHalfBits(static_cast<uint16_t>(b)); }, 0x7E00, 0xFE00, true},
      {"e4m3fn", 8, [](double v) -> uint32_t { return toFloat8E4M3FnBits(v); },
       [](uint32_t b) { return fromFloat8E4M3FnBits(static_cast<uint8_t>(b)); }, 0x7F, 0xFF, true},
      {"e5m2", 8, [](double v) -> uint32_t { return toFloat8E5M2Bits(v); },
       [](uint32_t b) { return fromFloat8E5M2Bits(static_cast<uint8_t>(b)); }, 0x7E, 0xFE, true},
      {"e4m3fnuz", 8, [](double v) -> uint32_t { return toFloat8E4M3FnuzBits(v); },
       [](uint32_t b) { return fromFloat8E4M3FnuzBits(static_cast<uint8_t>(b)); }, 0x80, 0x80, false},
      {"e5m2fnuz", 8, [](double v) -> uint32_t { return toFloat8E5M2FnuzBits(v); },
       [](uint32_t b) { return fromFloat8E5M2FnuzBits(static_cast<uint8_t>(b)); }, 0x80, 0x80, false},
  };
  return formats;
}

const FormatApi& format(const std::string& name) {
  for (const FormatApi& f : allFormats()) {
    if (name == f.name) {
      return f;
    }
  }
  throw std::runtime_error("unknown format " + name);
}

std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", v);
  return buf;
}

// A rounding table row: input and the exact bits it must become.
struct Row {
  double input;
  uint32_t bits;
};

void expectRows(const std::string& name, std::span<const Row> rows) {
  const FormatApi& f = format(name);
  for (const Row& row : rows) {
    EXPECT_EQ(f.to(row.input), row.bits) << f.name << " input " << hex(row.input);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Every bit pattern survives from -> to (NaNs collapse to the canonical NaN of their sign).

TEST(Numerics, EveryBitPatternRoundTrips) {
  for (const FormatApi& f : allFormats()) {
    int nanCount = 0;
    for (uint32_t bits = 0; bits < (1u << f.width); ++bits) {
      const double value = f.from(bits);
      if (std::isnan(value)) {
        ++nanCount;
        const uint32_t expected = std::signbit(value) ? f.canonicalNegativeNaN : f.canonicalNaN;
        EXPECT_EQ(f.to(value), expected) << f.name << " NaN pattern " << bits;
        continue;
      }
      if (!f.hasNegativeZero) {
        EXPECT_FALSE(value == 0.0 && std::signbit(value)) << f.name << " decodes -0 from " << bits;
      }
      if (std::isinf(value) && std::string(f.name) == "e5m2") {
        // SATFINITE: the inf codes decode to inf, but converting inf clamps to +-57344.
        EXPECT_EQ(f.to(value), std::signbit(value) ? 0xFBu : 0x7Bu) << f.name << " pattern " << bits;
        continue;
      }
      EXPECT_EQ(f.to(value), bits) << f.name << " pattern " << bits << " = " << hex(value);
    }
    // IEEE formats: 2 * (2^mantissa - 1) NaNs; e4m3fn: 2; fnuz: 1.
    const int expectedNaNs = std::string(f.name) == "bfloat16" ? 254
        : std::string(f.name) == "half"                        ? 2046
        : std::string(f.name) == "e5m2"                        ? 6
        : std::string(f.name) == "e4m3fn"                      ? 2
                                                               : 1;
    EXPECT_EQ(nanCount, expectedNaNs) << f.name;
  }
}

TEST(Numerics, PositiveCodesDecodeInIncreasingOrder) {
  for (const FormatApi& f : allFormats()) {
    double previous = -1.0;
    for (uint32_t bits = 0; bits < (1u << (f.width - 1)); ++bits) {
      const double value = f.from(bits);
      if (std::isnan(value)) {
        continue;
      }
      EXPECT_GT(value, previous) << f.name << " pattern " << bits;
      if (bits != 0 || f.hasNegativeZero) {  // fnuz: the -0 slot is the NaN, checked elsewhere
        EXPECT_EQ(f.from(bits | (1u << (f.width - 1))), -value) << f.name << " pattern " << bits;
      }
      previous = value;
    }
  }
}

TEST(Numerics, DecodesKnownValues) {
  EXPECT_EQ(fromBFloat16Bits(0x3F80), 1.0);
  EXPECT_EQ(fromBFloat16Bits(0xC040), -3.0);
  EXPECT_EQ(fromBFloat16Bits(0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(fromBFloat16Bits(0x0080), std::ldexp(1.0, -126));
  EXPECT_EQ(fromBFloat16Bits(0x7F7F), std::ldexp(255.0, 120));
  EXPECT_EQ(fromBFloat16Bits(0xFF80), -kInf);
  EXPECT_TRUE(std::isnan(fromBFloat16Bits(0x7F81)));
  EXPECT_EQ(fromHalfBits(0x3C00), 1.0);
  EXPECT_EQ(fromHalfBits(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(fromHalfBits(0x03FF), std::ldexp(1023.0, -24));
  EXPECT_EQ(fromHalfBits(0x7BFF), 65504.0);
  EXPECT_EQ(fromHalfBits(0x7C00), kInf);
  EXPECT_TRUE(std::signbit(fromHalfBits(0x8000)));
}

TEST(Numerics, Float8DecodeMatchesMlDtypesForEveryCode) {
  struct Table {
    const char* name;
    const double* values;
  };
  const Table tables[] = {{"e4m3fn", kFloat8E4M3FnValues},
                          {"e5m2", kFloat8E5M2Values},
                          {"e4m3fnuz", kFloat8E4M3FnuzValues},
                          {"e5m2fnuz", kFloat8E5M2FnuzValues}};
  for (const Table& table : tables) {
    const FormatApi& f = format(table.name);
    for (uint32_t bits = 0; bits < 256; ++bits) {
      const double expected = table.values[bits];
      const double actual = f.from(bits);
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(actual)) << f.name << " pattern " << bits;
      } else {
        // Bitwise, so the sign of zero counts.
        EXPECT_EQ(std::bit_cast<uint64_t>(actual), std::bit_cast<uint64_t>(expected))
            << f.name << " pattern " << bits << ": " << hex(actual) << " vs " << hex(expected);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Rounding tables. ulp(x) names the spacing at x; "+ tiny" rows sit 2^-40 relative off a midpoint, far below a
// float32 ulp, so they also catch a conversion that first rounds through float.

const double kTiny = std::ldexp(1.0, -40);

TEST(Numerics, BFloat16RoundsTiesToEven) {
  const Row rows[] = {
      {1.0, 0x3F80},
      {1.0 + std::ldexp(1.0, -8), 0x3F80},      // tie between 0x3F80 and 0x3F81 -> even
      {1.0 + 3 * std::ldexp(1.0, -8), 0x3F82},  // tie between 0x3F81 and 0x3F82 -> even
      {1.0 + std::ldexp(1.0, -8) * (1 + kTiny), 0x3F81},
      {1.0 + std::ldexp(1.0, -8) * (1 - kTiny), 0x3F80},
      {-(1.0 + 3 * std::ldexp(1.0, -8)), 0xBF82},
      {3.140625, 0x4049},
      {std::ldexp(1.0, -126), 0x0080},          // smallest normal
      {std::ldexp(1.0, -133), 0x0001},          // smallest subnormal
      {std::ldexp(1.0, -134), 0x0000},          // half of it: tie -> even (zero)
      {-std::ldexp(1.0, -134), 0x8000},
      {std::ldexp(1.0, -134) * (1 + kTiny), 0x0001},
      {std::ldexp(3.0, -134), 0x0002},          // tie between 1 and 2 quanta -> even
      {std::ldexp(5.0, -134), 0x0002},          // tie between 2 and 3 quanta -> even
      {std::ldexp(1.0, -1000), 0x0000},
      {std::ldexp(1.0, -1074), 0x0000},         // double subnormal
      {std::ldexp(255.0, 120), 0x7F7F},         // max finite
      {std::ldexp(511.0, 119) * (1 - kTiny), 0x7F7F},
      {std::ldexp(511.0, 119), 0x7F80},         // halfway to 2^128: ties to even, which is the inf code
      {1e300, 0x7F80},
      {-1e300, 0xFF80},
      {kInf, 0x7F80},
      {-kInf, 0xFF80},
      {kNaN, 0x7FC0},
      {-kNaN, 0xFFC0},
      {0.0, 0x0000},
      {-0.0, 0x8000},
  };
  expectRows("bfloat16", rows);
}

TEST(Numerics, HalfRoundsTiesToEven) {
  const Row rows[] = {
      {1.0, 0x3C00},
      {1.0 + std::ldexp(1.0, -11), 0x3C00},
      {1.0 + 3 * std::ldexp(1.0, -11), 0x3C02},
      {1.0 + std::ldexp(1.0, -11) * (1 + kTiny), 0x3C01},
      {1.0 + std::ldexp(1.0, -11) * (1 - kTiny), 0x3C00},
      {-2.0, 0xC000},
      {0.1, 0x2E66},
      {std::ldexp(1.0, -14), 0x0400},                              // smallest normal
      {std::ldexp(1.0, -14) - std::ldexp(1.0, -25), 0x0400},       // tie above largest subnormal -> even
      {std::ldexp(1.0, -24), 0x0001},                              // smallest subnormal
      {std::ldexp(1.0, -25), 0x0000},
      {-std::ldexp(1.0, -25), 0x8000},
      {std::ldexp(1.0, -25) * (1 + kTiny), 0x0001},
      {std::ldexp(3.0, -25), 0x0002},
      {std::ldexp(5.0, -25), 0x0002},
      {65504.0, 0x7BFF},
      {65519.0, 0x7BFF},
      {65520.0, 0x7C00},  // tie between 65504 and 65536 (overflow): even side is inf
      {1e10, 0x7C00},
      {-1e10, 0xFC00},
      {kInf, 0x7C00},
      {-kInf, 0xFC00},
      {kNaN, 0x7E00},
      {-kNaN, 0xFE00},
      {0.0, 0x0000},
      {-0.0, 0x8000},
  };
  expectRows("half", rows);
}

TEST(Numerics, Float8E4M3FnRoundsAndSaturates) {
  const Row rows[] = {
      {1.0, 0x38},
      {1.0625, 0x38},                    // tie -> even
      {1.1875, 0x3A},                    // tie -> even
      {1.0625 * (1 + kTiny), 0x39},
      {1.0625 * (1 - kTiny), 0x38},
      {-1.1875, 0xBA},
      {std::ldexp(1.0, -6), 0x08},       // smallest normal
      {std::ldexp(7.0, -9), 0x07},       // largest subnormal
      {std::ldexp(15.0, -10), 0x08},     // tie above largest subnormal -> even
      {std::ldexp(1.0, -9), 0x01},       // smallest subnormal
      {std::ldexp(1.0, -10), 0x00},      // half of it -> even (zero)
      {-std::ldexp(1.0, -10), 0x80},
      {std::ldexp(1.0, -10) * (1 + kTiny), 0x01},
      {std::ldexp(3.0, -10), 0x02},
      {448.0, 0x7E},                     // max finite
      {464.0, 0x7E},                     // tie between 448 and the NaN code -> even (448)
      {464.0 * (1 + kTiny), 0x7E},       // saturates
      {480.0, 0x7E},
      {1e9, 0x7E},
      {-1e9, 0xFE},
      {kInf, 0x7E},
      {-kInf, 0xFE},
      {kNaN, 0x7F},
      {-kNaN, 0xFF},
      {0.0, 0x00},
      {-0.0, 0x80},
  };
  expectRows("e4m3fn", rows);
}

TEST(Numerics, Float8E5M2RoundsAndSaturates) {
  const Row rows[] = {
      {1.0, 0x3C},
      {1.125, 0x3C},
      {1.375, 0x3E},
      {1.125 * (1 + kTiny), 0x3D},
      {1.125 * (1 - kTiny), 0x3C},
      {-1.375, 0xBE},
      {std::ldexp(1.0, -14), 0x04},      // smallest normal
      {std::ldexp(1.0, -16), 0x01},      // smallest subnormal
      {std::ldexp(1.0, -17), 0x00},
      {-std::ldexp(1.0, -17), 0x80},
      {std::ldexp(1.0, -17) * (1 + kTiny), 0x01},
      {std::ldexp(3.0, -17), 0x02},
      {57344.0, 0x7B},                   // max finite
      {61440.0 * (1 - kTiny), 0x7B},
      {61440.0, 0x7B},                   // IEEE would give inf here; SATFINITE clamps
      {1e9, 0x7B},
      {-1e9, 0xFB},
      {kInf, 0x7B},
      {-kInf, 0xFB},
      {kNaN, 0x7E},
      {-kNaN, 0xFE},
      {0.0, 0x00},
      {-0.0, 0x80},
  };
  expectRows("e5m2", rows);
  EXPECT_EQ(fromFloat8E5M2Bits(0x7C), kInf);
  EXPECT_EQ(fromFloat8E5M2Bits(0xFC), -kInf);
}

TEST(Numerics, Float8E4M3FnuzRoundsAndSaturates) {
  const Row rows[] = {
      {1.0, 0x40},
      {1.0625, 0x40},
      {1.1875, 0x42},
      {1.0625 * (1 + kTiny), 0x41},
      {std::ldexp(1.0, -7), 0x08},       // smallest normal
      {std::ldexp(1.0, -10), 0x01},      // smallest subnormal
      {std::ldexp(1.0, -11), 0x00},
      {-std::ldexp(1.0, -11), 0x00},     // rounds to zero, and there is no -0
      {std::ldexp(3.0, -11), 0x02},
      {240.0, 0x7F},                     // max finite
      {248.0, 0x7F},                     // tie rounds up past max, then saturates
      {1e9, 0x7F},
      {-1e9, 0xFF},
      {kInf, 0x7F},
      {-kInf, 0xFF},
      {kNaN, 0x80},
      {-kNaN, 0x80},
      {0.0, 0x00},
      {-0.0, 0x00},
  };
  expectRows("e4m3fnuz", rows);
}

TEST(Numerics, Float8E5M2FnuzRoundsAndSaturates) {
  const Row rows[] = {
      {1.0, 0x40},
      {1.125, 0x40},
      {1.375, 0x42},
      {1.125 * (1 + kTiny), 0x41},
      {std::ldexp(1.0, -15), 0x04},      // smallest normal
      {std::ldexp(1.0, -17), 0x01},      // smallest subnormal
      {std::ldexp(1.0, -18), 0x00},
      {-std::ldexp(1.0, -18), 0x00},
      {std::ldexp(3.0, -18), 0x02},
      {57344.0, 0x7F},
      {61440.0, 0x7F},
      {1e9, 0x7F},
      {-1e9, 0xFF},
      {kInf, 0x7F},
      {-kInf, 0xFF},
      {kNaN, 0x80},
      {-kNaN, 0x80},
      {0.0, 0x00},
      {-0.0, 0x00},
  };
  expectRows("e5m2fnuz", rows);
}

// ---------------------------------------------------------------------------------------------------------------
// Golden values generated by gen_numerics_golden.py from ml_dtypes / numpy (in-range inputs only).

void expectGolden(const std::string& name, std::span<const GoldenCase> cases) {
  const FormatApi& f = format(name);
  ASSERT_GE(cases.size(), 300u) << f.name;
  for (const GoldenCase& c : cases) {
    EXPECT_EQ(f.to(c.input), c.bits) << f.name << " input " << hex(c.input);
  }
}

TEST(Numerics, BFloat16MatchesMlDtypes) { expectGolden("bfloat16", kBFloat16Golden); }
TEST(Numerics, HalfMatchesNumpy) { expectGolden("half", kHalfGolden); }
TEST(Numerics, Float8E4M3FnMatchesMlDtypes) { expectGolden("e4m3fn", kFloat8E4M3FnGolden); }
TEST(Numerics, Float8E5M2MatchesMlDtypes) { expectGolden("e5m2", kFloat8E5M2Golden); }
TEST(Numerics, Float8E4M3FnuzMatchesMlDtypes) { expectGolden("e4m3fnuz", kFloat8E4M3FnuzGolden); }
TEST(Numerics, Float8E5M2FnuzMatchesMlDtypes) { expectGolden("e5m2fnuz", kFloat8E5M2FnuzGolden); }

// ---------------------------------------------------------------------------------------------------------------

TEST(Numerics, ToFloatRoundsTiesToEven) {
  EXPECT_EQ(toFloat(1.0 + std::ldexp(1.0, -24)), 1.0f);
  EXPECT_EQ(toFloat(std::nextafter(1.0 + std::ldexp(1.0, -24), 2.0)), std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(toFloat(1.0 + 3 * std::ldexp(1.0, -24)), 1.0f + std::ldexp(1.0f, -22));
  EXPECT_EQ(toFloat(std::ldexp(1.0, -150)), 0.0f);
  EXPECT_EQ(toFloat(std::ldexp(3.0, -150)), std::ldexp(1.0f, -148));
  EXPECT_EQ(toFloat(1e300), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(toFloat(-0.0)));
  EXPECT_TRUE(std::isnan(toFloat(kNaN)));
}

TEST(Numerics, RoundHalfEvenSaturate) {
  EXPECT_EQ(roundHalfEvenSaturate(2.5, -128, 127), 2);
  EXPECT_EQ(roundHalfEvenSaturate(3.5, -128, 127), 4);
  EXPECT_EQ(roundHalfEvenSaturate(-2.5, -128, 127), -2);
  EXPECT_EQ(roundHalfEvenSaturate(-3.5, -128, 127), -4);
  EXPECT_EQ(roundHalfEvenSaturate(0.5, -128, 127), 0);
  EXPECT_EQ(roundHalfEvenSaturate(-0.5, -128, 127), 0);
  EXPECT_EQ(roundHalfEvenSaturate(1.5, -128, 127), 2);
  EXPECT_EQ(roundHalfEvenSaturate(0.49999999999999994, -128, 127), 0);
  EXPECT_EQ(roundHalfEvenSaturate(2.5000000000000004, -128, 127), 3);
  EXPECT_EQ(roundHalfEvenSaturate(-2.7, -128, 127), -3);
  EXPECT_EQ(roundHalfEvenSaturate(126.5, -128, 127), 126);
  EXPECT_EQ(roundHalfEvenSaturate(127.5, -128, 127), 127);
  EXPECT_EQ(roundHalfEvenSaturate(1e9, -128, 127), 127);
  EXPECT_EQ(roundHalfEvenSaturate(-1e9, -128, 127), -128);
  EXPECT_EQ(roundHalfEvenSaturate(1e9, 0, 255), 255);
  EXPECT_EQ(roundHalfEvenSaturate(-1e9, 0, 255), 0);
  EXPECT_EQ(roundHalfEvenSaturate(kNaN, -128, 127), 0);
  EXPECT_EQ(roundHalfEvenSaturate(kNaN, 10, 20), 0);
  EXPECT_EQ(roundHalfEvenSaturate(kInf, -128, 127), 127);
  EXPECT_EQ(roundHalfEvenSaturate(-kInf, -128, 127), -128);
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(roundHalfEvenSaturate(1e30, kMin, kMax), kMax);
  EXPECT_EQ(roundHalfEvenSaturate(-1e30, kMin, kMax), kMin);
  EXPECT_EQ(roundHalfEvenSaturate(std::ldexp(1.0, 63), kMin, kMax), kMax);
  EXPECT_EQ(roundHalfEvenSaturate(-std::ldexp(1.0, 63), kMin, kMax), kMin);
  EXPECT_EQ(roundHalfEvenSaturate(std::ldexp(1.0, 52) + 1, kMin, kMax), (int64_t{1} << 52) + 1);
  EXPECT_EQ(roundHalfEvenSaturate(std::ldexp(1.0, 62), kMin, kMax), int64_t{1} << 62);
}

}  // namespace
}  // namespace braze::numerics
