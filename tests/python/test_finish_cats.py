"""Cats of a norm backward's outer results, written by the inner-outer finish (inner_outer/entry.h's
finishCats): DiT's block modulates each norm per image (adaLN: h = norm(x) * (1 + scale) + shift, six
[batch, hidden] chunks of one linear's output). Thunder hands the second norm's backward with the grad of
that output: the shift and scale grads (sums over each image's tokens, grouped outer reductions) and the
four chunks' grads that earlier fusions computed, each padded into [batch, 6 hidden] and added, cast back to
the grad's dtype, and transposed for the weight grad's matmul. One inner-outer segment writes all of it,
where a kernel of its own read the two sums back and wrote the cat. Values against the reference evaluator
on the test device, in bf16 and fp32, at odd sizes, a batch of 1, one token or a few (summed by another
plan), and strided or misaligned chunks."""

import ml_dtypes
import numpy as np
import pytest

import helpers
from braze import DataType, FusionDefinition

F32, BF16 = DataType.Float, DataType.BFloat16
NP = {BF16: np.dtype(ml_dtypes.bfloat16), F32: np.dtype(np.float32)}
# Where each grad goes in the modulation's output: shift1, scale1, gate1, shift2, scale2, gate2.
COMPUTED = {"shift2": 3, "scale2": 4}
GIVEN = {"shift1": 0, "scale1": 1, "gate1": 2, "gate2": 5}


def define_adaln_norm_backward(fd, dtype, hidden, contiguous_chunks=True):
    """Inputs: x and the grad of h [b, t, hidden] (dtype), mean and rstd [b, t, 1] float, scale [b, hidden]
    (dtype), the four given chunk grads [b, hidden] (dtype). Outputs: grad_x (dtype), the cat [b, 6 hidden]
    and its transpose."""
    full = dict(shape=[-1, -1, hidden], contiguity=[True] * 3, dtype=dtype)
    x, grad_h = fd.define_tensor(**full), fd.define_tensor(**full)
    mean = fd.define_tensor(shape=[-1, -1, 1], contiguity=[True, True, None], dtype=F32)
    rstd = fd.define_tensor(shape=[-1, -1, 1], contiguity=[True, True, None], dtype=F32)
    scale = fd.define_tensor(shape=[-1, hidden], contiguity=[True, True], dtype=dtype)
    given = {name: fd.define_tensor(shape=[-1, hidden], contiguity=[contiguous_chunks] * 2, dtype=dtype)
             for name in GIVEN}
    shape = x.shape()

    def rows(v):  # [b, t, 1] -> [b, t, hidden]
        return fd.ops.broadcast_in_dim(v, shape=shape, broadcast_dims=[0, 1, 2])

    xhat = fd.ops.mul(fd.ops.sub(fd.ops.cast(x, dtype=F32), rows(mean)), rows(rstd))
    g = fd.ops.cast(grad_h, dtype=F32)
    sums = {"shift2": fd.ops.sum(g, dims=[1], keepdim=False),
            "scale2": fd.ops.sum(fd.ops.mul(g, xhat), dims=[1], keepdim=False)}
    one_plus = fd.ops.add(fd.ops.cast(scale, dtype=F32), fd.define_scalar(1.0, dtype=DataType.Double))
    gn = fd.ops.mul(g, fd.ops.broadcast_in_dim(one_plus, shape=shape, broadcast_dims=[0, 2]))
    mean_gn = fd.ops.mul(fd.ops.sum(gn, dims=[2], keepdim=True), 1.0 / hidden)
    mean_gx = fd.ops.mul(fd.ops.sum(fd.ops.mul(gn, xhat), dims=[2], keepdim=True), 1.0 / hidden)
    grad_x = fd.ops.mul(rows(rstd), fd.ops.sub(fd.ops.sub(gn, rows(mean_gn)), fd.ops.mul(xhat, rows(mean_gx))))
    fd.add_output(fd.ops.cast(grad_x, dtype=dtype))
    # Thunder's cat: each chunk padded in its dtype, cast to float, the pads added, the sum cast back.
    chunks = {name: fd.ops.cast(v, dtype=dtype) for name, v in sums.items()}
    chunks.update(given)
    total = None
    for name, position in sorted({**COMPUTED, **GIVEN}.items(), key=lambda item: item[1]):
        pad = [position * hidden, (5 - position) * hidden]
        padded = fd.ops.cast(fd.ops.pad(chunks[name], pad, fd.define_scalar(0.0, dtype=DataType.Double)), dtype=F32)
        total = padded if total is None else fd.ops.add(total, padded)
    cat = fd.ops.cast(total, dtype=dtype)
    fd.add_output(cat)
    fd.add_output(fd.ops.permute(cat, dims=[1, 0]))


def adaln_inputs(rng, dtype, batch, seq, hidden, chunks="dense"):
    def values(*shape):
        return rng.standard_normal(shape).astype(NP[dtype])

    def laid_out(array):
        if chunks == "strided":
            wide = np.zeros((array.shape[0], 2 * array.shape[1]), array.dtype)
            wide[:, ::2] = array
            return wide[:, ::2]
        if chunks == "misaligned":
            buffer = np.empty(array.size + 1, array.dtype)[1:]
            buffer[:] = array.ravel()
            return buffer.reshape(array.shape)
        return array

    x = values(batch, seq, hidden)
    mean = x.astype(np.float32).mean(axis=2, keepdims=True)
    rstd = (1.0 / np.sqrt(x.astype(np.float32).var(axis=2, keepdims=True) + 1e-6)).astype(np.float32)
    return [x, values(batch, seq, hidden), mean, rstd, values(batch, hidden)] + [laid_out(values(batch, hidden))
                                                                                for _ in GIVEN]


@pytest.mark.parametrize("dtype", [BF16, F32])
@pytest.mark.parametrize("batch,seq,hidden", [(2, 64, 128), (3, 37, 40), (1, 17, 33), (2, 300, 24), (3, 13, 40),
                                              (4, 1, 16)])
def test_the_modulation_grad_cat_is_written_by_the_norm_backwards_finish(dtype, batch, seq, hidden):
    """One segment where the sums over the tokens are reductions (more than 16 tokens: fewer are summed by
    the pointwise kernels of another plan, which must be as right)."""
    with FusionDefinition() as fd:
        define_adaln_norm_backward(fd, dtype, hidden)
    inputs = adaln_inputs(np.random.default_rng(batch * seq + hidden), dtype, batch, seq, hidden)
    kernels, plan = helpers.kernels_of(fd, inputs)
    if seq > 16:
        assert [k.scheduler for k in kernels] == ["inner_outer_persistent"], plan
    outputs = helpers.execute_near_reference(fd, inputs, rtol=2e-2 if dtype == BF16 else 1e-5)
    np.testing.assert_array_equal(np.asarray(outputs[2]), np.asarray(outputs[1]).T)
    for name, position in GIVEN.items():  # the given chunks are copied where they go
        np.testing.assert_array_equal(np.asarray(outputs[1])[:, position * hidden:(position + 1) * hidden],
                                      inputs[5 + list(GIVEN).index(name)])


@pytest.mark.parametrize("chunks", ["strided", "misaligned"])
def test_strided_or_misaligned_chunks(chunks):
    with FusionDefinition() as fd:
        define_adaln_norm_backward(fd, BF16, 40, contiguous_chunks=chunks != "strided")
    inputs = adaln_inputs(np.random.default_rng(5), BF16, 3, 13, 40, chunks)
    kernels, plan = helpers.kernels_of(fd, inputs)
    assert [k.scheduler for k in kernels] == ["inner_outer_persistent"], plan
    helpers.execute_near_reference(fd, inputs, rtol=2e-2)


def test_a_cat_of_inputs_alone_is_no_finish_cat():
    """A cat whose parts are all inputs computes nothing from the sums: it is no part of the finish."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, 8], contiguity=[True] * 3)
        fd.add_output(fd.ops.sub(x, fd.ops.broadcast_in_dim(fd.ops.sum(x, dims=[2], keepdim=True), shape=x.shape(),
                                                            broadcast_dims=[0, 1, 2])))
        fd.add_output(fd.ops.sum(x, dims=[1], keepdim=False))
        a, b = (fd.define_tensor(shape=[-1, 8], contiguity=[True, True]) for _ in range(2))
        zero = fd.define_scalar(0.0, dtype=DataType.Double)
        fd.add_output(fd.ops.add(fd.ops.pad(a, [0, 8], zero), fd.ops.pad(b, [8, 0], zero)))
    rng = np.random.default_rng(6)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ((2, 5, 8), (2, 8), (2, 8))]
    kernels, plan = helpers.kernels_of(fd, inputs)
    assert "inner_outer_persistent" in [k.scheduler for k in kernels], plan
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)


def test_a_padded_part_returned_beside_the_cat_keeps_the_cat_out_of_the_finish():
    """A value on the cat's way that is an output too (a part padded): the finish writes a column per thread
    and whole cats, not that; the plan is another, and right."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, 8], contiguity=[True] * 3)
        fd.add_output(fd.ops.sub(x, fd.ops.broadcast_in_dim(fd.ops.sum(x, dims=[2], keepdim=True), shape=x.shape(),
                                                            broadcast_dims=[0, 1, 2])))
        a = fd.define_tensor(shape=[-1, 8], contiguity=[True, True])
        zero = fd.define_scalar(0.0, dtype=DataType.Double)
        padded = fd.ops.pad(fd.ops.sum(x, dims=[1], keepdim=False), [0, 8], zero)
        fd.add_output(padded)
        fd.add_output(fd.ops.add(padded, fd.ops.pad(a, [8, 0], zero)))
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal((2, 40, 8)).astype(np.float32), rng.standard_normal((2, 8)).astype(np.float32)]
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)
