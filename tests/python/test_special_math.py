"""Elementwise functions whose precision or type is easy to get wrong, against torch and closed forms:
nextafter in Half and BFloat16 (the neighbour in the narrow type, as torch steps), and erfinv / erfcinv
near 0 and near 1 (where a solver on erfc alone loses the low bits)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from braze import DataType, FusionDefinition, execute

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype, braze_dtype", [(torch.bfloat16, DataType.BFloat16), (torch.float16, DataType.Half)])
def test_nextafter_steps_in_the_narrow_type_as_torch(dtype, braze_dtype):
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=braze_dtype)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=braze_dtype)
        fd.add_output(fd.ops.nextafter(a, b))
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)  # every bit pattern
    targets = [torch.full_like(every, t) for t in (math.inf, -math.inf, 0.0, -0.0, 1.0)]
    targets.append(every[torch.randperm(every.numel(), generator=torch.Generator().manual_seed(0))])
    for target in targets:
        want = torch.nextafter(every, target)
        (got,) = fd.execute([every, target])
        (ref,) = execute.reference(fd, [every, target])
        assert got.dtype == dtype
        ref = torch.from_numpy(np.asarray(ref).view(np.int16)).view(dtype)
        for result in (got, ref):
            assert torch.equal(result.isnan(), want.isnan())
            assert torch.equal(result.view(torch.int16)[~want.isnan()], want.view(torch.int16)[~want.isnan()])


def _erfinv_series(y):
    # erfinv's Maclaurin series to y^5 at 50 digits (mpmath comes with torch): below 1e-3 the next term
    # is under 1e-19 of the value.
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(50):
        y = mpmath.mpf(y)
        return float(mpmath.sqrt(mpmath.pi) / 2 * (y + mpmath.pi / 12 * y**3 + 7 * mpmath.pi**2 / 480 * y**5))


@pytest.mark.parametrize("braze_dtype, np_dtype, ulps", [(DataType.Float, np.float32, 1), (DataType.Double, np.float64, 1)])
def test_erfinv_and_erfcinv_keep_full_precision_near_zero(braze_dtype, np_dtype, ulps):
    rng = np.random.default_rng(1)
    y = (np.where(rng.random(2000) < 0.5, -1, 1) * 10.0 ** rng.uniform(-30, -3, 2000)).astype(np_dtype)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=braze_dtype)
        u = fd.define_tensor(shape=[-1], contiguity=[True], dtype=braze_dtype)
        fd.add_output(fd.ops.erfinv(t))
        fd.add_output(fd.ops.erfcinv(u))
    z = (1 - y.astype(np.float64)).astype(np_dtype)  # erfcinv near 1: erfinv of 1 - z, which z holds exactly
    inv, cinv = fd.execute([y, z])
    want = np.array([_erfinv_series(float(v)) for v in y])
    want_c = np.array([_erfinv_series(1 - float(v)) for v in z])
    for got, expected in ((inv, want), (cinv, want_c)):
        expected = expected.astype(np_dtype)
        assert np.all(np.abs(got - expected) <= ulps * np.spacing(np.abs(expected))), (
            np.max(np.abs(got - expected) / np.spacing(np.abs(expected))))


@pytest.mark.parametrize("target", ["h100", "mi300x"])
def test_data_movement_keeps_an_e5m2_infinity(target):
    # A kernel that moves fp8 elements loads them as float and stores them back: the store must not
    # saturate (CUDA's satfinite turns inf into 57344, which is for casts).
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1.0, -np.inf, 2.0, np.inf], dtype=ml_dtypes.float8_e5m2)
    index = np.array([3, 1, 0, 2])
    moves = {
        "index_select": (lambda fd, t, i: fd.ops.index_select(t, i, 0), x[index]),
        "take_along_axis": (lambda fd, t, i: fd.ops.take_along_axis(t, i, 0), x[index]),
        "cat": (lambda fd, t, i: fd.ops.cat([t, t], 0), np.concatenate([x, x])),
        "pad": (lambda fd, t, i: fd.ops.pad(t, [1, 1]), np.pad(x, 1)),
    }
    for name, (build, want) in moves.items():
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float8_e5m2)
            i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
            fd.add_output(build(fd, t, i))
        (got,) = fd.execute([x, index], target=target)
        (ref,) = execute.reference(fd, [x, index])
        for result in (got, ref):
            np.testing.assert_array_equal(np.asarray(result).view(np.uint8), want.view(np.uint8), err_msg=name)
    with FusionDefinition() as fd:  # a cast saturates, as CUDA's satfinite conversion does
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.cast(t, DataType.Float8_e5m2))
    (got,) = fd.execute([np.array([np.inf, -np.inf], np.float32)], target=target)
    np.testing.assert_array_equal(got.astype(np.float32), [57344.0, -57344.0])


def test_a_cast_to_its_own_fp8_dtype_keeps_an_infinity_in_kernels_and_reference():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([np.inf, -np.inf, 1.0], np.float32).astype(ml_dtypes.float8_e5m2)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float8_e5m2)
        fd.add_output(fd.ops.cast(t, DataType.Float8_e5m2))
    for result in (fd.execute([x])[0], execute.reference(fd, [x])[0]):
        np.testing.assert_array_equal(np.asarray(result).view(np.uint8), x.view(np.uint8))
