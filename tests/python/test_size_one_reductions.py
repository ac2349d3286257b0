"""Sums, products, max and min over broadcast (size-1) dims, which are built as a squeeze and a cast
(so that a definition's sum over a dim it broadcast to 1 is no reduction of its own): against numpy and
torch, and the dims that look like 1 in a definition but are longer, or empty, at execute time (an
expanded batch dim through matmul or take_along_axis, an extent-1 dim broadcast at execute time, a slice
of a broadcast dim with bounds given at execute time), which must still reduce."""

import numpy as np
import pytest

import device_switch
from braze import DataType, FusionDefinition, execute

torch = pytest.importorskip("torch")

KINDS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("dims,keepdim", [([1], False), ([1], True), ([0, 1], False), ([1, 2], True)])
@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Int32])
def test_a_reduction_over_size_one_dims_is_the_value_over_the_rest(kind, dims, keepdim, dtype):
    # [5, 1, 7] with dim 1 a broadcast (size 1): a reduction over it alone is each element (cast to the
    # result's dtype: Int64 for a sum or product of integers); over it and others, the others' reduction.
    np_dtype = np.float32 if dtype == DataType.Float else np.int32
    rng = np.random.default_rng(len(dims) * 10 + keepdim)
    x = (rng.standard_normal((5, 1, 7)) * 4).astype(np_dtype)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, True], dtype=dtype)
        fd.add_output(getattr(fd.ops, kind)(t, dims, keepdim=keepdim))
    (got,) = device_switch.execute(fd, [x])
    want = KINDS[kind](x.astype(np.float64), axis=tuple(dims), keepdims=keepdim)
    assert np.asarray(got).shape == want.shape
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-5)
    if dtype == DataType.Int32 and kind in ("sum", "prod"):
        assert np.asarray(got).dtype == np.int64
    if dims == [1]:
        assert "squeeze" in repr(fd) and f"fd.ops.{kind}(" not in repr(fd)  # squeezed, not reduced


def test_a_sum_over_a_size_one_dim_is_a_new_tensor_not_a_view():
    x = np.arange(6, dtype=np.float32).reshape(6, 1)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t, [1]))
    (got,) = fd.execute([x])
    np.testing.assert_array_equal(got, x[:, 0])
    assert not np.shares_memory(got, x)
    x[:] = -1  # the caller changes its input afterwards: the result stays
    np.testing.assert_array_equal(got, np.arange(6, dtype=np.float32))


def test_a_sum_over_a_matmul_batch_dim_that_an_expanded_operand_makes_long():
    a = torch.randn(1, 2, 3, dtype=torch.float64).expand(4, 2, 3)  # batch dim expanded (stride 0)
    b = torch.randn(3, 2, dtype=torch.float64)
    with FusionDefinition() as fd:
        m = fd.ops.matmul(fd.from_pytorch(a), fd.from_pytorch(b))
        fd.add_output(fd.ops.sum(m, [0]))
        fd.add_output(fd.ops.prod(m, [0], keepdim=True))
        fd.add_output(fd.ops.size(m, 0))
    total, product, size = fd.execute([a, b])
    torch.testing.assert_close(total, (a @ b).sum(0))
    torch.testing.assert_close(product, (a @ b).prod(0, keepdim=True))
    assert size == 4
    for got, want in zip(execute.reference(fd, [a, b])[:2], [(a @ b).sum(0), (a @ b).prod(0, keepdim=True)]):
        torch.testing.assert_close(torch.as_tensor(np.asarray(got)), want)


def test_a_sum_over_a_take_along_axis_dim_that_an_expanded_index_makes_long():
    x = torch.arange(5.0).reshape(1, 5)
    index = torch.tensor([[4, 1]]).expand(3, 2)
    with FusionDefinition() as fd:
        g = fd.ops.take_along_axis(fd.from_pytorch(x), fd.from_pytorch(index), 1)
        fd.add_output(fd.ops.sum(g, [0]))
        fd.add_output(fd.ops.sum(g, [0], keepdim=True))
        fd.add_output(fd.ops.size(g, 0))
    want = torch.take_along_dim(x, index, 1)
    total, kept, size = fd.execute([x, index])
    torch.testing.assert_close(total, want.sum(0))
    torch.testing.assert_close(kept, want.sum(0, keepdim=True))
    assert size == 3


def test_a_sum_over_an_extent_one_dim_broadcast_at_execute_time():
    a, c = torch.arange(5.0), torch.tensor([3.0, 9.0, 1.0])
    with FusionDefinition() as fd:
        ta = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        tc = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        top, _ = fd.ops.topk(tc, fd.define_scalar(1), 0)  # [1], then broadcast against [5]
        s = fd.ops.add(ta, top)
        fd.add_output(fd.ops.sum(s, [0], keepdim=True))
        fd.add_output(fd.ops.max(s, [0]))
    want = a + c.topk(1).values
    kept, largest = fd.execute([a, c])
    torch.testing.assert_close(kept, want.sum(0, keepdim=True))
    torch.testing.assert_close(largest, want.amax(0))


@pytest.mark.parametrize("keepdim", [False, True])
def test_a_sum_over_a_slice_of_a_broadcast_dim_emptied_at_execute_time(keepdim):
    x = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
        start, end = fd.define_scalar(dtype=DataType.Int64), fd.define_scalar(dtype=DataType.Int64)
        u = fd.ops.slice(t, start_indices=[0, start], end_indices=[3, end])
        fd.add_output(fd.ops.sum(u, [1], keepdim=keepdim))
        fd.add_output(fd.ops.prod(u, [1], keepdim=keepdim))
    for lo, hi in [(0, 0), (0, 1)]:
        part = x[:, lo:hi].astype(np.float64)
        total, product = fd.execute([x, lo, hi])
        np.testing.assert_array_equal(total, part.sum(1, keepdims=keepdim))
        np.testing.assert_array_equal(product, part.prod(1, keepdims=keepdim))


def test_a_sum_of_one_negative_zero_is_positive_zero():
    x = np.array([[-0.0], [2.0]], dtype=np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
        fd.add_output(fd.ops.reciprocal(fd.ops.sum(t, [1])))
    (got,) = device_switch.execute(fd, [x])
    with np.errstate(divide="ignore"):
        want = 1 / np.sum(x, axis=1)  # [inf, 0.5]: numpy's sum starts from +0
    np.testing.assert_array_equal(got, want)
