"""A scan kernel (cumsum, topk, argsort, scatter) writes its op's outputs and nothing else: a view of the
scan's operand that the fusion also returns (a permute, reshape, slice or broadcast of a value a
persistent or matmul kernel computes) is written by another segment, not left unwritten beside the scan."""

from __future__ import annotations

import numpy as np
import pytest

from braze import DataType, FusionDefinition
from braze import execute as bx


def _view(fd, q, kind):
    if kind == "permute":
        return fd.ops.permute(q, [1, 0])
    if kind == "identity_permute":
        return fd.ops.permute(q, [0, 1])
    if kind == "reshape":
        return fd.ops.reshape(q, [15])
    if kind == "slice":
        return fd.ops.slice(q, [0, 1], [2, 4])
    return fd.ops.broadcast_in_dim(q, [2, 3, 5], [1, 2])


def _scan(fd, q, kind):
    if kind == "cumsum":
        return [fd.ops.cumsum(q, 1)]
    if kind == "topk":
        return list(fd.ops.topk(q, fd.define_scalar(2, dtype=DataType.Int), 1))
    return [fd.ops.argsort(q, 1)]


@pytest.mark.parametrize("scan", ["cumsum", "topk", "argsort"])
@pytest.mark.parametrize("view", ["permute", "identity_permute", "reshape", "slice", "broadcast_in_dim"])
def test_a_view_returned_beside_a_scan_of_a_kernel_result(scan, view):
    rng = np.random.default_rng(7)
    x0 = (np.abs(rng.standard_normal((3, 5))) + 0.5).astype(np.float32)  # row sums away from 0
    x1 = rng.standard_normal((3, 5)).astype(np.float32)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        q = fd.ops.sub(t1, fd.ops.div(t0, fd.ops.sum(t0, dims=[1], keepdim=True)))
        fd.add_output(_view(fd, q, view))
        for out in _scan(fd, q, scan):
            fd.add_output(out)
    got = fd.execute([x0, x1])
    want = bx.reference(fd, [x0, x1])
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    for segment in fd.explain([x0, x1]).segments:
        if segment.scheduler == "scan":
            assert all(op in ("cumsum", "topk", "argsort", "slice") for op in segment.ops), segment.ops


def test_a_broadcast_of_a_matmul_result_returned_beside_its_cumsum():
    rng = np.random.default_rng(1)
    import ml_dtypes

    a = rng.standard_normal((33, 20)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((20, 26)).astype(ml_dtypes.bfloat16)
    with FusionDefinition() as fd:
        ta = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        tb = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        y = fd.ops.cast(fd.ops.matmul(ta, tb), DataType.Float)
        fd.add_output(fd.ops.broadcast_in_dim(y, [2, 33, 26], [1, 2]))
        fd.add_output(fd.ops.cumsum(y, 1))
    got = fd.execute([a, b])
    want = bx.reference(fd, [a, b])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
