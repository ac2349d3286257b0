"""Shared helpers of the Python tests: defining inputs like given numpy arrays, running a fusion,
and comparing with a numpy reference with a tolerance that depends on the output dtype."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import device_switch
from braze import DataType, FusionDefinition, dtypes, execute

BF16 = np.dtype(ml_dtypes.bfloat16)

# numpy (and ml_dtypes) dtype -> braze DataType: from braze's own table, so the tests never restate it.
NUMPY_TO_BRAZE = {dtypes.to_numpy_dtype(dtype): dtype for dtype in dtypes.ARRAY_NAMES}

# (rtol, atol) per output dtype: about two units in the last place, since the reference is rounded
# to the output dtype once and the evaluator may round once more inside an op.
TOLERANCE = {
    np.dtype(np.float64): (1e-12, 1e-12),
    np.dtype(np.float32): (1e-6, 1e-6),
    np.dtype(np.float16): (2e-3, 1e-3),
    BF16: (1.6e-2, 1e-2),
}


def misaligned(array):
    """The same values one element past an aligned address: no vector load of the array is aligned."""
    buffer = np.empty(array.size + 1, array.dtype)[1:]
    buffer[:] = array.ravel()
    return buffer.reshape(array.shape)


def strided(array):
    """The same values in every other element of the last dim of a wider array."""
    wide = np.zeros((*array.shape[:-1], 2 * array.shape[-1]), array.dtype)
    wide[..., ::2] = array
    return wide[..., ::2]


def is_floating(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype == BF16 or "float8" in dtype.name


def define_like(fd, array, static_sizes=False):
    """The fusion input for `array`, layout taken from its strides (nvFuser's from_pytorch)."""
    array = np.asarray(array)
    strides = [s // array.itemsize for s in array.strides]
    return fd.define_tensor(
        sizes=list(array.shape), strides=strides, dtype=NUMPY_TO_BRAZE[array.dtype], static_sizes=static_sizes
    )


def run(build, inputs):
    """Defines an input for each array (numbers become symbolic scalars), calls build(fd, *handles),
    adds what it returns as outputs, and executes on the test device (device_switch.py: the simulated
    device, or the GPU with BRAZE_TEST_DEVICE=cuda). Returns (outputs, fd)."""
    with FusionDefinition() as fd:
        handles = []
        for x in inputs:
            if isinstance(x, np.ndarray):
                handles.append(define_like(fd, x))
            else:
                dtype = DataType.Bool if isinstance(x, bool) else DataType.Int64 if isinstance(x, int) else DataType.Double
                handles.append(fd.define_scalar(None, dtype=dtype))
        outs = build(fd, *handles)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        for out in outs:
            fd.add_output(out)
    return device_switch.execute(fd, list(inputs)), fd


def as_reference(array):
    """An input as the reference sees it: float64 for floating types, int64 for integers."""
    array = np.asarray(array)
    if array.dtype == np.bool_:
        return array.copy()
    if is_floating(array.dtype):
        return array.astype(np.float64)
    return array.astype(np.int64)


def assert_matches(got, expected, dtype, what=""):
    """got (braze's output) has numpy dtype `dtype`, expected's shape, and expected's values once
    expected is rounded to `dtype` (within that dtype's tolerance)."""
    dtype = np.dtype(dtype)
    if not isinstance(got, np.ndarray):
        assert np.asarray(got).item() == np.asarray(expected).item(), what
        return
    assert got.dtype == dtype, f"{what}: dtype {got.dtype}, expected {dtype}"
    expected = np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    if is_floating(dtype):
        rtol, atol = TOLERANCE.get(dtype, (0.0, 0.0))  # fp8 outputs are rounded once: exact
        rounded = expected.astype(dtype).astype(np.float64)
        np.testing.assert_allclose(got.astype(np.float64), rounded, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected.astype(dtype), err_msg=what)


def execute_near_reference(fd, inputs, rtol):
    """Runs fd on the test device and checks every output against the reference evaluator's: within rtol,
    and an absolute tolerance of rtol times the output's largest magnitude (at least 1), as sums of many
    terms need. Returns the outputs."""
    outputs = device_switch.execute(fd, inputs)
    expected = execute.reference(fd, inputs)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(np.abs(want).max(initial=0), 1.0))
    return outputs


def kernels_of(fd, inputs):
    """The kernel segments of fd's plan for inputs on the test device, and the plan as text."""
    plan = device_switch.explain(fd, inputs)
    return [s for s in plan.segments if s.kind == "kernel"], str(plan)


def activation_derivative(fd, x, gelu):
    """The derivative of GELU (with erf) or SiLU at float tensor x, as a backward pass writes it."""
    if gelu:
        cdf = fd.ops.mul(fd.ops.add(fd.ops.erf(fd.ops.mul(x, 0.7071067811865476)), 1.0), 0.5)
        pdf = fd.ops.mul(fd.ops.exp(fd.ops.mul(fd.ops.mul(x, x), -0.5)), 0.3989422804014327)
        return fd.ops.add(cdf, fd.ops.mul(x, pdf))
    s = fd.ops.sigmoid(x)
    return fd.ops.mul(s, fd.ops.add(1.0, fd.ops.mul(x, fd.ops.sub(1.0, s))))
