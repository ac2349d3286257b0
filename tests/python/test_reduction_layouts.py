"""Values a reduction kernel writes lie where its reduction domain has them: a reduction result permuted,
broadcast along another dim than its own or combined with a transposed operand, and outputs that are
permuted or reshaped copies of the reduced tensor, each the reference's (the segmenter cuts where one kernel
over the domain cannot write them), at square sizes too, where element counts alone cannot tell."""

from __future__ import annotations

import numpy as np
import pytest

from braze import DataType, FusionDefinition
from braze import execute as bx


def _check(fd, inputs):
    got = fd.execute(inputs)
    want = bx.reference(fd, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dims, order", [([1], [1, 0]), ([0], [1, 0]), ([2], [1, 0]), ([1, 2], None)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_a_permuted_reduction_result(dims, order, keepdim):
    rng = np.random.default_rng(3)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
        s = fd.ops.sum(t, dims=dims, keepdim=keepdim)
        rank = 3 if keepdim else 3 - len(dims)
        perm = list(reversed(range(rank))) if order is None or keepdim else order
        fd.add_output(fd.ops.permute(fd.ops.sigmoid(s), perm))
    for shape in [(3, 4, 5), (4, 4, 4), (6, 1, 6)]:
        _check(fd, [rng.standard_normal(shape).astype(np.float32)])


@pytest.mark.parametrize("n", [2, 4, 64])
def test_a_row_statistic_broadcast_along_the_other_dim(n):
    """A / (d_i d_j) with d the row sums of a square A: d broadcast along the rows and along the columns."""
    rng = np.random.default_rng(n)
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        d = fd.ops.sum(a, dims=[1])
        di = fd.ops.broadcast_in_dim(d, shape=a.shape(), broadcast_dims=[0])
        dj = fd.ops.broadcast_in_dim(d, shape=a.shape(), broadcast_dims=[1])
        fd.add_output(dj)
        fd.add_output(fd.ops.div(a, fd.ops.mul(di, dj)))
        fd.add_output(fd.ops.sub(a, fd.ops.broadcast_in_dim(fd.ops.max(a, dims=[0]), shape=a.shape(), broadcast_dims=[0])))
    _check(fd, [rng.uniform(0.5, 1.5, (n, n)).astype(np.float32)])


def test_a_row_statistic_times_a_transposed_operand():
    rng = np.random.default_rng(5)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        s = fd.ops.sum(t, dims=[1])
        fd.add_output(fd.ops.mul(fd.ops.permute(t, [1, 0]), fd.ops.broadcast_in_dim(s, shape=[5, 16], broadcast_dims=[1])))
    _check(fd, [rng.standard_normal((16, 5)).astype(np.float32)])


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 0, 1], [0, 2, 1]])
def test_a_permuted_copy_of_the_reduced_tensor_as_another_output(perm):
    rng = np.random.default_rng(7)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
        n = fd.ops.neg(t)
        fd.add_output(fd.ops.sum(n, dims=[0, 2]))
        fd.add_output(fd.ops.permute(n, perm))
        fd.add_output(fd.ops.sum(n, dims=[2]) if perm == [0, 2, 1] else fd.ops.exp(n))
    for shape in [(3, 8, 16), (4, 4, 4)]:
        _check(fd, [rng.uniform(-1, 1, shape).astype(np.float32)])


def test_a_reshaped_broadcast_of_the_reduced_tensor_as_another_output():
    x = np.arange(14, dtype=np.float32).reshape(7, 2)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.ops.broadcast_in_dim(t, shape=[7, 2, 2], broadcast_dims=[0, 2])
        fd.add_output(fd.ops.reshape(b, new_shape=[7, 4]))
        fd.add_output(fd.ops.sum(b, dims=[0, 2]))
    _check(fd, [x])


def test_layer_norm_stays_one_kernel():
    """The alignment check refuses none of a normalization's own values: a layer norm over [rows, hidden]
    with its mean and rstd as outputs is still one inner-persistent kernel."""
    rng = np.random.default_rng(9)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(x, dims=[1], correction=0, keepdim=True)
        rstd = fd.ops.rsqrt(fd.ops.add(var, 1e-5))
        fd.add_output(fd.ops.mul(fd.ops.sub(x, mean), rstd))
        fd.add_output(fd.ops.squeeze(mean, [1]))
        fd.add_output(rstd)
    inputs = [rng.standard_normal((33, 33)).astype(np.float32)]
    _check(fd, inputs)
    assert [s.scheduler for s in fd.explain(inputs).segments] == ["inner_persistent"]


@pytest.mark.parametrize("op, want", [("sum", [3, 0]), ("prod", [0, 2])])
@pytest.mark.parametrize("dtype", [DataType.Int32, DataType.Int])
def test_a_float_reduction_into_an_integer_dtype_casts_each_element_first(op, want, dtype):
    """As torch's sum(dtype=) and prod(dtype=): [0.6, 1.7, 2.9] sums to 0 + 1 + 2 = 3, not to int(5.2)."""
    x = np.array([[0.6, 1.7, 2.9], [-0.5, 0.4, 0.3]], np.float32)
    if op == "prod":
        x = np.array([[0.6, 1.7, 2.9], [1.5, 2.2, 1.0]], np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(getattr(fd.ops, op)(t, dims=[1], dtype=dtype))
    (got,) = fd.execute([x])
    (ref,) = bx.reference(fd, [x])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ref, want)


DTYPE_CASES = [
    ("min", np.array([2, -3, 0], np.int32), DataType.Int32, DataType.Bool, False),
    ("max", np.array([2, -3, 0], np.int32), DataType.Int32, DataType.UInt8, 253),
    ("min", np.array([2, -3, 0], np.int32), DataType.Int32, DataType.UInt8, 0),
    ("min", np.array([2, -3, 300, -200], np.int64), DataType.Int, DataType.Int8, -3),
    ("max", np.array([2, -3, 300, -200], np.int64), DataType.Int, DataType.Int8, 56),
    ("sum", np.full(3, 100.0, np.float32), DataType.Float, DataType.Int8, 44),
    ("sum", np.full(4, 1e9, np.float32), DataType.Float, DataType.Int32, -294967296),
    ("sum", np.array([0.5, -0.5], np.float32), DataType.Float, DataType.Bool, True),
    ("sum", np.array([1, 1, -2], np.int32), DataType.Int32, DataType.Bool, True),
    ("prod", np.full(3000, 2, np.int32), DataType.Int32, DataType.Bool, True),
]


@pytest.mark.parametrize("op, x, dtype, out, want", DTYPE_CASES)
def test_a_reduction_with_dtype_converts_each_element_then_wraps(op, x, dtype, out, want):
    """dtype= converts each element as a cast would (torch's sum(dtype=) does), then accumulates in the
    output's type with wrap-around: kernels and the reference alike."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        fd.add_output(getattr(fd.ops, op)(t, dims=[0], dtype=out))
    (got,) = fd.execute([x])
    (ref,) = bx.reference(fd, [x])
    assert got == want and ref == want


@pytest.mark.parametrize("bookend", ["auto", "none", "both"])
def test_copies_with_a_size_1_dim_added_or_dropped_beside_a_reduction(bookend):
    """A reduction over non-adjacent dims with a copy of the reduced tensor given a size-1 dim (broadcast)
    or without one (a [1, n, n, n] view reduced, its rank-3 source an output), an expanded input among
    them, and a padded row sum reduced over two domains: each output the reference's."""
    rng = np.random.default_rng(23)
    x = rng.uniform(-1, 1, (4, 4, 4)).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
        n = fd.ops.neg(t)
        fd.add_output(fd.ops.sum(n, dims=[0, 2]))
        fd.add_output(fd.ops.broadcast(n, [False, True, False, False]))
        fd.add_output(fd.ops.sum(fd.ops.broadcast(n, [True, False, False, False]), dims=[1, 3]))
    _check_policy(fd, [x], bookend)
    expanded = np.broadcast_to(rng.uniform(-1, 1, (4, 1, 4)).astype(np.float32), (4, 4, 4))
    with FusionDefinition() as fd:
        t = fd.define_tensor(sizes=[4, 4, 4], strides=[4, 0, 1], dtype=DataType.Float)
        m = fd.ops.neg(t)
        fd.add_output(fd.ops.min(fd.ops.broadcast(m, [True, False, False, False]), dims=[0, 1, 3]))
        fd.add_output(m)
    _check_policy(fd, [expanded], bookend)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
        p = fd.ops.pad(fd.ops.sum(t, dims=[1], keepdim=True), [2, 1, 1, 2], fd.define_scalar(0.0))
        fd.add_output(fd.ops.sum(fd.ops.broadcast(p, [False, True, False, False]), dims=[0, 3]))
        fd.add_output(fd.ops.max(p, dims=[0], keepdim=True))
    _check_policy(fd, [(np.arange(27, dtype=np.float32).reshape(3, 3, 3) % 7) + 1], bookend)


def _check_policy(fd, inputs, bookend):
    got = fd.execute(inputs, bookend=bookend)
    for g, w in zip(got, bx.reference(fd, inputs), strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16])
@pytest.mark.parametrize("shape, dims", [((2, 3), [1]), ((1000, 4), [0]), ((2, 100000), [1])])
def test_all_and_any_into_a_float_dtype(dtype, shape, dims):
    """all(x, dtype=Float) started its accumulator from a Bool true, which a Float var read as 0: every
    row came back 0 (inner, outer and grid reductions alike)."""
    x = np.ones(shape, np.float32)
    x.flat[::7] = 0.0 if shape[0] == 2 else 1.0
    x[-1, 0] = 0.0
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.all(t, dims=dims, dtype=dtype))
        fd.add_output(fd.ops.any(t, dims=dims, dtype=dtype))
    got = fd.execute([x])
    want = [np.all(x != 0, axis=dims[0]), np.any(x != 0, axis=dims[0])]
    for g, r, w in zip(got, bx.reference(fd, [x]), want):
        np.testing.assert_array_equal(np.asarray(g, np.float64), w.astype(np.float64))
        np.testing.assert_array_equal(np.asarray(r, np.float64), w.astype(np.float64))
