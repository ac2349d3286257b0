"""Random cats of costly inputs, for the differential fuzzer, generated as Python source (a failing case
prints itself as a standalone reproducer).

A case concatenates 2 to 4 inputs along the third dim of [b, g, pieces, t, h], as GQA's backward lays out
the fused QKV projection's gradient: a plain input (a tensor reshaped to [b, g, n, t, h], scaled, cast to
the output dtype) or a sum over the n query heads of a KV head (reshaped, summed in float, cast, broadcast
back to [b, g, 1, t, h]), either read transposed ([b, heads, h, t] permuted) and either with RoPE's rotate-
half before it (slices and pads of its halves along h). The cat is returned as it is, or through the
permute and reshape to [b, t, g * pieces * h] (and its 2D view), or through a permute that moves the last
dim. Head sizes are sometimes not whole vectors (3, 5, 12), where a chunk's lanes fall in several inputs.
The pointwise and transpose lowerings build such a cat by input (scheduler/cat_pieces.h) where they can.
"""

from __future__ import annotations

import random

DTYPES = [("np.float32", "Float"), ("ml_dtypes.bfloat16", "BFloat16"), ("np.float16", "Half")]
HEAD_SIZES = [8, 16, 24, 64, 3, 5, 12]
SEQUENCES = [1, 3, 7, 16, 33]


def generate_cat_pieces(seed: int) -> str:
    """The source of one case: defines `fd` and `inputs`."""
    rng = random.Random(seed)
    dtype = rng.choice(DTYPES)
    b, g, t, h = rng.choice([1, 2]), rng.choice([1, 2, 3]), rng.choice(SEQUENCES), rng.choice(HEAD_SIZES)
    lines = ["import ml_dtypes", "import numpy as np", "from braze import DataType, FusionDefinition", "",
             f"rng = np.random.default_rng({rng.randrange(1 << 30)})", "inputs = []",
             "with FusionDefinition() as fd:"]

    def define(sizes):
        name = f"x{len(defined)}"
        defined.append(sizes)
        contiguity = [None if n == 1 else True for n in sizes]
        lines.append(f"    {name} = fd.define_tensor(shape={sizes}, contiguity={contiguity}, dtype=DataType.{dtype[1]})")
        return name

    defined: list[list[int]] = []
    pieces, sizes_along = [], []
    kinds = [rng.choice(["plain", "sum", "sum"]) for _ in range(rng.randint(2, 4))]
    if "sum" not in kinds:
        kinds[0] = "sum"
    for i, kind in enumerate(kinds):
        n = rng.randint(1, 16 if kind == "sum" else 8)
        heads = g * n
        transposed = rng.random() < 0.4
        x = define([b, heads, h, t] if transposed else [b, heads, t, h])
        v = f"fd.ops.cast({x}, DataType.Float)"
        if transposed:
            v = f"fd.ops.permute({v}, [0, 1, 3, 2])"
        lines.append(f"    v{i} = {v}")
        v = f"v{i}"
        if rng.random() < 0.4 and h % 2 == 0:
            half = h // 2
            last = f"[{b}, {heads}, {t}, "
            lines += [f"    lo{i} = fd.ops.slice({v}, [0, 0, 0, 0], {last}{half}], [1, 1, 1, 1])",
                      f"    hi{i} = fd.ops.slice({v}, [0, 0, 0, {half}], {last}{h}], [1, 1, 1, 1])",
                      f"    v{i} = fd.ops.add(fd.ops.pad(hi{i}, [0, {half}, 0, 0, 0, 0, 0, 0], 0.0), "
                      f"fd.ops.pad(fd.ops.neg(lo{i}), [{half}, 0, 0, 0, 0, 0, 0, 0], 0.0))"]
        grouped = f"[{b}, {g}, {n}, {t}, {h}]"
        if kind == "plain":
            scale = rng.choice([0.125, -1.0, 2.0])
            lines.append(f"    p{i} = fd.ops.reshape(fd.ops.cast(fd.ops.mul(v{i}, {scale}), DataType.{dtype[1]}), {grouped})")
            sizes_along.append(n)
        else:
            lines += [f"    s{i} = fd.ops.cast(fd.ops.sum(fd.ops.reshape(v{i}, {grouped}), [2]), DataType.{dtype[1]})",
                      f"    p{i} = fd.ops.broadcast_in_dim(s{i}, [{b}, {g}, 1, {t}, {h}], [0, 1, 3, 4])"]
            sizes_along.append(1)
        pieces.append(f"p{i}")
    width = g * sum(sizes_along) * h
    lines.append(f"    cat = fd.ops.cat([{', '.join(pieces)}], 2)")
    ending = rng.choice(["as_is", "qkv", "qkv", "moved_last"])
    if ending == "as_is":
        lines.append("    fd.add_output(cat)")
    elif ending == "qkv":
        lines += [f"    out = fd.ops.reshape(fd.ops.permute(cat, [0, 3, 1, 2, 4]), [{b}, {t}, {width}])",
                  "    fd.add_output(out)"]
        if rng.random() < 0.5:
            lines.append(f"    fd.add_output(fd.ops.reshape(out, [{b * t}, {width}]))")
    else:
        lines.append("    fd.add_output(fd.ops.permute(cat, [0, 1, 2, 4, 3]))")
    lines += [f"inputs.append((rng.standard_normal({sizes}) * 2).astype({dtype[0]}))" for sizes in defined]
    return "\n".join(lines) + "\n"
