"""Random fusions for the differential fuzzer, generated as Python source: the source is what runs,
so a failing case prints itself as a standalone reproducer.

A case has 1-3 inputs of one "full" shape (rank 1-3, sizes including 1, odd and prime), each maybe
transposed in memory, strided, offset by one element or an expanded broadcast, in float32, bfloat16
or float16; then 2-6 ops drawn from elementwise math, casts, broadcasts and expands of reductions
(normalization patterns; now and then broadcast along other dims of the same sizes, or permuted as an
output), permutes, slice+pad, split+cat, reshapes; then 1-3 outputs. Now and then positions (an iota)
are returned and added, a 0-dim input (a CPU scalar or a device tensor) scales the last value, joins
its total or makes an output alone, and an input of another shape gets work of its own (elementwise, a
transposing copy or a sum) beside the rest.
"""

from __future__ import annotations

import itertools
import random

SIZES = [1, 2, 3, 5, 7, 8, 13, 16, 24, 32, 33]
DTYPES = [("np.float32", "Float"), ("np.float32", "Float"), ("ml_dtypes.bfloat16", "BFloat16"), ("np.float16", "Half")]
UNARY = ["exp", "neg", "abs", "relu", "sin", "tanh", "sigmoid", "silu"]
BINARY = ["add", "mul", "sub", "maximum", "minimum"]
LAYOUTS = ["contiguous", "contiguous", "transposed", "strided", "offset", "expanded"]


def defined(source: str, label: str) -> dict | None:
    """The names a case's source defines (fd, inputs, ...), or None where braze refuses to squeeze or expand a
    dim that a slice or a reshape made 1, which is no broadcast dim (fuzz_views draws those); any other error
    is raised."""
    scope: dict = {}
    try:
        exec(compile(source, f"<{label}>", "exec"), scope)
    except ValueError as error:
        if not str(error).startswith(("squeeze:", "expand:")):
            raise
        return None
    return scope


def _input_source(i: int, shape: list[int], dtype: str, layout: str, rng: random.Random) -> list[str]:
    """Lines making numpy input x{i} with the given layout (values uniform in [-2, 2])."""
    n = f"x{i}"
    lines = [f"rng = np.random.default_rng({rng.randrange(1 << 30)})"]
    full = f"({', '.join(map(str, shape))},)"
    if layout == "transposed" and len(shape) > 1:
        order = list(range(len(shape)))
        rng.shuffle(order)
        inverse = [order.index(d) for d in range(len(shape))]
        permuted = tuple(shape[d] for d in order)
        lines.append(f"{n} = rng.uniform(-2, 2, {permuted}).astype({dtype}).transpose({inverse})")
    elif layout == "strided":
        doubled = shape[:-1] + [shape[-1] * 2]
        lines.append(f"{n} = rng.uniform(-2, 2, {tuple(doubled)}).astype({dtype})[..., ::2]")
    elif layout == "offset":
        count = 1
        for s in shape:
            count *= s
        lines.append(f"{n} = rng.uniform(-2, 2, {count + 1}).astype({dtype})[1:].reshape({full})")
    elif layout == "expanded":
        d = rng.randrange(len(shape))
        small = list(shape)
        small[d] = 1
        lines.append(f"{n} = np.broadcast_to(rng.uniform(-2, 2, {tuple(small)}).astype({dtype}), {full})")
    else:
        lines.append(f"{n} = rng.uniform(-2, 2, {full}).astype({dtype})")
    return lines


def _op_slots(rng: random.Random, live: list[str], count: int, ops: tuple[int, int] = (2, 6)):
    """`ops` (2-6) ops' slots: each op's name t<count>, its count, an operand drawn from `live` and a draw in
    [0, 1) picking its kind; the name joins `live` once the caller has written the op."""
    for _ in range(rng.randint(*ops)):
        name = f"t{count}"
        count += 1
        yield name, count, rng.choice(live), rng.random()
        live.append(name)


def _permute_round_trip(name: str, a: str, rank: int, rng: random.Random, op: str = "exp") -> str:
    """A line computing `op` of `a` through a random permute and back (a transpose the plan must see through)."""
    order = list(range(rank))
    rng.shuffle(order)
    inverse = [order.index(d) for d in range(rank)]
    return f"{name} = fd.ops.permute(fd.ops.{op}(fd.ops.permute({a}, {order})), {inverse})"


def _with_outputs(lines: list[str], body: list[str], computed: list[str], extra_outputs: list[str],
                  rng: random.Random, rank: int = 0, most: int = 2) -> str:
    """The case's source: 1 to `most` of the computed values (and the extra outputs) cast to one dtype as
    outputs; where `rank` is above 1, some asked in a random stride order (a column-major output's strides
    name its leading extent)."""
    outputs = rng.sample(computed, min(len(computed), rng.randint(1, most))) + extra_outputs
    out_dtype = rng.choice(["DataType.Float", "DataType.BFloat16", "DataType.Float"])
    for out in outputs:
        order = ""
        if rank > 1 and rng.random() < 0.3:
            dims = list(range(rank))
            rng.shuffle(dims)
            order = f", stride_order={dims}"
        body.append(f"fd.add_output(fd.ops.cast({out}, {out_dtype}){order})")
    lines += ["    " + line for line in body]
    return "\n".join(lines) + "\n"


def generate(seed: int, ops: tuple[int, int] = (2, 6), most_outputs: int = 2, bounded: bool = False) -> str:
    """The source of one case: defines `fd` and `inputs`. `ops`: how many ops (at least, at most), and
    1 to `most_outputs` of the computed values are outputs; with `bounded`, exp takes the tanh of its
    operand (long chains would otherwise overflow float32 where the float64 reference does not). A fifth
    of the cases also return positions along a dim and the last value plus them."""
    rng = random.Random(seed)
    rank = rng.randint(1, 3)
    shape = [rng.choice(SIZES) for _ in range(rank)]
    if rng.random() < 0.15:
        shape = [shape[0]] * rank  # square: element counts alone do not tell a dim from another
    n_inputs = rng.randint(1, 3)
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", ""]
    dtypes = [rng.choice(DTYPES) for _ in range(n_inputs)]
    for i in range(n_inputs):
        lines += _input_source(i, shape, dtypes[i][0], rng.choice(LAYOUTS), rng)
    lines.append(f"inputs = [{', '.join(f'x{i}' for i in range(n_inputs))}]")
    lines.append("with FusionDefinition() as fd:")
    body = []
    for i in range(n_inputs):
        body.append(f"t{i} = fd.define_tensor(sizes=list(x{i}.shape), strides=[s // x{i}.itemsize for s in x{i}.strides], "
                    f"dtype=DataType.{dtypes[i][1]})")
        body.append(f"t{i} = fd.ops.cast(t{i}, DataType.Float)")
    live = [f"t{i}" for i in range(n_inputs)]
    extra_outputs = []
    count = n_inputs
    full = f"[{', '.join(map(str, shape))}]"
    for name, count, a, kind in _op_slots(rng, live, count, ops):
        if kind < 0.25:
            op = rng.choice(UNARY)
            body.append(f"{name} = fd.ops.exp(fd.ops.tanh({a}))" if bounded and op == "exp" else f"{name} = fd.ops.{op}({a})")
        elif kind < 0.45:
            body.append(f"{name} = fd.ops.{rng.choice(BINARY)}({a}, {rng.choice(live)})")
        elif kind < 0.6:
            # A reduction broadcast back over the full shape (norms, softmax) or kept as an output.
            dims = sorted(rng.sample(range(rank), rng.randint(1, rank)))
            op = rng.choice(["sum", "max", "min"])
            body.append(f"r{count} = fd.ops.{op}({a}, dims={dims}, keepdim=True)")
            if rng.random() < 0.3:
                extra_outputs.append(f"r{count}")
            kept = [d for d in range(rank) if d not in dims]
            if len(kept) > 1 and rng.random() < 0.3:
                # The result without its reduced dims, permuted: its dims elsewhere than the domain has them.
                order = list(range(len(kept)))
                rng.shuffle(order)
                extra_outputs.append(f"fd.ops.permute(fd.ops.{op}({a}, dims={dims}), {order})")
            # Now and then the result without its reduced dims broadcast back along dims of the same sizes
            # that are not its own (a row statistic of a square matrix along its rows).
            placements = [p for p in itertools.combinations(range(rank), len(kept))
                          if [shape[d] for d in p] == [shape[d] for d in kept]]
            if kept and len(placements) > 1 and rng.random() < 0.5:
                placement = list(rng.choice(placements))
                body.append(f"{name} = fd.ops.sub({a}, fd.ops.broadcast_in_dim(fd.ops.{op}({a}, dims={dims}), "
                            f"{full}, {placement}))")
            else:
                body.append(f"{name} = fd.ops.sub({a}, fd.ops.expand(r{count}, {full}))")
        elif kind < 0.68:
            body.append(f"v{count}, m{count} = fd.ops.var_mean({a}, dims=[{rank - 1}], correction=1, keepdim=True)")
            body.append(f"{name} = fd.ops.mul(fd.ops.sub({a}, fd.ops.expand(m{count}, {full})), "
                        f"fd.ops.rsqrt(fd.ops.add(fd.ops.expand(v{count}, {full}), 1e-5)))")
        elif kind < 0.76 and rank > 1:
            body.append(_permute_round_trip(name, a, rank, rng, "tanh" if bounded else "exp"))
        elif kind < 0.84 and shape[-1] > 1:
            k = rng.randint(1, shape[-1] - 1)
            starts = [0] * rank
            starts[-1] = k
            body.append(f"{name} = fd.ops.pad(fd.ops.slice({a}, {starts}, {shape}), [{k}, 0], 0.5)")
        elif kind < 0.92 and shape[-1] > 1:
            k = rng.randint(1, shape[-1] - 1)
            head_end = list(shape)
            head_end[-1] = k
            tail_start = [0] * rank
            tail_start[-1] = k
            body.append(f"{name} = fd.ops.cat([fd.ops.slice({a}, {tail_start}, {shape}), "
                        f"fd.ops.neg(fd.ops.slice({a}, {[0] * rank}, {head_end}))], dim={rank - 1})")
        else:
            total = 1
            for s in shape:
                total *= s
            body.append(f"{name} = fd.ops.reshape(fd.ops.sin(fd.ops.reshape({a}, [{total}])), {full})")
    # Now and then positions along a dim, returned (maybe unsqueezed, as nanoGPT's arange(T)) and added to
    # the last value (a position embedding): a value made from scalars that other ops read. Drawn from a
    # generator of its own, so that the cases drawn before stay as they were.
    positions = random.Random(seed * 13 + 3)
    if positions.random() < 0.2:
        d = positions.randrange(rank)
        body.append(f"pos = fd.ops.iota({shape[d]}, 0, 1, dtype=DataType.Int)")
        if positions.random() < 0.5:
            body.append(f"pos = fd.ops.broadcast_in_dim(pos, [1, {shape[d]}], [1])")
            body.append(f"pos_read = fd.ops.reshape(pos, [{shape[d]}])")
        else:
            body.append("pos_read = pos")
        body.append(f"placed = fd.ops.add({live[-1]}, fd.ops.broadcast_in_dim(fd.ops.cast(pos_read, DataType.Float), "
                    f"{full}, [{d}]))")
        extra_outputs += ["pos", "placed"]
    # Now and then a 0-dim input, on the host (a CPU scalar) or the device, read as a scalar: it scales the
    # last value, is added to the last value's total (a loss's other term), or makes an output alone.
    # Drawn from a generator of its own too.
    terms = random.Random(seed * 17 + 5)
    if terms.random() < 0.2:
        is_cpu = terms.random() < 0.5
        lines.insert(lines.index("with FusionDefinition() as fd:"),
                     f"inputs.append(np.asarray({round(terms.uniform(-2, 2), 3)}, np.float32))")
        body.insert(2 * n_inputs, f"s0 = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu={is_cpu})")
        uses = terms.sample(["scaled", "total", "alone"], terms.randint(1, 3))
        if "scaled" in uses:
            extra_outputs.append(f"fd.ops.mul({live[-1]}, s0)")
        if "total" in uses:
            extra_outputs.append(f"fd.ops.add(fd.ops.sum({live[-1]}, dims={list(range(rank))}), s0)")
        if "alone" in uses:
            extra_outputs.append("fd.ops.sub(s0, 0.5)")
    # Now and then an input of another shape with work of its own, an output beside the others (Thunder hands
    # a region's unrelated ops to one fusion): elementwise math (a part of another kernel, in blocks of its
    # own), a transposing copy or a sum. Drawn from a generator of its own too.
    unrelated = random.Random(seed * 19 + 7)
    if unrelated.random() < 0.25:
        other = [unrelated.choice(SIZES) for _ in range(unrelated.randint(1, 3))]
        np_dtype, dtype = unrelated.choice(DTYPES)
        at = lines.index("with FusionDefinition() as fd:")
        lines[at:at] = _input_source(9, other, np_dtype, unrelated.choice(LAYOUTS), unrelated) + ["inputs.append(x9)"]
        defined_before = 2 * n_inputs + (1 if "inputs.append(np.asarray(" in "\n".join(lines) else 0)
        body[defined_before:defined_before] = [
            f"u0 = fd.define_tensor(sizes=list(x9.shape), strides=[s // x9.itemsize for s in x9.strides], "
            f"dtype=DataType.{dtype})", "u0 = fd.ops.cast(u0, DataType.Float)"]
        work = unrelated.choice(["neg", "tanh", "transposed", "sum"])
        if work == "transposed" and len(other) > 1:
            extra_outputs.append(f"fd.ops.mul(fd.ops.permute(u0, {list(reversed(range(len(other))))}), 2.0)")
        elif work == "sum":
            extra_outputs.append(f"fd.ops.sum(u0, dims=[{unrelated.randrange(len(other))}])")
        else:
            extra_outputs.append(f"fd.ops.{'tanh' if work == 'tanh' else 'neg'}(u0)")
    return _with_outputs(lines, body, live[n_inputs:], extra_outputs, rng, most=most_outputs)


def generate_large(seed: int) -> str:
    """A case of generate's kinds with 10-24 ops (exp bounded) and 1-5 of its values as outputs (besides
    reduction results kept as outputs): graphs that the segmenter cuts into several kernels, with
    intermediates passed between them and views in between."""
    return generate(seed, ops=(10, 24), most_outputs=5, bounded=True)


MM_SIZES = [1, 2, 7, 8, 16, 17, 33, 40]


def generate_matmul(seed: int) -> str:
    """The source of one matmul case (sizes up to 40, and now and then a K of 1104: split-K): matmul or
    linear of bf16, f16, int8 or fp8 (e4m3fn, e5m2; a Float result) operands (the 16-bit ones maybe cast from float32 inputs: a prologue), an operand maybe
    transposed (a permute: a strided view) or with a broadcast batch dim, then 0-2 elementwise ops, maybe
    a dropout (its mask an output too, now and then), maybe an index map of the result (a transpose, a
    slice, or a reshape into two halves and a permute), and a cast (the epilogue). Defines `fd` and
    `inputs`."""
    rng = random.Random(seed)
    m, n, k = (rng.choice(MM_SIZES) for _ in range(3))
    if rng.random() < 0.05:
        k = 1104  # a long K for few output tiles: split among blocks (a multiple of 16: staged)
    batch = rng.choice([[], [], [3]])
    integer = rng.random() < 0.3
    dtype = "Int8" if integer else rng.choice(["BFloat16", "Half", "BFloat16", "Half", "Float8_e4m3fn", "Float8_e5m2"])
    fp8 = dtype.startswith("Float8")
    np_dtype = {"Int8": "np.int8", "BFloat16": "ml_dtypes.bfloat16", "Half": "np.float16",
                "Float8_e4m3fn": "ml_dtypes.float8_e4m3fn", "Float8_e5m2": "ml_dtypes.float8_e5m2"}[dtype]
    linear = rng.random() < 0.3
    a_t = rng.random() < 0.3 and not linear
    b_t = rng.random() < 0.4
    b_batch = batch if batch and not linear and rng.random() < 0.5 else []
    prologue = not integer and not fp8 and rng.random() < 0.3

    def values(shape, as_dtype):
        if integer:
            return f"rng.integers(-128, 128, {tuple(shape)}).astype(np.int8)"
        return f"rng.uniform(-2, 2, {tuple(shape)}).astype({as_dtype})"

    in_dtype = "np.float32" if prologue else np_dtype
    a_shape = batch + ([k, m] if a_t else [m, k])
    if linear:
        b_shape = [n, k]
    else:
        b_shape = b_batch + ([n, k] if b_t else [k, n])
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", "",
             f"rng = np.random.default_rng({rng.randrange(1 << 30)})",
             f"x0 = {values(a_shape, in_dtype)}", f"x1 = {values(b_shape, in_dtype)}"]
    bias = linear and rng.random() < 0.5
    if bias:
        bias_values = values([n], "ml_dtypes.bfloat16" if fp8 else np_dtype)
        lines.append(f"x2 = rng.integers(-1000, 1000, ({n},)).astype(np.int32)" if integer else f"x2 = {bias_values}")
    lines.append(f"inputs = [x0, x1{', x2' if bias else ''}]")
    if dtype in ("BFloat16", "Half"):
        lines.append(f"rounded_through = {np_dtype}  # the matmul's result dtype")
    lines.append("with FusionDefinition() as fd:")
    body = []
    bias_dtype = "Int32" if integer else ("BFloat16" if fp8 else dtype)
    for i, name in enumerate(["x0", "x1"] + (["x2"] if bias else [])):
        body.append(f"t{i} = fd.define_tensor(sizes=list({name}.shape), strides=[s // {name}.itemsize for s in {name}.strides], "
                    f"dtype=DataType.{bias_dtype if i == 2 else ('Float' if prologue else dtype)})")
    if prologue:
        body += [f"t0 = fd.ops.cast(t0, DataType.{dtype})", f"t1 = fd.ops.cast(t1, DataType.{dtype})"]
    if a_t:
        order = list(range(len(a_shape)))
        order[-1], order[-2] = order[-2], order[-1]
        body.append(f"t0 = fd.ops.permute(t0, {order})")
    if b_t and not linear:
        order = list(range(len(b_shape)))
        order[-1], order[-2] = order[-2], order[-1]
        body.append(f"t1 = fd.ops.permute(t1, {order})")
    # fp8 products have no fp8 result (torch has no fp8 matmul): a Float one, as _scaled_mm accumulates.
    result = ", dtype=DataType.Float" if fp8 else ""
    body.append(f"y = fd.ops.linear(t0, t1{', t2' if bias else ''}{result})" if linear else f"y = fd.ops.matmul(t0, t1{result})")
    for _ in range(rng.randint(0, 2)):
        if integer:
            body.append(rng.choice(["y = fd.ops.add(y, 7)", "y = fd.ops.neg(y)", "y = fd.ops.abs(y)"]))
        else:
            body.append(rng.choice(["y = fd.ops.relu(y)", "y = fd.ops.mul(y, 0.5)", "y = fd.ops.tanh(y)", "y = fd.ops.add(y, y)"]))
    # Now and then a dropout of the result (numbers drawn at the result's index), its mask an output too:
    # drawn from a generator of their own, so the rest of each case stays as it was.
    extra = random.Random(seed * 7919 + 1)
    mask = None
    if not integer and extra.random() < 0.2:
        p = extra.choice([0.25, 0.5])
        body.append(f"keep = fd.ops.lt(fd.ops.uniform(0.0, 1.0, {batch + [m, n]}, rng_seed={extra.randrange(1000)}, "
                    f"rng_offset={extra.randrange(8)}), {1 - p})")
        body.append(f"y = fd.ops.where(keep, fd.ops.mul(y, {1 / (1 - p)}), 0.0)")
        mask = "keep" if extra.random() < 0.6 else None
    # Now and then an index map of the result before the cast (the epilogue stores through it).
    mapping = rng.choice(["", "", "", "permute", "slice", "reshape"])
    lead = len(batch)
    if mapping == "permute":
        body.append(f"y = fd.ops.permute(y, {list(range(lead)) + [lead + 1, lead]})")
    elif mapping == "slice" and m > 2:
        body.append(f"y = fd.ops.slice(y, {[0] * lead + [1, 0]}, {batch + [m - 1, max(1, n // 2)]})")
    elif mapping == "reshape" and n % 2 == 0:
        body.append(f"y = fd.ops.permute(fd.ops.reshape(y, {batch + [m, 2, n // 2]}), "
                    f"{list(range(lead)) + [lead + 1, lead, lead + 2]})")
    out = rng.choice(["Int32", "Int8"]) if integer else rng.choice(["Float", "BFloat16"])
    body.append(f"fd.add_output(fd.ops.cast(y, DataType.{out}))")
    if mask is not None:
        body.append(f"fd.add_output({mask})")
    lines += ["    " + line for line in body]
    return "\n".join(lines) + "\n"


SCAN_SIZES = [1, 2, 3, 5, 8, 13, 33, 64, 100]
LONG_LINES = [700, 2049, 4100]  # block sorts of one pass, several passes, or parts and a merge


def generate_scan(seed: int) -> str:
    """The source of one scan case: an input of rank 1-3 (sizes including 1, now and then a long line),
    in float32, bfloat16, float16 or int32 (floats with ties, as few distinct values, and NaNs), laid
    out as _input_source lays them, maybe read through a permute or a slice, then a topk (k from 0 to
    the line, largest or smallest), an argsort or a cumsum along a random dim, maybe followed by an
    elementwise op of its result. Now and then the operand is computed by an elementwise op first, and a
    cumsum's result goes on through elementwise ops (reading the operand again at its element, or cast
    back to the input's dtype), and now and then the operand is a softmax, log_softmax or x - max along
    the line, and a topk's results go on through elementwise ops or sums over the kept elements: those
    belong in the scan's kernel (the reductions and the ops of a topk's results only where the line is
    short), as do a sort's computed operand and zeros of its shape returned beside it. Defines `fd`,
    `inputs`, `kernels` (how many the plan takes) and `exact_kernels` (False: at least that many)."""
    rng = random.Random(seed)
    extra = random.Random(seed * 31 + 5)  # draws of its own, so that the cases drawn before stay as they were
    rank = rng.randint(1, 3)
    shape = [rng.choice(SCAN_SIZES) for _ in range(rank)]
    dim = rng.randrange(rank)
    if rng.random() < 0.15:
        shape[dim] = rng.choice(LONG_LINES)
        for d in range(rank):
            if d != dim:
                shape[d] = min(shape[d], 3)  # a few long lines: the simulator runs every block sort
    np_dtype, dtype = rng.choice(DTYPES[1:] + [("np.int32", "Int32")])
    nans = np_dtype != "np.int32" and rng.random() < 0.5
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", "",
             "def tied(rng, shape):",
             "    # Few distinct values (ties everywhere), a tenth of them NaN where asked.",
             "    values = rng.integers(-4, 5, shape) / 2",
             f"    return np.where(rng.random(shape) < 0.1, np.nan, values) if {nans} else values", ""]
    # The layouts of _input_source, with tied values in place of uniform ones.
    lines += [line.replace("rng.uniform(-2, 2, ", "tied(rng, ")
              for line in _input_source(0, shape, np_dtype, rng.choice(LAYOUTS), rng)]
    lines.append("inputs = [x0]")
    lines.append("with FusionDefinition() as fd:")
    body = [f"t0 = fd.define_tensor(sizes=list(x0.shape), strides=[s // x0.itemsize for s in x0.strides], "
            f"dtype=DataType.{dtype})"]
    a, sizes = "t0", list(shape)
    view = rng.choice(["", "", "permute", "slice"])
    if view == "permute" and rank > 1:
        order = list(range(rank))
        rng.shuffle(order)
        body.append(f"t1 = fd.ops.permute(t0, {order})")
        a, sizes, dim = "t1", [shape[d] for d in order], order.index(dim)
    elif view == "slice" and sizes[dim] > 2:
        starts = [0] * rank
        starts[dim] = 1
        body.append(f"t1 = fd.ops.slice(t0, {starts}, {sizes})")
        a = "t1"
        sizes[dim] -= 1
    op = rng.choice(["topk", "topk", "argsort", "cumsum"])
    outputs = []
    kernels, exact = 1, True
    prologue = extra.choice(["", "", "neg", "abs", "half", "plus_one"])
    if prologue:
        # Exact in every dtype drawn (ties and NaNs stay as they are); bf16 and half compute in float.
        body.append(f"p = fd.ops.{ {'neg': 'neg({})', 'abs': 'abs({})', 'half': 'mul({}, 0.5)', 'plus_one': 'add({}, 1)'}[prologue].format(a)}")
        a = "p"
    along_line = extra.choice(["", "", "", "softmax", "log_softmax", "minus_max"])
    if along_line:
        # Reductions along the line first: walked by the scan's own thread where the line is short, in a
        # kernel of their own where it is long. Equal values stay equal, so ties stay ties.
        body.append(f"f = fd.ops.cast({a}, DataType.Float)")
        body.append(f"z = fd.ops.sub(f, fd.ops.max(f, dims=[{dim}], keepdim=True))")
        if along_line == "minus_max":
            a = "z"
        else:
            body.append("e = fd.ops.exp(z)")
            body.append(f"s = fd.ops.sum(e, dims=[{dim}], keepdim=True)")
            body.append("a = fd.ops.div(e, s)" if along_line == "softmax" else "a = fd.ops.sub(z, fd.ops.log(s))")
            a = "a"
        if sizes[dim] > 256:  # kMaxReducedLine
            kernels += 1
            exact = False  # the reductions of a long line: one kernel or more, as the reduction schedulers plan
    if op == "topk":
        k = rng.choice([0, 1, min(3, sizes[dim]), sizes[dim] // 2, rng.randint(0, sizes[dim]), sizes[dim]])
        largest = rng.random() < 0.5
        body.append(f"values, indices = fd.ops.topk({a}, {k}, {dim}, {largest}, True)")
        outputs = rng.choice([["values", "indices"], ["indices"], ["values"]])
    elif op == "argsort":
        body.append(f"indices = fd.ops.argsort({a}, dim={dim}, descending={rng.random() < 0.5})")
        outputs = ["indices"]
    elif dtype == "Int32" and prologue != "half" and not along_line and extra.random() < 0.7:
        body.append(f"values = fd.ops.cumsum({a}, {dim})")  # integers: a block scan where lines are few and long
        outputs = ["values"]
    else:
        body.append(f"values = fd.ops.cumsum(fd.ops.cast({a}, DataType.Float), {dim})")
        outputs = ["values"]
    walked = sizes[dim] <= 256  # kMaxReducedLine: a thread per line computes the ops of a topk's results
    sort_ops = False
    if "values" in outputs and rng.random() < 0.3:
        body.append("values = fd.ops.neg(values)")
        sort_ops = op == "topk"
    if op == "topk":
        kept_ops = extra.choice(["", "", "", "renormalize", "kept_sum", "indices_and_values"])
        if kept_ops == "renormalize" and "values" in outputs:
            body.append("vf = fd.ops.cast(values, DataType.Float)")
            body.append(f"values = fd.ops.div(vf, fd.ops.sum(vf, dims=[{dim}], keepdim=True))")
        elif kept_ops == "kept_sum":
            body.append(f"kept = fd.ops.sum(fd.ops.cast(values, DataType.Float), dims=[{dim}])")
            outputs.append("kept")
        elif kept_ops == "indices_and_values":
            body.append("mixed = fd.ops.add(fd.ops.cast(indices, DataType.Float), fd.ops.cast(values, DataType.Float))")
            outputs.append("mixed")
        sort_ops = sort_ops or (kept_ops == "renormalize" and "values" in outputs) or kept_ops in ("kept_sum", "indices_and_values")
    elif op == "argsort" and extra.random() < 0.2:
        body.append("indices = fd.ops.add(indices, 1)")
        kernels += 1  # an argsort's indices are written as they are: the add is a kernel of its own
    if sort_ops and not walked:
        kernels += 1  # a block sort's results are written as they are: their ops take a kernel or more
        exact = False
    if op == "cumsum":
        epilogue = extra.choice(["", "", "plus_operand", "times_operand", "nan_to_zero", "cast"])
        if epilogue in ("plus_operand", "times_operand"):
            body.append(f"values = fd.ops.{'add' if epilogue == 'plus_operand' else 'mul'}(values, fd.ops.cast({a}, DataType.Float))")
        elif epilogue == "nan_to_zero":
            body.append("values = fd.ops.where(fd.ops.isnan(values), 0.0, values)")
        elif epilogue == "cast" and dtype != "Int32":
            body.append(f"values = fd.ops.cast(values, DataType.{dtype})")
    # What Thunder returns beside a router's results for the backward: the sort's operand (a value computed
    # before the sort, which a sort's line walk writes) and zeros of its shape (a group reading no tensor,
    # which joins a kernel writing its shape). Drawn from a generator of their own.
    written = random.Random(seed * 31 + 7)
    if op != "cumsum" and a not in ("t0", "t1") and written.random() < 0.3:
        outputs.append(a)
        if not walked:
            exact = False  # a block sort writes only its results: another kernel, unless one computes it anyway
    if written.random() < 0.2:
        body.append(f"zeros = fd.ops.full({a}.shape(), fd.define_scalar(0.0, dtype=DataType.Double), DataType.Float)")
        # It joins the line walk where that writes a value of its shape (the operand, an argsort's indices,
        # a topk of whole lines); beside a cumsum, a block sort or only shorter results, another kernel that
        # writes its shape, or one of its own.
        joins = walked and (op == "argsort" or a in outputs or (op == "topk" and k == sizes[dim]))
        outputs.append("zeros")
        exact = exact and joins
    body.append(f"kernels, exact_kernels = {kernels}, {exact}")
    for out in outputs:
        body.append(f"fd.add_output({out})")
    lines += ["    " + line for line in body]
    return "\n".join(lines) + "\n"


def generate_in_place(seed: int) -> str | None:
    """generate(seed) with one input updated in place (add_output(..., alias_input=), as Thunder writes
    every in-place op): one of the values the fusion computes, cast to that input's dtype, is written
    back into it through its layout (transposed, strided or offset inputs included), while the other
    outputs read the input as it was. None where every input is an expanded broadcast (read-only)."""
    source = generate(seed)
    rng = random.Random(seed * 7 + 1)
    lines = source.split("\n")
    writable = [i for i in range(3) if any(line.startswith(f"x{i} = ") and "broadcast_to" not in line for line in lines)
                and not any(line.startswith(f"x{i} = ") and "broadcast_to" in line for line in lines)]
    if not writable:
        return None
    i = rng.choice(writable)
    define = next(n for n, line in enumerate(lines) if line.startswith(f"    t{i} = fd.define_tensor("))
    dtype = lines[define].split("dtype=DataType.")[1].rstrip(")")
    computed = sorted({line.split(" = ")[0].strip() for line in lines if line.startswith("    t") and " = fd.ops." in line
                       and "fd.ops.cast(" not in line.split(" = ", 1)[1][:14]})
    if not computed:
        return None
    value = rng.choice(computed)
    lines.insert(define + 1, f"    original{i} = t{i}")
    first_output = next(n for n, line in enumerate(lines) if "fd.add_output(" in line)
    lines.insert(first_output, f"    fd.add_output(fd.ops.cast({value}, DataType.{dtype}), alias_input=original{i})")
    return "\n".join(lines)


SHAPE_SETS = 6  # input shapes a multi-shape case runs, one after the other, through one definition
ROW_COUNTS = [1, 64, 97, 128, 200, 256, 257, 300]
# No exp and no sin: x minus a sum over 300 x 33 x 33 elements reaches the tens, and float32's exp there
# differs from float64's in every digit; a sum over 256 rows of such differences reaches 3e4, where one
# float32 step is 0.004, which sin passes on whole (multi-shape case 9703550). Rounding amplified, not a
# kernel's error; the other generators keep both.
BOUNDED_UNARY = [op for op in UNARY if op not in ("exp", "sin")]


def generate_multi_shape(seed: int) -> str:
    """The source of one case whose definition leaves every size open (define_tensor(shape=[-1, ...])):
    1-3 inputs of one rank, contiguous or transposed, strided or offset in memory (declared so), and 2-6
    ops that fix no size (elementwise math without exp or sin, reductions kept as size-1 dims and broadcast
    back (one sum at most), var_mean normalizations, permute round trips), then 1-2 outputs, now and then
    in another stride order, and now and then a normalization of two values concatenated along the leading
    dim as one more. Defines `fd`
    and `input_sets`: SHAPE_SETS lists of inputs of other sizes (mostly another leading dim or, at rank 3,
    the second one, with or without the first; now and then every dim; 1 included), which run one after
    the other through the definition's one plan cache: kernels compiled for one shape run for the others."""
    rng = random.Random(seed)
    rank = rng.randint(1, 3)
    n_inputs = rng.randint(1, 3)
    dtypes = [rng.choice(DTYPES) for _ in range(n_inputs)]
    layouts = [rng.choice(["contiguous", "contiguous", "transposed", "strided", "offset"]) for _ in range(n_inputs)]
    shapes = [[rng.choice(SIZES) for _ in range(rank)]]
    while len(shapes) < SHAPE_SETS:
        shape = list(shapes[0])
        if rng.random() < 0.8:
            # Another batch or row count, or (rank 3) another sequence length after a small batch, now and
            # then with another small batch too (a batch before a row extent counts in the shape class by
            # its power of two); the rest as before.
            if rank == 3 and rng.random() < 0.4:
                shape[1] = rng.choice(ROW_COUNTS)
                if rng.random() < 0.5:
                    shape[0] = rng.choice(SIZES)
            else:
                shape[0] = rng.choice(ROW_COUNTS)
        else:
            shape = [rng.choice(SIZES) for _ in range(rank)]
        shapes.append(shape)
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", "",
             "input_sets = []"]
    for shape in shapes:
        for i in range(n_inputs):
            lines += _input_source(i, shape, dtypes[i][0], layouts[i], rng)
        lines.append(f"input_sets.append([{', '.join(f'x{i}' for i in range(n_inputs))}])")
    lines.append("with FusionDefinition() as fd:")
    body = []
    for i in range(n_inputs):
        contiguity = [layouts[i] == "contiguous"] * rank
        body.append(f"t{i} = fd.define_tensor(shape={[-1] * rank}, contiguity={contiguity}, dtype=DataType.{dtypes[i][1]})")
        body.append(f"t{i} = fd.ops.cast(t{i}, DataType.Float)")
    live = [f"t{i}" for i in range(n_inputs)]
    count = n_inputs
    extra_outputs = []
    summed = False
    for name, count, a, kind in _op_slots(rng, live, count):
        if kind < 0.3:
            body.append(f"{name} = fd.ops.{rng.choice(BOUNDED_UNARY)}({a})")
        elif kind < 0.55:
            body.append(f"{name} = fd.ops.{rng.choice(BINARY)}({a}, {rng.choice(live)})")
        elif kind < 0.75:
            dims = sorted(rng.sample(range(rank), rng.randint(1, rank)))
            op = rng.choice(['sum', 'max', 'min'])
            if op == "sum" and summed:
                # One sum a case: x minus a sum over 36000 elements reaches the hundreds, and a second sum of
                # such differences 4e6, where a float32 step is 0.25 and the order of the additions decides
                # which one (multi-shape case 9953736). Rounding amplified, not a kernel's error.
                op = rng.choice(["max", "min"])
            summed = summed or op == "sum"
            body.append(f"r{count} = fd.ops.{op}({a}, dims={dims}, keepdim=True)")
            if rng.random() < 0.3:
                extra_outputs.append(f"r{count}")
            body.append(f"{name} = fd.ops.sub({a}, r{count})")
        elif kind < 0.88:
            body.append(f"v{count}, m{count} = fd.ops.var_mean({a}, dims=[{rank - 1}], correction=0, keepdim=True)")
            body.append(f"{name} = fd.ops.mul(fd.ops.sub({a}, m{count}), fd.ops.rsqrt(fd.ops.add(v{count}, 1e-5)))")
        elif rank > 1:
            body.append(_permute_round_trip(name, a, rank, rng, "tanh"))
        else:
            body.append(f"{name} = fd.ops.cast(fd.ops.cast({a}, DataType.BFloat16), DataType.Float)")
    if rank > 1 and rng.random() < 0.25:
        # Two values concatenated along the leading dim, normalized over their rows: a row kernel whose
        # code names the boundary, the first value's leading extent.
        first, second = rng.choice(live), rng.choice(live)
        body.append(f"c{count} = fd.ops.cat([{first}, {second}], 0)")
        body.append(f"cv{count}, cm{count} = fd.ops.var_mean(c{count}, dims=[{rank - 1}], correction=0, keepdim=True)")
        body.append(f"cn{count} = fd.ops.mul(fd.ops.sub(c{count}, cm{count}), fd.ops.rsqrt(fd.ops.add(cv{count}, 1e-5)))")
        extra_outputs.append(f"cn{count}")
    return _with_outputs(lines, body, live[n_inputs:], extra_outputs, rng, rank)
