"""Random chains of meta ops around a little math, for the differential fuzzer, generated as Python source
(a failing case prints itself as a standalone reproducer).

A case reads an input of rank 1-4 (transposed, strided, offset or expanded in memory), applies 0-4 meta ops
(permute, reshapes that split or merge dims or add a size-1 dim, slices with steps, squeeze, broadcast,
expand, broadcast_in_dim), then maybe elementwise math (with a second input of that shape, or a scalar),
then 0-3 more meta ops; its outputs are the end of the chain and, now and then, a value from its middle or
the input's own chain with no math at all (a view of the input where bookending makes one). Each case runs
under one bookending policy: views made at the outputs, at both ends, at neither, or as the cost model says.
"""

from __future__ import annotations

import math
import random

from fuzz_fusions import _input_source

SIZES = [1, 1, 2, 3, 4, 5, 6, 8, 12]
MAX_ELEMENTS = 4096
DTYPES = [("np.float32", "Float"), ("np.float32", "Float"), ("ml_dtypes.bfloat16", "BFloat16"), ("np.float16", "Half")]
LAYOUTS = ["contiguous", "contiguous", "transposed", "strided", "offset", "expanded"]
POLICIES = ["auto", "auto", "none", "outputs", "both"]


def _meta_op(rng: random.Random, name: str, shape: list[int]) -> tuple[str, list[int]] | None:
    """One meta op of `name` (a value of `shape`): its expression and its shape, or None when the op drawn
    does not apply to this shape."""
    rank = len(shape)
    kind = rng.choice(["permute", "split", "merge", "unsqueeze", "slice", "squeeze", "broadcast", "expand",
                       "broadcast_in_dim"])
    if kind == "permute" and rank > 1:
        order = list(range(rank))
        rng.shuffle(order)
        return f"fd.ops.permute({name}, {order})", [shape[d] for d in order]
    if kind == "split" and rank < 5:
        splittable = [d for d in range(rank) if any(shape[d] % a == 0 for a in range(2, shape[d]))]
        if not splittable:
            return None
        d = rng.choice(splittable)
        a = rng.choice([a for a in range(2, shape[d]) if shape[d] % a == 0])
        new = shape[:d] + [a, shape[d] // a] + shape[d + 1:]
        written = list(new)
        if rng.random() < 0.3:
            written[rng.randrange(len(new))] = -1  # inferred
        return f"fd.ops.reshape({name}, {written})", new
    if kind == "merge" and rank > 1:
        d = rng.randrange(rank - 1)
        new = shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:]
        return f"fd.ops.reshape({name}, {new})", new
    if kind == "unsqueeze" and rank < 5:
        d = rng.randrange(rank + 1)
        new = shape[:d] + [1] + shape[d:]
        return f"fd.ops.reshape({name}, {new})", new
    if kind == "slice":
        d = rng.randrange(rank)
        start = rng.randrange(shape[d])
        end = rng.randint(start + 1, shape[d])
        step = rng.choice([1, 1, 1, 2, 3])
        starts, ends, steps = [0] * rank, list(shape), [1] * rank
        starts[d], ends[d], steps[d] = start, end, step
        new = list(shape)
        new[d] = (end - start + step - 1) // step
        stride_arg = f", {steps}" if step != 1 or rng.random() < 0.2 else ""
        return f"fd.ops.slice({name}, {starts}, {ends}{stride_arg})", new
    if kind == "squeeze":
        ones = [d for d in range(rank) if shape[d] == 1]
        if not ones or rank == 1:
            return None
        d = rng.choice(ones)
        return f"fd.ops.squeeze({name}, [{d}])", shape[:d] + shape[d + 1:]
    if kind == "broadcast" and rank < 5:
        d = rng.randrange(rank + 1)
        flags = [False] * (rank + 1)
        flags[d] = True
        return f"fd.ops.broadcast({name}, {flags})", shape[:d] + [1] + shape[d:]
    if kind == "expand":
        ones = [d for d in range(rank) if shape[d] == 1]
        if not ones:
            return None
        d = rng.choice(ones)
        new = list(shape)
        new[d] = rng.choice([2, 3, 4])
        if math.prod(new) > MAX_ELEMENTS:
            return None
        written = [-1 if (s == n and rng.random() < 0.3) else n for s, n in zip(shape, new)]
        return f"fd.ops.expand({name}, {written})", new
    if kind == "broadcast_in_dim" and rank < 5:
        d = rng.randrange(rank + 1)
        new = shape[:d] + [rng.choice([1, 2, 3])] + shape[d:]
        if math.prod(new) > MAX_ELEMENTS:
            return None
        dims = [i for i in range(rank + 1) if i != d]
        return f"fd.ops.broadcast_in_dim({name}, {new}, {dims})", new
    return None


def _chain(rng: random.Random, body: list[str], name: str, shape: list[int], count: int, prefix: str
           ) -> tuple[str, list[int]]:
    """Up to `count` meta ops applied to `name`, each written as a line `{prefix}{i} = ...`: the last value's
    name and shape."""
    for i in range(count):
        op = _meta_op(rng, name, shape)
        if op is None:
            continue
        expr, shape = op
        name = f"{prefix}{i}"
        body.append(f"{name} = {expr}")
    return name, shape


def generate_views(seed: int) -> str:
    """The source of one case: defines `fd`, `inputs` and `bookend` (the policy to run under)."""
    rng = random.Random(seed)
    rank = rng.randint(1, 4)
    shape = [rng.choice(SIZES) for _ in range(rank)]
    while math.prod(shape) > MAX_ELEMENTS:
        shape[rng.randrange(rank)] = 1
    dtype = rng.choice(DTYPES)
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", ""]
    lines += _input_source(0, shape, dtype[0], rng.choice(LAYOUTS), rng)
    body = [f"t0 = fd.define_tensor(sizes=list(x0.shape), strides=[s // x0.itemsize for s in x0.strides], "
            f"dtype=DataType.{dtype[1]})"]
    inputs = ["x0"]
    before, before_shape = _chain(rng, body, "t0", shape, rng.randint(0, 4), "a")
    outputs = []
    math_kind = rng.random()
    if math_kind < 0.2:
        end, end_shape = before, before_shape  # meta ops only
    else:
        if math_kind < 0.5:
            body.append(f"m = fd.ops.{rng.choice(['neg', 'abs', 'exp', 'sin'])}({before})")
        elif math_kind < 0.75:
            body.append(f"m = fd.ops.{rng.choice(['add', 'mul'])}({before}, {rng.choice([0.5, 2.0, -1.0])})")
        else:
            second = rng.choice(DTYPES)
            lines += [line.replace("x0", "x1") for line in
                      _input_source(0, before_shape, second[0], rng.choice(LAYOUTS), rng)]
            body.append(f"t1 = fd.define_tensor(sizes=list(x1.shape), strides=[s // x1.itemsize for s in x1.strides], "
                        f"dtype=DataType.{second[1]})")
            inputs.append("x1")
            body.append(f"m = fd.ops.{rng.choice(['add', 'sub', 'mul', 'maximum'])}({before}, t1)")
        if rng.random() < 0.3:
            body.append(f"m = fd.ops.cast(m, DataType.{rng.choice(['Float', 'BFloat16', 'Half'])})")
        end, end_shape = _chain(rng, body, "m", before_shape, rng.randint(0, 3), "b")
        if end != "m" and rng.random() < 0.3:
            outputs.append("m")
        if before != "t0" and rng.random() < 0.3:
            outputs.append(before)  # the input's own chain, no math: a view where bookending makes one
    outputs.insert(0, end)
    lines.append(f"inputs = [{', '.join(inputs)}]")
    lines.append(f"bookend = {rng.choice(POLICIES)!r}")
    lines.append("with FusionDefinition() as fd:")
    body += [f"fd.add_output({out})" for out in dict.fromkeys(outputs)]
    lines += ["    " + line for line in body]
    return "\n".join(lines) + "\n"
