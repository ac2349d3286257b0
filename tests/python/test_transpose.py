"""The transpose scheduler from Python: fusions that permute the innermost dim, or read an input
stored transposed, run as shared-memory tiled kernels (fd.explain shows the tiles) and match numpy."""

from __future__ import annotations

import numpy as np
import pytest

from braze import DataType, FusionDefinition

from helpers import BF16, assert_matches, define_like


def kernel_segment(plan):
    (kernel,) = [s for s in plan.segments if s.kind == "kernel"]
    return kernel


@pytest.mark.parametrize("shape", [(3, 40, 72), (2, 33, 65), (1, 128, 8)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=lambda d: np.dtype(d).name)
def test_permute_times_two_plus_bias_is_tiled_and_matches_numpy(shape, dtype):
    B, M, N = shape
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(dtype)
    bias = rng.standard_normal(M).astype(dtype)
    with FusionDefinition() as fd:
        tx, tb = define_like(fd, x), define_like(fd, bias)
        y = fd.ops.add(fd.ops.mul(fd.ops.permute(tx, [0, 2, 1]), 2.0), fd.ops.broadcast_in_dim(tb, [B, N, M], [2]))
        fd.add_output(fd.ops.cast(y, DataType.BFloat16 if dtype == BF16 else DataType.Float))
    plan = fd.explain([x, bias])
    kernel = kernel_segment(plan)
    assert kernel.scheduler == "transpose"
    assert kernel.heuristics.startswith("transpose: tile ") and "dims (a=1, b=2), 1 staged input" in kernel.heuristics
    (got,) = fd.execute([x, bias])
    want = x.astype(np.float64).transpose(0, 2, 1) * 2 + bias.astype(np.float64)
    assert_matches(got, want, dtype)


def test_transposed_numpy_input_plus_contiguous_input():
    rng = np.random.default_rng(5)
    xt = rng.standard_normal((70, 45)).astype(np.float32).T  # (45, 70), column-major
    z = rng.standard_normal((45, 70)).astype(np.float32)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.add(define_like(fd, xt), define_like(fd, z)))
    kernel = kernel_segment(fd.explain([xt, z]))
    assert kernel.scheduler == "transpose" and "dims (a=0, b=1), 1 staged input" in kernel.heuristics
    (got,) = fd.execute([xt, z])
    assert_matches(got, xt.astype(np.float64) + z, np.float32)


def test_explain_shows_bigger_tiles_on_a_gpu_the_problem_fills_twice():
    x = np.zeros((7, 1024, 1024), np.float32)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.neg(fd.ops.permute(define_like(fd, x), [0, 2, 1])))
    assert "tile 64x64" in kernel_segment(fd.explain([x], target="a100")).heuristics
    assert "tile 32x32" in kernel_segment(fd.explain([x], target="h100")).heuristics
