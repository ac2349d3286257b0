"""Random row kernels with totals over their rows, for the differential fuzzer, generated as Python source (a
failing case prints itself as a standalone reproducer).

A case is a softmax, layer norm or RMS norm over the last dim of a 2-D or 3-D input, or a cross entropy over
a 2-D one (targets picked with take_along_axis, some ignored), beside one to three totals: a sum, max or min
over every row of a per-row value (a statistic of the rows, a per-row input of weights, a count of the weights
over one half, the cross entropy's loss), kept as one element or as size-1 dims, in float or double. Elementwise
math may follow the totals (a total scaled, or divided by another: a mean, or plus a loss's other terms: 0-dim
tensors on the host or the device, which may also make an output alone), and the per-row values and the rows'
output are returned or not. The rows' kernel (inner persistent where the rows' output is returned, else a plain
reduction's) adds up the rows' values and its last block finishes the totals (row_totals.h). Definitions leave
their sizes open half of the time, and then run at a second shape with other row counts.
"""

from __future__ import annotations

import random

ROW_SIZES = [1, 2, 3, 5, 8, 17, 33, 130]
WIDTHS = [1, 2, 7, 32, 100, 300, 1000]
DTYPES = [("np.float32", "Float"), ("ml_dtypes.bfloat16", "BFloat16"), ("np.float16", "Half")]


def _rows(rng: random.Random, op: str, rank: int, lines: list[str]) -> list[str]:
    """Appends the rows' ops (of `y`, float) and returns the names of their per-row values ([rows...])."""
    last = rank - 1
    per_row = f"shape=sizes, broadcast_dims={list(range(rank - 1))}"
    if op in ("softmax", "cross_entropy"):
        lines += [f"    m = fd.ops.max(y, dims=[{last}])",
                  f"    e = fd.ops.exp(fd.ops.sub(y, fd.ops.broadcast_in_dim(m, {per_row})))",
                  f"    s = fd.ops.log(fd.ops.sum(e, dims=[{last}]))",
                  f"    out = fd.ops.div(e, fd.ops.broadcast_in_dim(fd.ops.exp(s), {per_row}))"]
        if op == "softmax":
            return ["m", "s"]
        lines += ["    kept = fd.ops.ne(t, fd.define_scalar(-1, dtype=DataType.Int64))",
                  "    safe = fd.ops.where(kept, t, fd.define_scalar(0, dtype=DataType.Int64))",
                  "    picked = fd.ops.reshape(fd.ops.take_along_axis(y, fd.ops.broadcast_in_dim(safe, "
                  "shape=[sizes[0], 1], broadcast_dims=[0]), dim=1), [sizes[0]])",
                  "    loss = fd.ops.where(kept, fd.ops.sub(fd.ops.add(m, s), picked), "
                  "fd.define_scalar(0.0, dtype=DataType.Float))",
                  "    count = fd.ops.cast(kept, DataType.Float)"]
        return ["m", "s", "loss", "count", "loss"]
    if op == "layer_norm":
        lines += [f"    var, mean = fd.ops.var_mean(y, dims=[{last}], correction=0, keepdim=False)",
                  "    r = fd.ops.rsqrt(fd.ops.add(var, 1e-5))",
                  f"    out = fd.ops.mul(fd.ops.sub(y, fd.ops.broadcast_in_dim(mean, {per_row})), "
                  f"fd.ops.broadcast_in_dim(r, {per_row}))"]
        return ["mean", "r", "var"]
    lines += [f"    ms = fd.ops.div(fd.ops.sum(fd.ops.mul(y, y), dims=[{last}]), fd.ops.cast(sizes[{last}], DataType.Float))",
              "    r = fd.ops.rsqrt(fd.ops.add(ms, 1e-5))",
              f"    out = fd.ops.mul(y, fd.ops.broadcast_in_dim(r, {per_row}))"]
    return ["ms", "r"]


def generate_row_totals(seed: int) -> str:
    """The source of one case: defines `fd` and `input_sets` (one or two lists of inputs: x, the per-row
    weights w, and for a cross entropy the targets t)."""
    rng = random.Random(seed)
    dtype = rng.choice(DTYPES)
    op = rng.choice(["softmax", "layer_norm", "rms_norm", "cross_entropy"])
    rank = 2 if op == "cross_entropy" else rng.choice([2, 3])
    shape = [rng.choice(ROW_SIZES) for _ in range(rank - 1)] + [rng.choice(WIDTHS)]
    open_sizes = rng.random() < 0.5
    shapes = [shape]
    if open_sizes:
        shapes.append([rng.choice(ROW_SIZES) for _ in shape[:-1]] + [shape[-1]])
    # A loss's other terms: 0-dim tensors (on the host or the device) that the last block reads as scalars.
    terms = [rng.random() < 0.5 for _ in range(rng.choice([0, 0, 1, 2]))]
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", "",
             "input_sets = []"]
    for sizes in shapes:
        lines += [f"rng = np.random.default_rng({rng.randrange(1 << 30)})",
                  f"inputs = [(rng.standard_normal({sizes}) * 2).astype({dtype[0]}), rng.random({sizes[:-1]}).astype(np.float32)]"]
        if op == "cross_entropy":
            lines += [f"t = rng.integers(0, {sizes[-1]}, {sizes[:-1]})",
                      f"t[rng.random({sizes[:-1]}) < 0.25] = -1",
                      "inputs.append(t)"]
        for _ in terms:
            lines.append(f"inputs.append(np.asarray({round(rng.uniform(-2, 2), 3)}, np.float32))")
        lines.append("input_sets.append(inputs)")
    contiguity = [True] * rank if open_sizes else [None if s == 1 else True for s in shape]
    row_contiguity = contiguity[:-1]
    lines += ["with FusionDefinition() as fd:",
              f"    x = fd.define_tensor(shape={[-1] * rank if open_sizes else shape}, contiguity={contiguity}, "
              f"dtype=DataType.{dtype[1]})",
              f"    w = fd.define_tensor(shape={[-1] * (rank - 1) if open_sizes else shape[:-1]}, "
              f"contiguity={row_contiguity}, dtype=DataType.Float)"]
    if op == "cross_entropy":
        lines.append(f"    t = fd.define_tensor(shape={[-1] if open_sizes else shape[:-1]}, "
                     f"contiguity={row_contiguity}, dtype=DataType.Int64)")
    lines += ["    sizes = x.shape()" if open_sizes else f"    sizes = {shape}",
              "    y = fd.ops.cast(x, DataType.Float)"]
    for i, is_cpu in enumerate(terms):
        lines.append(f"    term{i} = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu={is_cpu})")
    values = _rows(rng, op, rank, lines) + ["w", "fd.ops.cast(fd.ops.gt(w, fd.define_scalar(0.5, dtype=DataType.Double)), DataType.Float)"]
    if rng.random() < 0.7:
        lines.append(f"    fd.add_output(fd.ops.cast(out, DataType.{dtype[1]}))")
    every_row = list(range(rank - 1))
    totals, kept_dims = [], []
    for i in range(rng.randint(1, 3)):
        value = rng.choice(values)
        if rng.random() < 0.2:
            value = f"fd.ops.cast({value}, DataType.Double)"
        reduce = rng.choice(["sum", "sum", "max", "min"])
        keepdim = rng.random() < 0.3
        lines.append(f"    total{i} = fd.ops.{reduce}({value}, dims={every_row}, keepdim={keepdim})")
        totals.append(f"total{i}")
        kept_dims.append(keepdim)
        if rng.random() < 0.3:
            lines.append(f"    fd.add_output({value})")
    for i, total in enumerate(totals):
        kind = rng.choice(["as_is", "scaled", "ratio"])
        if kind == "scaled":
            total = f"fd.ops.mul({total}, {rng.choice([0.5, -3.0, 1e-4])})"
        elif kind == "ratio" and len(totals) > 1:
            total = f"fd.ops.div({total}, fd.ops.add({totals[(i + 1) % len(totals)]}, 1.0))"
        if terms and not kept_dims[i] and (kind != "ratio" or not kept_dims[(i + 1) % len(totals)]):
            term = f"term{rng.randrange(len(terms))}"
            if len(terms) > 1 and rng.random() < 0.5:
                term = "fd.ops.mul(term0, term1)"
            total = f"fd.ops.add({total}, fd.ops.mul({term}, 0.5))"
        lines.append(f"    fd.add_output({total})")
    if terms and rng.random() < 0.5:  # an output of the terms alone
        lines.append(f"    fd.add_output(fd.ops.sub(term0, {rng.choice([1.0, -0.25])}))")
    return "\n".join(lines) + "\n"
