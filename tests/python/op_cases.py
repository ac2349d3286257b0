"""The case type of the op tables (op_cases_elementwise.py, op_cases_tensor.py) used by test_ops.py.

A case names the fd.ops entry it covers, builds a fusion on defined inputs, makes seeded random
inputs, and computes the expected outputs with numpy, independently of braze.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from helpers import BF16


@dataclass(frozen=True)
class OpCase:
    op: str  # the fd.ops name covered
    id: str  # pytest id
    build: Callable  # (fd, *inputs) -> output Tensor/Scalar, or a tuple of them
    make_inputs: Callable[[np.random.Generator], list]  # arrays (tensor inputs) and numbers (scalar inputs)
    reference: Callable  # (*inputs) -> expected output, or a tuple of them
    out_dtypes: tuple  # numpy dtype of each output
    raw: bool = False  # True: reference gets the inputs as given; else float64 / int64 copies
    tags: tuple = field(default_factory=tuple)


# Input makers: functions of the case's seeded rng, so every case gets the same inputs on every run.
def uniform(shape, low, high, dtype=np.float32):
    def make(rng):
        return rng.uniform(low, high, size=shape).astype(dtype)
    return make


def ints(shape, low, high, dtype=np.int32):
    def make(rng):
        return rng.integers(low, high, size=shape).astype(dtype)
    return make


def nonzero_ints(shape, low, high, dtype=np.int32):
    def make(rng):
        x = rng.integers(low, high, size=shape)
        x[x == 0] = 1
        return x.astype(dtype)
    return make


def bools(shape):
    def make(rng):
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    return make


def with_specials(make, dtype):
    """Adds inf, -inf, nan, 0 and -0 to a float input (predicates need them)."""
    def wrapped(rng):
        x = make(rng).astype(np.float64)
        flat = x.reshape(-1)
        flat[:5] = [np.inf, -np.inf, np.nan, 0.0, -0.0]
        return x.astype(dtype)
    return wrapped


def inputs(*makers):
    """A make_inputs function from one maker per input (numbers are passed as they are)."""
    def make(rng):
        return [m(rng) if callable(m) else m for m in makers]
    return make


F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
I32 = np.dtype(np.int32)
I64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)
