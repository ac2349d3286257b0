"""The layer-norm backward exactly as Lightning Thunder 0.2.6 writes it for nanoGPT's block (its nvFuser
executor's definition, captured by running Thunder on braze): 3-D [batch, seq, hidden] tensors, the mean
given as [batch, seq] and rstd as [batch, seq, 1], the residual's gradient added in, the bias grads of
grad_out and of the next linear's output (another width) summed over dims [0, 1], and one sum over the
size-1 dim that a broadcast made. How many kernels it plans as, and its values against the reference
evaluator on the test device."""

import ml_dtypes
import numpy as np
import pytest

import helpers
from braze import DataType, FusionDefinition

F32, BF16 = DataType.Float, DataType.BFloat16
BF16_NP = np.dtype(ml_dtypes.bfloat16)


def define_thunder_layer_norm_backward(fd, batch, seq, hidden, width, grad_in_outputs=True):
    """Inputs: mean [b, s] f32, weight [h], grad_out [b, s, h], x [b, s, h], rstd [b, s, 1] f32, the
    residual's grad [b, s, h], the next linear's output grad [b, s, width]. Outputs: grad_in + residual
    grad and the same as [b * s, h] (where grad_in_outputs), grad_weight, grad_bias and the next linear's
    bias grad. Returns grad_in + residual grad (bf16)."""
    b, s, h = batch, seq, hidden
    bsh, bs1 = [b, s, h], [b, s, 1]

    def scalar(value):
        return fd.define_scalar(value, dtype=DataType.Double)

    def rows(t):  # [b, s, 1] -> [b, s, h]
        return fd.ops.broadcast_in_dim(t, shape=bsh, broadcast_dims=[0, 1, 2])

    def per_row(t):  # [b, s] -> [b, s, 1]
        return fd.ops.broadcast_in_dim(t, shape=bs1, broadcast_dims=[0, 1])

    def tensor(shape, dtype):  # size-1 dims are broadcasts (contiguity None), as Thunder defines them
        return fd.define_tensor(shape=shape, contiguity=[None if n == 1 else True for n in shape], dtype=dtype)

    mean, weight = tensor([b, s], F32), tensor([h], BF16)
    grad_out, x, rstd = tensor(bsh, BF16), tensor(bsh, BF16), tensor(bs1, F32)
    residual, next_grad = tensor(bsh, BF16), tensor([b, s, width], BF16)

    go = fd.ops.cast(grad_out, dtype=F32)
    w = fd.ops.cast(fd.ops.broadcast_in_dim(weight, shape=bsh, broadcast_dims=[2]), dtype=F32)
    xf = fd.ops.cast(x, dtype=F32)
    g = fd.ops.mul(w, go)
    centered = fd.ops.sub(xf, rows(per_row(mean)))
    rstd_rows = rows(rstd)
    dvar_part = fd.ops.sum(fd.ops.mul(centered, g), dims=[2], keepdim=False, dtype=DataType.Null)
    scaled = fd.ops.mul(rstd_rows, g)
    neg_sum = fd.ops.sum(fd.ops.neg(scaled), dims=[2], keepdim=False, dtype=DataType.Null)
    dvar = fd.ops.mul(fd.ops.mul(scalar(-0.5), per_row(dvar_part)), fd.ops.pow(rstd, scalar(3.0)))
    dvar_sum = fd.ops.sum(dvar, dims=[2], keepdim=False, dtype=DataType.Null)
    # The sum over the size-1 dim the broadcast made: one element per row.
    dmean = fd.ops.sum(per_row(neg_sum), dims=[2], keepdim=False, dtype=DataType.Null)
    centered_again = fd.ops.sub(xf, rows(per_row(mean)))
    from_var = fd.ops.mul(fd.ops.mul(scalar(2.0), rows(per_row(dvar_sum))), centered_again)
    from_var = fd.ops.mul(from_var, fd.ops.cast(fd.ops.reciprocal(scalar(float(h))), dtype=F32))
    from_mean = fd.ops.mul(scalar(1.0 / h), rows(per_row(dmean)))
    grad_in = fd.ops.add(fd.ops.add(fd.ops.cast(residual, dtype=F32), scaled), fd.ops.add(from_mean, from_var))
    grad_weight = fd.ops.sum(fd.ops.mul(fd.ops.mul(centered, rstd_rows), go), dims=[0, 1], keepdim=False,
                             dtype=DataType.Null)
    grad_bias = fd.ops.sum(fd.ops.cast(grad_out, dtype=F32), dims=[0, 1], keepdim=False, dtype=DataType.Null)
    next_bias = fd.ops.sum(fd.ops.cast(next_grad, dtype=F32), dims=[0, 1], keepdim=False, dtype=DataType.Null)
    grad_in_bf16 = fd.ops.cast(grad_in, dtype=BF16)
    if grad_in_outputs:
        fd.add_output(grad_in_bf16)
        fd.add_output(fd.ops.reshape(grad_in_bf16, new_shape=[b * s, h]))
    for t in (grad_weight, grad_bias, next_bias):
        fd.add_output(fd.ops.cast(t, dtype=BF16))
    return grad_in_bf16


def thunder_inputs(rng, batch, seq, hidden, width):
    def bf16(*shape):
        return rng.standard_normal(shape).astype(BF16_NP)
    return [rng.standard_normal((batch, seq)).astype(np.float32), bf16(hidden), bf16(batch, seq, hidden),
            bf16(batch, seq, hidden), (0.5 + rng.random((batch, seq, 1))).astype(np.float32),
            bf16(batch, seq, hidden), bf16(batch, seq, width)]


def kernel_segments(plan):
    return [s for s in plan.segments if s.kind == "kernel"]


def test_thunder_layer_norm_backward_at_nanogpt_size_is_one_inner_outer_kernel():
    with FusionDefinition() as fd:
        define_thunder_layer_norm_backward(fd, 8, 256, 768, 3072)
    plan = fd.explain(thunder_inputs(np.random.default_rng(0), 8, 256, 768, 3072))
    assert [s.scheduler for s in kernel_segments(plan)] == ["inner_outer_persistent"], str(plan)


@pytest.mark.parametrize("batch,seq,hidden,width", [
    (2, 37, 200, 300),  # odd rows, a wider next linear
    (3, 5, 33, 17),     # odd hidden, a narrower one
    (1, 7, 64, 8),      # batch 1: the sums over [0, 1] squeeze dim 0 and reduce over dim 1
    (1, 1, 64, 8),      # one row: every sum over [0, 1] is the row itself
])
def test_thunder_layer_norm_backward_matches_the_reference(batch, seq, hidden, width):
    with FusionDefinition() as fd:
        define_thunder_layer_norm_backward(fd, batch, seq, hidden, width)
    inputs = thunder_inputs(np.random.default_rng(batch * seq + hidden), batch, seq, hidden, width)
    plan = fd.explain(inputs)
    if batch * seq > 1:
        assert len(kernel_segments(plan)) == 1, str(plan)
    # bf16 outputs: within two units in the last place of the largest value.
    assert len(helpers.execute_near_reference(fd, inputs, rtol=2e-2)) == 5
