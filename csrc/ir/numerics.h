#pragma once
#include "ir/data_type.h"

#include <cstdint>
namespace braze::numerics {
// Conversions from a double to the bit pattern of a narrower float type, rounding to nearest, ties to
// even, directly from the double (one rounding). They follow what CUDA does when a kernel converts:
//  - bfloat16 / half: IEEE, overflow goes to +-inf, NaN stays NaN (canonical quiet NaN 0x7FC0 / 0x7E00 with sign kept).
//  - fp8 (all four formats): CUDA's __NV_SATFINITE behaviour: a finite value (or +-inf) whose magnitude rounds above the
//    largest finite value becomes +-max finite; NaN becomes the format's NaN.
//      e4m3fn:   bias 7, no infinities, NaN = S.1111.111 (0x7F / 0xFF), max 448.
//      e5m2:     bias 15, IEEE-like with inf (0x7C) and NaN (0x7E..), max 57344; saturation means +-inf input -> +-57344.
//      e4m3fnuz: bias 8, no inf, no negative zero, the only NaN is 0x80, max 240.  (-0.0 -> 0x00)
//      e5m2fnuz: bias 16, no inf, no negative zero, the only NaN is 0x80, max 57344. (-0.0 -> 0x00)
//    Subnormals are supported in every format and rounded correctly.
uint16_t toBFloat16Bits(double value);
uint16_t toHalfBits(double value);
uint8_t toFloat8E4M3FnBits(double value);
uint8_t toFloat8E5M2Bits(double value);
uint8_t toFloat8E4M3FnuzBits(double value);
uint8_t toFloat8E5M2FnuzBits(double value);
// Exact widening back to double.
double fromBFloat16Bits(uint16_t bits);
double fromHalfBits(uint16_t bits);
double fromFloat8E4M3FnBits(uint8_t bits);
double fromFloat8E5M2Bits(uint8_t bits);
double fromFloat8E4M3FnuzBits(uint8_t bits);
double fromFloat8E5M2FnuzBits(uint8_t bits);
// Rounding a double to float (IEEE RNE, what a float register holds).
float toFloat(double value);
// Round-half-to-even to an integer and clamp into [lo, hi] (used by quantize ops, like torch's nearbyint + clamp).
// NaN gives 0.
int64_t roundHalfEvenSaturate(double value, int64_t lo, int64_t hi);
// Rounds a float64 to what a value of `dtype` holds (identity for Double).
double roundToType(double x, DataType dtype);
// Float -> integer conversion as CUDA does it: truncate toward zero, saturate, NaN -> 0.
int64_t floatToInt(double x, DataType dtype);
// Wraps an int64 to the width and signedness of an integer dtype, as a C++ conversion does.
int64_t wrapToType(int64_t x, DataType dtype);
}  // namespace braze::numerics
