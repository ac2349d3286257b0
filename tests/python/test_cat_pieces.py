"""Outputs made by one cat of costly inputs compute, per chunk, only the input the chunk falls in
(csrc/scheduler/cat_pieces.h). Thunder's backward of Llama's QKV split with RoPE on grouped-query
attention concatenates the query heads' gradient with the keys' and the values', each summed over the
query heads of its KV head, the keys' read transposed: one transpose kernel from 1 to 16 query heads a
KV head, against the reference. So is the plain GQA backward's pointwise kernel where the cat's inputs
split a vector of lanes (each lane then computes every input and selects)."""

import ml_dtypes
import numpy as np
import pytest

import helpers
import test_small_reductions as small
from braze import DataType, FusionDefinition

F32, BF16 = DataType.Float, DataType.BFloat16


def define_rope_gqa_backward(fd, b, g, q, t, hs, t_max, scale=0.125):
    """As Thunder writes it for a Llama block (its fusion after SDPA's backward): the keys' gradient
    transposed [b, g * q, hs, t], RoPE's sin and cos tables [t_max, hs], the queries' and values' gradients
    [b, g * q, t, hs]; out, the fused QKV projection's gradient [b, t, g * (q + 2) * hs] and its 2D view."""
    heads, half = g * q, hs // 2
    shape = [b, heads, t, hs]

    def tensor(sizes, dtype=BF16):
        return fd.define_tensor(shape=sizes, contiguity=[None if n == 1 else True for n in sizes], dtype=dtype)

    dk_t, sin, cos, dq, dv = tensor([b, heads, hs, t]), tensor([t_max, hs]), tensor([t_max, hs]), tensor(shape), tensor(shape)

    def f32(x):
        return fd.ops.cast(x, F32)

    def bf16(x):
        return fd.ops.cast(x, BF16)

    def table(x):
        return f32(fd.ops.broadcast_in_dim(fd.ops.slice(x, [0, 0], [t, hs], [1, 1]), shape, [2, 3]))

    def last(x, lo, hi):
        return fd.ops.slice(x, [0, 0, 0, lo], [b, heads, t, hi], [1, 1, 1, 1])

    def rope_backward(grad):
        """The gradient of x * cos + rotate_half(x) * sin with respect to x, rounded as Thunder rounds it:
        grad * cos + cat(s[half:], -s[:half]) with s = grad * sin."""
        by_sin = bf16(fd.ops.mul(sin_t, grad))
        rotated = f32(fd.ops.pad(last(by_sin, half, hs), [0, half, 0, 0, 0, 0, 0, 0], 0.0))
        negated = f32(fd.ops.pad(bf16(fd.ops.neg(f32(last(by_sin, 0, half)))), [half, 0, 0, 0, 0, 0, 0, 0], 0.0))
        return bf16(fd.ops.add(fd.ops.add(fd.ops.mul(cos_t, grad), rotated), negated))

    sin_t, cos_t = table(sin), table(cos)
    keys = rope_backward(f32(fd.ops.permute(bf16(fd.ops.mul(scale, f32(dk_t))), [0, 1, 3, 2])))
    queries = rope_backward(fd.ops.mul(scale, f32(dq)))
    grouped = [b, g, q, t, hs]

    def summed(x):
        total = bf16(fd.ops.sum(f32(fd.ops.reshape(x, grouped)), [2]))
        return fd.ops.broadcast_in_dim(total, [b, g, 1, t, hs], [0, 1, 3, 4])

    qkv = fd.ops.cat([fd.ops.reshape(queries, grouped), summed(keys), summed(dv)], 2)
    out = fd.ops.reshape(fd.ops.permute(qkv, [0, 3, 1, 2, 4]), [b, t, g * (q + 2) * hs])
    fd.add_output(out)
    fd.add_output(fd.ops.reshape(out, [b * t, g * (q + 2) * hs]))


def rope_gqa_inputs(b, g, q, t, hs, t_max, seed):
    rng = np.random.default_rng(seed)
    bf16 = np.dtype(ml_dtypes.bfloat16)
    heads = g * q
    return [rng.standard_normal(s).astype(bf16)
            for s in ((b, heads, hs, t), (t_max, hs), (t_max, hs), (b, heads, t, hs), (b, heads, t, hs))]


@pytest.mark.parametrize(
    "b,g,q,t,hs",
    [
        (2, 2, 8, 128, 64),  # Llama-3-70B's eight query heads a KV head, as Thunder's Llama block runs it
        (1, 3, 8, 33, 16),   # an odd sequence length: the tiles' last rows are partial
        (2, 2, 4, 40, 32),   # Llama-3-8B's four
        (1, 1, 16, 9, 8),    # sixteen, the most summed per element
        (1, 4, 1, 7, 8),     # one a KV head: each sum is of one head
    ],
)
def test_rope_gqa_backward_is_one_kernel_at_any_query_heads_per_kv_head(b, g, q, t, hs):
    with FusionDefinition() as fd:
        define_rope_gqa_backward(fd, b, g, q, t, hs, t_max=t + 3)
    inputs = rope_gqa_inputs(b, g, q, t, hs, t + 3, seed=q * 100 + t)
    kernels, plan = helpers.kernels_of(fd, inputs)
    assert [k.scheduler for k in kernels] == ["transpose"], plan
    helpers.execute_near_reference(fd, inputs, rtol=1e-2)


@pytest.mark.parametrize("h", [3, 5])
def test_a_cat_whose_inputs_split_a_vector_computes_every_input_per_lane(h):
    """Head sizes of 3 or 5 bf16 values: a chunk of lanes spans two inputs of the cat, so each lane
    computes every input and selects, as any cat does; still one kernel, still the reference's values."""
    b, g, q, t = 2, 2, 8, 7
    with FusionDefinition() as fd:
        small.define_gqa_backward(fd, BF16, b, g, q, t, h)
    rng = np.random.default_rng(h)
    inputs = [rng.standard_normal((b, g * q, t, h)).astype(small.NP[BF16]) for _ in range(3)]
    kernels, plan = helpers.kernels_of(fd, inputs)
    assert len(kernels) == 1, plan
    helpers.execute_near_reference(fd, inputs, rtol=1e-2)
