"""Random row kernels beside values made from scalars alone, for the differential fuzzer, generated as Python
source (a failing case prints itself as a standalone reproducer).

A case is a softmax, layer norm or RMS norm over the last dim of a 2-D or 3-D input, with one to three values
made from scalars alone: an iota of the columns (scaled), seeded uniform noise of the columns, a full of the
rows' leading dims and another width, an iota of its own length, a [1, 1] full, or an iota reshaped to
[columns, 1]. The rows read most column values (added before the norm), and most values are returned too, so
the inner persistent kernel writes them in a pointwise part beside its rows and computes them again where
its rows read them (reduction_parts.h). Definitions leave their sizes open half of the time, and then run at a
second shape with other row counts.
"""

from __future__ import annotations

import random

ROW_SIZES = [1, 2, 3, 5, 8, 17, 33]
WIDTHS = [1, 4, 7, 32, 64, 100, 300]
DTYPES = [("np.float32", "Float"), ("ml_dtypes.bfloat16", "BFloat16")]


def _value(rng: random.Random, columns: int, sizes: str) -> tuple[str, str]:
    """One value made from scalars: ("column", source) for one of [columns] elements, else ("other", source)."""
    kind = rng.choice(["iota", "uniform", "full", "iota_length", "full_1x1", "iota_column"])
    if kind == "iota":
        return "column", (f"fd.ops.div(fd.ops.cast(fd.ops.iota({columns}, 0, 1, dtype=DataType.Int64), DataType.Float), "
                          f"{float(columns)})")
    if kind == "uniform":
        return "column", (f"fd.ops.uniform(0.0, 1.0, [{columns}], rng_seed=fd.define_scalar({rng.randrange(1000)}, "
                          f"dtype=DataType.Int64), rng_offset=fd.define_scalar({4 * rng.randrange(10)}, "
                          "dtype=DataType.Int64), dtype=DataType.Float)")
    if kind == "full":
        return "other", (f"fd.ops.full({sizes}[:-1] + [{rng.choice([1, 3, 9])}], "
                         f"fd.define_scalar({rng.choice([0.0, 1.5])}, dtype=DataType.Double), DataType.Float)")
    if kind == "iota_length":
        return "other", f"fd.ops.iota({rng.choice([1, 5, 17, 40])}, 0, 1, dtype=DataType.Int64)"
    if kind == "full_1x1":
        return "other", "fd.ops.full([1, 1], fd.define_scalar(2.0, dtype=DataType.Double), DataType.Float)"
    return "other", (f"fd.ops.reshape(fd.ops.broadcast_in_dim(fd.ops.iota({columns}, 0, 1, dtype=DataType.Int64), "
                     f"shape=[1, {columns}], broadcast_dims=[1]), [{columns}, 1])")


def generate_scalar_parts(seed: int) -> str:
    """The source of one case: defines `fd` and `input_sets` (one or two lists of one input)."""
    rng = random.Random(seed)
    dtype = rng.choice(DTYPES)
    rank = rng.choice([2, 3])
    shape = [rng.choice(ROW_SIZES) for _ in range(rank - 1)] + [rng.choice(WIDTHS)]
    open_sizes = rng.random() < 0.5
    shapes = [shape]
    if open_sizes:
        shapes.append([s if rng.random() < 0.5 else rng.choice([1, 2, 6, 40]) for s in shape[:-1]] + [shape[-1]])
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", "",
             "input_sets = []"]
    for sizes in shapes:
        lines.append(f"input_sets.append([np.random.default_rng({rng.randrange(1 << 30)}).standard_normal({sizes})"
                     f".astype({dtype[0]})])")
    contiguity = [True] * rank if open_sizes else [None if s == 1 else True for s in shape]
    lines += ["with FusionDefinition() as fd:",
              f"    x = fd.define_tensor(shape={[-1] * rank if open_sizes else shape}, contiguity={contiguity}, "
              f"dtype=DataType.{dtype[1]})",
              "    sizes = x.shape()" if open_sizes else f"    sizes = {shape}",
              "    y = fd.ops.cast(x, DataType.Float)"]
    values = [_value(rng, shape[-1], "sizes") for _ in range(rng.randint(1, 3))]
    for i, (kind, source) in enumerate(values):
        lines.append(f"    v{i} = {source}")
        if kind == "column" and rng.random() < 0.8:
            lines.append(f"    y = fd.ops.add(y, fd.ops.broadcast_in_dim(v{i}, shape=sizes, broadcast_dims=[{rank - 1}]))")
    last, kept = rank - 1, list(range(rank - 1))
    per_row = f"shape=sizes, broadcast_dims={kept}"
    op = rng.choice(["softmax", "layer_norm", "rms_norm"])
    if op == "softmax":
        lines += [f"    e = fd.ops.exp(fd.ops.sub(y, fd.ops.broadcast_in_dim(fd.ops.max(y, dims=[{last}]), {per_row})))",
                  f"    out = fd.ops.div(e, fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[{last}]), {per_row}))"]
    elif op == "layer_norm":
        lines += [f"    var, mean = fd.ops.var_mean(y, dims=[{last}], correction=0, keepdim=False)",
                  f"    out = fd.ops.mul(fd.ops.sub(y, fd.ops.broadcast_in_dim(mean, {per_row})), "
                  f"fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(var, 1e-5)), {per_row}))"]
    else:
        lines += [f"    ms = fd.ops.div(fd.ops.sum(fd.ops.mul(y, y), dims=[{last}]), {float(shape[-1])})",
                  f"    out = fd.ops.mul(y, fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(ms, 1e-5)), {per_row}))"]
    lines.append(f"    fd.add_output(fd.ops.cast(out, DataType.{dtype[1]}))")
    for i in range(len(values)):
        if rng.random() < 0.85:
            lines.append(f"    fd.add_output(v{i})")
    return "\n".join(lines) + "\n"
