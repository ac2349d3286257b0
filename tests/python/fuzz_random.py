"""Random numbers inside fusions, for the differential fuzzer, generated as Python source (a failing case
prints itself as a standalone reproducer).

Element i of uniform, normal, rand_like and randn_like is a function of (seed, offset, i) alone, i counted
in the random tensor's own row-major order, whatever kernel computes it. A case draws one or two random
tensors (any of the four ops, in float32, float64, bfloat16 or float16; seed and offset constants or
scalar inputs; the shape written out or read from an input with fd.ops.shape) in a shape that meta ops
bring to the input's: as it is, permuted, broadcast along some dims, flattened, sliced (with steps) or
expanded from size-1 dims. The random values then drop out elements (where(rand < p, x / (1 - p), 0)),
add noise or scale an input read through a layout, and what follows may reduce (a sum or max), normalize
(var_mean) or take a softmax, so the numbers are drawn in pointwise, reduction and persistent kernels on
several devices and tunings. Outputs are the result, and now and then the random tensor itself, its
mask, or a second draw with the same seed, offset and shape (the same numbers).
"""

from __future__ import annotations

import math
import random

from fuzz_fusions import _input_source

SIZES = [1, 2, 3, 5, 7, 8, 13, 16, 33, 64, 100]
DTYPES = [("np.float32", "Float"), ("np.float32", "Float"), ("ml_dtypes.bfloat16", "BFloat16"), ("np.float16", "Half")]
RANDOM_DTYPES = ["Float", "Float", "Double", "BFloat16", "Half"]
LAYOUTS = ["contiguous", "contiguous", "transposed", "strided", "offset", "expanded"]
# Devices and tunings the plans are made for: vector widths, block shapes and persistent rows differ.
TARGETS = ["h100", "h100", "mi300x", "a100:block_threads=64,max_unroll=2", "h100:persistent_staged=1",
           "h100:persistent_values=8"]


def _placement(rng: random.Random, full: list[int], symbolic: bool) -> tuple[list[int], str, str]:
    """A shape to draw the random tensor in, as sizes and as the definition writes it, and the expression
    (of `R`) that brings it to `full`. With `symbolic`, sizes are read from t0 (fd.ops.size), whose
    definition leaves them open, and the draw is never sliced or expanded."""
    rank = len(full)
    kinds = ["direct", "direct", "permute", "broadcast", "flatten"] + ([] if symbolic else ["slice", "expand"])
    kind = rng.choice(kinds)
    size = [f"fd.ops.size(t0, {d})" for d in range(rank)] if symbolic else [str(n) for n in full]
    target = "fd.ops.shape(t0)" if symbolic else str(full)

    def written(dims: list[int]) -> str:
        return f"[{', '.join(size[d] for d in dims)}]"

    if kind == "permute" and rank > 1:
        order = list(range(rank))
        rng.shuffle(order)  # R's dim j is full's dim order[j]
        back = [order.index(d) for d in range(rank)]
        return [full[d] for d in order], written(order), f"fd.ops.permute(R, {back})"
    if kind == "broadcast" and rank > 1:
        kept = sorted(rng.sample(range(rank), rng.randint(1, rank - 1)))
        return [full[d] for d in kept], written(kept), f"fd.ops.broadcast_in_dim(R, {target}, {kept})"
    if kind == "flatten":
        total = size[0]
        for d in range(1, rank):
            total = f"fd.ops.mul({total}, {size[d]})" if symbolic else str(int(total) * full[d])
        return [math.prod(full)], f"[{total}]", f"fd.ops.reshape(R, {target})"
    if kind == "slice":
        d = rng.randrange(rank)
        step = rng.choice([1, 2, 3])
        start = rng.randint(0, 3)
        drawn = list(full)
        drawn[d] = start + (full[d] - 1) * step + 1 + rng.randint(0, 2)
        starts, ends, steps = [0] * rank, list(drawn), [1] * rank
        starts[d], ends[d], steps[d] = start, start + (full[d] - 1) * step + 1, step
        return drawn, str(drawn), f"fd.ops.slice(R, {starts}, {ends}, {steps})"
    if kind == "expand":
        ones = [d for d in range(rank) if rng.random() < 0.5]
        drawn = [1 if d in ones else n for d, n in enumerate(full)]
        return drawn, str(drawn), f"fd.ops.expand(R, {full})"
    return list(full), ("fd.ops.shape(t0)" if symbolic or rng.random() < 0.3 else str(full)), "R"


def generate_random(seed: int) -> str:
    """The source of one case: defines `fd`, `input_sets` (one list of inputs; or, for a definition that
    leaves every size open, 3 lists of other sizes, run one after the other through its one plan cache),
    `inputs` (the first) and `target` (a device preset, maybe with tuning)."""
    rng = random.Random(seed)
    rank = rng.randint(1, 3)
    symbolic = rng.random() < 0.3
    shapes = [[rng.choice(SIZES) for _ in range(rank)] for _ in range(3 if symbolic else 1)]
    full = shapes[0]
    np_dtype, dtype = rng.choice(DTYPES)
    layout = rng.choice(LAYOUTS[:-1] if symbolic else LAYOUTS)  # an expanded input has no open sizes
    scalar_inputs = rng.random() < 0.4
    seed_value, offset_value = rng.randrange(1 << 20), rng.choice([0, 1, 4, rng.randrange(1 << 16)])
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", "",
             "input_sets = []"]
    for shape in shapes:
        lines += _input_source(0, shape, np_dtype, layout, rng)
        lines.append(f"input_sets.append([x0{f', {seed_value}, {offset_value}' if scalar_inputs else ''}])")
    lines.append("inputs = input_sets[0]")
    lines.append(f"target = {rng.choice(TARGETS)!r}")
    lines.append("with FusionDefinition() as fd:")
    if symbolic:
        body = [f"t0 = fd.define_tensor(shape={[-1] * rank}, contiguity={[layout == 'contiguous'] * rank}, "
                f"dtype=DataType.{dtype})"]
    else:
        body = [f"t0 = fd.define_tensor(sizes=list(x0.shape), strides=[s // x0.itemsize for s in x0.strides], "
                f"dtype=DataType.{dtype})"]
    if scalar_inputs:
        body += ["seed = fd.define_scalar(DataType.Int)", "offset = fd.define_scalar(DataType.Int)"]
        key = "rng_seed=seed, rng_offset=offset"
    else:
        key = f"rng_seed={seed_value}, rng_offset={offset_value}"
    body.append("x = fd.ops.cast(t0, DataType.Float)")

    drawn, written, placed = _placement(rng, full, symbolic)
    uniform = rng.random() < 0.6
    random_dtype = rng.choice(RANDOM_DTYPES)
    if placed == "R" and rng.random() < 0.3:
        # The _like forms take the input's shape and dtype.
        body.append(f"R = fd.ops.{'rand_like' if uniform else 'randn_like'}({rng.choice(['t0', 'x'])}, {key})")
    elif uniform:
        body.append(f"R = fd.ops.uniform(0.0, 1.0, {written}, dtype=DataType.{random_dtype}, {key})")
    else:
        body.append(f"R = fd.ops.normal({rng.choice([0.0, 1.0])}, {rng.choice([0.5, 1.0])}, {written}, "
                    f"DataType.{random_dtype}, {key})")
    body.append(f"r = fd.ops.cast({placed}, DataType.Float)")

    outputs = []
    use = rng.choice(["dropout", "dropout", "noise", "scale"])
    if use == "dropout":
        p = rng.choice([0.1, 0.5, 0.9])
        # Each element kept with probability 1 - p (uniform), or where the normal draw is positive.
        body.append(f"mask = fd.ops.lt(r, {1 - p})" if uniform else "mask = fd.ops.gt(r, 0.0)")
        body.append(f"y = fd.ops.where(mask, fd.ops.mul(x, {1 / (1 - p) if uniform else 2.0}), 0.0)")
        if rng.random() < 0.3:
            outputs.append("mask")
    elif use == "noise":
        body.append("y = fd.ops.add(x, fd.ops.mul(r, 0.1))")
    else:
        body.append("y = fd.ops.mul(x, r)")

    after = rng.choice(["none", "none", "reduce", "var_mean", "softmax"])
    last = rank - 1
    if after == "reduce":
        dims = sorted(rng.sample(range(rank), rng.randint(1, rank)))
        body.append(f"y = fd.ops.{rng.choice(['sum', 'max'])}(y, dims={dims}, keepdim={rng.random() < 0.5})")
    elif after == "var_mean":
        # Statistics kept as size-1 dims broadcast back, which needs no size written out.
        body.append(f"v, m = fd.ops.var_mean(y, dims=[{last}], correction=0, keepdim=True)")
        body.append("y = fd.ops.mul(fd.ops.sub(y, m), fd.ops.rsqrt(fd.ops.add(v, 1e-5)))")
    elif after == "softmax":
        body.append(f"e = fd.ops.exp(fd.ops.sub(y, fd.ops.max(y, dims=[{last}], keepdim=True)))")
        body.append(f"y = fd.ops.div(e, fd.ops.sum(e, dims=[{last}], keepdim=True))")
    outputs.insert(0, f"fd.ops.cast(y, DataType.{dtype})" if rng.random() < 0.5 else "y")
    if rng.random() < 0.3:
        outputs.append("R")  # the numbers as drawn, in their own shape and dtype
    if rng.random() < 0.2:
        # A second draw with the same seed, offset and shape: the same numbers, so the difference is zero.
        again = body[[i for i, line in enumerate(body) if line.startswith("R = ")][0]].replace("R = ", "", 1)
        body.append(f"again = fd.ops.sub(fd.ops.cast(R, DataType.Float), fd.ops.cast({again}, DataType.Float))")
        outputs.append("again")
    body += [f"fd.add_output({o})" for o in outputs]
    return "\n".join(lines + ["    " + line for line in body]) + "\n"
