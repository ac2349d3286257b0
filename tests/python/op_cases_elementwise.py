"""Cases for the elementwise fd.ops: unary, binary, ternary, cast, add_alpha/sub_alpha.

Output dtypes follow nvFuser (notes section 3): transcendental ops and neg/add/... compute bf16 as
Float and return Float; ceil/floor/frac/relu/round/silu/trunc/abs keep the input dtype;
predicates return Bool.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from braze import DataType
from helpers import NUMPY_TO_BRAZE
from op_cases import BF16, BOOL, F32, F64, I32, I64, OpCase, bools, inputs, ints, nonzero_ints, uniform, with_specials

SHAPE = (3, 5)  # odd sizes on purpose


def _vectorize(fn):
    return np.vectorize(fn, otypes=[np.float64])


def _erfinv(y):
    """Inverse of math.erf by Newton's method (numpy has no erfinv; scipy is not a dependency)."""
    x = np.zeros_like(y)
    erf = _vectorize(math.erf)
    for _ in range(60):
        x = x - (erf(x) - y) / (2 / math.sqrt(math.pi) * np.exp(-x * x))
    return x


# name: (reference, output kind, input range). Output kind: "float" (Float for float32/bf16/int
# inputs), "same" (the input dtype), "bool".
UNARY = {
    "abs": (np.abs, "same", (-3, 3)),
    "acos": (np.arccos, "float", (-0.9, 0.9)),
    "acosh": (np.arccosh, "float", (1.1, 5)),
    "asin": (np.arcsin, "float", (-0.9, 0.9)),
    "asinh": (np.arcsinh, "float", (-3, 3)),
    "atan": (np.arctan, "float", (-3, 3)),
    "atanh": (np.arctanh, "float", (-0.9, 0.9)),
    "ceil": (np.ceil, "same", (-3, 3)),
    "cos": (np.cos, "float", (-3, 3)),
    "cosh": (np.cosh, "float", (-3, 3)),
    "erf": (_vectorize(math.erf), "float", (-2, 2)),
    "erfc": (_vectorize(math.erfc), "float", (-2, 2)),
    "erfinv": (_erfinv, "float", (-0.9, 0.9)),
    "erfcinv": (lambda x: _erfinv(1 - x), "float", (0.1, 1.9)),
    "exp": (np.exp, "float", (-3, 3)),
    "exp2": (np.exp2, "float", (-3, 3)),
    "expm1": (np.expm1, "float", (-3, 3)),
    "floor": (np.floor, "same", (-3, 3)),
    "frac": (lambda x: x - np.trunc(x), "same", (-3, 3)),
    "lgamma": (_vectorize(math.lgamma), "float", (0.1, 5)),
    "log": (np.log, "float", (0.1, 5)),
    "log10": (np.log10, "float", (0.1, 5)),
    "log1p": (np.log1p, "float", (-0.5, 5)),
    "log2": (np.log2, "float", (0.1, 5)),
    "neg": (np.negative, "float", (-3, 3)),
    "real": (lambda x: x, "same", (-3, 3)),
    "reciprocal": (lambda x: 1 / x, "float", (0.1, 5)),
    "relu": (lambda x: np.maximum(x, 0), "same", (-3, 3)),
    "round": (np.round, "same", (-3, 3)),  # half to even, like CUDA's nearbyint; inputs include halves
    "rsqrt": (lambda x: 1 / np.sqrt(x), "float", (0.1, 5)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), "float", (-3, 3)),
    "sign": (np.sign, "same", (-3, 3)),
    "silu": (lambda x: x / (1 + np.exp(-x)), "same", (-3, 3)),
    "sin": (np.sin, "float", (-3, 3)),
    "sinh": (np.sinh, "float", (-3, 3)),
    "sqrt": (np.sqrt, "float", (0.1, 5)),
    "tan": (np.tan, "float", (-1.2, 1.2)),
    "tanh": (np.tanh, "float", (-3, 3)),
    "trunc": (np.trunc, "same", (-3, 3)),
}

PREDICATES = {
    "isfinite": np.isfinite,
    "isinf": np.isinf,
    "isnan": np.isnan,
    "isneginf": np.isneginf,
    "isposinf": np.isposinf,
    "isreal": lambda x: np.ones(x.shape, np.bool_),
    "signbit": np.signbit,
    "logical_not": lambda x: x == 0,
}


def _unary(name, dtype, make, reference, out):
    return OpCase(name, f"{name}-{np.dtype(dtype).name}", lambda fd, x: getattr(fd.ops, name)(x), inputs(make), reference,
                  (out,))


def _with_halves(make):
    def wrapped(rng):
        x = make(rng)
        x.reshape(-1)[:6] = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]  # exact in bf16 too
        return x
    return wrapped


def unary_cases():
    cases = []
    for name, (ref, kind, (low, high)) in UNARY.items():
        for dtype in (F32, BF16):
            make = uniform(SHAPE, low, high, dtype)
            if name == "round":
                make = _with_halves(make)
            out = F32 if kind == "float" else dtype
            cases.append(_unary(name, dtype, make, ref, out))
    for name, ref in PREDICATES.items():
        for dtype in (F32, BF16):
            cases.append(_unary(name, dtype, with_specials(uniform(SHAPE, -3, 3, dtype), dtype), ref, BOOL))
    # Integer inputs: abs/neg/sign keep the type, float ops promote to Float, bitwise_not flips bits.
    int_in = ints(SHAPE, -50, 50)
    cases += [
        _unary("abs", I32, int_in, np.abs, I32),
        _unary("neg", I32, int_in, np.negative, I32),
        _unary("sign", I32, int_in, np.sign, I32),
        _unary("exp", I32, ints(SHAPE, -5, 5), np.exp, F32),
        _unary("bitwise_not", I32, int_in, np.invert, I32),
        _unary("logical_not", I32, int_in, lambda x: x == 0, BOOL),
        _unary("bitwise_not", BOOL, bools(SHAPE), np.logical_not, BOOL),
    ]
    # imag of a real tensor: nvFuser raises; covered in test_errors.py (not executable).
    return cases


def _binary(name, make_inputs, reference, out, tag="", raw=False):
    ident = f"{name}-{tag}" if tag else name
    return OpCase(name, ident, lambda fd, a, b: getattr(fd.ops, name)(a, b), make_inputs, reference, (out,), raw=raw)


def _trunc_div(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


FLOAT_BINARY = {
    "add": (np.add, "float"),
    "sub": (np.subtract, "float"),
    "mul": (np.multiply, "float"),
    "div": (np.divide, "float"),
    "truediv": (np.divide, "float"),
    "atan2": (np.arctan2, "float"),
    "fmod": (np.fmod, "float"),
    "remainder": (np.remainder, "float"),
    "pow": (np.power, "float"),
    "maximum": (np.maximum, "float"),
    "minimum": (np.minimum, "float"),
    "eq": (np.equal, "bool"),
    "ne": (np.not_equal, "bool"),
    "lt": (np.less, "bool"),
    "le": (np.less_equal, "bool"),
    "gt": (np.greater, "bool"),
    "ge": (np.greater_equal, "bool"),
    "logical_and": (lambda a, b: (a != 0) & (b != 0), "bool"),
    "logical_or": (lambda a, b: (a != 0) | (b != 0), "bool"),
}

INT_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _trunc_div,  # C semantics: truncates toward zero
    "mod": np.fmod,  # C %: the sign of the dividend
    "fmod": np.fmod,
    "remainder": np.remainder,  # Python %: the sign of the divisor
    "maximum": np.maximum,
    "minimum": np.minimum,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "gcd": np.gcd,
    "eq": np.equal,
    "lt": np.less,
}


def _small_floats(dtype):
    """Values on a coarse grid, so comparisons see ties and every op is exact in bf16."""
    def make(rng):
        return (rng.integers(-6, 7, size=SHAPE) / 2).astype(dtype)
    return make


def binary_cases():
    cases = []
    for name, (ref, kind) in FLOAT_BINARY.items():
        for dtype in (F32, BF16):
            if name in ("pow",):
                make = inputs(uniform(SHAPE, 0.5, 3, dtype), uniform(SHAPE, -2, 2, dtype))
            elif name in ("div", "truediv", "fmod", "remainder"):
                make = inputs(uniform(SHAPE, -5, 5, dtype), uniform(SHAPE, 0.5, 3, dtype))
            else:
                make = inputs(_small_floats(dtype), _small_floats(dtype))
            cases.append(_binary(name, make, ref, F32 if kind == "float" else BOOL, np.dtype(dtype).name))
    for name, ref in INT_BINARY.items():
        out = BOOL if name in ("eq", "lt") else I32
        make = inputs(ints(SHAPE, -60, 60), nonzero_ints(SHAPE, -9, 9))
        cases.append(_binary(name, make, ref, out, "int32"))
    shifts = inputs(ints(SHAPE, -1000, 1000), ints(SHAPE, 0, 8))
    cases += [
        _binary("pow", inputs(ints(SHAPE, -4, 5), ints(SHAPE, 0, 4)), np.power, I32, "int32"),
        _binary("bitwise_left_shift", shifts, np.left_shift, I32, "int32"),
        _binary("bitwise_right_shift", shifts, np.right_shift, I32, "int32"),  # arithmetic
        _binary("logical_right_shift", shifts,
                lambda a, s: (a.astype(np.uint32) >> s.astype(np.uint32)).astype(np.int32), I32, "int32", raw=True),
        _binary("bitwise_and", inputs(bools(SHAPE), bools(SHAPE)), np.logical_and, BOOL, "bool"),
        _binary("bitwise_xor", inputs(bools(SHAPE), bools(SHAPE)), np.logical_xor, BOOL, "bool"),
        # nextafter works in the operands' own type: the next float32, not the next double.
        _binary("nextafter", inputs(uniform(SHAPE, -3, 3), uniform(SHAPE, -3, 3)),
                lambda a, b: np.nextafter(a, b), F32, "float32", raw=True),
    ]
    # Mixed operands: Python numbers, symbolic scalars, broadcasting size-1 dims, int + float.
    cases += [
        OpCase("add", "add-tensor-python-float", lambda fd, a: fd.ops.add(a, 2.5),
               inputs(uniform(SHAPE, -3, 3)), lambda a: a + 2.5, (F32,)),
        OpCase("mul", "mul-python-int-bf16", lambda fd, a: fd.ops.mul(3, a),
               inputs(uniform(SHAPE, -3, 3, BF16)), lambda a: 3 * a, (F32,)),
        OpCase("sub", "sub-symbolic-scalar", lambda fd, a, s: fd.ops.sub(a, s),
               inputs(uniform(SHAPE, -3, 3), 0.75), lambda a, s: a - s, (F32,)),
        OpCase("add", "add-int-tensor-float-scalar", lambda fd, a: fd.ops.add(a, 0.5),
               inputs(ints(SHAPE, -9, 9)), lambda a: a + 0.5, (F32,)),
        OpCase("mul", "mul-broadcast-size-1-dim", lambda fd, a, b: fd.ops.mul(a, b),
               inputs(uniform((3, 1, 5), -3, 3), uniform((3, 4, 5), -3, 3)), np.multiply, (F32,)),
        OpCase("add", "add-scalars", lambda fd, s, t: fd.ops.add(s, t), inputs(2, 40), lambda s, t: s + t, (I64,)),
    ]
    return cases


def ternary_cases():
    f = uniform(SHAPE, -3, 3)
    return [
        OpCase("where", "where", lambda fd, c, a, b: fd.ops.where(c, a, b), inputs(bools(SHAPE), f, f),
               np.where, (F32,)),
        OpCase("where", "where-bf16-number", lambda fd, c, a: fd.ops.where(c, a, 0.0),
               inputs(bools(SHAPE), uniform(SHAPE, -3, 3, BF16)), lambda c, a: np.where(c, a, 0.0), (BF16,)),
        OpCase("lerp", "lerp", lambda fd, a, b, w: fd.ops.lerp(a, b, w), inputs(f, f, uniform(SHAPE, 0, 1)),
               lambda a, b, w: a + w * (b - a), (F32,)),
        OpCase("lerp", "lerp-scalar-weight", lambda fd, a, b: fd.ops.lerp(a, b, 0.25), inputs(f, f),
               lambda a, b: a + 0.25 * (b - a), (F32,)),
        OpCase("clamp", "clamp", lambda fd, x: fd.ops.clamp(x, -1.0, 0.5), inputs(f),
               lambda x: np.clip(x, -1.0, 0.5), (F32,)),
        OpCase("clamp", "clamp-bf16", lambda fd, x: fd.ops.clamp(x, -1.0, 0.5), inputs(uniform(SHAPE, -3, 3, BF16)),
               lambda x: np.clip(x, -1.0, 0.5), (BF16,)),
        OpCase("threshold", "threshold", lambda fd, x: fd.ops.threshold(x, 0.5, -7.0), inputs(f),
               lambda x: np.where(x <= 0.5, -7.0, x), (F32,)),
        OpCase("addcmul", "addcmul", lambda fd, x, a, b: fd.ops.addcmul(x, a, b, 0.5), inputs(f, f, f),
               lambda x, a, b: x + 0.5 * a * b, (F32,)),
        OpCase("add_alpha", "add_alpha", lambda fd, a, b: fd.ops.add_alpha(a, b, 2.0), inputs(f, f),
               lambda a, b: a + 2.0 * b, (F32,)),
        OpCase("sub_alpha", "sub_alpha", lambda fd, a, b: fd.ops.sub_alpha(a, b, 2.0), inputs(f, f),
               lambda a, b: a - 2.0 * b, (F32,)),
    ]


def _cast(src, dst, make, reference=None, raw=False):
    dtype = NUMPY_TO_BRAZE[np.dtype(dst)]
    ref = reference or (lambda x: x)
    return OpCase("cast", f"cast-{np.dtype(src).name}-to-{np.dtype(dst).name}",
                  lambda fd, x: fd.ops.cast(x, dtype=dtype), inputs(make), ref, (np.dtype(dst),), raw=raw)


def cast_cases():
    e4m3 = np.dtype(ml_dtypes.float8_e4m3fn)
    return [
        _cast(F32, BF16, uniform(SHAPE, -3, 3)),
        _cast(BF16, F32, uniform(SHAPE, -3, 3, BF16)),
        _cast(F32, np.float16, uniform(SHAPE, -3, 3)),
        _cast(F32, F64, uniform(SHAPE, -3, 3)),
        _cast(F32, I32, uniform(SHAPE, -30, 30), np.trunc),  # C conversion truncates toward zero
        _cast(I32, F32, ints(SHAPE, -100, 100)),
        _cast(F32, BOOL, with_specials(uniform(SHAPE, -1, 1), F32), lambda x: x != 0),
        _cast(BOOL, F32, bools(SHAPE), lambda x: x.astype(np.float64)),
        _cast(I64, np.int8, ints(SHAPE, -300, 300, I64), lambda x: x.astype(np.int8), raw=True),  # wraps like C++
        _cast(F32, e4m3, uniform(SHAPE, -3, 3), lambda x: x.astype(e4m3), raw=True),
        OpCase("cast", "cast-scalar-int-to-double", lambda fd, s: fd.ops.cast(fd.ops.add(s, 1), dtype=DataType.Double),
               inputs(41), lambda s: float(s + 1), (F64,)),
    ]


def all_cases():
    return unary_cases() + binary_cases() + ternary_cases() + cast_cases()
