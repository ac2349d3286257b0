"""Bad inputs for the fuzzer's bad-input mode: for every op with operands, a definition with symbolic
sizes and inputs that break it in one way, generated from a seed:

- "size": two dims that must agree (a letter used twice in the op's operands) get different sizes;
- "index": an index tensor holds a value outside the dim it selects from;
- "dtype": an input has another dtype than its definition;
- "rank": an input has one dim more or fewer than its definition;
- "negative": a size given as a scalar input is negative.

Each case must raise ValueError, TypeError or IndexError whose message names the op (or, for an input
that does not match its definition, "input <i>"): never a result, never another exception.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

import ml_dtypes
import numpy as np

from braze import DataType

NUMPY = {DataType.Float: np.float32, DataType.BFloat16: ml_dtypes.bfloat16, DataType.Half: np.float16,
         DataType.Int8: np.int8, DataType.Int32: np.int32, DataType.Int: np.int64, DataType.Bool: np.bool_,
         DataType.Float8_e4m3fn: ml_dtypes.float8_e4m3fn}
F, I, B = DataType.Float, DataType.Int, DataType.Bool


@dataclass
class OpCase:
    """An op's definition over inputs whose dims are letters (equal letters: sizes that must agree)."""

    name: str                       # the op the error names
    inputs: list[tuple[DataType, str]]
    build: Callable                 # (fd, input tensors) -> output
    mismatch_inputs: list[int] | None = None  # inputs whose letters a size mismatch may change (None: all)
    grow_only: bool = False         # a mismatch must enlarge the dim (a smaller index is valid for gather)
    index: tuple[int, int, int] | None = None  # (index input, data input, dim of the data input it selects)
    scalars: list[str] = field(default_factory=list)  # letters given as Int scalar inputs, after the tensors
    negative_wraps: bool = False    # an index in [-extent, 0) counts from the end (torch's index_put)


def _unary(name):
    return OpCase(name, [(F, "MN")], lambda fd, t: getattr(fd.ops, name)(t[0]))


def _binary(name, dtype=F):
    return OpCase(name, [(dtype, "MN"), (dtype, "MN")], lambda fd, t: getattr(fd.ops, name)(t[0], t[1]))


def _reduction(name):
    return OpCase(name, [(F, "MN")], lambda fd, t: getattr(fd.ops, name)(t[0], dims=[1]))


def _broadcast_in_dim(fd, t):
    return fd.ops.add(fd.ops.broadcast_in_dim(t[0], shape=t[1].shape(), broadcast_dims=[1]), t[1])


CASES = [
    *[_unary(n) for n in ("exp", "neg", "abs", "relu", "tanh", "sigmoid", "sqrt", "log")],
    *[_binary(n) for n in ("add", "mul", "sub", "div", "maximum", "minimum", "pow", "atan2", "lt", "eq")],
    *[_binary(n, I) for n in ("bitwise_and", "bitwise_xor")],
    OpCase("where", [(B, "MN"), (F, "MN"), (F, "MN")], lambda fd, t: fd.ops.where(t[0], t[1], t[2])),
    *[_reduction(n) for n in ("sum", "prod", "max", "min")],
    OpCase("var_mean", [(F, "MN")], lambda fd, t: fd.ops.var_mean(t[0], dims=[1], correction=0)[0]),
    OpCase("cumsum", [(F, "MN")], lambda fd, t: fd.ops.cumsum(t[0], 1)),
    OpCase("broadcast_in_dim", [(F, "N"), (F, "MN")], _broadcast_in_dim),
    OpCase("reshape", [(F, "AB"), (F, "BA")], lambda fd, t: fd.ops.add(fd.ops.reshape(t[0], t[1].shape()), t[1])),
    OpCase("permute", [(F, "MNK")], lambda fd, t: fd.ops.permute(t[0], [2, 0, 1])),
    OpCase("pad", [(F, "MN")], lambda fd, t: fd.ops.pad(t[0], [1, 2])),
    OpCase("slice", [(F, "MN")], lambda fd, t: fd.ops.slice(t[0], [0, 1], [1, 2])),
    OpCase("cat", [(F, "MN"), (F, "MK")], lambda fd, t: fd.ops.cat([t[0], t[1]], dim=1)),
    OpCase("matmul", [(DataType.BFloat16, "MK"), (DataType.BFloat16, "KN")], lambda fd, t: fd.ops.matmul(t[0], t[1])),
    OpCase("matmul", [(DataType.Int8, "MK"), (DataType.Int8, "KN")], lambda fd, t: fd.ops.matmul(t[0], t[1])),
    OpCase("matmul", [(DataType.Half, "BMK"), (DataType.Half, "BKN")], lambda fd, t: fd.ops.matmul(t[0], t[1])),
    OpCase("matmul", [(F, "MK"), (F, "K")], lambda fd, t: fd.ops.matmul(t[0], t[1])),
    OpCase("linear", [(DataType.BFloat16, "MK"), (DataType.BFloat16, "NK"), (DataType.BFloat16, "N")],
           lambda fd, t: fd.ops.linear(t[0], t[1], t[2])),
    OpCase("linear", [(DataType.Half, "BMK"), (DataType.Half, "NK")], lambda fd, t: fd.ops.linear(t[0], t[1])),
    OpCase("quantize", [(F, "MN"), (F, "M")], lambda fd, t: fd.ops.quantize(t[0], t[1], axis=0)),
    OpCase("dequantize", [(DataType.Int8, "MN"), (F, "N")], lambda fd, t: fd.ops.dequantize(t[0], t[1], axis=1)),
    OpCase("dequantize", [(DataType.Int8, "MN"), (F, "M"), (DataType.Int8, "M")],
           lambda fd, t: fd.ops.dequantize(t[0], t[1], t[2], axis=0)),
    OpCase("index_select", [(F, "MN"), (I, "K")], lambda fd, t: fd.ops.index_select(t[0], t[1], 0), index=(1, 0, 0)),
    OpCase("index_select", [(F, "MN"), (I, "K")], lambda fd, t: fd.ops.index_select(t[0], t[1], 1), index=(1, 0, 1)),
    OpCase("gather", [(F, "MN"), (I, "KN")], lambda fd, t: fd.ops.gather(t[0], t[1], 0), mismatch_inputs=[1],
           grow_only=True, index=(1, 0, 0)),
    OpCase("take_along_axis", [(F, "MN"), (I, "MK")], lambda fd, t: fd.ops.take_along_axis(t[0], t[1], 1),
           index=(1, 0, 1)),
    OpCase("scatter", [(F, "MN"), (I, "KN"), (F, "KN")], lambda fd, t: fd.ops.scatter(t[0], t[1], t[2], 0),
           mismatch_inputs=[1], grow_only=True, index=(1, 0, 0)),
    OpCase("index_put_accumulate", [(F, "MN"), (I, "K"), (F, "KN")],
           lambda fd, t: fd.ops.index_put_accumulate(t[0], t[1], t[2]), index=(1, 0, 0), negative_wraps=True),
    OpCase("iota", [], lambda fd, t: fd.ops.iota(t[0], 0, 1, dtype=DataType.Int), scalars=["N"]),
    OpCase("full", [], lambda fd, t: fd.ops.full([t[0], 3], 1.5, dtype=DataType.Float), scalars=["N"]),
]


def _kinds(case: OpCase) -> list[str]:
    """The mistakes that apply to the case; sizes and indices twice, as the rarer and harder ones."""
    kinds = []
    letters = [c for _, dims in case.inputs for c in dims]
    if any(letters.count(c) > 1 for c in set(letters)):
        kinds += ["size", "size"]
    if case.index is not None:
        kinds += ["index", "index"]
    if case.inputs:
        kinds += ["dtype", "rank"]
    if case.scalars:
        kinds.append("negative")
    return kinds


def _other_dtype(dtype: DataType, rng: random.Random) -> DataType:
    return rng.choice([d for d in NUMPY if d != dtype])


def _values(dtype: DataType, shape: tuple, rng: np.random.Generator, high: int = 3):
    if dtype == DataType.Bool:
        return rng.random(shape) < 0.5
    if dtype in (DataType.Int, DataType.Int32, DataType.Int8):
        return rng.integers(0, high, shape).astype(NUMPY[dtype])
    return rng.uniform(-2, 2, shape).astype(NUMPY[dtype])


def generate(seed: int, case: OpCase | None = None, kind: str | None = None):
    """One bad case: (the OpCase, the kind of mistake, its inputs). `kind` "good" makes inputs that fit."""
    rng = random.Random(seed)
    # Op cases and their kinds of mistake in turn, so every pair comes up in the first few hundred seeds;
    # the sizes, the dim or input broken and the values are random.
    case = case or CASES[seed % len(CASES)]
    kind = kind or _kinds(case)[(seed // len(CASES)) % len(_kinds(case))]
    sizes = {c: rng.randint(2, 9) for c in "ABKMN"}
    shapes = [[sizes[c] for c in dims] for _, dims in case.inputs]
    dtypes = [dtype for dtype, _ in case.inputs]
    nprng = np.random.default_rng(seed)
    values = {}
    if kind == "size":
        slots = [(i, d) for i, (_, dims) in enumerate(case.inputs) for d, c in enumerate(dims)
                 if (case.mismatch_inputs is None or i in case.mismatch_inputs)
                 and sum(x.count(c) for _, x in case.inputs) > 1]
        i, d = rng.choice(slots)
        was = shapes[i][d]
        # Never 1 (a size-1 dim broadcasts against the others): always a size no rule accepts.
        shapes[i][d] = was + rng.randint(1, 4) if case.grow_only else rng.choice(
            [s for s in range(2, 12) if s != was])
    elif kind == "dtype":
        i = rng.randrange(len(dtypes))
        dtypes_used = list(dtypes)
        dtypes_used[i] = _other_dtype(dtypes[i], rng)
        values["dtypes"] = dtypes_used
    elif kind == "rank":
        i = rng.randrange(len(shapes))
        if shapes[i] and rng.random() < 0.5:
            shapes[i].pop()
        else:
            shapes[i].append(rng.randint(2, 4))
    dtypes_used = values.get("dtypes", dtypes)
    inputs = []
    for i, (shape, dtype) in enumerate(zip(shapes, dtypes_used)):
        high = 3
        if case.index is not None and i == case.index[0]:
            high = shapes[case.index[1]][case.index[2]] if case.index[2] < len(shapes[case.index[1]]) else 2
        inputs.append(_values(dtype, tuple(shape), nprng, high))
    if kind == "index":
        i, data, dim = case.index
        extent = shapes[data][dim]
        flat = inputs[i].reshape(-1)
        below = -extent if case.negative_wraps else 0  # the first index below the valid ones is below - 1
        flat[rng.randrange(flat.size)] = rng.choice([extent, extent + rng.randint(1, 50), below - rng.randint(1, 5)])
    for letter in case.scalars:
        inputs.append(-rng.randint(1, 9) if kind == "negative" else sizes[letter])
    return case, kind, inputs


def define(case: OpCase):
    """The case's FusionDefinition: every tensor input with symbolic sizes."""
    from braze import FusionDefinition

    with FusionDefinition() as fd:
        tensors = [fd.define_tensor(shape=[-1] * len(dims), contiguity=True, dtype=dtype) for dtype, dims in case.inputs]
        tensors += [fd.define_scalar(dtype=DataType.Int) for _ in case.scalars]
        fd.add_output(case.build(fd, tensors))
    return fd
