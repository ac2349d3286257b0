"""Random backward-pass fusions for the differential fuzzer, written as Thunder writes them and generated as
Python source (a failing case prints itself as a standalone reproducer).

A case is one of:
- a layer-norm or RMS-norm backward: grad_out and x of 2 or 3 dims, the forward's float32 mean and rstd
  (keepdim), maybe a weight; out grad_in (maybe plus a residual's grad), maybe grad_weight and grad_bias,
  and 0-2 bias grads of neighbouring linears (sums over the same rows, of other widths), and at times
  grad_in summed over one of its row dims (a position embedding's grad) or a bias grad over rows of its own;
- an activation backward (GELU with erf or tanh, SiLU) with its linear's bias grad (or without it, as
  Thunder writes it), maybe through a dropout-like mask, and 0-2 bias grads of the next linears (sums over
  the same rows of other widths, side by side);
- a softmax backward.
Rows and widths include 1, odd and prime sizes and widths past what a thread keeps in registers; inputs
may be transposed, strided or offset by an element; every case is planned for one of six devices and
tunings, so the inner-outer scheduler's register, shared-memory and staged forms all run.
"""

from __future__ import annotations

import math
import random

from fuzz_fusions import _input_source

ROWS = [1, 2, 3, 7, 16, 33, 64, 100, 257]
WIDTHS = [1, 3, 8, 24, 33, 96, 128, 200, 257, 768, 1000, 1600, 2304]
# Simulated elements per tensor at most: keeps a case under a second or so.
MAX_ELEMENTS = 120_000
DTYPES = [("np.float32", "Float"), ("ml_dtypes.bfloat16", "BFloat16"), ("ml_dtypes.bfloat16", "BFloat16"),
          ("np.float16", "Half")]
LAYOUTS = ["contiguous", "contiguous", "contiguous", "transposed", "strided", "offset"]
TARGETS = ["h100", "h100", "a100", "h100:persistent_staged=1", "h100:persistent_values=24",
           "h100:block_threads=64,max_chunks_per_thread=2", "mi300x"]


def _shape(rng: random.Random, width: int) -> list[int]:
    """Rows of `width` elements, as [rows, width] or [batch, seq, width], within MAX_ELEMENTS."""
    rows = rng.choice([r for r in ROWS if r * width <= MAX_ELEMENTS] or [1])
    if rows > 3 and rng.random() < 0.4:
        batch = rng.choice([d for d in (2, 3, 4) if rows % d == 0] or [1])
        return [batch, rows // batch, width]
    return [rows, width]


def _tensor(lines: list[str], body: list[str], name: str, shape: list[int], dtype: tuple[str, str], layout: str,
            rng: random.Random, values: str = "") -> None:
    """Input x_{name} (numpy, in `layout`) and its definition t_{name}, cast to float; `values` (an expression
    of {x}) rewrites the array's values after it is made (rstd kept positive, say)."""
    source = _input_source(0, shape, dtype[0], layout, rng)
    lines += [line.replace("x0", f"x_{name}") for line in source]
    if values:
        # In place: the array keeps the layout it was made in.
        lines.append(f"x_{name}[...] = {values.format(x=f'x_{name}')}")
    body.append(f"t_{name} = fd.define_tensor(sizes=list(x_{name}.shape), "
                f"strides=[s // x_{name}.itemsize for s in x_{name}.strides], dtype=DataType.{dtype[1]})")
    body.append(f"f_{name} = fd.ops.cast(t_{name}, DataType.Float)")


def _norm_backward(rng: random.Random, lines: list[str], body: list[str], inputs: list[str],
                   grouped_rng: random.Random) -> int | None:
    width = rng.choice([w for w in WIDTHS if w <= MAX_ELEMENTS])
    shape = _shape(rng, width)
    rank = len(shape)
    rows_dims = list(range(rank - 1))
    stat_shape = shape[:-1] + [1]
    dtype = rng.choice(DTYPES)
    rms = rng.random() < 0.35
    weight = rng.random() < 0.8
    bias = not rms and rng.random() < 0.7
    for name in ("go", "x"):
        _tensor(lines, body, name, shape, dtype, rng.choice(LAYOUTS), rng)
        inputs.append(f"x_{name}")
    f32 = ("np.float32", "Float")
    if not rms:
        _tensor(lines, body, "mean", stat_shape, f32, "contiguous", rng, "({x} * 0.5).astype(np.float32)")
        inputs.append("x_mean")
    _tensor(lines, body, "rstd", stat_shape, f32, rng.choice(["contiguous", "offset"]), rng,
            "(1.0 + 0.25 * {x}).astype(np.float32)")
    inputs.append("x_rstd")
    full = f"{shape}"
    if weight:
        _tensor(lines, body, "w", [width], dtype, rng.choice(["contiguous", "strided", "offset"]), rng)
        inputs.append("x_w")
        body.append(f"g = fd.ops.mul(f_go, fd.ops.broadcast_in_dim(f_w, {full}, [{rank - 1}]))")
    else:
        body.append("g = f_go")
    centered_x = "f_x" if rms else f"fd.ops.sub(f_x, fd.ops.broadcast_in_dim(f_mean, {full}, {list(range(rank))}))"
    body.append(f"xh = fd.ops.mul({centered_x}, fd.ops.broadcast_in_dim(f_rstd, {full}, {list(range(rank))}))")
    body.append(f"n = fd.ops.size(t_x, {rank - 1})")
    body.append(f"b = fd.ops.div(fd.ops.sum(fd.ops.mul(g, xh), [{rank - 1}], keepdim=True), n)")
    if rms:
        body.append("centered = g")
    else:
        body.append(f"centered = fd.ops.sub(g, fd.ops.expand(fd.ops.div(fd.ops.sum(g, [{rank - 1}], keepdim=True), n), "
                    f"{full}))")
    body.append(f"gi = fd.ops.mul(fd.ops.broadcast_in_dim(f_rstd, {full}, {list(range(rank))}), "
                f"fd.ops.sub(centered, fd.ops.mul(xh, fd.ops.expand(b, {full}))))")
    if rng.random() < 0.3:
        # The residual branch's grad added to the norm's (a pre-norm block's skip connection).
        _tensor(lines, body, "res", shape, dtype, rng.choice(LAYOUTS), rng)
        inputs.append("x_res")
        body.append("gi = fd.ops.add(gi, f_res)")
    out = f"DataType.{dtype[1]}"
    body.append(f"fd.add_output(fd.ops.cast(gi, {out}))")
    if weight:
        body.append(f"fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.mul(f_go, xh), {rows_dims}), {out}))")
    if bias:
        body.append(f"fd.add_output(fd.ops.cast(fd.ops.sum(f_go, {rows_dims}), {out}))")
    row_shape = shape[:-1]
    for i in range(rng.choice([0, 0, 1, 1, 2])):
        # A neighbouring linear's bias grad: its output's grad summed over the same rows, another width.
        other = rng.choice([w for w in WIDTHS if w * max(1, math.prod(row_shape)) <= 2 * MAX_ELEMENTS] or [1])
        fc_dtype = rng.choice([dtype, dtype, ("np.float32", "Float")])
        _tensor(lines, body, f"fc{i}", row_shape + [other], fc_dtype, rng.choice(LAYOUTS), rng)
        inputs.append(f"x_fc{i}")
        body.append(f"fd.add_output(fd.ops.cast(fd.ops.sum(f_fc{i}, {rows_dims}), DataType.{fc_dtype[1]}))")
    # The rows' pass and its finish, where the norm's own outer sums are there to be joined, over several rows
    # of more than one element (a linear's 1-wide bias grad joins too): a single row's sums over its size-1
    # dims are no reductions at all, and rows of one element need no row reduction.
    plain = math.prod(row_shape) > 1 and width > 1 and (weight or bias)
    if rank == 3 and grouped_rng.random() < 0.35:
        # grad_in summed over one of the row dims (a learned position embedding's grad over the batch): the
        # rows' pass sums each group's rows together where the dim has more than one element.
        summed = grouped_rng.choice(rows_dims)
        total = f"fd.ops.sum(gi, [{summed}])"
        if grouped_rng.random() < 0.5:
            # Thunder's broadcast to a leading 1 and squeeze back (T5's relative position bias grad).
            kept = [size for d, size in enumerate(shape) if d != summed]
            total = (f"fd.ops.squeeze(fd.ops.broadcast_in_dim({total}, shape={[1] + kept}, "
                     f"broadcast_dims={list(range(1, len(kept) + 1))}), [0])")
        body.append(f"fd.add_output(fd.ops.cast({total}, {out}))")
        plain = plain and shape[summed] > 1
    if weight and grouped_rng.random() < 0.25:
        # The weight grad again, reshaped to [1, width] (size-1 dims added after an outer sum).
        body.append(f"fd.add_output(fd.ops.reshape(fd.ops.sum(fd.ops.mul(f_go, xh), {rows_dims}), [1, {width}]))")
    if grouped_rng.random() < 0.25:
        # A bias grad over rows of its own (a ViT's head on the class token: a row per image beside a row per
        # token), up to four per row of the norm: the norm's kernel walks them too. (Over one row it is a
        # copy, no reduction: a kernel of its own.)
        rows = math.prod(row_shape)
        own = grouped_rng.choice(sorted({2, 3, rows // 2 + 2, rows + 1, 2 * rows, 4 * rows}))
        other = grouped_rng.choice([w for w in WIDTHS if w * own <= 2 * MAX_ELEMENTS] or [1])
        _tensor(lines, body, "own", [own, other], dtype, grouped_rng.choice(LAYOUTS), grouped_rng)
        inputs.append("x_own")
        body.append(f"fd.add_output(fd.ops.cast(fd.ops.sum(f_own, [0]), {out}))")
    return 2 if plain else None


def _activation_backward(rng: random.Random, lines: list[str], body: list[str], inputs: list[str]) -> int | None:
    width = rng.choice(WIDTHS)
    shape = _shape(rng, width)
    rank = len(shape)
    dtype = rng.choice(DTYPES)
    layouts = [rng.choice(LAYOUTS) for _ in ("g", "x")]
    for name, layout in zip(("g", "x"), layouts):
        _tensor(lines, body, name, shape, dtype, layout, rng)
        inputs.append(f"x_{name}")
    kind = rng.choice(["gelu", "gelu_tanh", "silu"])
    if kind == "gelu":
        body.append("cdf = fd.ops.mul(fd.ops.add(fd.ops.erf(fd.ops.mul(f_x, 0.7071067811865476)), 1.0), 0.5)")
        body.append("pdf = fd.ops.mul(fd.ops.exp(fd.ops.mul(fd.ops.mul(f_x, f_x), -0.5)), 0.3989422804014327)")
        body.append("d = fd.ops.add(cdf, fd.ops.mul(f_x, pdf))")
    elif kind == "gelu_tanh":
        body.append("inner = fd.ops.mul(fd.ops.add(f_x, fd.ops.mul(fd.ops.mul(fd.ops.mul(f_x, f_x), f_x), 0.044715)), "
                    "0.7978845608028654)")
        body.append("th = fd.ops.tanh(inner)")
        body.append("dinner = fd.ops.mul(fd.ops.add(fd.ops.mul(fd.ops.mul(f_x, f_x), 0.134145), 1.0), 0.7978845608028654)")
        body.append("d = fd.ops.add(fd.ops.mul(fd.ops.add(th, 1.0), 0.5), "
                    "fd.ops.mul(fd.ops.mul(fd.ops.mul(f_x, 0.5), fd.ops.sub(1.0, fd.ops.mul(th, th))), dinner))")
    else:
        body.append("s = fd.ops.sigmoid(f_x)")
        body.append("d = fd.ops.mul(s, fd.ops.add(1.0, fd.ops.mul(f_x, fd.ops.sub(1.0, s))))")
    body.append("gi = fd.ops.mul(f_g, d)")
    if rng.random() < 0.3:
        # Dropout's backward before it: the kept elements' grads scaled by 1 / (1 - p).
        lines.append(f"x_keep = np.random.default_rng({rng.randrange(1 << 30)}).random({tuple(shape)}) < 0.9")
        body.append("t_keep = fd.define_tensor(sizes=list(x_keep.shape), strides=[s for s in x_keep.strides], "
                    "dtype=DataType.Bool)")
        inputs.append("x_keep")
        body.append("gi = fd.ops.mul(fd.ops.where(t_keep, gi, 0.0), 1.1111111111111112)")
    out = f"DataType.{dtype[1]}"
    rows_dims = list(range(rank - 1))
    body.append(f"fd.add_output(fd.ops.cast(gi, {out}))")
    own_bias_grad = rng.random() < 0.7  # else Thunder's form: the linear's bias grad is another fusion's
    if own_bias_grad:
        body.append(f"fd.add_output(fd.ops.cast(fd.ops.sum(gi, {rows_dims}), {out}))")
    row_shape = shape[:-1]
    extras = rng.choice([0, 0, 1, 1, 2])
    widths = [width] if own_bias_grad else []
    for i in range(extras):
        # The next linear's bias grad, beside the activation's ops (a part side by side): another width.
        other = rng.choice([w for w in WIDTHS if w * max(1, math.prod(row_shape)) <= 2 * MAX_ELEMENTS] or [1])
        fc_dtype = rng.choice([dtype, ("np.float32", "Float")])
        _tensor(lines, body, f"fc{i}", row_shape + [other], fc_dtype, rng.choice(LAYOUTS), rng)
        inputs.append(f"x_fc{i}")
        body.append(f"fd.add_output(fd.ops.cast(fd.ops.sum(f_fc{i}, {rows_dims}), DataType.{fc_dtype[1]}))")
        widths.append(other)
    if not own_bias_grad and extras == 0:
        return 1  # the activation's ops alone
    # Sums over several rows are reductions, the parts side by side in one kernel; over a single row, they are
    # casts of their own shapes (no claim). A sum of a one-wide tensor over its rows walks the rows as a
    # row's elements, an inner reduction, which is no part beside others (no claim).
    one_wide = len(widths) + (0 if own_bias_grad else 1) > 1 and 1 in widths
    # Without its bias grad, the activation's ops reading a transposed input are a transpose kernel, which
    # keeps its tiles rather than join the sums (no claim).
    transposed = not own_bias_grad and "transposed" in layouts
    return 1 if math.prod(row_shape) > 1 and not one_wide and not transposed else None


def _softmax_backward(rng: random.Random, lines: list[str], body: list[str], inputs: list[str]) -> int | None:
    width = rng.choice(WIDTHS)
    shape = _shape(rng, width)
    rank = len(shape)
    dtype = rng.choice(DTYPES)
    _tensor(lines, body, "g", shape, dtype, rng.choice(LAYOUTS), rng)
    # y: a softmax's output, rows of positive values summing to 1.
    _tensor(lines, body, "y", shape, dtype, rng.choice(LAYOUTS), rng,
            f"(np.exp({{x}}.astype(np.float32)) / np.exp({{x}}.astype(np.float32)).sum(-1, keepdims=True))"
            f".astype({dtype[0]})")
    inputs += ["x_g", "x_y"]
    body.append(f"dot = fd.ops.sum(fd.ops.mul(f_g, f_y), [{rank - 1}], keepdim=True)")
    # Scaled by the width: y is about 1 / width, so the grads of wide rows would sit under the tolerances.
    body.append(f"gi = fd.ops.mul(fd.ops.mul(f_y, fd.ops.sub(f_g, fd.ops.expand(dot, {shape}))), {float(width)})")
    body.append(f"fd.add_output(fd.ops.cast(gi, DataType.{dtype[1]}))")
    return 1


def generate_backward(seed: int) -> str:
    """The source of one case: defines `fd`, `inputs`, `target` (a device preset, maybe tuned) and `kernels`,
    the number of kernels the plan must have (None where the case makes no claim)."""
    rng = random.Random(seed)
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", ""]
    body: list[str] = []
    inputs: list[str] = []
    kind = rng.random()
    if kind < 0.65:
        # The grouped sums draw from a generator of their own: the other draws of a seed stay as they were.
        kernels = _norm_backward(rng, lines, body, inputs, random.Random(f"grouped {seed}"))
    elif kind < 0.9:
        kernels = _activation_backward(rng, lines, body, inputs)
    else:
        kernels = _softmax_backward(rng, lines, body, inputs)
    lines.append(f"inputs = [{', '.join(inputs)}]")
    lines.append(f"target = {rng.choice(TARGETS)!r}")
    lines.append(f"kernels = {kernels}")
    lines.append("with FusionDefinition() as fd:")
    lines += ["    " + line for line in body]
    return "\n".join(lines) + "\n"


SHAPE_SETS = 4


def generate_norm_backward_shapes(seed: int) -> str:
    """The source of one case whose norm backward (layer or RMS, maybe with weight, bias and neighbouring
    linears' bias grads) leaves every size open: defines `fd` and `input_sets`, SHAPE_SETS lists of inputs
    with other row counts (now and then other widths too, and 1 row), which run one after the other through
    the definition's one plan cache, each with its own partial sums and launch arguments."""
    rng = random.Random(seed)
    rank = rng.choice([2, 2, 3])
    dtype = rng.choice(DTYPES)
    rms = rng.random() < 0.35
    weight = rng.random() < 0.8
    bias = not rms and rng.random() < 0.7
    extras = [(rng.choice([dtype, ("np.float32", "Float")]), rng.choice(LAYOUTS)) for _ in range(rng.choice([0, 1, 2]))]
    layouts = {name: rng.choice(LAYOUTS) for name in ("go", "x")}
    width, extra_widths = rng.choice(WIDTHS[2:]), [rng.choice(WIDTHS[1:]) for _ in extras]
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", "",
             "input_sets = []"]
    for s in range(SHAPE_SETS):
        if s > 0 and rng.random() < 0.2:
            width, extra_widths = rng.choice(WIDTHS[2:]), [rng.choice(WIDTHS[1:]) for _ in extras]
        rows = rng.choice([r for r in ROWS if r * max([width] + extra_widths) <= MAX_ELEMENTS] or [1])
        row_shape = [rows] if rank == 2 else [rng.choice([1, 2, 3]), rows]
        names = []
        for name in ("go", "x"):
            lines += [line.replace("x0", f"x_{name}") for line in
                      _input_source(0, row_shape + [width], dtype[0], layouts[name], rng)]
            names.append(f"x_{name}")
        stats = ["rstd"] if rms else ["mean", "rstd"]
        for name in stats:
            lines.append(f"x_{name} = np.random.default_rng({rng.randrange(1 << 30)}).uniform(0.5, 1.5, "
                         f"{tuple(row_shape + [1])}).astype(np.float32)")
            names.append(f"x_{name}")
        if weight:
            lines.append(f"x_w = np.random.default_rng({rng.randrange(1 << 30)}).uniform(-2, 2, {width}).astype({dtype[0]})")
            names.append("x_w")
        for i, ((fc_dtype, layout), other) in enumerate(zip(extras, extra_widths)):
            lines += [line.replace("x0", f"x_fc{i}") for line in
                      _input_source(0, row_shape + [other], fc_dtype[0], layout, rng)]
            names.append(f"x_fc{i}")
        lines.append(f"input_sets.append([{', '.join(names)}])")
    lines.append("with FusionDefinition() as fd:")
    body = []
    stat_contiguity = [True] * (rank - 1) + [None]

    def define(name, dims, contiguity, dt):
        body.append(f"t_{name} = fd.define_tensor(shape={dims}, contiguity={contiguity}, dtype=DataType.{dt[1]})")
        body.append(f"f_{name} = fd.ops.cast(t_{name}, DataType.Float)")

    for name in ("go", "x"):
        define(name, [-1] * rank, [layouts[name] == "contiguous"] * rank, dtype)
    for name in ["rstd"] if rms else ["mean", "rstd"]:
        define(name, [-1] * (rank - 1) + [1], stat_contiguity, ("np.float32", "Float"))
    if weight:
        define("w", [-1], [True], dtype)
    for i, (fc_dtype, layout) in enumerate(extras):
        define(f"fc{i}", [-1] * rank, [layout == "contiguous"] * rank, fc_dtype)
    # Size-1 dims broadcast against the rows' dims, as nvFuser's binary ops do: no literal sizes anywhere.
    row_dims = list(range(rank - 1))
    body.append(f"g = fd.ops.mul(f_go, fd.ops.broadcast(f_w, {[True] * (rank - 1) + [False]}))" if weight else "g = f_go")
    body.append(f"xh = fd.ops.mul({'f_x' if rms else 'fd.ops.sub(f_x, f_mean)'}, f_rstd)")
    body.append(f"n = fd.ops.size(t_x, {rank - 1})")
    body.append(f"b = fd.ops.div(fd.ops.sum(fd.ops.mul(g, xh), [{rank - 1}], keepdim=True), n)")
    centered = "g" if rms else f"fd.ops.sub(g, fd.ops.div(fd.ops.sum(g, [{rank - 1}], keepdim=True), n))"
    body.append(f"fd.add_output(fd.ops.cast(fd.ops.mul(f_rstd, fd.ops.sub({centered}, fd.ops.mul(xh, b))), "
                f"DataType.{dtype[1]}))")
    if weight:
        body.append(f"fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.mul(f_go, xh), {row_dims}), DataType.{dtype[1]}))")
    if bias:
        body.append(f"fd.add_output(fd.ops.cast(fd.ops.sum(f_go, {row_dims}), DataType.{dtype[1]}))")
    for i, (fc_dtype, _) in enumerate(extras):
        body.append(f"fd.add_output(fd.ops.cast(fd.ops.sum(f_fc{i}, {row_dims}), DataType.{fc_dtype[1]}))")
    lines += ["    " + line for line in body]
    return "\n".join(lines) + "\n"
