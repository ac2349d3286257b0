"""Defining fusions: define_tensor's overloads and layouts, scalars, vectors, handles, operators,
the definition scope, and introspection. Layouts are checked through repr(fd), the printed
define_tensor call, which is the contract nvFuser scripts rely on."""

from __future__ import annotations

import numpy as np
import pytest

import braze
from braze import DataType, FusionDefinition


def _define(**kwargs):
    with FusionDefinition() as fd:
        t = fd.define_tensor(**kwargs)
        fd.add_output(t)
    return fd


def _define_line(fd) -> str:
    return next(line.strip() for line in repr(fd).splitlines() if "define_tensor" in line)


def test_datatype_has_nvfuser_names_and_int_alias():
    names = ["Null", "Bool", "Int8", "UInt8", "Int16", "Int32", "Int64", "Half", "BFloat16", "Float", "Double",
             "Float8_e4m3fn", "Float8_e5m2", "Float8_e4m3fnuz", "Float8_e5m2fnuz"]
    assert [d.name for d in DataType] == names
    assert DataType.Int is DataType.Int64
    assert str(DataType.Float) == "DataType.Float"


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(shape=[-1, 1, -1], contiguity=True), "shape=[-1, 1, -1], contiguity=[True, None, True]"),
        (dict(shape=[-1, -1]), "shape=[-1, -1], contiguity=[False, False]"),  # nvFuser's default is False
        (dict(shape=[-1, 1], contiguity=False), "shape=[-1, 1], contiguity=[False, None]"),
        (dict(shape=[4, -1], contiguity=[True, False]), "shape=[4, -1], contiguity=[True, False]"),
        (dict(shape=[-1, -1], contiguity=[None, True]), "shape=[-1, -1], contiguity=[None, True]"),  # expanded dim 0
        (dict(shape=[], contiguity=[]), "shape=[], contiguity=[]"),
    ],
)
def test_define_tensor_contiguity(kwargs, expected):
    assert expected in _define_line(_define(**kwargs))


def test_single_bool_contiguity_is_placed_in_allocation_order():
    # stride_order [0, 2, 1]: dim 1 outermost, then dim 2, then dim 0; the size-1 dim 1 gets None.
    line = _define_line(_define(shape=[-1, 1, -1], contiguity=True, stride_order=[0, 2, 1]))
    assert "contiguity=[None, True, True]" in line and "stride_order=[0, 2, 1]" in line


def test_contiguity_list_with_stride_order_is_in_allocation_order():
    line = _define_line(_define(shape=[-1, -1], contiguity=[False, True], stride_order=[0, 1]))
    assert "contiguity=[False, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1]" in line


def test_negative_stride_order_entries_count_from_the_end():
    assert "stride_order=[0, 1]" in _define_line(_define(shape=[-1, -1], contiguity=True, stride_order=[-2, -1]))


def test_compute_tensor_descriptor_matches_nvfuser_example():
    contiguity, stride_order = braze.compute_tensor_descriptor([2, 1, 3, 1, 4], [24, 4, 8, 4, 2])
    assert contiguity == [True, True, None, None, False]
    assert stride_order == [4, 2, 3, 1, 0]


def test_compute_contiguity_uses_logical_order():
    assert braze.compute_contiguity([2, 1, 3], [3, 3, 1]) == [True, None, True]
    assert braze.compute_contiguity([4, 3], [0, 1]) == [None, True]


@pytest.mark.parametrize(
    "sizes, strides, static, expected",
    [
        ([2, 1, 3, 1, 4], [24, 4, 8, 4, 2], False,
         "shape=[-1, 1, -1, 1, -1], contiguity=[True, True, None, None, False], dtype=DataType.Float, is_cpu=False, "
         "stride_order=[4, 2, 3, 1, 0]"),
        ([2, 1, 3, 1, 4], [24, 4, 8, 4, 2], True, "shape=[2, 1, 3, 1, 4]"),
        ([4, 5], [0, 1], False, "shape=[-1, -1], contiguity=[None, True]"),  # stride 0: expanded
        ([3, 4], [1, 3], False, "shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, "
         "stride_order=[0, 1]"),  # column-major
    ],
)
def test_define_tensor_from_sizes_and_strides(sizes, strides, static, expected):
    assert expected in _define_line(_define(sizes=sizes, strides=strides, static_sizes=static))


def test_define_scalar_infers_and_casts():
    with FusionDefinition() as fd:
        b, i, f = fd.define_scalar(True), fd.define_scalar(3), fd.define_scalar(2.5)
        cast = fd.define_scalar(1, dtype=DataType.Double)
        numpy_int = fd.define_scalar(np.int32(7))
        symbolic = fd.define_scalar(dtype=DataType.Double)
        legacy = fd.define_constant(4)
    assert (b.dtype, i.dtype, f.dtype) == (DataType.Bool, DataType.Int64, DataType.Double)
    assert (b.value, i.value, f.value) == (True, 3, 2.5)
    assert cast.dtype == DataType.Double and cast.value == 1.0 and isinstance(cast.value, float)
    assert numpy_int.value == 7 and numpy_int.dtype == DataType.Int64
    assert symbolic.value is None and fd.inputs() == [symbolic.index]
    assert legacy.value == 4
    assert "fd.define_scalar(None, dtype=DataType.Double)" in repr(fd)


def test_define_vector_of_size_makes_symbolic_inputs():
    with FusionDefinition() as fd:
        v = fd.define_vector(3)
    assert len(v) == 3 and all(s.dtype == DataType.Int64 and s.value is None for s in v)
    assert fd.inputs() == [s.index for s in v]


def test_define_vector_of_values_mixes_constants_and_scalars():
    with FusionDefinition() as fd:
        s = fd.define_scalar(dtype=DataType.Int)
        v = fd.define_vector([16, s, -1], dtype=DataType.Int)
    assert [x.value for x in v] == [16, None, -1]
    assert v[1].name == s.name


def test_tensor_handle():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 7], contiguity=True, dtype=DataType.BFloat16)
        sizes = t.shape()
        d1 = t.size(1)
    assert (t.ndim, t.dtype, t.name, t.index) == (2, DataType.BFloat16, "T0", 0)
    assert repr(t) == "Tensor(index=0, ndim=2)"
    assert len(sizes) == 2 and sizes[0].value is None and sizes[1].value == 7  # static extents are constants
    assert d1.value == 7
    assert {t: 1}[t] == 1  # hashable although == records an op


OPERATORS = [
    (lambda a, b: a + b, "add(T0, T1)"),
    (lambda a, b: a - b, "sub(T0, T1)"),
    (lambda a, b: a * b, "mul(T0, T1)"),
    (lambda a, b: a / b, "div(T0, T1)"),  # nvFuser: `/` is div (C semantics), not truediv
    (lambda a, b: a ** b, "pow(T0, T1)"),
    (lambda a, b: a % b, "mod(T0, T1)"),
    (lambda a, b: a == b, "eq(T0, T1)"),
    (lambda a, b: a != b, "ne(T0, T1)"),
    (lambda a, b: a < b, "lt(T0, T1)"),
    (lambda a, b: a <= b, "le(T0, T1)"),
    (lambda a, b: a > b, "gt(T0, T1)"),
    (lambda a, b: a >= b, "ge(T0, T1)"),
    (lambda a, b: a & b, "bitwise_and(T0, T1)"),
    (lambda a, b: a | b, "bitwise_or(T0, T1)"),
    (lambda a, b: a ^ b, "bitwise_xor(T0, T1)"),
    (lambda a, b: a << b, "bitwise_left_shift(T0, T1)"),
    (lambda a, b: a >> b, "bitwise_right_shift(T0, T1)"),
    (lambda a, b: -a, "neg(T0)"),
    (lambda a, b: abs(a), "abs(T0)"),
    (lambda a, b: 2 - a, "sub(2, T0)"),  # reflected operators keep the operand order
    (lambda a, b: 1.5 * a, "mul(1.5, T0)"),
]


@pytest.mark.parametrize("fn, expr", OPERATORS, ids=[e for _, e in OPERATORS])
def test_operators_record_nvfuser_ops(fn, expr):
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Int32)
        b = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Int32)
        out = fn(a, b)
        fd.add_output(out)
    assert isinstance(out, braze.Tensor)
    assert f"= {expr}" in fd.fusion_ir()


def test_scalar_arithmetic_gives_scalars():
    with FusionDefinition() as fd:
        s = fd.define_scalar(dtype=DataType.Int)
        r = (s + 1) * 2
    assert isinstance(r, braze.Scalar) and r.dtype == DataType.Int64


def test_handles_have_no_truth_value():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1])
        with pytest.raises(TypeError, match="no truth value"):
            bool(t == t)


def test_ops_outside_the_definition_raise():
    fd = FusionDefinition()
    with pytest.raises(RuntimeError, match="not open"):
        fd.define_tensor(shape=[-1])
    with fd:
        t = fd.define_tensor(shape=[-1])
    with pytest.raises(RuntimeError, match="completed definition"):
        fd.ops.exp(t)
    with pytest.raises(RuntimeError, match="completed definition"):
        fd.add_output(t)


def test_two_open_definitions_stay_separate():
    with FusionDefinition() as outer:
        a = outer.define_tensor(shape=[-1])
        with FusionDefinition() as inner:
            b = inner.define_tensor(shape=[-1])
            inner.add_output(inner.ops.exp(b))
        outer.add_output(outer.ops.neg(a))
    assert len(outer.inputs()) == 1 and len(inner.inputs()) == 1
    assert "neg" in outer.fusion_ir() and "exp" not in outer.fusion_ir()


def test_subclass_definition_is_built_on_first_execute():
    class Double(FusionDefinition):
        def definition(self):
            t = self.define_tensor(shape=[-1], contiguity=True)
            self.add_output(self.ops.mul(t, 2.0))

    fd = Double()
    (out,) = fd.execute([np.arange(3, dtype=np.float32)])
    np.testing.assert_array_equal(out, [0, 2, 4])


def test_inputs_outputs_and_fusion_ir():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=True)
        s = fd.define_scalar(dtype=DataType.Double)
        out = fd.ops.mul(t, s)
        fd.add_output(out)
    # nvFuser's answer: the state indices; braze's handles come from input_handles / output_handles.
    assert fd.inputs() == [0, 1] and fd.outputs() == [out.index]
    assert [v.name for v in fd.input_handles()] == ["T0", "S1"]
    assert [v.name for v in fd.output_handles()] == [out.name]
    ir = fd.fusion_ir()
    # The Double scalar is converted to the Float tensor's type before the multiply.
    assert ir.startswith("Inputs:") and "S2 Float = cast(S1, dtype=Float)" in ir and "mul(T0, S2)" in ir


def test_last_cuda_code_before_and_after_execute():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))
    with pytest.raises(RuntimeError, match="nothing has been executed yet"):
        fd.last_cuda_code()
    x = np.arange(8, dtype=np.float32)
    (out,) = fd.execute([x])
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)
    code = fd.last_cuda_code()
    assert 'extern "C" __global__' in code and "braze_s0_pointwise" in code
    assert fd.cuda_code_for([x]) == code


def test_contiguity_is_stored_per_logical_dim():
    # The C++ TensorView keeps contiguity per logical dim; define_tensor takes it in allocation
    # order when a stride order is given. stride_order [0, 1, 2]: dim 2 is outermost, dim 0 innermost.
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 1, 5], contiguity=[False, None, True], stride_order=[0, 1, 2])
    handle = t._val
    assert handle.contiguity == [True, None, False]
    assert handle.stride_order == [0, 1, 2]
    assert handle.static_shape == [-1, 1, 5]
    assert not handle.is_cpu


def test_a_typed_constant_holds_what_its_dtype_holds():
    """define_scalar(value, dtype) stores the value a kernel of that dtype holds (an int wrapped to its width,
    a float truncated and saturated with NaN as 0, or rounded to float32): the reference, the simulated kernel
    and a later fusion whose constant is that value all agree (they share the kernel's source)."""
    import numpy as np

    from braze import execute as bx

    cases = [(2**32 + 5, DataType.Int32, 5.0), (300, DataType.UInt8, 44.0), (200, DataType.Int8, -56.0),
             (float("nan"), DataType.Int64, 0.0), (1e40, DataType.Int32, 2.0**31 - 1), (0.1, DataType.Float, float(np.float32(0.1)))]
    x = np.zeros(2, np.float64)
    for value, dtype, held in cases:
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Double)
            fd.add_output(fd.ops.add(t, fd.define_scalar(value, dtype=dtype)))
        (got,) = fd.execute([x])
        (want,) = bx.reference(fd, [x])
        np.testing.assert_array_equal(got, np.full(2, held))
        np.testing.assert_array_equal(want, np.full(2, held))


def test_threads_running_a_subclass_definition_first_build_it_once():
    import threading
    import time

    class Exp(FusionDefinition):
        def definition(self):
            x = self.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
            time.sleep(0.01)  # long enough for the other threads to arrive while it builds
            self.add_output(self.ops.exp(x))

    fd, errors = Exp(), []
    start = threading.Barrier(3)

    def first_execute():
        start.wait()
        try:
            np.testing.assert_allclose(fd.execute([np.zeros(3, np.float32)])[0], 1.0)
        except Exception as error:  # noqa: BLE001 - collected for the assertion below
            errors.append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=first_execute) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
