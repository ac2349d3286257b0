"""Dims whose length a definition does not fix: an extent of 1 that broadcasts at execute time (topk with
k = 1, a pad or slice to 1) and an expanded index (stride 0, a length) are no size-1 dims of the result.
fd.ops.size, reductions, select and triu over such results against torch, on the kernels and the reference."""

import numpy as np
import pytest

from braze import FusionDefinition, execute

torch = pytest.importorskip("torch")


def both(fd, inputs):
    """The outputs of the kernels (the simulated device) and of the reference evaluator."""
    return fd.execute(inputs), execute.reference(fd, inputs)


def as_tensor(value):
    return torch.as_tensor(np.asarray(value)) if not isinstance(value, torch.Tensor) else value


def test_a_difference_with_a_top_one_keeps_the_rows_length():
    x = torch.arange(1.0, 25.0).reshape(4, 6)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        top, _ = fd.ops.topk(t, fd.define_scalar(1), 1)  # [4, 1]: broadcast over the row at execute time
        d = fd.ops.sub(t, top)
        fd.add_output(d)
        fd.add_output(fd.ops.size(d, 1))
        fd.add_output(fd.ops.div(fd.ops.sum(d, [1]), fd.ops.size(d, 1)))
        fd.add_output(fd.ops.select(d, -1, 1))
        fd.add_output(fd.ops.triu(d))
        fd.add_output(fd.ops.topk(d, fd.define_scalar(2), 1)[0])
        fd.add_output(fd.ops.size(fd.ops.cat([d, d], 1), 1))
    want = x - x.topk(1, 1).values
    expected = [want, 6, want.mean(1), want[:, -1], torch.triu(want), want.topk(2, 1).values, 12]
    for outputs in both(fd, [x]):
        for got, w in zip(outputs, expected, strict=True):
            if isinstance(w, int):
                assert got == w
            else:
                torch.testing.assert_close(as_tensor(got), w)


def test_a_static_tensor_less_a_top_one_is_accepted_and_broadcast():
    c = torch.tensor([[3.0, 9.0, 1.0, 4.0, 0.0, 2.0]] * 4)
    x = torch.arange(24.0).reshape(4, 6)
    with FusionDefinition() as fd:
        tx = fd.define_tensor(shape=[4, 6], contiguity=[True, True])
        tc = fd.from_pytorch(c)
        top, _ = fd.ops.topk(tc, fd.define_scalar(1), 1)
        fd.add_output(fd.ops.sub(tx, top))
    for outputs in both(fd, [x, c]):
        torch.testing.assert_close(as_tensor(outputs[0]), x - c.topk(1, 1).values)


def test_index_select_with_an_expanded_index_selects_its_length_of_rows():
    w = torch.arange(24.0).reshape(6, 4)
    index = torch.tensor([2]).expand(5)
    with FusionDefinition() as fd:
        t = fd.ops.index_select(fd.from_pytorch(w), fd.from_pytorch(index), 0)
        fd.add_output(t)
        fd.add_output(fd.ops.size(t, 0))
        fd.add_output(fd.ops.sum(t, [0]))
        fd.add_output(fd.ops.triu(t))
    want = torch.index_select(w, 0, index)
    for outputs in both(fd, [w, index]):
        torch.testing.assert_close(as_tensor(outputs[0]), want)
        assert outputs[1] == 5
        torch.testing.assert_close(as_tensor(outputs[2]), want.sum(0))
        torch.testing.assert_close(as_tensor(outputs[3]), torch.triu(want))


def test_a_matmul_batch_against_a_top_one_keeps_the_other_batch():
    a = torch.randn(5, 2, 3, dtype=torch.float64)
    b = torch.randn(4, 3, 2, dtype=torch.float64)
    with FusionDefinition() as fd:
        ta, tb = fd.from_pytorch(a), fd.from_pytorch(b)
        top, _ = fd.ops.topk(tb, fd.define_scalar(1), 0)  # [1, 3, 2]
        m = fd.ops.matmul(ta, top)
        fd.add_output(m)
        fd.add_output(fd.ops.size(m, 0))
    want = a @ b.topk(1, 0).values
    for outputs in both(fd, [a, b]):
        torch.testing.assert_close(as_tensor(outputs[0]), want)
        assert outputs[1] == 5
