"""The matmul scheduler from Python: the seeds' matmul patterns plan as one mma.sync kernel (the
dequantize prologue and the cast epilogue inside it) and equal the reference evaluator on the simulated
device; a GPU without mma.sync, and operand types mma.sync does not take, say why."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import braze
from braze import DataType, FusionDefinition

BF16 = ml_dtypes.bfloat16


def kernels(plan):
    return [s for s in plan.segments if s.kind == "kernel"]


def define_weight_int8_linear(fd, group=None, n=None, k=None):
    """Seed 003: bf16 activations x int8 weights [N, K] dequantized by a bf16 scale per output channel, or
    per channel and group of `group` K elements (scales [N, K / group]; the fusion then needs N and K)."""
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8)
    wf = fd.ops.cast(w, DataType.Float)
    if group is None:
        s = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        wf = fd.ops.mul(wf, fd.ops.broadcast_in_dim(s, shape=w.shape(), broadcast_dims=[0]))
    else:
        s = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        grouped = fd.ops.reshape(wf, [n, k // group, group])
        scale = fd.ops.broadcast_in_dim(s, shape=[n, k // group, group], broadcast_dims=[0, 1])
        wf = fd.ops.reshape(fd.ops.mul(grouped, scale), [n, k])
    wd = fd.ops.cast(wf, DataType.BFloat16)
    fd.add_output(fd.ops.cast(fd.ops.linear(x, wd), DataType.BFloat16))


@pytest.mark.parametrize("group", [None, 128])
@pytest.mark.parametrize("m", [1, 7, 64])
def test_weight_only_int8_linear_is_one_kernel(m, group):
    # A few rows take the GEMV schedule (16-byte loads of the int8 weights along K), more the tensor cores;
    # N = 97 leaves a block's last columns empty.
    n, k = 97, 384
    with FusionDefinition() as fd:
        define_weight_int8_linear(fd, group, n, k)
    rng = np.random.default_rng(m)
    scale_shape = (n,) if group is None else (n, k // group)
    inputs = [rng.standard_normal((m, k)).astype(BF16), rng.integers(-128, 128, (n, k)).astype(np.int8),
              (rng.random(scale_shape) * 0.01).astype(BF16)]
    (segment,) = kernels(fd.explain(inputs))
    assert segment.scheduler == "matmul"
    assert "linear" in segment.ops and segment.ops.count("cast") == 3
    if m <= 16:
        assert "matmul gemv:" in segment.heuristics and "16-element loads along K" in segment.heuristics
    else:
        assert "mma.m16n8k16" in segment.heuristics
    (out,) = fd.execute(inputs)
    expected = braze.execute.reference(fd, inputs)[0]
    np.testing.assert_allclose(out.astype(np.float64), np.asarray(expected).astype(np.float64), rtol=1e-2, atol=1e-2)
    if m > 16:
        assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in fd.last_cuda_code()


def test_xla_s8_bmm_with_an_s8_result_is_one_kernel_bit_exact():
    # Seed: s8 x s8 -> s8; int32 accumulation, then the wrap the cast to int8 asks for.
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Int8)
        b = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Int8)
        fd.add_output(fd.ops.cast(fd.ops.matmul(a, b), DataType.Int8))
    rng = np.random.default_rng(1)
    inputs = [rng.integers(-128, 128, (3, 17, 70)).astype(np.int8), rng.integers(-128, 128, (3, 70, 9)).astype(np.int8)]
    (segment,) = kernels(fd.explain(inputs))
    assert segment.scheduler == "matmul" and "mma.m16n8k32" in segment.heuristics
    (out,) = fd.execute(inputs)
    np.testing.assert_array_equal(out, braze.execute.reference(fd, inputs)[0])
    exact = (inputs[0].astype(np.int64) @ inputs[1].astype(np.int64)).astype(np.int8)  # wraps as int32 then int8 do
    np.testing.assert_array_equal(out, exact)


def test_without_mma_the_plan_says_why():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.matmul(a, b))
    inputs = [np.ones((8, 16), BF16), np.ones((16, 8), BF16)]
    plan = fd.explain(inputs, target="mi300x")
    (segment,) = plan.segments
    assert segment.scheduler is None
    assert any("not an NVIDIA GPU" in why for _, why in segment.refusals)
    (out,) = fd.execute(inputs, target="mi300x")  # the host step on the simulated device
    np.testing.assert_array_equal(out.astype(np.float32), np.full((8, 8), 16.0, np.float32))


def test_float32_operands_are_refused_by_name():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.matmul(a, b))
    (segment,) = fd.explain([np.ones((4, 4), np.float32), np.ones((4, 4), np.float32)]).segments
    assert segment.scheduler is None
    assert any(kind == "matmul" and "Float operands; mma.sync takes bf16, f16 or (u)int8" in why
               for kind, why in segment.refusals)


def test_integer_accumulators_wrap_as_int32():
    # 70000 products of 255 * 255 sum past 2**32: the int32 accumulator wraps, as the reference's exact
    # sum converted to Int32 does.
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.UInt8)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.UInt8)
        fd.add_output(fd.ops.matmul(a, b))
    k = 70000
    inputs = [np.full((1, k), 255, np.uint8), np.full((k, 1), 255, np.uint8)]
    assert kernels(fd.explain(inputs))[0].scheduler == "matmul"
    (out,) = fd.execute(inputs)
    exact = k * 255 * 255
    assert exact > 2**32
    assert out.dtype == np.int32 and int(out[0, 0]) == (exact + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(out, braze.execute.reference(fd, inputs)[0])


def test_integer_linear_adds_its_bias_in_integers():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8)
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
        fd.add_output(fd.ops.linear(x, w, b))
    k = 2048  # sums past 2**24, where a float add would round
    inputs = [np.full((3, k), 127, np.int8), np.full((5, k), 127, np.int8), np.array([1, 2, 3, 4, 5], np.int32)]
    assert kernels(fd.explain(inputs))[0].scheduler == "matmul"
    (out,) = fd.execute(inputs)
    np.testing.assert_array_equal(out, braze.execute.reference(fd, inputs)[0])
    assert int(out[0, 0]) == 127 * 127 * k + 1


def test_empty_outputs_and_refused_result_dtypes():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.matmul(a, b))
    (out,) = fd.execute([np.ones((0, 16), BF16), np.ones((16, 8), BF16)])
    assert out.shape == (0, 8)
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.matmul(a, b, DataType.Double))
    (segment,) = fd.explain([np.ones((4, 16), BF16), np.ones((16, 8), BF16)]).segments
    assert any("a Double result of BFloat16 operands" in why for _, why in segment.refusals)
