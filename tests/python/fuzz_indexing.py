"""Indexing inside fusions, for the differential fuzzer, generated as Python source (a failing case prints
itself as a standalone reproducer).

A case reads a source tensor (rank 1-3, in any layout fuzz_fusions draws, maybe computed by elementwise
math first, maybe permuted) and an integer index (int32 or int64, contiguous, transposed, strided or a
broadcast along a dim), then picks elements with index_select, gather, take_along_axis, select or
embedding_fwd along any dim; what it picks is then scaled, added to a value of its own shape, reduced
(a sum or max over a dim), normalized or put through a softmax whose picked entries are the cross
entropy's (log_softmax then take_along_axis of the targets, as Thunder writes it). Indices repeat, and
the picked tensor may be larger than the source along the picked dim.
"""

from __future__ import annotations

import random

from fuzz_fusions import _input_source

SIZES = [1, 2, 3, 5, 7, 8, 13, 16, 33]
DTYPES = [("np.float32", "Float"), ("np.float32", "Float"), ("ml_dtypes.bfloat16", "BFloat16"), ("np.float16", "Half")]
LAYOUTS = ["contiguous", "contiguous", "transposed", "strided", "offset", "expanded"]
TARGETS = ["h100", "h100", "mi300x", "a100:block_threads=64,max_unroll=2", "h100:index_checks=0"]


def _index_source(name: str, shape: list[int], high: int, dtype: str, layout: str, rng: random.Random) -> list[str]:
    """Lines making integer array `name` of `shape` with values in [0, high), in one of fuzz_fusions'
    layouts (transposed, strided, offset, expanded along a dim): its uniform draw in [-2, 2) scaled."""
    values = f".__add__(2).__mul__({high / 4}).astype({dtype})"
    return [line.replace("x9 = ", f"{name} = ").replace(".astype(np.float64)", values)
            for line in _input_source(9, shape, "np.float64", layout, rng)]


def generate_indexing(seed: int) -> str:
    """The source of one case: defines `fd`, `inputs`, `target` (a device preset, maybe with tuning) and,
    for a cross entropy, `pick_in_row_kernel` (whether the target's pick is in the row's kernel)."""
    rng = random.Random(seed)
    rank = rng.randint(1, 3)
    shape = [rng.choice(SIZES) for _ in range(rank)]
    np_dtype, dtype = rng.choice(DTYPES)
    index_dtype = rng.choice([("np.int64", "Int64"), ("np.int32", "Int32")])
    index_layout = rng.choice(["contiguous", "contiguous", "transposed", "strided", "offset", "expanded"])
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", ""]
    lines += _input_source(0, shape, np_dtype, rng.choice(LAYOUTS), rng)
    body = ["x = fd.define_tensor(sizes=list(x0.shape), strides=[s // x0.itemsize for s in x0.strides], "
            f"dtype=DataType.{dtype})", "x = fd.ops.cast(x, DataType.Float)"]
    if rng.random() < 0.4:
        body.append(f"x = fd.ops.{rng.choice(['tanh', 'sin', 'abs', 'neg'])}(x)")
    if rank > 1 and rng.random() < 0.3:
        order = list(range(rank))
        rng.shuffle(order)
        body.append(f"x = fd.ops.permute(x, {order})")
        shape = [shape[d] for d in order]
    dim = rng.randrange(rank)
    op = rng.choice(["index_select", "index_select", "gather", "take_along_axis", "select", "embedding", "cross_entropy"])
    if op == "embedding" and rank != 2:
        op = "index_select"
    if op == "cross_entropy" and rank == 1:
        op = "gather"
    inputs = ["x0"]
    picked_shape = list(shape)
    if op == "index_select":
        count = rng.choice([1, 2, 5, shape[dim], shape[dim] + 3])
        lines += _index_source("i0", [count], shape[dim], index_dtype[0], "contiguous", rng)
        body.append("i = fd.define_tensor(sizes=list(i0.shape), strides=[s // i0.itemsize for s in i0.strides], "
                    f"dtype=DataType.{index_dtype[1]})")
        body.append(f"y = fd.ops.index_select(x, i, {dim})")
        picked_shape[dim] = count
        inputs.append("i0")
    elif op in ("gather", "take_along_axis"):
        index_shape = list(shape)
        index_shape[dim] = rng.choice([1, 2, shape[dim], shape[dim] + 2])
        if op == "gather":  # torch.gather's index may be smaller on the other dims too
            index_shape = [n if d == dim else rng.randint(1, n) for d, n in enumerate(index_shape)]
        lines += _index_source("i0", index_shape, shape[dim], index_dtype[0], index_layout, rng)
        body.append("i = fd.define_tensor(sizes=list(i0.shape), strides=[s // i0.itemsize for s in i0.strides], "
                    f"dtype=DataType.{index_dtype[1]})")
        body.append(f"y = fd.ops.{op}(x, i, {dim})")
        picked_shape = index_shape
        inputs.append("i0")
    elif op == "select":
        at = rng.randrange(-shape[dim], shape[dim])
        body.append(f"y = fd.ops.select(x, {at}, {dim})")
        picked_shape = shape[:dim] + shape[dim + 1:]
    elif op == "embedding":
        tokens = [rng.choice([1, 3, 8]) for _ in range(rng.randint(1, 2))]
        lines += _index_source("i0", tokens, shape[0], index_dtype[0], index_layout, rng)
        body.append("i = fd.define_tensor(sizes=list(i0.shape), strides=[s // i0.itemsize for s in i0.strides], "
                    f"dtype=DataType.{index_dtype[1]})")
        body.append("y = fd.ops.embedding_fwd(i, x, None, None, None, None, None)")
        picked_shape = tokens + [shape[1]]
        inputs.append("i0")
    else:
        # Cross entropy as Thunder writes it: log_softmax over the last dim, the targets' entries picked.
        last = rank - 1
        body.append(f"m = fd.ops.max(x, dims=[{last}], keepdim=True)")
        body.append("z = fd.ops.sub(x, m)")
        body.append(f"lse = fd.ops.log(fd.ops.sum(fd.ops.exp(z), dims=[{last}], keepdim=True))")
        index_shape = shape[:-1] + [1]
        lines += _index_source("i0", index_shape, shape[-1], index_dtype[0], index_layout, rng)
        # Rows of more than one element reduce: the kernel keeping the row picks the target too.
        lines.append(f"pick_in_row_kernel = {shape[-1] > 1}")
        body.append("i = fd.define_tensor(sizes=list(i0.shape), strides=[s // i0.itemsize for s in i0.strides], "
                    f"dtype=DataType.{index_dtype[1]})")
        body.append(f"y = fd.ops.neg(fd.ops.take_along_axis(fd.ops.sub(z, lse), i, {last}))")
        picked_shape = index_shape
        inputs.append("i0")

    after = rng.choice(["none", "scale", "add", "reduce", "softmax"])
    if after == "scale":
        body.append("y = fd.ops.mul(y, 0.5)")
    elif after == "add" and picked_shape:
        lines += _input_source(1, picked_shape, "np.float32", rng.choice(LAYOUTS), rng)
        body.append("b = fd.define_tensor(sizes=list(x1.shape), strides=[s // x1.itemsize for s in x1.strides], "
                    "dtype=DataType.Float)")
        body.append("y = fd.ops.add(y, b)")
        inputs.append("x1")
    elif after == "reduce" and picked_shape:
        dims = sorted(rng.sample(range(len(picked_shape)), rng.randint(1, len(picked_shape))))
        body.append(f"y = fd.ops.{rng.choice(['sum', 'max'])}(y, dims={dims}, keepdim={rng.random() < 0.5})")
    elif after == "softmax" and picked_shape:
        last = len(picked_shape) - 1
        body.append(f"e = fd.ops.exp(fd.ops.sub(y, fd.ops.max(y, dims=[{last}], keepdim=True)))")
        body.append(f"y = fd.ops.div(e, fd.ops.sum(e, dims=[{last}], keepdim=True))")
    body.append(f"fd.add_output(fd.ops.cast(y, DataType.{dtype}) if {rng.random() < 0.4} else y)")
    lines.append(f"inputs = [{', '.join(inputs)}]")
    lines.append(f"target = {rng.choice(TARGETS)!r}")
    lines.append("with FusionDefinition() as fd:")
    return "\n".join(lines + ["    " + line for line in body]) + "\n"


def generate_scatter_in_place(seed: int) -> str:
    """The source of one case updating an input in place with scatter or index_put_accumulate (a KV cache's
    new tokens, a grad accumulated into its buffer): repeated entries, an index shorter than the input on
    the other dims, in any layout, entries given or computed (now and then from the updated input itself,
    a slice of it or, as a repetition penalty, its values gathered at the index, which makes the plan copy
    the update back), and now and then another output reading the input as it was. Defines `fd` and
    `inputs`."""
    rng = random.Random(seed)
    rank = rng.randint(1, 3)
    shape = [rng.choice(SIZES) for _ in range(rank)]
    np_dtype, dtype = rng.choice(DTYPES)
    accumulate = rng.random() < 0.3
    dim = 0 if accumulate else rng.randrange(rank)
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", ""]
    lines += _input_source(0, shape, np_dtype, rng.choice(["contiguous", "contiguous", "transposed", "strided", "offset"]),
                           rng)
    if accumulate:
        entries = rng.randint(1, 6)
        index_shape, src_shape = [entries], [entries] + shape[1:]
    else:
        index_shape = [rng.randint(1, n) if d != dim else rng.randint(1, n + 2) for d, n in enumerate(shape)]
        src_shape = list(index_shape)
    index_dtype = rng.choice([("np.int64", "Int"), ("np.int32", "Int32")])
    lines += _index_source("i0", index_shape, shape[dim], index_dtype[0],
                           rng.choice(["contiguous", "transposed", "strided", "expanded"]), rng)
    lines += _input_source(1, src_shape, np_dtype, rng.choice(LAYOUTS), rng)
    lines.append("inputs = [x0, i0, x1]")
    body = [f"x = fd.define_tensor(sizes=list(x0.shape), strides=[s // x0.itemsize for s in x0.strides], dtype=DataType.{dtype})",
            "i = fd.define_tensor(sizes=list(i0.shape), strides=[s // i0.itemsize for s in i0.strides], "
            f"dtype=DataType.{index_dtype[1]})",
            f"s = fd.define_tensor(sizes=list(x1.shape), strides=[s // x1.itemsize for s in x1.strides], dtype=DataType.{dtype})"]
    src = rng.choice(["s", "s", "computed", "own"])
    if src == "computed":
        body.append(f"s = fd.ops.cast(fd.ops.mul(fd.ops.cast(s, DataType.Float), 2.0), DataType.{dtype})")
    elif src == "own" and all(a <= b for a, b in zip(src_shape, shape)) and len(src_shape) == rank:
        # Entries read from the updated input itself: a slice of it.
        body.append(f"s = fd.ops.slice(x, {[0] * rank}, {src_shape})")
    extra = random.Random(seed * 13 + 7)  # draws of its own, so that the cases drawn before stay as they were
    if src == "s" and not accumulate and extra.random() < 0.3:
        # A repetition penalty's entries: the input gathered at the index, changed, scattered back.
        body.append(f"g = fd.ops.gather(x, i, {dim})")
        body.append(f"s = fd.ops.cast(fd.ops.where(fd.ops.lt(g, 0), fd.ops.mul(g, 2), fd.ops.neg(g)), DataType.{dtype})")
    op = "fd.ops.index_put_accumulate(x, i, s)" if accumulate else f"fd.ops.scatter(x, i, s, {dim})"
    body.append(f"fd.add_output({op}, alias_input=x)")
    if rng.random() < 0.3:
        body.append("fd.add_output(fd.ops.neg(x))  # the input as it was")
    lines.append("with FusionDefinition() as fd:")
    return "\n".join(lines + ["    " + line for line in body]) + "\n"
