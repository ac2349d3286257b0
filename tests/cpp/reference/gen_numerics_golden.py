#!/usr/bin/env python3
"""Writes numerics_golden_<format>.inc, one file per format: (double input, expected bits) pairs from
ml_dtypes / numpy, and for the fp8 formats every code widened to double.

Run from anywhere: python3 gen_numerics_golden.py  (needs numpy and ml_dtypes).

ml_dtypes (0.6) converts float64 -> bfloat16 and float64 -> float8_* by first rounding to float32, so
for those formats every input is a float32 value: then the first rounding is exact and the result
equals braze's single rounding from double. numpy's float64 -> float16 rounds once, directly from
the double, so half inputs use full double precision (which also catches double-rounding bugs).

ml_dtypes does not saturate out-of-range float8 values (it gives inf or NaN), and braze follows
CUDA's __NV_SATFINITE, so only inputs whose ml_dtypes result is finite are kept.
"""

import math
import os
import random

import ml_dtypes
import numpy as np

SEED = 20240611
RANDOM_PER_FORMAT = 220
MIDPOINT_NEIGHBOURS_PER_FORMAT = 60

# name in the .inc, numpy dtype, bits dtype, exponent bits, mantissa bits, bias, double-precise inputs?
FORMATS = [
    ("kBFloat16Golden", ml_dtypes.bfloat16, np.uint16, 8, 7, 127, False),
    ("kHalfGolden", np.float16, np.uint16, 5, 10, 15, True),
    ("kFloat8E4M3FnGolden", ml_dtypes.float8_e4m3fn, np.uint8, 4, 3, 7, False),
    ("kFloat8E5M2Golden", ml_dtypes.float8_e5m2, np.uint8, 5, 2, 15, False),
    ("kFloat8E4M3FnuzGolden", ml_dtypes.float8_e4m3fnuz, np.uint8, 4, 3, 8, False),
    ("kFloat8E5M2FnuzGolden", ml_dtypes.float8_e5m2fnuz, np.uint8, 5, 2, 16, False),
]
# The file each format's tables go to, in FORMATS' order.
FILES = ["bfloat16", "half", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]


def positive_finite_values(dtype, bits_dtype):
    """All positive finite values of a small format, ascending (sampled for 16-bit formats)."""
    width = np.dtype(bits_dtype).itemsize * 8
    codes = np.arange(0, 1 << (width - 1), dtype=np.uint64).astype(bits_dtype)
    with np.errstate(invalid="ignore"):
        values = codes.view(dtype).astype(np.float64)
    values = values[np.isfinite(values)]
    return np.unique(values[values >= 0])


def convert(values, dtype, bits_dtype):
    return np.asarray(values, dtype=np.float64).astype(dtype).view(bits_dtype)


def random_input(rng, exp_lo, exp_hi, double_precise):
    exponent = rng.randint(exp_lo, exp_hi)
    mantissa_bits = 52 if double_precise else 23
    mantissa = rng.getrandbits(mantissa_bits) / float(1 << mantissa_bits)
    value = math.ldexp(1.0 + mantissa, exponent)
    if not double_precise:
        value = float(np.float32(value))  # exact unless below float32's range, where it is a float32 anyway
    return -value if rng.random() < 0.5 else value


def neighbours(value, double_precise):
    """The representable inputs just below and above a (positive) midpoint."""
    if double_precise:
        return [math.nextafter(value, 0.0), math.nextafter(value, math.inf)]
    as_f32 = np.float32(value)
    return [float(np.nextafter(as_f32, np.float32(0))), float(np.nextafter(as_f32, np.float32(np.inf)))]


def cases_for(fmt, rng):
    name, dtype, bits_dtype, exp_bits, man_bits, bias, double_precise = fmt
    positives = positive_finite_values(dtype, bits_dtype)
    largest = positives[-1]
    inputs = []

    # Exact midpoints between neighbours (all of them for fp8, a sample for the 16-bit formats), which
    # must go to the even code, and the inputs right next to some of them.
    midpoints = list((positives[:-1] + positives[1:]) / 2)
    if len(midpoints) > 160:
        midpoints = rng.sample(midpoints[:64], 32) + rng.sample(midpoints, 128)
    near = []
    for m in rng.sample(midpoints, min(MIDPOINT_NEIGHBOURS_PER_FORMAT, len(midpoints))):
        near += neighbours(m, double_precise)
    inputs += [v if rng.random() < 0.5 else -v for v in midpoints + near]

    # Random magnitudes from well below the smallest subnormal to the largest finite value.
    smallest_exp = 1 - bias - man_bits
    largest_exp = math.frexp(largest)[1] - 1
    for _ in range(RANDOM_PER_FORMAT):
        inputs.append(random_input(rng, smallest_exp - 3, largest_exp, double_precise))
    # Extra weight on the subnormal range, where the quantum stops shrinking.
    for _ in range(RANDOM_PER_FORMAT // 4):
        inputs.append(random_input(rng, smallest_exp - 1, smallest_exp + man_bits, double_precise))

    inputs += [0.0, -0.0, float(positives[1]), float(largest), -float(largest)]

    results = convert(inputs, dtype, bits_dtype)
    decoded = results.view(dtype).astype(np.float64)
    cases = []
    for value, code, back in zip(inputs, results, decoded):
        if not np.isfinite(back):
            continue  # out of range for ml_dtypes; saturation is tested by hand
        cases.append((float(value), int(code)))
    return cases


def decode_table(name, dtype):
    """Every fp8 code widened to double, so decoding is checked code by code."""
    with np.errstate(invalid="ignore"):
        values = np.arange(256, dtype=np.uint16).astype(np.uint8).view(dtype).astype(np.float64)
    lines = [f"inline constexpr double {name}[256] = {{"]
    for code, value in enumerate(values):
        if np.isnan(value):
            text = "kNaN"
        elif np.isinf(value):
            text = "kInf" if value > 0 else "-kInf"
        else:
            text = float(value).hex()
        lines.append(f"    {text},  // 0x{code:02x}")
    lines.append("};")
    lines.append("")
    return lines


def main():
    rng = random.Random(SEED)
    # Every format's cases first, in FORMATS' order: the random draws do not depend on how files are cut.
    all_cases = [cases_for(fmt, rng) for fmt in FORMATS]
    folder = os.path.dirname(os.path.abspath(__file__))
    for fmt, cases, name in zip(FORMATS, all_cases, FILES):
        lines = [
            "// Generated by gen_numerics_golden.py from ml_dtypes " + ml_dtypes.__version__ + " and numpy "
            + np.__version__ + ". Do not edit.",
            "// k*Golden entries: {double input, expected bit pattern}; k*Values: every fp8 code widened to double.",
            "// Expects `struct GoldenCase { double input; uint32_t bits; };` and doubles kNaN, kInf in scope.",
            "",
            f"inline constexpr GoldenCase {fmt[0]}[] = {{",
        ]
        for value, code in cases:
            lines.append(f"    {{{value.hex()}, 0x{code:x}}},")
        lines.append("};")
        lines.append("")
        if fmt in FORMATS[2:]:
            lines += decode_table(fmt[0].replace("Golden", "Values"), fmt[1])
        with open(os.path.join(folder, f"numerics_golden_{name}.inc"), "w") as f:
            f.write("\n".join(lines))


if __name__ == "__main__":
    main()
