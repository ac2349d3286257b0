"""Reductions that share no tensor but reduce the same dims of the same sizes plan as one kernel (the
segmenter's horizontal merge): a GQA backward's k and v grads, each summed over the repeated heads of
[batch, kv heads, repeats, seq, head dim] and concatenated into the kv linear's grad by the same
kernel; two norms of one shape side by side. Reductions of other dims or sizes stay apart. Values against the reference evaluator
on the test device."""

import numpy as np
import pytest

import helpers
from braze import DataType, FusionDefinition

F32 = DataType.Float


def kernels(plan):
    return [s for s in plan.segments if s.kind == "kernel"]


def define_gqa_kv_grads(fd, b, kv, rep, t, d):
    """The k grad (after a RoPE backward: x * cos + rotate(x) * sin) and the v grad, each [b, kv, rep, t, d],
    summed over the repeats, then concatenated along the last dim (pads and an add, as Thunder writes a
    cat) into the kv linear's grad [b, t, kv, 2 d]."""
    shape = [b, kv, rep, t, d]

    def tensor(sizes):  # size-1 dims are broadcasts (contiguity None), as Thunder defines them
        return fd.define_tensor(shape=sizes, contiguity=[None if n == 1 else True for n in sizes], dtype=F32)

    gk, gv, cos, sin = tensor(shape), tensor(shape), tensor([t, d]), tensor([t, d])
    half = d // 2
    cos_b = fd.ops.broadcast_in_dim(cos, shape=shape, broadcast_dims=[3, 4])
    sin_b = fd.ops.broadcast_in_dim(sin, shape=shape, broadcast_dims=[3, 4])
    x_sin = fd.ops.mul(gk, sin_b)
    first = fd.ops.slice(x_sin, start_indices=[0, 0, 0, 0, 0], end_indices=[b, kv, rep, t, half])
    second = fd.ops.slice(x_sin, start_indices=[0, 0, 0, 0, half], end_indices=shape)
    rotated = fd.ops.add(fd.ops.pad(fd.ops.neg(second), [0, half, 0, 0, 0, 0, 0, 0, 0, 0]),
                         fd.ops.pad(first, [half, 0, 0, 0, 0, 0, 0, 0, 0, 0]))
    k_grad = fd.ops.sum(fd.ops.add(fd.ops.mul(gk, cos_b), rotated), dims=[2], keepdim=False, dtype=DataType.Null)
    v_grad = fd.ops.sum(gv, dims=[2], keepdim=False, dtype=DataType.Null)
    k_t = fd.ops.permute(k_grad, dims=[0, 2, 1, 3])  # [b, t, kv, d]
    v_t = fd.ops.permute(v_grad, dims=[0, 2, 1, 3])
    kv_grad = fd.ops.add(fd.ops.pad(k_t, [0, d, 0, 0, 0, 0, 0, 0]), fd.ops.pad(v_t, [d, 0, 0, 0, 0, 0, 0, 0]))
    fd.add_output(fd.ops.reshape(kv_grad, new_shape=[b, t, kv * 2 * d]))


@pytest.mark.parametrize("b,kv,rep,t,d", [(2, 2, 3, 13, 8), (1, 1, 4, 7, 4), (2, 3, 1, 5, 6), (1, 2, 2, 1, 2)])
def test_gqa_kv_grads_sum_their_repeats_in_one_kernel(b, kv, rep, t, d):
    with FusionDefinition() as fd:
        define_gqa_kv_grads(fd, b, kv, rep, t, d)
    rng = np.random.default_rng(b * 100 + t)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ([b, kv, rep, t, d],) * 2 + ([t, d],) * 2]
    plan = fd.explain(inputs)
    reductions = [s for s in kernels(plan) if s.ops.count("sum") > 0]
    if rep > 1:
        assert len(reductions) == 1 and reductions[0].ops.count("sum") == 2, str(plan)
        # The join into the kv grad is that kernel's too (test_row_cats.py).
        assert len(kernels(plan)) == 1, str(plan)
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)


def test_two_norms_of_one_shape_side_by_side_are_one_kernel():
    with FusionDefinition() as fd:
        for _ in range(2):
            x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
            mean = fd.ops.broadcast_in_dim(fd.ops.sum(x, dims=[1], keepdim=False), shape=x.shape(), broadcast_dims=[0])
            fd.add_output(fd.ops.sub(x, mean))
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((37, 48)).astype(np.float32) for _ in range(2)]
    plan = fd.explain(inputs)
    assert len(kernels(plan)) == 1, str(plan)
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)


def test_reductions_of_other_dims_or_sizes_stay_apart():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        fd.add_output(fd.ops.sum(a, dims=[1], keepdim=False))
        fd.add_output(fd.ops.sum(b, dims=[0], keepdim=False))
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((37, 48)).astype(np.float32), rng.standard_normal((37, 48)).astype(np.float32)]
    plan = fd.explain(inputs)
    assert len(kernels(plan)) == 2, str(plan)
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)
