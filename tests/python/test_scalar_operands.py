"""A tensor op computes in its tensors' type, as nvFuser and torch do: a scalar operand of another type (a
Python float beside a Float tensor, a large int beside a Float tensor, an Int64 scalar beside an Int32
tensor) is converted to that type first, in the reference and in every kernel alike."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from braze import DataType, FusionDefinition
from braze import execute as bx

X = np.array([0.1, 0.3, 1 / 3, 16777216.0, 16777218.0, 1e-46, 3.4e38, -0.1, 0.0, 1.0], dtype=np.float32)


def _run(define, inputs, maxulp=0):
    with FusionDefinition() as fd:
        define(fd)
    got = fd.execute(inputs)
    want = bx.reference(fd, inputs)
    for g, w in zip(got, want):
        if maxulp:
            np.testing.assert_array_max_ulp(g, w, maxulp=maxulp)
        else:
            np.testing.assert_array_equal(g, w)
    return fd, got


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "div", "atan2", "fmod"])
@pytest.mark.parametrize("constant", [0.1, 1 / 3, 16777217, -0.1, 3.4e38])
def test_a_python_number_beside_a_float_tensor_computes_in_float32(op, constant):
    def define(fd):
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(getattr(fd.ops, op)(t, constant))

    # A kernel divides by a scalar through its reciprocal (README: within 1.5 ulp of the division).
    _, (got,) = _run(define, [X], maxulp=2 if op == "div" else 0)
    want = getattr(torch, op)(torch.from_numpy(X), torch.tensor(np.float32(constant))).numpy()
    if op in ("div", "atan2"):
        # A division by a scalar multiplies by its reciprocal (README: within 1.5 ulp); atan2 is torch's
        # float32 approximation. A Double 1/3 or -0.1 would be many ulps off where it matters (X = 3.4e38).
        np.testing.assert_array_max_ulp(got, want, maxulp=2)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["eq", "sub", "mul", "lt"])
def test_a_double_scalar_input_beside_a_float_tensor_computes_in_float32(op):
    def define(fd):
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        s = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(getattr(fd.ops, op)(t, s))

    for value in [0.1, 1 / 3, 16777217.0]:
        fd, (got,) = _run(define, [X, value])
        np.testing.assert_array_equal(got, getattr(torch, op)(torch.from_numpy(X), value).numpy())
    assert "cast(S1, dtype=Float)" in fd.fusion_ir()


def test_an_int64_scalar_beside_an_int32_tensor_wraps_to_int32():
    x = np.array([1, -5, 2**31 - 1], dtype=np.int32)

    def define(fd):
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
        fd.add_output(fd.ops.bitwise_and(t, 2**32 + 3))
        fd.add_output(fd.ops.add(t, 2**32 + 1))

    _, (anded, added) = _run(define, [x])
    assert anded.dtype == np.int32 and added.dtype == np.int32
    np.testing.assert_array_equal(anded, x & 3)
    np.testing.assert_array_equal(added, (x.astype(np.int64) + 1).astype(np.int32))


def test_a_python_float_beside_an_int_tensor_is_a_float32_operand():
    x = np.array([0, 1, 16777216, -3], dtype=np.int32)

    def define(fd):
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
        fd.add_output(fd.ops.add(t, 0.1))
        fd.add_output(fd.ops.mul(t, 1 / 3))

    _, (added, scaled) = _run(define, [x])
    tx = torch.from_numpy(x)
    np.testing.assert_array_equal(added, (tx + 0.1).numpy())
    np.testing.assert_array_equal(scaled, (tx * (1 / 3)).numpy())


def test_threshold_lerp_and_addcmul_take_their_scalars_in_the_compute_type():
    y = np.linspace(-1, 1, X.size).astype(np.float32)

    def define(fd):
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        u = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.threshold(t, 0.1, -1.0))
        fd.add_output(fd.ops.lerp(t, u, 1 / 3))
        fd.add_output(fd.ops.addcmul(t, t, u, 0.1))

    _, (thr, lerp, acm) = _run(define, [X, y])
    tx, ty = torch.from_numpy(X), torch.from_numpy(y)
    np.testing.assert_array_equal(thr, torch.threshold(tx, 0.1, -1.0).numpy())
    # lerp and addcmul round twice in float32 in torch and once in braze's kernels: compare the values
    # a float32 weight gives, computed exactly, against a Double weight's.
    x64, y64 = X.astype(np.float64), y.astype(np.float64)
    w, v = np.float64(np.float32(1 / 3)), np.float64(np.float32(0.1))
    with np.errstate(over="ignore"):  # 3.4e38 * 1 * 0.1 + 3.4e38 is inf in float32, as in braze
        np.testing.assert_array_max_ulp(lerp, (x64 + w * (y64 - x64)).astype(np.float32), maxulp=1)
        np.testing.assert_array_max_ulp(acm, (x64 + v * x64 * y64).astype(np.float32), maxulp=1)


def test_the_printed_script_writes_the_constant_as_defined():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(t, 0.1))
    script = repr(fd)
    assert "fd.define_scalar(0.1, dtype=DataType.Double)" in script
    assert "add(T0, 0.10000000149011612)" in fd.fusion_ir()


@pytest.mark.parametrize(
    "dtype, value, held",
    [
        (DataType.Float, 0.1, float(np.float32(0.1))),
        (DataType.Float, 1e40, np.inf),
        (DataType.Half, 0.1, float(np.float16(0.1))),
        (DataType.Half, 1e5, np.inf),
        (DataType.BFloat16, 0.1, float(torch.tensor(0.1, dtype=torch.bfloat16))),
        (DataType.Int8, 300, 44),
        (DataType.UInt8, -1, 255),
        (DataType.Int16, 40000, -25536),
        (DataType.Int32, 2**31, -(2**31)),
    ],
)
def test_a_scalar_input_holds_its_dtypes_value(dtype, value, held):
    """Beside a Double tensor (which computes in float64) and as a scalar result: the kernel argument, the
    host's scalar arithmetic and the reference each take the value the scalar's dtype holds."""

    def define(fd):
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Double)
        s = fd.define_scalar(dtype=dtype)
        fd.add_output(fd.ops.add(t, s))
        fd.add_output(fd.ops.cast(s, DataType.Double))

    _, (added, scalar) = _run(define, [np.zeros(3), value])
    np.testing.assert_array_equal(added, np.full(3, held))
    assert scalar == held


@pytest.mark.parametrize(
    "dims_dtype, zero_dtype, x, y",
    [
        (DataType.Float, DataType.Double, np.array([1.0, 0.1, 16777216.0], np.float32), np.array(0.1)),
        (DataType.Int32, DataType.Int64, np.array([2**31 - 1, 5, -3], np.int32), np.array(1, np.int64)),
        (DataType.Int32, DataType.Double, np.array([2, 5, -3], np.int32), np.array(0.25)),
        (DataType.Bool, DataType.Int64, np.array([True, False, True]), np.array(7, np.int64)),
    ],
)
def test_a_0d_tensor_promotes_as_torch_and_nvfuser_promote_it(dims_dtype, zero_dtype, x, y):
    """A 0-d tensor (a CPU scalar tensor, as Thunder passes them) changes the type of tensors with dims only
    where its category is higher, and is then converted to the op's type, as a scalar is."""

    def define(fd):
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dims_dtype)
        s = fd.define_tensor(shape=[], contiguity=[], dtype=zero_dtype)
        fd.add_output(fd.ops.add(t, s))
        fd.add_output(fd.ops.eq(t, s))

    _, (added, equal) = _run(define, [x, y])
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    want = tx + ty
    assert str(added.dtype) == str(want.dtype).replace("torch.", "")
    np.testing.assert_array_equal(added, want.numpy())
    np.testing.assert_array_equal(equal, (tx == ty).numpy())


def test_a_0d_tensor_with_only_scalars_beside_it_computes_in_its_type():
    def define(fd):
        t = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
        fd.add_output(fd.ops.sub(t, 0.1))
        fd.add_output(fd.ops.eq(t, 0.1))
        fd.add_output(fd.ops.threshold(t, 0.1, 3.0))

    _, (diff, equal, thresholded) = _run(define, [np.array(0.1, np.float32)])
    assert diff == 0.0 and equal and thresholded == 3.0


def test_threshold_and_clamp_of_bfloat16_compare_in_float():
    import ml_dtypes

    x = np.array([0.1, 0.5, -0.1], ml_dtypes.bfloat16)  # bf16(0.1) is 0.10009765625, above float32(0.1)

    def define(fd):
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.threshold(t, 0.1, 3.0))
        fd.add_output(fd.ops.clamp(t, -0.1, 0.1))
        fd.add_output(fd.ops.le(t, 0.1))

    _, (thr, clamped, le) = _run(define, [x])
    tx = torch.tensor(x.astype(np.float32), dtype=torch.bfloat16)
    np.testing.assert_array_equal(thr.astype(np.float32), torch.threshold(tx, 0.1, 3.0).float().numpy())
    np.testing.assert_array_equal(le, [False, False, True])
    np.testing.assert_array_equal(clamped.astype(np.float32), np.clip(x.astype(np.float32), np.float32(-0.1), np.float32(0.1)).astype(ml_dtypes.bfloat16).astype(np.float32))


def test_an_integer_tensor_in_float_math_is_converted_to_float_first():
    """Int32 + Float, Int64 == Float and sin(Int32) convert the integers to float32 first, as torch does."""
    ints = np.array([16777217, 3, -16777219, 2**31 - 1], np.int32)
    floats = np.array([1.0, 0.5, -1.0, 0.0], np.float32)

    def define(fd):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(a, b))
        fd.add_output(fd.ops.eq(fd.ops.cast(a, DataType.Int64), fd.ops.add(b, 16777216.0)))
        fd.add_output(fd.ops.sin(a))

    _, (added, equal, sine) = _run(define, [ints, floats])
    ta, tb = torch.from_numpy(ints), torch.from_numpy(floats)
    np.testing.assert_array_equal(added, (ta + tb).numpy())
    np.testing.assert_array_equal(equal, (ta.to(torch.int64) == tb + 16777216.0).numpy())
    np.testing.assert_array_max_ulp(sine, torch.sin(ta).numpy(), maxulp=1)


def test_a_scalar_input_cast_by_the_definition_then_converted_stays_a_launch_argument():
    """cast(s, Int32) beside a Float tensor is cast again to Float: the kernel casts its argument twice, so
    a new value of s reuses the plan and is read anew."""

    def define(fd):
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        s = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.add(t, fd.ops.cast(s, DataType.Int32)))

    x = np.zeros(3, np.float32)
    fd, (first,) = _run(define, [x, 2.7])
    np.testing.assert_array_equal(first, [2, 2, 2])
    (second,) = fd.execute([x, -5.9])
    np.testing.assert_array_equal(second, [-5, -5, -5])
    assert fd.explain([x, 9.5]).cache == "hit"
