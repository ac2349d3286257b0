"""fd.execute on host inputs: every dtype, layouts (strided, transposed, reversed, expanded),
scalar and vector inputs, in-place (aliased) outputs, scalar outputs, and the keywords kept for
nvFuser compatibility."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import braze
from braze import DataType, FusionDefinition
from braze import execute as bx
from helpers import NUMPY_TO_BRAZE, define_like, run


def _copy_fusion(dtype, **define):
    with FusionDefinition() as fd:
        t = fd.define_tensor(dtype=dtype, **define)
        fd.add_output(fd.ops.set(t))
    return fd


@pytest.mark.parametrize("np_dtype", list(NUMPY_TO_BRAZE), ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips(np_dtype):
    rng = np.random.default_rng(3)
    x = rng.uniform(-4, 4, size=(3, 5)).astype(np_dtype)
    fd = _copy_fusion(NUMPY_TO_BRAZE[np.dtype(np_dtype)], shape=[-1, -1], contiguity=True)
    (out,) = fd.execute([x])
    assert out.dtype == x.dtype and out.shape == x.shape
    np.testing.assert_array_equal(out.view(np.uint8), x.view(np.uint8))  # bit-exact


def test_transposed_input_with_stride_order():
    x = np.arange(12, dtype=np.float32).reshape(3, 4).T  # shape (4, 3), strides (1, 4): column-major
    fd = _copy_fusion(DataType.Float, shape=[-1, -1], contiguity=[True, True], stride_order=[0, 1])
    np.testing.assert_array_equal(fd.execute([x])[0], x)


def test_sliced_input_declared_non_contiguous():
    x = np.arange(30, dtype=np.float32).reshape(5, 6)[1:4, ::2]
    fd = _copy_fusion(DataType.Float, shape=[-1, -1], contiguity=False)
    np.testing.assert_array_equal(fd.execute([x])[0], x)


def test_reversed_input_is_copied():
    x = np.arange(10, dtype=np.int32)[::-1]
    fd = _copy_fusion(DataType.Int32, shape=[-1], contiguity=False)
    np.testing.assert_array_equal(fd.execute([x])[0], x)


def test_expanded_input_keeps_stride_zero():
    row = np.arange(5, dtype=np.float32)
    x = np.broadcast_to(row, (4, 5))  # strides (0, 4)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[None, True])
        fd.add_output(fd.ops.sum(t, dims=[0]))
    np.testing.assert_allclose(fd.execute([x])[0], 4 * row)


def test_static_and_broadcast_dims():
    x = np.ones((2, 1, 3), np.float32)
    fd = _copy_fusion(DataType.Float, shape=[2, 1, -1], contiguity=True)
    assert fd.execute([x])[0].shape == (2, 1, 3)


def test_zero_dim_and_empty_tensors():
    with FusionDefinition() as fd:
        s = fd.define_tensor(shape=[], contiguity=[], is_cpu=True)
        e = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.add_output(fd.ops.mul(s, 2.0))
        fd.add_output(fd.ops.sum(e, dims=[0]))
    zero_d, summed = fd.execute([np.array(1.5, np.float32), np.zeros((0, 3), np.float32)])
    assert zero_d.shape == () and zero_d == 3.0
    np.testing.assert_array_equal(summed, np.zeros(3, np.float32))
    assert fd.execute([np.float32(1.5), np.zeros((0, 3), np.float32)])[0] == 3.0  # a numpy scalar for a 0-D tensor


@pytest.mark.parametrize("shape", [(0, 3, 4), (3, 0, 4), (3, 4, 0), (2, 0), (0, 5), (3, 0, 0)], ids=str)
def test_a_zero_size_dim_anywhere(shape):
    """A zero-size dim in any position: pointwise ops give empty outputs, a sum over every subset of dims
    gives zeros where its output has elements, a normalization over the last dim gives an empty output,
    and all of it is the reference's (no kernel indexes a space without elements)."""
    rank = len(shape)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=DataType.Float)
        fd.add_output(fd.ops.exp(fd.ops.permute(x, list(reversed(range(rank))))))
        for count in range(1, rank + 1):
            for dims in itertools.combinations(range(rank), count):
                fd.add_output(fd.ops.sum(fd.ops.mul(x, x), dims=list(dims)))
        var, mean = fd.ops.var_mean(x, dims=[rank - 1], correction=0, keepdim=True)
        fd.add_output(fd.ops.mul(fd.ops.sub(x, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5))))
    inputs = [np.zeros(shape, np.float32)]
    got = fd.execute(inputs)
    want = bx.reference(fd, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dim", [0, 1])
def test_a_cat_of_inputs_all_empty_along_its_dim(dim):
    """Its result is empty along dim too: alone, summed over dim (zeros) and summed over the other dim."""
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        c = fd.ops.cat([a, fd.ops.neg(b)], dim)
        fd.add_output(c)
        fd.add_output(fd.ops.sum(c, dims=[dim]))
        fd.add_output(fd.ops.sum(fd.ops.exp(c), dims=[1 - dim]))
    shape = (0, 3) if dim == 0 else (3, 0)
    inputs = [np.zeros(shape, np.float32), np.zeros(shape, np.float32)]
    got = fd.execute(inputs)
    want = bx.reference(fd, inputs)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("value", [2, 2.5, True, np.float32(2.5), np.int64(2), np.array(2.5), ml_dtypes.bfloat16(2.5)],
                         ids=["int", "float", "bool", "np.float32", "np.int64", "0-d array", "bfloat16"])
def test_symbolic_scalar_inputs(value):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Double)
        s = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.mul(t, s))
    (out,) = fd.execute([np.ones(3), value])
    np.testing.assert_array_equal(out, np.full(3, float(value)))


def test_vector_inputs_are_flattened():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=True)
        shape = fd.define_vector(2)
        fd.add_output(fd.ops.broadcast_in_dim(t, shape, [1]))
    (out,) = fd.execute([np.arange(3, dtype=np.float32), [4, 3]])
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(3, dtype=np.float32), (4, 3)))


def test_scalar_outputs_are_python_numbers():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=True)
        s = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.size(t, 1))
        fd.add_output(fd.ops.mul(s, 2))
        fd.add_output(fd.ops.lt(s, 0.0))
    n, doubled, negative = fd.execute([np.zeros((2, 9), np.float32), -1.25])
    assert (n, doubled, negative) == (9, -2.5, True)
    assert type(n) is int and type(doubled) is float and type(negative) is bool


def test_input_returned_as_output():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.add_output(t)
    np.testing.assert_array_equal(fd.execute([x])[0], x)


@pytest.mark.parametrize("layout", ["contiguous", "reversed"])
def test_aliased_output_updates_the_input_in_place(layout):
    x = np.arange(5, dtype=np.float32)
    view = x if layout == "contiguous" else x[::-1]
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=layout == "contiguous")
        fd.add_output(fd.ops.add(t, 1.0), alias_input=t)
        fd.add_output(fd.ops.mul(t, 2.0))
    before = view.copy()
    outputs = fd.execute([view])
    assert len(outputs) == 1  # like nvFuser, the in-place output is not returned
    np.testing.assert_array_equal(outputs[0], before * 2)
    np.testing.assert_array_equal(view, before + 1)


def test_read_only_input_cannot_be_updated_in_place():
    x = np.broadcast_to(np.float32(1), (4,))
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[None])
        fd.add_output(fd.ops.add(t, 1.0), alias_input=t)
    with pytest.raises(ValueError, match="input 0: T0 is updated in place .* read-only"):
        fd.execute([x])


def test_outputs_are_independent_arrays():
    x = np.ones(4, np.float32)
    (a,), _ = run(lambda fd, t: fd.ops.neg(t), [x])
    a[0] = 7  # writable, and owned by the result
    (b,), _ = run(lambda fd, t: fd.ops.neg(t), [x])
    assert b[0] == -1 and x[0] == 1


def test_bf16_outputs_are_ml_dtypes_arrays():
    x = np.linspace(-2, 2, 7).astype(ml_dtypes.bfloat16)
    (out,), _ = run(lambda fd, t: fd.ops.cast(fd.ops.mul(t, t), DataType.BFloat16), [x])
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out, (x.astype(np.float64) ** 2).astype(ml_dtypes.bfloat16))


def test_cpu_dlpack_objects_are_read_without_copy():
    class CpuTensor:  # what a torch CPU tensor looks like to braze
        def __init__(self, array):
            self._array = array

        def __dlpack__(self, **kwargs):
            return self._array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self._array.__dlpack_device__()

    x = np.arange(4, dtype=np.float32)
    (out,), _ = run(lambda fd, t: fd.ops.add(t, 1.0), [x])
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.add(define_like(fd, x), 1.0))
    np.testing.assert_array_equal(fd.execute([CpuTensor(x)])[0], out)


class _CudaArray:
    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 3}


class _CudaDlpack:
    def __dlpack__(self, **kwargs):
        raise AssertionError("must not be called")

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA


def test_gpu_arrays_without_dlpack_are_refused_clearly():
    fd = _copy_fusion(DataType.Float, shape=[-1], contiguity=True)
    with pytest.raises(RuntimeError, match="input 0: a GPU array without DLPack"):
        fd.execute([_CudaArray()])


def test_a_cuda_object_that_fails_dlpack_is_named():
    # It says it lives on a CUDA device, so the GPU path takes it, and cannot read it through DLPack.
    fd = _copy_fusion(DataType.Float, shape=[-1], contiguity=True)
    with pytest.raises((TypeError, RuntimeError), match="input 0"):
        fd.execute([_CudaDlpack()])


def test_execute_keywords():
    fd = _copy_fusion(DataType.Float, shape=[-1], contiguity=True)
    x = np.ones(2, np.float32)
    fd.execute([x], device="cpu", profile=False, print_repro=False, _enable_options=[])  # accepted, ignored
    with pytest.raises(RuntimeError, match="GPU"):
        fd.execute([x], device="cuda:0")
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        fd.execute([x], no_such_option=True)


def test_numpy_inputs_run_through_the_fusion_cache():
    """numpy inputs take the GPU's execute path on the simulated device: the first call plans and lowers,
    a second with the same signature finds the prepared plan (explain says "hit"), a new shape that keeps
    the heuristics' choice launches the kernels lowered already."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.mul(x, x), dims=[1]))
    a = np.linspace(-1, 1, 4000 * 64, dtype=np.float32).reshape(4000, 64)
    assert fd.explain([a]).cache == "new kernel"
    (first,) = fd.execute([a])
    plan = fd.explain([a])
    assert plan.cache == "hit", plan.cache_why
    (second,) = fd.execute([a])
    np.testing.assert_allclose(second, (a * a).sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(first, second)
    assert fd.explain([np.ones((6000, 64), np.float32)]).cache == "new launch parameters"


def test_a_float_constant_is_the_float_it_rounds_to_in_kernels():
    # 0.05 as a Float scale is 0.0500000007...: 1.375 / it is just under 27.5 and quantizes to 27, as the
    # reference and the emitted 0.05f literal compute. The simulator once used the double 0.05 (28).
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.quantize(a, 0.05, dtype=DataType.Int8))
    x = np.array([1.375, -0.375, 1.0], np.float32)
    (out,) = fd.execute([x])
    np.testing.assert_array_equal(out, braze.execute.reference(fd, [x])[0])
    assert out.tolist() == [27, -7, 20]


def test_inputs_that_are_views_of_one_buffer():
    """Two inputs that are views of one array (the q and k halves of a qkv buffer, adjacent windows,
    overlapping windows, windows with a gap): the simulated device gives each the memory it spans, and the
    sum is numpy's."""
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[False, False], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[False, False], dtype=DataType.Float)
        fd.add_output(fd.ops.add(a, b))
    buf = np.arange(100, dtype=np.float32)
    qkv = buf[:24].reshape(3, 8)
    for x, y in [(qkv[:, :4], qkv[:, 4:]), (buf[0:12].reshape(3, 4), buf[12:24].reshape(3, 4)),
                 (buf[0:12].reshape(3, 4), buf[1:13].reshape(3, 4)), (buf[0:12].reshape(3, 4), buf[13:25].reshape(3, 4)),
                 (buf[12:24].reshape(3, 4), buf[0:12].reshape(3, 4))]:
        (out,) = fd.execute([x, y])
        np.testing.assert_array_equal(out, x + y)


def test_a_fusion_reading_more_tensors_than_a_kernel_takes_is_split():
    """A sum of 3900 inputs (a gradient-norm over every parameter) in one kernel needs 3901 pointer
    parameters, 31 KiB, past what NVRTC accepts with the scalars beside them: the segmenter cuts it."""
    n = 3900
    xs = [np.full((3, 5), i % 7, np.float32) for i in range(n)]
    with FusionDefinition() as fd:
        ts = [fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float) for _ in range(n)]
        acc = ts[0]
        for t in ts[1:]:
            acc = fd.ops.add(acc, t)
        fd.add_output(acc)
    (out,) = fd.execute(xs)
    np.testing.assert_array_equal(out, sum(x.astype(np.float64) for x in xs))
    plan = fd.explain(xs)
    assert len(plan.segments) == 2
    assert all(len(s.inputs) + len(s.outputs) <= 3840 for s in plan.segments)
    assert "a kernel's parameters hold at most 3840" in str(plan)
