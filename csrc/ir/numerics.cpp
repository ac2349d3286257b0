#include "ir/numerics.h"

#include "ir/data_type.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace braze::numerics {
namespace {

// Where a format keeps its NaN decides which other codes are left for finite values, so it also
// fixes the largest finite value and whether -0 exists.
enum class NanEncoding {
  // Exponent all ones, mantissa non-zero (IEEE); canonical NaN is the quiet one with only the top mantissa bit set.
  IeeeQuiet,
  // Only S.1111...1 is NaN (e4m3fn), so the all-ones exponent still holds finite values.
  AllOnes,
  // The -0 slot (sign bit alone) is the one NaN (the fnuz formats), so there is no negative zero.
  NegativeZeroSlot,
};

struct Format {
  int expBits;
  int manBits;
  int bias;
  bool hasInf;
  NanEncoding nan;
  // CUDA's __NV_SATFINITE: anything too large (inf included) clamps to the largest finite value.
  bool saturate;
};

constexpr Format kBFloat16{8, 7, 127, true, NanEncoding::IeeeQuiet, false};
constexpr Format kHalf{5, 10, 15, true, NanEncoding::IeeeQuiet, false};
constexpr Format kE4M3Fn{4, 3, 7, false, NanEncoding::AllOnes, true};
constexpr Format kE5M2{5, 2, 15, true, NanEncoding::IeeeQuiet, true};
constexpr Format kE4M3Fnuz{4, 3, 8, false, NanEncoding::NegativeZeroSlot, true};
constexpr Format kE5M2Fnuz{5, 2, 16, false, NanEncoding::NegativeZeroSlot, true};

constexpr uint64_t signBit(const Format& f) {
  return uint64_t{1} << (f.expBits + f.manBits);
}

constexpr uint64_t manMask(const Format& f) {
  return (uint64_t{1} << f.manBits) - 1;
}

constexpr uint64_t maxExpField(const Format& f) {
  return (uint64_t{1} << f.expBits) - 1;
}

// Exponent of the quantum (weight of the last mantissa bit) for subnormals and the smallest binade.
constexpr int minQuantumExp(const Format& f) {
  return 1 - f.bias - f.manBits;
}

// Magnitude code (bits without the sign) of the largest finite value.
constexpr uint64_t maxFiniteCode(const Format& f) {
  switch (f.nan) {
    case NanEncoding::IeeeQuiet:
      return ((maxExpField(f) - 1) << f.manBits) | manMask(f);
    case NanEncoding::AllOnes:
      return (maxExpField(f) << f.manBits) | (manMask(f) - 1);
    case NanEncoding::NegativeZeroSlot:
      break;
  }
  return (maxExpField(f) << f.manBits) | manMask(f);
}

constexpr uint64_t nanBits(const Format& f, uint64_t sign) {
  switch (f.nan) {
    case NanEncoding::IeeeQuiet:
      return sign | (maxExpField(f) << f.manBits) | (uint64_t{1} << (f.manBits - 1));
    case NanEncoding::AllOnes:
      return sign | (maxExpField(f) << f.manBits) | manMask(f);
    case NanEncoding::NegativeZeroSlot:
      break;
  }
  return signBit(f);
}

// Rounds a finite, non-negative double (given as its bits) to the format and returns the magnitude code
// it would have if the exponent field were unbounded. Bit patterns of a binary float grow monotonically
// and without gaps across binades, so code = ((q - qmin) << manBits) + n, where n * 2^q is the rounded
// value; a rounding carry out of the mantissa then bumps the exponent by itself, and a code above
// maxFiniteCode means overflow.
uint64_t roundMagnitude(uint64_t absBits, const Format& f) {
  constexpr uint64_t kDoubleManMask = (uint64_t{1} << 52) - 1;
  const uint64_t expField = absBits >> 52;
  const uint64_t fraction = absBits & kDoubleManMask;
  if (expField == 0 && fraction == 0) {
    return 0;
  }
  const uint64_t sig = expField != 0 ? (fraction | (uint64_t{1} << 52)) : fraction;
  const int sigExp = static_cast<int>(expField != 0 ? expField : 1) - 1075;  // value = sig * 2^sigExp
  const int floorLog2 = (63 - std::countl_zero(sig)) + sigExp;
  const int qmin = minQuantumExp(f);
  // Below the smallest normal binade the quantum stops shrinking: that is what makes subnormals.
  const int q = std::max(floorLog2 - f.manBits, qmin);
  const int shift = q - sigExp;

  uint64_t n = 0;
  if (shift <= 0) {
    // Exact; the value is below 2^(floorLog2 + 1), so n < 2^(manBits + 1) and the shift cannot overflow.
    n = sig << -shift;
  } else if (shift <= 53) {
    n = sig >> shift;
    const uint64_t rest = sig & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    if (rest > half || (rest == half && (n & 1) != 0)) {
      ++n;
    }
  }
  // else: sig < 2^53 <= half a quantum, so the value rounds to zero (n stays 0).
  return (static_cast<uint64_t>(q - qmin) << f.manBits) + n;
}

// The common case of an IEEE format (bf16, half, e5m2), done on the double's bits: a value in one of the
// format's normal binades keeps its binade or carries into the next, so rounding the double's mantissa to
// manBits bits (to nearest, ties to even) is the whole conversion. Zero, values below the smallest normal,
// a rounding past the largest finite value, infinities and NaN return false and take the general path.
bool encodeNormal(uint64_t bits, const Format& f, uint64_t& code) {
  constexpr uint64_t kExpMask = 0x7ff;
  const int64_t exp = static_cast<int64_t>((bits >> 52) & kExpMask) - 1023;
  const int64_t min_exp = 1 - f.bias, max_exp = static_cast<int64_t>(maxExpField(f)) - 1 - f.bias;
  if (f.nan != NanEncoding::IeeeQuiet || exp < min_exp || exp > max_exp) return false;
  const int drop = 52 - f.manBits;
  const uint64_t lsb = (bits >> drop) & 1;
  bits += (uint64_t{1} << (drop - 1)) - 1 + lsb;  // carries exactly when the dropped bits round up
  const int64_t rounded_exp = static_cast<int64_t>((bits >> 52) & kExpMask) - 1023;
  if (rounded_exp > max_exp) return false;  // rounded past the largest finite value
  const uint64_t sign = (bits >> 63) != 0 ? signBit(f) : 0;
  code = sign | (static_cast<uint64_t>(rounded_exp + f.bias) << f.manBits) | ((bits >> drop) & manMask(f));
  return true;
}

uint64_t encode(double value, const Format& f) {
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  if (uint64_t code = 0; encodeNormal(bits, f, code)) return code;
  const uint64_t sign = (bits >> 63) != 0 ? signBit(f) : 0;
  if (std::isnan(value)) {
    return nanBits(f, sign);
  }
  const uint64_t absBits = bits & ~(uint64_t{1} << 63);
  const bool isInf = std::isinf(value);
  const uint64_t code = isInf ? std::numeric_limits<uint64_t>::max() : roundMagnitude(absBits, f);
  if (code > maxFiniteCode(f)) {
    if (f.saturate) {
      return sign | maxFiniteCode(f);
    }
    if (f.hasInf) {
      return sign | (maxExpField(f) << f.manBits);
    }
    return nanBits(f, sign);
  }
  if (code == 0 && f.nan == NanEncoding::NegativeZeroSlot) {
    // -0 (or a tiny negative that rounds to zero) would land on the NaN code.
    return 0;
  }
  return sign | code;
}

double decode(uint64_t bits, const Format& f) {
  const bool negative = (bits & signBit(f)) != 0;
  const uint64_t code = bits & (signBit(f) - 1);
  const uint64_t expField = code >> f.manBits;
  const uint64_t mantissa = code & manMask(f);
  if (f.nan == NanEncoding::IeeeQuiet && expField != 0 && expField != maxExpField(f)) {
    // A normal number: the double with the same exponent and the mantissa's bits at the top of its own.
    const auto exp = static_cast<uint64_t>(static_cast<int64_t>(expField) - f.bias + 1023);
    return std::bit_cast<double>((negative ? uint64_t{1} << 63 : 0) | (exp << 52) | (mantissa << (52 - f.manBits)));
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (f.nan) {
    case NanEncoding::IeeeQuiet:
      if (expField == maxExpField(f)) {
        const double special = mantissa == 0 ? std::numeric_limits<double>::infinity() : nan;
        return negative ? -special : special;
      }
      break;
    case NanEncoding::AllOnes:
      if (code == (signBit(f) - 1)) {
        return negative ? -nan : nan;
      }
      break;
    case NanEncoding::NegativeZeroSlot:
      if (bits == signBit(f)) {
        return nan;
      }
      break;
  }
  const int qmin = minQuantumExp(f);
  // Subnormals share the smallest binade's quantum; normals add back the implicit leading bit.
  const double magnitude = expField == 0
      ? std::ldexp(static_cast<double>(mantissa), qmin)
      : std::ldexp(static_cast<double>(mantissa | (uint64_t{1} << f.manBits)),
                   qmin + static_cast<int>(expField) - 1);
  return negative ? -magnitude : magnitude;
}

}  // namespace

uint16_t toBFloat16Bits(double value) {
  return static_cast<uint16_t>(encode(value, kBFloat16));
}

uint16_t toHalfBits(double value) {
  return static_cast<uint16_t>(encode(value, kHalf));
}

uint8_t toFloat8E4M3FnBits(double value) {
  return static_cast<uint8_t>(encode(value, kE4M3Fn));
}

uint8_t toFloat8E5M2Bits(double value) {
  return static_cast<uint8_t>(encode(value, kE5M2));
}

uint8_t toFloat8E4M3FnuzBits(double value) {
  return static_cast<uint8_t>(encode(value, kE4M3Fnuz));
}

uint8_t toFloat8E5M2FnuzBits(double value) {
  return static_cast<uint8_t>(encode(value, kE5M2Fnuz));
}

double fromBFloat16Bits(uint16_t bits) {
  return decode(bits, kBFloat16);
}

double fromHalfBits(uint16_t bits) {
  return decode(bits, kHalf);
}

double fromFloat8E4M3FnBits(uint8_t bits) {
  return decode(bits, kE4M3Fn);
}

double fromFloat8E5M2Bits(uint8_t bits) {
  return decode(bits, kE5M2);
}

double fromFloat8E4M3FnuzBits(uint8_t bits) {
  return decode(bits, kE4M3Fnuz);
}

double fromFloat8E5M2FnuzBits(uint8_t bits) {
  return decode(bits, kE5M2Fnuz);
}

float toFloat(double value) {
  // The compiler's conversion is IEEE round-to-nearest-even under the default floating-point environment,
  // which is the only one this library runs in.
  return static_cast<float>(value);
}

int64_t roundHalfEvenSaturate(double value, int64_t lo, int64_t hi) {
  if (std::isnan(value)) {
    return 0;
  }
  // Done by hand rather than with std::nearbyint so the result does not depend on the current rounding mode.
  // Both v - floor(v) and the comparisons below are exact in double.
  double rounded = std::floor(value);
  const double fraction = value - rounded;
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(rounded, 2.0) != 0.0)) {
    rounded += 1.0;
  }
  // 2^63 is exact in double while INT64_MAX is not, so range-check against powers of two before casting.
  constexpr double kTwo63 = 9223372036854775808.0;
  if (rounded >= kTwo63) {
    return hi;
  }
  if (rounded < -kTwo63) {
    return lo;
  }
  // min(max()) rather than std::clamp, which is undefined when lo > hi.
  return std::min(std::max(static_cast<int64_t>(rounded), lo), hi);
}

double roundToType(double x, DataType dtype) {
  switch (dtype) {
    case DataType::Double: return x;
    case DataType::Float: return toFloat(x);
    case DataType::Half: return fromHalfBits(toHalfBits(x));
    case DataType::BFloat16: return fromBFloat16Bits(toBFloat16Bits(x));
    case DataType::Float8_e4m3fn: return fromFloat8E4M3FnBits(toFloat8E4M3FnBits(x));
    case DataType::Float8_e5m2: return fromFloat8E5M2Bits(toFloat8E5M2Bits(x));
    case DataType::Float8_e4m3fnuz: return fromFloat8E4M3FnuzBits(toFloat8E4M3FnuzBits(x));
    case DataType::Float8_e5m2fnuz: return fromFloat8E5M2FnuzBits(toFloat8E5M2FnuzBits(x));
    default:
      if (isBool(dtype)) return x != 0.0 ? 1.0 : 0.0;
      return static_cast<double>(floatToInt(x, dtype));
  }
}

int64_t floatToInt(double x, DataType dtype) {
  if (isBool(dtype)) return x != 0.0;  // NaN is nonzero: true, as a C++ conversion gives
  if (std::isnan(x)) return 0;
  const double t = std::trunc(x);
  const auto lo = static_cast<double>(integerMin(dtype));
  const auto hi = static_cast<double>(integerMax(dtype));
  if (t <= lo) return integerMin(dtype);
  if (t >= hi) return integerMax(dtype);
  return static_cast<int64_t>(t);
}

int64_t wrapToType(int64_t x, DataType dtype) {
  switch (dtype) {
    case DataType::Bool: return x != 0;
    case DataType::Int8: return static_cast<int8_t>(x);
    case DataType::UInt8: return static_cast<uint8_t>(x);
    case DataType::Int16: return static_cast<int16_t>(x);
    case DataType::Int32: return static_cast<int32_t>(x);
    default: return x;
  }
}

}  // namespace braze::numerics
