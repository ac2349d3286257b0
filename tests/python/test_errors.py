"""Mistakes give the builtin exception that fits (ValueError, TypeError, IndexError, RuntimeError)
and a message naming the op (or the input's index), the operand and what was expected."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from braze import DataType, FusionDefinition
from braze import execute as _execute


def _definition_error(build, exc, match):
    with FusionDefinition() as fd:
        with pytest.raises(exc, match=match):
            build(fd)


def _t(fd, shape=(-1, -1), dtype=DataType.Float):
    return fd.define_tensor(shape=list(shape), contiguity=True, dtype=dtype)


DEFINITION_ERRORS = [
    ("reduction-dim-out-of-range", lambda fd: fd.ops.sum(_t(fd), dims=[5]), IndexError, r"sum: dim 5 is out of range"),
    ("var-dim-out-of-range", lambda fd: fd.ops.var(_t(fd), dims=[-3]), IndexError, r"var: dim -3"),
    ("permute-not-a-permutation", lambda fd: fd.ops.permute(_t(fd), [0, 0]), ValueError, r"permute: .*not a permutation"),
    ("permute-wrong-length", lambda fd: fd.ops.permute(_t(fd), [0]), ValueError, r"permute: dims \[0\] has 1 entries"),
    ("cat-mismatched-shapes", lambda fd: fd.ops.cat([_t(fd, (2, 3)), _t(fd, (4, 5))], dim=1), ValueError,
     r"cat: dim 0 of T1 \[4, 5\] does not match T0 \[2, 3\]"),
    ("cat-mismatched-dtypes", lambda fd: fd.ops.cat([_t(fd), _t(fd, dtype=DataType.Half)]), TypeError,
     r"cat: all tensors need dtype Float"),
    ("cat-manual-padding", lambda fd: fd.ops.cat([_t(fd)], 0, manual_padding=True), ValueError, "manual_padding"),
    ("add-broadcast-extents-differ", lambda fd: fd.ops.add(_t(fd, (3,)), _t(fd, (2, 4))), ValueError,
     r"add: dim 1 has extent 3 in T2 \[1\(b\), 3\] but 4 in T1 \[2, 4\]"),
    ("add-static-extents-differ", lambda fd: fd.ops.add(_t(fd, (2, 3)), _t(fd, (2, 4))), ValueError,
     r"add: dim 1 has extent 3 in T0"),
    ("where-condition-not-bool", lambda fd: fd.ops.where(_t(fd), 1.0, 2.0), TypeError, r"where: the condition T0 must be Bool"),
    ("bitwise-and-of-floats", lambda fd: fd.ops.bitwise_and(_t(fd), _t(fd)), TypeError,
     r"bitwise_and: expected integer or bool operands"),
    ("silu-of-ints", lambda fd: fd.ops.silu(_t(fd, dtype=DataType.Int32)), TypeError,
     r"silu: expected a floating operand, but T0 has dtype Int32"),
    ("int-to-negative-power", lambda fd: fd.ops.pow(_t(fd, dtype=DataType.UInt8), -1), ValueError,
     r"pow: T0 has dtype UInt8, and integers to negative integer powers are not allowed \(got -1\)"),
    ("numpy-array-as-operand", lambda fd: fd.ops.add(np.ones(3), _t(fd)), TypeError,
     r"add: lhs must be a Tensor, a Scalar or a Python number, got a numpy array"),
    ("string-as-operand", lambda fd: fd.ops.exp("x"), TypeError, r"exp: arg must be .* got str 'x'"),
    ("scalar-where-tensor-expected", lambda fd: fd.ops.sum(fd.define_scalar(1.0)), TypeError,
     r"sum: arg must be a Tensor, got Scalar S0"),
    ("shape-entry-not-int", lambda fd: fd.ops.reshape(_t(fd), [2, 1.5]), TypeError,
     r"reshape: new_shape\[1\] must be an int"),
    ("broadcast-in-dim-bad-dims", lambda fd: fd.ops.broadcast_in_dim(_t(fd, (-1,)), [3, 4], [2]), IndexError,
     r"broadcast_in_dim: broadcast_dims\[0\] = 2 is out of range"),
    ("squeeze-non-broadcast-dim", lambda fd: fd.ops.squeeze(_t(fd), [0]), ValueError, r"squeeze: dim 0 of T0"),
    ("reshape-wrong-element-count", lambda fd: fd.ops.reshape(_t(fd, (2, 3)), [4, 2]), ValueError,
     r"reshape: T0 \[2, 3\] has 6 elements but new_shape has 8"),
    ("matmul-inner-dims", lambda fd: fd.ops.matmul(_t(fd, (2, 3)), _t(fd, (4, 5))), ValueError, r"matmul: inner dims differ"),
    ("imag-of-real", lambda fd: fd.ops.imag(_t(fd)), TypeError, r"imag: T0 has the real dtype DataType.Float"),
    ("quantize-bad-dtype", lambda fd: fd.ops.quantize(_t(fd), 0.5, dtype=DataType.Float), TypeError,
     r"quantize: the output dtype must be Int8"),
    ("cast-without-dtype", lambda fd: fd.ops.cast(_t(fd), "float"), TypeError, r"cast: dtype must be a DataType"),
    ("define-tensor-contiguity-length", lambda fd: fd.define_tensor(shape=[-1, -1], contiguity=[True]), ValueError,
     r"define_tensor: contiguity has 1 entries but shape \[-1, -1\] has 2"),
    ("define-tensor-contiguous-broadcast", lambda fd: fd.define_tensor(shape=[1], contiguity=[True]), ValueError,
     r"define_tensor: dim 0 has size 1, a broadcast dim, so its contiguity must be None"),
    ("define-tensor-bad-stride-order", lambda fd: fd.define_tensor(shape=[-1, -1], stride_order=[0, 0]), ValueError,
     r"define_tensor: stride_order \[0, 0\] is not a permutation"),
    ("define-tensor-is-cpu-rank-1", lambda fd: fd.define_tensor(shape=[-1], is_cpu=True), ValueError,
     r"is_cpu=True is only allowed for 0-dim tensors"),
    ("define-scalar-complex", lambda fd: fd.define_scalar(1 + 2j), TypeError, r"define_scalar: \(1\+2j\) is complex"),
    ("define-tensor-complex", lambda fd: fd.define_tensor(shape=[-1], dtype=DataType.ComplexFloat), TypeError,
     r"define_tensor: dtype is DataType.ComplexFloat: braze has no complex dtypes"),
    ("slice-negative-start", lambda fd: fd.ops.slice(_t(fd), [-1, 0], [2, 2]), ValueError,
     r"slice: start_indices\[0\] = -1 must be >= 0"),
    ("slice-end-before-start", lambda fd: fd.ops.slice(_t(fd), [3, 4], [1, 2]), ValueError,
     r"slice: end_indices\[0\] = 1 must be >= start_indices\[0\] = 3"),
    ("define-scalar-bad-value", lambda fd: fd.define_scalar("1"), TypeError, r"define_scalar: value must be a bool, int or float"),
    ("define-scalar-past-int64", lambda fd: fd.define_scalar(2**64), ValueError,
     r"the integer constant 18446744073709551616 does not fit braze's Int \(64-bit"),
    ("operand-past-int64", lambda fd: fd.ops.add(_t(fd, dtype=DataType.Int), -2**63 - 1), ValueError,
     r"the integer constant -9223372036854775809 does not fit braze's Int"),
    *[(f"{name}-float-{arg}", build, TypeError, rf"{name}: {arg} must be an int or an integer Scalar, got float")
      for name, arg, build in [
          ("triu", "diagonal", lambda fd: fd.ops.triu(_t(fd), 0.5)),
          ("topk", "k", lambda fd: fd.ops.topk(_t(fd), 2.5, dim=1)),
          ("select", "index", lambda fd: fd.ops.select(_t(fd), 1.9, 0)),
          ("iota", "length", lambda fd: fd.ops.iota(2.9)),
      ]],
    ("alias-dtype-mismatch", lambda fd: fd.add_output(fd.ops.cast(_t(fd), DataType.Half), alias_input=fd.input_handles()[0]),
     TypeError, r"add_output: T1 of dtype Half cannot alias input T0 of dtype Float"),
]


@pytest.mark.parametrize("build, exc, match", [c[1:] for c in DEFINITION_ERRORS], ids=[c[0] for c in DEFINITION_ERRORS])
def test_definition_error(build, exc, match):
    _definition_error(build, exc, match)


def test_operands_from_another_definition():
    with FusionDefinition() as other:
        foreign = other.define_tensor(shape=[-1])
    with FusionDefinition() as fd:
        with pytest.raises(ValueError, match=r"add: rhs T0 belongs to another FusionDefinition"):
            fd.ops.add(fd.define_tensor(shape=[-1]), foreign)


def _three_inputs():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.BFloat16)
        c = fd.define_tensor(shape=[4, 1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.add(fd.ops.add(a, fd.ops.broadcast(b, [True, False])), c))
    return fd


GOOD = [np.ones((4, 3), np.float32), np.ones(3, ml_dtypes.bfloat16), np.ones((4, 1), np.float32)]


def _replace(index, value):
    inputs = list(GOOD)
    inputs[index] = value
    return inputs


EXECUTE_ERRORS = [
    ("count", GOOD[:2], ValueError, r"expected 3 inputs, got 2"),
    ("dtype", _replace(1, np.ones(3, np.float32)), TypeError, r"input 1 \(T1\): expected dtype BFloat16, got Float"),
    ("rank", _replace(0, np.ones(3, np.float32)), ValueError, r"input 0 \(T0\): expected rank 2"),
    ("static-size", _replace(2, np.ones((5, 1), np.float32)), ValueError,
     r"input 2 \(T2\): dim 0 was defined with static size 4, got 5"),
    ("broadcast-size", _replace(2, np.ones((4, 2), np.float32)), ValueError,
     r"input 2 \(T2\): dim 1 was defined as a broadcast dim \(size 1\), got size 2"),
    ("not-contiguous", _replace(0, np.ones((4, 6), np.float32)[:, ::2]), ValueError,
     r"input 0 \(T0\): dim 1 was defined as contiguous"),
    ("transposed-not-declared", _replace(0, np.ones((3, 4), np.float32).T), ValueError,
     r"input 0 \(T0\): dim 1 was defined as contiguous"),
    ("unsupported-numpy-dtype", _replace(0, np.ones((4, 3), np.uint16)), TypeError,
     r"input 0: numpy dtype uint16 is not supported"),
    ("list-of-lists", _replace(0, "not an array"), TypeError, r"input 0: expected a numpy array or a Python number, got str"),
    ("scalar-for-tensor", _replace(1, 2.0), TypeError, r"input 1 \(T1\): expected a BFloat16 tensor of rank 1, got the scalar"),
    ("int-past-int64", _replace(1, 2**70), ValueError, r"input 1: the integer 1180591620717411303424 does not fit braze's Int"),
]


@pytest.mark.parametrize("inputs, exc, match", [c[1:] for c in EXECUTE_ERRORS], ids=[c[0] for c in EXECUTE_ERRORS])
def test_execute_input_error(inputs, exc, match):
    fd = _three_inputs()
    fd.execute(GOOD)  # the good inputs run
    with pytest.raises(exc, match=match):
        fd.execute(inputs)


def test_expanded_dim_needs_stride_zero():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[None, True])
        fd.add_output(fd.ops.set(t))
    with pytest.raises(ValueError, match=r"input 0 \(T0\): dim 0 was defined as an expanded broadcast \(stride 0\)"):
        fd.execute([np.ones((3, 4), np.float32)])


def test_float_for_an_integer_scalar_input():
    with FusionDefinition() as fd:
        s = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.add(s, 1))
    with pytest.raises(TypeError, match=r"input 0 \(S0\): expected a Int64 scalar, got the float 2.5"):
        fd.execute([2.5])


def test_a_bool_scalar_input_takes_only_true_false_0_or_1():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        fd.add_output(fd.ops.add(a, fd.ops.cast(fd.define_scalar(dtype=DataType.Bool), DataType.Int)))
    for flag, added in ((True, 1), (1, 1), (0, 0), (False, 0)):
        np.testing.assert_array_equal(fd.execute([np.array([10, 20]), flag])[0], [10 + added, 20 + added])
    with pytest.raises(TypeError, match=r"input 1 \(S1\): expected a Bool scalar, got 2"):
        fd.execute([np.array([10, 20]), 2])


def test_an_integer_scalar_input_past_int64():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(a, fd.define_scalar(dtype=DataType.Int)))
    np.testing.assert_array_equal(fd.execute([np.ones(2, np.float32), 2**63 - 1])[0], np.full(2, 2.0**63, np.float32))
    for value in (2**63, -2**63 - 1):
        with pytest.raises(ValueError, match=rf"input 1: the integer {value} does not fit braze's Int"):
            fd.execute([np.ones(2, np.float32), value])


def test_execute_while_open():
    with FusionDefinition() as fd:
        with pytest.raises(RuntimeError, match="still open"):
            fd.execute([])


def test_select_counts_a_negative_index_from_the_end_and_names_one_past_it():
    # torch.select(x, 1, -1) is the last column; -5 of 4 columns is out of range, reported as given.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.select(x, fd.define_scalar(dtype=DataType.Int), 1))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for index in (-4, -1, 0, 3):
        np.testing.assert_array_equal(fd.execute([a, index])[0], a[:, index])
    for index in (-5, 4):
        with pytest.raises(IndexError, match=rf"dim 1 of T0, size 4\): index {index} is out of bounds"):
            fd.execute([a, index])


def test_a_vector_input_of_another_length_is_named():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        s = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.mul(fd.ops.reshape(t, fd.define_vector(2)), s))
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(fd.execute([a, 2.0, [3, 8]])[0], a.reshape(3, 8) * 2)
    for sizes in ([3, 8, 1], [24]):
        with pytest.raises(ValueError, match=rf"input 2: expected a list of 2 ints \(define_vector\(2\)\), got {len(sizes)}"):
            fd.execute([a, 2.0, sizes])


def _vector_then_tensor():
    with FusionDefinition() as fd:
        v = fd.define_vector(3)
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(t, fd.ops.full(v[:2], 1.0, DataType.Float)))
    return fd


@pytest.mark.parametrize("inputs, error, match", [
    (lambda x: [[2, 3, 0]], ValueError, r"execute: expected 2 inputs \(each define_vector input one list\), got 1"),
    (lambda x: [x, 2, 3, 1], ValueError, r"expected 2 inputs \(each define_vector input one list\), got 4"),
    (lambda x: [[x], [2, 3], 1], ValueError, r"expected 2 inputs"),
    (lambda x: [np.array([2, 3, 0]), x], TypeError, r"input 0: expected a list of 3 ints \(define_vector\(3\)\), got ndarray"),
    (lambda x: [[2, 3, 0], [x]], ValueError, r"input 1: a list, but only a define_vector input takes one"),
    (lambda x: [[2, True, 0], x], TypeError, r"input 0\[1\]: a bool, expected an int"),
    (lambda x: [[2, 3, 0], x.ravel()], ValueError, r"input 1 \(T3\): expected rank 2"),  # the caller's place, not 3
], ids=["too-few", "spread-by-hand", "wrapped", "array", "tensor-in-a-list", "bool", "numbered-as-passed"])
def test_vector_inputs_take_one_list_each_and_messages_count_as_passed(inputs, error, match):
    fd = _vector_then_tensor()
    x = np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(fd.execute([[2, 3, 0], x])[0], np.ones((2, 3), np.float32))
    with pytest.raises(error, match=match):
        fd.execute(inputs(x))


def test_messages_count_inputs_as_passed_past_drawn_seeds():
    """A random op's seed and offset are inputs the caller does not pass: a message names the caller's place."""
    with FusionDefinition() as fd:
        r = fd.ops.uniform(0.0, 1.0, [3], dtype=DataType.Float)
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(r, t))
    assert fd.execute([np.zeros(3, np.float32)])[0].shape == (3,)
    with pytest.raises(ValueError, match=r"^input 0 \(T\d+\): expected rank 1"):
        fd.execute([np.zeros((1, 3), np.float32)])


@pytest.mark.parametrize("low, high, dtype, which", [
    (0.0, float("inf"), DataType.Float, "maxval inf"),
    (float("-inf"), 0.0, DataType.Float, "minval -inf"),
    (-1e30, 1e30, DataType.Half, "minval -1e\\+30"),          # finite as a Double, not as a Half
    (-1.7e308, 1.7e308, DataType.Float, "minval -1.7e\\+308"),
])
def test_uniform_refuses_bounds_its_dtype_does_not_hold(low, high, dtype, which):
    # torch's uniform_ refuses them ("from is out of bounds"); drawn, they gave all minval, NaN or -inf.
    with FusionDefinition() as fd:
        with pytest.raises(ValueError, match=rf"uniform: {which} is out of bounds for {dtype.name}"):
            fd.ops.uniform(low, high, [4], dtype=dtype, rng_seed=0, rng_offset=0)


@pytest.mark.parametrize("op", ["rand_like", "randn_like"])
def test_random_like_an_integer_tensor_is_refused_by_its_own_name(op):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        with pytest.raises(TypeError, match=rf"{op}: draws numbers of arg's dtype, which must be floating"):
            getattr(fd.ops, op)(t, rng_seed=1, rng_offset=0)


def test_a_definition_by_id_keeps_its_vector_inputs():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(x, fd.define_vector(2)))
        fd.add_output(fd.ops.reshape(x, fd.define_vector(2)))
    same = FusionDefinition(fd.id())
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert [o.shape for o in same.execute([a, [4, 3], [6, 2]])] == [(4, 3), (6, 2)]
    with pytest.raises(ValueError, match=r"input 1: expected a list of 2 ints \(define_vector\(2\)\), got 1"):
        same.execute([a, [4], [3, 6, 2]])


def test_every_path_numbers_inputs_as_passed_in_size_messages_too():
    """The reference, the kernels' source and explain renumber as execute does, and a size message's "from
    input N" (a cast of an input that does not fit) is the caller's place too."""
    with FusionDefinition() as fd:
        v = fd.define_vector(3)
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(fd.ops.cast(a, DataType.Double), b))
        fd.add_output(fd.ops.full(v, 1.0, DataType.Float))
    sizes = [np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32)]
    rank = [np.zeros(6, np.float32), np.zeros((2, 4), np.float32)]
    for run in (fd.execute, lambda i: _execute.reference(fd, i), fd.cuda_code_for, fd.explain):
        with pytest.raises(ValueError, match=r"add: dim 1 has size 3 in T\d+ \(from input 1, T3\)"):
            run([[1, 2, 3], *sizes])
        with pytest.raises(ValueError, match=r"^input 1 \(T3\): expected rank 2"):
            run([[1, 2, 3], *rank])


@pytest.mark.parametrize("zero_point, dtype", [(300, DataType.Int8), (-129, DataType.Int8), (-5, DataType.UInt8),
                                               (256, DataType.UInt8), (np.int64(300), DataType.Int8)])
def test_a_quantize_zero_point_outside_the_dtype_is_refused(zero_point, dtype):
    """torch.quantize_per_tensor refuses it; saturated, it moved every value to the dtype's bound."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        with pytest.raises(ValueError, match=rf"quantize: zero_point {zero_point} is outside {dtype.name}'s range"):
            fd.ops.quantize(x, 0.1, zero_point, dtype=dtype)


@pytest.mark.parametrize("scale_a, scale_b, bias, match", [
    ([3, 5], [1, 5], None, r"scale_a must be one element or \[M, 1\] = \[3, 1\], got T2 of shape \[3, 5\]"),
    ([1, 5], [1, 5], None, r"scale_a must be one element or \[M, 1\] = \[3, 1\], got T2 of shape \[1, 5\]"),
    ([3, 1], [3, 1], None, r"scale_b must be one element or \[1, N\] = \[1, 5\], got T3 of shape \[3, 1\]"),
    ([3, 1], [1, 5], [1], r"bias must have N = 5 entries, got T4 of 1"),
])
def test_scaled_mm_refuses_scales_and_biases_torch_refuses(scale_a, scale_b, bias, match):
    def define(shape, dtype):
        return fd.define_tensor(shape=shape, contiguity=[None if s == 1 else True for s in shape], dtype=dtype)

    with FusionDefinition() as fd:
        a = define([3, 16], DataType.Float8_e4m3fn)
        b = define([16, 5], DataType.Float8_e4m3fn)
        sa, sb = define(scale_a, DataType.Float), define(scale_b, DataType.Float)
        bv = None if bias is None else define(bias, DataType.BFloat16)
        with pytest.raises(ValueError, match=match):
            fd.ops.scaled_mm(a, b, sa, sb, bias=bv, out_dtype=DataType.Float)


def test_a_numpy_integer_zero_point_past_int32_is_refused():
    """It wrapped to 0 silently (a Python int was refused)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        with pytest.raises(ValueError, match=r"quantize: zero_point 1099511627776 does not fit Int32"):
            fd.ops.quantize(x, 0.5, np.int64(2**40), dtype=DataType.Int32)


def test_every_input_number_of_a_message_is_the_callers():
    """An overlap message names two inputs, and a torch leaf check after drawn seeds was renumbered twice."""
    with FusionDefinition() as fd:
        v = fd.define_vector(2)
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(b, v))
        fd.add_output(fd.ops.add(a, b), alias_input=a)
    buf = np.arange(8, dtype=np.float32)
    with pytest.raises(ValueError) as caught:
        fd.execute([[2, 2], buf[0:4], buf[2:6]])
    numbers = [int(n) for n in __import__("re").findall(r"(?<![\w-])input (\d+)", str(caught.value))]
    assert numbers and set(numbers) <= {1, 2}, str(caught.value)
    torch = pytest.importorskip("torch")
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        r = fd.ops.uniform(0.0, 1.0, [4], dtype=DataType.Float)
        t1, t2, t3 = (fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float) for _ in range(3))
        fd.add_output(fd.ops.add(t0, r))
        fd.add_output(fd.ops.add(fd.ops.add(t1, t2), t3), alias_input=t3)
    with pytest.raises(ValueError, match=r"^input 3 \(T\d+\) is updated in place"):
        fd.execute([torch.zeros(4), torch.zeros(4), torch.zeros(4), torch.zeros(4, requires_grad=True)])
