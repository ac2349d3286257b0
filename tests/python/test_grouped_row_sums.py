"""Sums over some of the rows' dims beside a norm backward (inner_outer/entry.h, RowGrouping): GPT's first
layer-norm backward as Thunder hands it also returns the position embedding's grad, grad_in summed over
the batch and kept per position. The inner-outer kernel walks each position's rows together and sums
them there (a slice of them per block item where positions are few), so the plan stays one segment and
its finish, instead of a second kernel reading a float [batch, seq, hidden] grad_in back. Values against
numpy in float64 on the test device, at odd sizes, a batch of 1, other row dims summed, and other
reductions; where it cannot (two groupings), the plan says why and is still right."""

import ml_dtypes
import numpy as np
import pytest

import device_switch
from braze import DataType, FusionDefinition

F32 = DataType.Float
NP = {DataType.BFloat16: np.dtype(ml_dtypes.bfloat16), DataType.Half: np.dtype(np.float16), F32: np.dtype(np.float32)}
TOL = {DataType.BFloat16: 2e-2, DataType.Half: 3e-3, F32: 1e-5}


def define_rows(fd, dtype, rank, batch_of_one=False):
    """grad_out, x, the residual stream's grad [..rows.., hidden], mean and rstd [..rows.., 1] float, weight
    [hidden] (`batch_of_one`: the first dim defined as 1, as Thunder defines a batch of 1); returns grad_in
    (float, the residual's added) and the weight and bias grads' operands."""
    lead = ([1], [None]) if batch_of_one else ([-1], [True])
    full = dict(shape=lead[0] + [-1] * (rank - 1), contiguity=lead[1] + [True] * (rank - 1), dtype=dtype)
    stats = dict(shape=lead[0] + [-1] * (rank - 2) + [1], contiguity=lead[1] + [True] * (rank - 2) + [None], dtype=F32)
    go_, x_, res = fd.define_tensor(**full), fd.define_tensor(**full), fd.define_tensor(**full)
    mean, rstd = fd.define_tensor(**stats), fd.define_tensor(**stats)
    w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
    go = fd.ops.cast(go_, F32)
    xh = fd.ops.mul(fd.ops.sub(fd.ops.cast(x_, F32), mean), rstd)
    g = fd.ops.mul(go, fd.ops.broadcast(fd.ops.cast(w, F32), [True] * (rank - 1) + [False]))
    c = fd.ops.size(x_, rank - 1)
    a = fd.ops.div(fd.ops.sum(g, [rank - 1], keepdim=True), c)
    b = fd.ops.div(fd.ops.sum(fd.ops.mul(g, xh), [rank - 1], keepdim=True), c)
    grad_in = fd.ops.add(fd.ops.cast(res, F32), fd.ops.mul(rstd, fd.ops.sub(fd.ops.sub(g, a), fd.ops.mul(xh, b))))
    return grad_in, fd.ops.mul(go, xh), go


def rows_inputs(rng, dtype, shape):
    stats = shape[:-1] + (1,)
    return [rng.standard_normal(shape).astype(NP[dtype]), rng.standard_normal(shape).astype(NP[dtype]),
            rng.standard_normal(shape).astype(NP[dtype]), rng.standard_normal(stats).astype(np.float32),
            (0.5 + rng.random(stats)).astype(np.float32), rng.standard_normal(shape[-1]).astype(NP[dtype])]


def grad_in_of(inputs):
    go, x, res, mean, rstd, w = (np.asarray(v, dtype=np.float64) for v in inputs)
    xh = (x - mean) * rstd
    g = go * w
    c = x.shape[-1]
    grad_in = res + rstd * (g - g.sum(-1, keepdims=True) / c - xh * (g * xh).sum(-1, keepdims=True) / c)
    return grad_in, go * xh, go


def assert_close(got, expected, dtype):
    tol = TOL[dtype]
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * max(np.abs(expected).max(initial=0.0), 1.0))


def segments(fd, inputs):
    return [s.scheduler for s in fd.explain(inputs).segments]


@pytest.mark.parametrize(
    "batch,seq,hidden,dtype",
    [
        (8, 64, 96, DataType.BFloat16),  # whole positions per block item
        (3, 37, 200, DataType.Half),  # odd sizes
        (300, 3, 40, F32),  # few positions, many sequences: each position's rows in slices
        (2, 1, 64, DataType.BFloat16),  # one position
        (5, 11, 1, F32),  # one channel
    ],
)
def test_the_position_embedding_grad_joins_the_layer_norm_backward(batch, seq, hidden, dtype):
    with FusionDefinition() as fd:
        grad_in, gw, go = define_rows(fd, dtype, 3)
        fd.add_output(fd.ops.cast(grad_in, dtype))
        fd.add_output(fd.ops.cast(fd.ops.sum(gw, [0, 1]), dtype))
        fd.add_output(fd.ops.cast(fd.ops.sum(go, [0, 1]), dtype))
        fd.add_output(fd.ops.cast(fd.ops.sum(grad_in, [0]), dtype))
    inputs = rows_inputs(np.random.default_rng(batch * seq + hidden), dtype, (batch, seq, hidden))
    plan = fd.explain(inputs)
    if hidden > 1:
        assert segments(fd, inputs) == ["inner_outer_persistent"], str(plan)
    if hidden > 1 and seq > 1:  # (one position: a sum over every row, a plain outer reduction)
        assert "sums over the" in str(plan), str(plan)
    gi, gw_, go_ = grad_in_of(inputs)
    expected = [gi, gw_.sum((0, 1)), go_.sum((0, 1)), gi.sum(0)]
    for got, want in zip(device_switch.execute(fd, inputs), expected, strict=True):
        assert got.dtype == NP[dtype]
        assert_close(got, want, dtype)


@pytest.mark.parametrize(
    "shape,summed",
    [
        ((6, 5, 48), [1]),  # the sequence summed, the batch kept
        ((3, 4, 5, 40), [0, 2]),  # dims apart: kept 4, summed 3 x 5
        ((4, 1, 7, 24), [0, 1]),  # a size-1 dim among the summed
        ((2, 3, 5, 16), [2]),  # the last row dim only
    ],
)
def test_sums_over_other_row_dims_and_their_scaled_results(shape, summed):
    """Sums over any of the row dims (as a mean and kept as size 1 here): each item walks the rows of one
    index of the kept dims, wherever the summed dims lie among them."""
    rank = len(shape)
    with FusionDefinition() as fd:
        grad_in, gw, _ = define_rows(fd, F32, rank)
        fd.add_output(grad_in)
        fd.add_output(fd.ops.sum(gw, list(range(rank - 1))))
        count = float(np.prod([shape[d] for d in summed]))
        fd.add_output(fd.ops.mul(fd.ops.sum(grad_in, summed, keepdim=True), fd.define_scalar(1.0 / count)))
    inputs = rows_inputs(np.random.default_rng(len(summed) + shape[0]), F32, shape)
    assert segments(fd, inputs) == ["inner_outer_persistent"], str(fd.explain(inputs))
    gi, gw_, _ = grad_in_of(inputs)
    expected = [gi, gw_.sum(tuple(range(rank - 1))), gi.sum(tuple(summed), keepdims=True) / count]
    for got, want in zip(device_switch.execute(fd, inputs), expected, strict=True):
        assert_close(got, want, F32)


@pytest.mark.parametrize("op", ["max", "min"])
def test_a_max_or_min_over_the_batch_starts_from_its_identity(op):
    """Every item's sums start from the reduction's identity (-inf for max): values all negative or all
    positive show one that started from zero."""
    shape = (7, 9, 33)
    with FusionDefinition() as fd:
        grad_in, gw, _ = define_rows(fd, F32, 3)
        fd.add_output(fd.ops.sum(gw, [0, 1]))
        shifted = fd.ops.add(grad_in, fd.define_scalar(-100.0 if op == "max" else 100.0))
        fd.add_output(getattr(fd.ops, op)(shifted, [0]))
    inputs = rows_inputs(np.random.default_rng(5), F32, shape)
    assert segments(fd, inputs) == ["inner_outer_persistent"], str(fd.explain(inputs))
    gi, gw_, _ = grad_in_of(inputs)
    shift = -100.0 if op == "max" else 100.0
    expected = [gw_.sum((0, 1)), getattr(np, op)(gi + shift, axis=0)]
    for got, want in zip(device_switch.execute(fd, inputs), expected, strict=True):
        assert_close(got, want, F32)


def test_two_groupings_stay_apart_and_say_why():
    """A sum over the batch and another over the sequence: one walk cannot keep both groups together; the
    plan says so and its kernels give the reference's values."""
    shape = (4, 6, 32)
    with FusionDefinition() as fd:
        grad_in, gw, _ = define_rows(fd, F32, 3)
        fd.add_output(fd.ops.sum(gw, [0, 1]))
        fd.add_output(fd.ops.sum(grad_in, [0]))
        fd.add_output(fd.ops.sum(grad_in, [1]))
    inputs = rows_inputs(np.random.default_rng(9), F32, shape)
    plan = str(fd.explain(inputs))
    assert "sums other dims of the rows" in plan, plan
    gi, gw_, _ = grad_in_of(inputs)
    for got, want in zip(device_switch.execute(fd, inputs), [gw_.sum((0, 1)), gi.sum(0), gi.sum(1)], strict=True):
        assert_close(got, want, F32)


def test_another_batch_or_sequence_length_plans_its_own_walk():
    """The walk's strides among the rows are in its code: a new batch size or sequence length lowers it
    again (no relaunch of the first one's), each right."""
    with FusionDefinition() as fd:
        grad_in, gw, _ = define_rows(fd, DataType.BFloat16, 3)
        fd.add_output(fd.ops.cast(fd.ops.sum(gw, [0, 1]), DataType.BFloat16))
        fd.add_output(fd.ops.cast(fd.ops.sum(grad_in, [0]), DataType.BFloat16))
    for i, shape in enumerate([(4, 40, 64), (8, 40, 64), (4, 80, 64), (4, 40, 64)]):
        inputs = rows_inputs(np.random.default_rng(i), DataType.BFloat16, shape)
        gi, gw_, _ = grad_in_of(inputs)
        got = device_switch.execute(fd, inputs)
        assert_close(got[0], gw_.sum((0, 1)), DataType.BFloat16)
        assert_close(got[1], gi.sum(0), DataType.BFloat16)


def test_a_batch_of_one_squeezed_is_written_by_the_norm_kernel():
    """At batch 1 Thunder's sum over the batch is a squeeze of grad_in ([1, seq, hidden] to [seq, hidden]):
    a row-sized output one size-1 dim short, which the inner-outer kernel writes at its linear position."""
    with FusionDefinition() as fd:
        grad_in, gw, _ = define_rows(fd, DataType.BFloat16, 3, batch_of_one=True)
        fd.add_output(fd.ops.cast(grad_in, DataType.BFloat16))
        fd.add_output(fd.ops.cast(fd.ops.sum(gw, [0, 1]), DataType.BFloat16))
        fd.add_output(fd.ops.cast(fd.ops.squeeze(grad_in, [0]), DataType.BFloat16))
    inputs = rows_inputs(np.random.default_rng(3), DataType.BFloat16, (1, 37, 96))
    assert segments(fd, inputs) == ["inner_outer_persistent"], str(fd.explain(inputs))
    gi, gw_, _ = grad_in_of(inputs)
    for got, want in zip(device_switch.execute(fd, inputs), [gi, gw_.sum((0, 1)), gi[0]], strict=True):
        assert_close(got, want, DataType.BFloat16)


def test_a_batch_of_one_defined_without_sizes_keeps_its_sum_apart():
    """Run at batch 1, a definition without sizes sums grad_in over a dim of size 1: a copy of each row,
    which items of one row each would make slow. No grouped walk: the norm backward keeps its thread rows,
    and the values are still right."""
    with FusionDefinition() as fd:
        grad_in, gw, _ = define_rows(fd, F32, 3)
        fd.add_output(fd.ops.sum(gw, [0, 1]))
        fd.add_output(fd.ops.sum(grad_in, [0]))
    inputs = rows_inputs(np.random.default_rng(4), F32, (1, 37, 96))
    assert "sums over the" not in str(fd.explain(inputs))
    gi, gw_, _ = grad_in_of(inputs)
    for got, want in zip(device_switch.execute(fd, inputs), [gw_.sum((0, 1)), gi.sum(0)], strict=True):
        assert_close(got, want, F32)


@pytest.mark.parametrize("shape", [(0, 5, 16), (3, 0, 16)])
def test_empty_rows_give_empty_or_zero_sums(shape):
    with FusionDefinition() as fd:
        grad_in, gw, _ = define_rows(fd, F32, 3)
        fd.add_output(grad_in)
        fd.add_output(fd.ops.sum(gw, [0, 1]))
        fd.add_output(fd.ops.sum(grad_in, [0]))
    inputs = rows_inputs(np.random.default_rng(6), F32, shape)
    gi, gw_, _ = grad_in_of(inputs)
    for got, want in zip(device_switch.execute(fd, inputs), [gi, gw_.sum((0, 1)), gi.sum(0)], strict=True):
        assert_close(got, want, F32)


@pytest.mark.parametrize("batch,heads,seq,dtype", [(2, 4, 16, DataType.BFloat16), (5, 3, 37, F32), (1, 2, 9, F32)])
def test_a_relative_position_bias_grad_through_size_one_dims_joins_the_softmax_backward(batch, heads, seq, dtype):
    """T5's attention as Thunder hands its backward: the scores' grad (a softmax backward over the keys) and the
    learned bias's grad, the scores' grad summed over the batch, which Thunder broadcasts to [1, H, T, T] and
    squeezes back before the cast. Meta ops that add or drop size-1 dims keep each column where it is: one
    inner-outer kernel, no pointwise kernel after it."""
    full = dict(shape=[-1] * 4, contiguity=[True] * 4, dtype=dtype)
    with FusionDefinition() as fd:
        grad_, probs_ = fd.define_tensor(**full), fd.define_tensor(**full)
        grad, probs = fd.ops.cast(grad_, F32), fd.ops.cast(probs_, F32)
        gp = fd.ops.mul(grad, probs)
        dot = fd.ops.sum(gp, [3], keepdim=True)
        scores_grad = fd.ops.sub(gp, fd.ops.mul(probs, dot))
        bias = fd.ops.sum(scores_grad, [0])
        bias = fd.ops.squeeze(fd.ops.broadcast_in_dim(bias, shape=[1, heads, seq, seq], broadcast_dims=[1, 2, 3]), [0])
        fd.add_output(fd.ops.cast(fd.ops.add(bias, fd.define_scalar(0.0)), dtype))
        fd.add_output(fd.ops.cast(scores_grad, dtype))
    rng = np.random.default_rng(batch * heads + seq)
    grad = rng.standard_normal((batch, heads, seq, seq)).astype(NP[dtype])
    probs = rng.random((batch, heads, seq, seq)).astype(NP[dtype])
    inputs = [grad, probs]
    if batch > 1:  # (a sum over a batch of 1 sums size-1 dims only: a kernel of its own, as above)
        assert segments(fd, inputs) == ["inner_outer_persistent"], str(fd.explain(inputs))
    g, p = np.asarray(grad, np.float64), np.asarray(probs, np.float64)
    scores = g * p - p * (g * p).sum(-1, keepdims=True)
    for got, want in zip(device_switch.execute(fd, inputs), [scores.sum(0), scores], strict=True):
        assert got.dtype == NP[dtype]
        assert_close(got, want, dtype)


def test_outer_sums_through_size_one_dims_and_an_expand_beside_them():
    """The weight grad reshaped to [1, 1, C] and the bias grad broadcast to [C, 1] stay in the kernel; the
    weight grad expanded to [2, C] (each column read twice) is computed after it. All right."""
    shape = (6, 7, 40)
    with FusionDefinition() as fd:
        grad_in, gw, go = define_rows(fd, F32, 3)
        fd.add_output(grad_in)
        weight_grad = fd.ops.sum(gw, [0, 1])
        fd.add_output(fd.ops.reshape(weight_grad, [1, 1, shape[2]]))
        fd.add_output(fd.ops.broadcast_in_dim(fd.ops.sum(go, [0, 1]), shape=[shape[2], 1], broadcast_dims=[0]))
        fd.add_output(fd.ops.broadcast_in_dim(weight_grad, shape=[2, shape[2]], broadcast_dims=[1]))
    inputs = rows_inputs(np.random.default_rng(7), F32, shape)
    plan = fd.explain(inputs)
    assert [s.scheduler for s in plan.segments if s.kind == "kernel"][0] == "inner_outer_persistent", str(plan)
    gi, gw_, go_ = grad_in_of(inputs)
    w = gw_.sum((0, 1))
    expected = [gi, w.reshape(1, 1, -1), go_.sum((0, 1))[:, None], np.broadcast_to(w, (2, shape[2]))]
    for got, want in zip(device_switch.execute(fd, inputs), expected, strict=True):
        assert_close(got, want, F32)
