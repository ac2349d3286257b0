"""Row statistics (var, var_mean, welford) as torch computes them: a row of equal values has its value for a
mean and a variance of exactly 0, whichever scheduler reduces it (inner persistent, inner reduction over a
long row, outer, several dims), so a layer norm of it is exactly 0 rather than an ulp of the value times
rstd (up to 0.9 before); exactly while the sums of the deviations are exact, short of some 2^24 elements.
Random rows stay within float rounding of the float64 result."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from braze import DataType, FusionDefinition
from braze import execute as bx

SHAPES = [((3, 31), [1]), ((2, 768), [1]), ((2, 1000), [1]), ((1, 8191), [1]), ((1, 40000), [1]), ((1000, 3), [0]),
          ((4099, 2), [0]), ((5, 7, 9), [0, 2]), ((300, 300), [0, 1]), ((2, 3, 0), [2]), ((0, 4), [0])]


def _statistic(kind, dims, rank):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=DataType.Float)
        if kind == "var_mean":
            var, mean = fd.ops.var_mean(x, dims=dims, correction=1, keepdim=False)
            fd.add_output(var)
            fd.add_output(mean)
        elif kind == "var":
            fd.add_output(fd.ops.var(x, dims=dims, correction=0))
        else:
            mean, m2, _ = fd.ops.welford(x, dims=dims)
            fd.add_output(mean)
            fd.add_output(m2)
    return fd


@pytest.mark.parametrize("kind", ["var_mean", "var", "welford"])
@pytest.mark.parametrize("shape, dims", SHAPES, ids=[f"{'x'.join(map(str, s))}-{d}" for s, d in SHAPES])
def test_rows_of_equal_values_have_their_value_and_no_variance(kind, shape, dims):
    fd = _statistic(kind, dims, len(shape))
    for value in (1000.1, 12345.6, 1e5 + 0.3, -7.77e7, 0.1):
        x = np.full(shape, value, np.float32)
        for got, want in zip(fd.execute([x]), bx.reference(fd, [x])):
            np.testing.assert_array_equal(got, want)  # exact: NaN for an empty mean, 0 for its squares


@pytest.mark.parametrize("hidden", [64, 768, 1600, 8192])
def test_layer_norm_of_a_constant_row_is_zero(hidden):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(x, dims=[1], correction=0, keepdim=True)
        fd.add_output(fd.ops.mul(fd.ops.sub(x, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5))))
    x = np.full((2, hidden), 3000.7, np.float32)
    y, = fd.execute([x])
    np.testing.assert_array_equal(y, torch.nn.functional.layer_norm(torch.from_numpy(x), (hidden,)).numpy())


@pytest.mark.parametrize("shape, dims", SHAPES[:8], ids=[f"{'x'.join(map(str, s))}-{d}" for s, d in SHAPES[:8]])
@pytest.mark.parametrize("offset", [0.0, 1e4, -3e5])
def test_random_rows_stay_within_float_rounding(shape, dims, offset):
    x = (np.random.default_rng(7).standard_normal(shape) + offset).astype(np.float32)
    var, mean = _statistic("var_mean", dims, len(shape)).execute([x])
    want_var, want_mean = torch.var_mean(torch.from_numpy(x).double(), dim=dims, correction=1)
    np.testing.assert_allclose(var, want_var.numpy(), rtol=1e-6)
    np.testing.assert_allclose(mean, want_mean.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dims", [[1], [0]])
def test_rows_near_the_float_limits_and_with_infinities_follow_the_reference(dims):
    """The first mean sums x / n, so rows whose plain sum overflows keep a finite mean (they gave NaN, before
    that inf), and stands where the deviations overflow (their sum gave NaN or inf); an infinity in a row is
    its mean, as the reference and torch.mean give."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(x, dims=dims, correction=0, keepdim=False)
        fd.add_output(var)
        fd.add_output(mean)
        welford_mean, m2, _ = fd.ops.welford(x, dims=dims)
        fd.add_output(welford_mean)
        fd.add_output(m2)
    for row in ([1e38] * 4, [3e38, 3e38], [2e38, 3e38, -1e38], [1, np.inf, 2], [1, -np.inf, 2], [np.inf, -np.inf],
                [1, np.nan], [3e38, 3e38, -3e38], [3e38, -3e38, 3e38], [3e38, 3e38, -3e38, -3e38]):
        x = np.array([row], np.float32)
        x = x if dims == [1] else np.ascontiguousarray(x.T)
        for got, want in zip(fd.execute([x]), bx.reference(fd, [x])):
            np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
