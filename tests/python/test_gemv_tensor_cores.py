"""The GEMV on tensor cores: a linear of 2 to 64 rows against weights read along K runs as mma.sync with A
and B swapped (the weights fill the mma's rows), each lane loading 16 bytes of its weight rows per group
of K and the mma's K order permuted to match. Every case is checked against the reference evaluator on
the simulator, at odd sizes (K not whole groups, N not whole tiles, rows not whole tiles of 8), with
split-K, batch dims read as rows, strided and misaligned activations, and an epilogue."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import braze
from braze import DataType, FusionDefinition

from test_matmul import define_int8_linear_with_bias, define_weight_int8_linear, kernels

BF16 = ml_dtypes.bfloat16


def check_against_reference(fd, inputs, target=None, exact=False):
    outs = fd.execute(inputs, target=target) if target else fd.execute(inputs)
    for out, want in zip(outs, braze.execute.reference(fd, inputs)):
        got, want = np.asarray(out).astype(np.float64), np.asarray(want).astype(np.float64)
        if exact:
            np.testing.assert_array_equal(got, want)
        else:  # sums in another order, rounded to bf16
            np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


def int8_linear_inputs(rows_shape, k, n, seed, group=None):
    rng = np.random.default_rng(seed)
    scale_shape = (n,) if group is None else (n, k // group)
    return [rng.standard_normal((*rows_shape, k)).astype(BF16), rng.integers(-128, 128, (n, k)).astype(np.int8),
            (rng.random(scale_shape) * 0.01).astype(BF16)]


@pytest.mark.parametrize("m", [2, 9, 16, 33, 64])
@pytest.mark.parametrize("k, n", [(384, 97), (104, 40), (100, 40), (8232, 40)])
def test_weight_only_int8_rows_on_tensor_cores(m, k, n):
    with FusionDefinition() as fd:
        define_weight_int8_linear(fd)
    inputs = int8_linear_inputs((m,), k, n, m + k)
    (segment,) = kernels(fd.explain(inputs))
    assert "matmul gemv on tensor cores: mma.m16n8k16" in segment.heuristics
    # 40 columns are 3 blocks for 132 SMs: K = 8232 splits among blocks (a partial last group too).
    assert ("K split among" in segment.heuristics) == (k == 8232)
    check_against_reference(fd, inputs)
    code = fd.last_cuda_code()
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in code
    # Rows of whole 16-byte chunks (K % 8 == 0): the activations' fragments come straight from 16-byte
    # loads; else, and in a last group past K, from values loaded one by one.
    packed = "braze_mma_m16n8k16_bf16_vw(acc" in code
    assert packed == (k % 8 == 0)
    assert ("braze_mma_m16n8k16_bf16(acc" in code) == (not packed or k % 64 != 0)


def test_group_scales_on_tensor_cores():
    with FusionDefinition() as fd:
        define_weight_int8_linear(fd, 128, 97, 512)
    inputs = int8_linear_inputs((12,), 512, 97, 3, group=128)
    (segment,) = kernels(fd.explain(inputs))
    assert "gemv on tensor cores" in segment.heuristics
    check_against_reference(fd, inputs)


@pytest.mark.parametrize("dtype, np_dtype", [(DataType.BFloat16, BF16), (DataType.Half, np.float16)])
def test_a_16_bit_linear_with_bias_and_an_epilogue(dtype, np_dtype):
    # bf16 / f16 weights: 8 per 16-byte load, groups of 32 K (K = 200 leaves a partial one); the bias and
    # tanh(.) + residual in the epilogue.
    m, k, n = 12, 200, 50
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        r = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        y = fd.ops.add(fd.ops.tanh(fd.ops.linear(x, w, b)), r)
        fd.add_output(fd.ops.cast(y, dtype))
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((m, k)).astype(np_dtype), (rng.standard_normal((n, k)) * 0.1).astype(np_dtype),
              rng.standard_normal(n).astype(np_dtype), rng.standard_normal((m, n)).astype(np_dtype)]
    (segment,) = kernels(fd.explain(inputs))
    assert "gemv on tensor cores" in segment.heuristics and "8-element loads along K" in segment.heuristics
    check_against_reference(fd, inputs)


def test_an_integer_linear_on_tensor_cores_wraps_as_int32():
    # s8 x s8: mma.m16n8k32 (runs of 4 K a lane), int32 sums that wrap as the reference's, the bias added in
    # integers; split among blocks (5 columns), the splits summed in int32 too.
    with FusionDefinition() as fd:
        define_int8_linear_with_bias(fd)
    rng = np.random.default_rng(9)
    k = 8200
    inputs = [rng.integers(-128, 128, (6, k)).astype(np.int8), rng.integers(-128, 128, (5, k)).astype(np.int8),
              rng.integers(-1000, 1000, 5).astype(np.int32)]
    inputs[0][0, :] = 127
    inputs[1][0, :] = 127
    (segment,) = kernels(fd.explain(inputs))
    assert "gemv on tensor cores: mma.m16n8k32" in segment.heuristics and "K split among" in segment.heuristics
    check_against_reference(fd, inputs, exact=True)


@pytest.mark.parametrize("rows_shape", [(16, 1), (4, 3), (2, 2, 5)])
def test_batch_dims_are_read_as_rows(rows_shape):
    # A decoding step's [batch, 1, K] activations: one pass over the weights for every batch, not one each.
    k, n = 256, 97
    with FusionDefinition() as fd:
        define_weight_int8_linear(fd, x_rank=len(rows_shape) + 1)
    inputs = int8_linear_inputs(rows_shape, k, n, 11)
    (segment,) = kernels(fd.explain(inputs))
    assert "gemv on tensor cores" in segment.heuristics and "batch dims read as rows" in segment.heuristics
    assert segment.heuristics.endswith(f"grid {-(-n // 16)}")
    check_against_reference(fd, inputs)


def test_batch_dims_are_rows_of_the_scalar_gemv_too():
    # Without mma.sync (an AMD GPU) the scalar GEMV reads the batch's rows in one pass as well.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.BFloat16)
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.linear(x, w))
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((3, 2, 64)).astype(BF16), rng.standard_normal((40, 64)).astype(BF16)]
    (segment,) = kernels(fd.explain(inputs, target="mi300x"))
    assert "matmul gemv:" in segment.heuristics and "batch dims read as rows" in segment.heuristics
    check_against_reference(fd, inputs, target="mi300x")


@pytest.mark.parametrize("layout", ["transposed", "misaligned"])
def test_activations_not_stored_as_read_are_loaded_as_values(layout):
    # A transposed x (strided along K) or x[:, 1:] (rows 2 bytes off 16-byte alignment): the fragments are
    # built from the loaded values, with the same K order.
    m, k, n = 10, 130, 33
    with FusionDefinition() as fd:
        if layout == "transposed":
            xt = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
            x = fd.ops.permute(xt, [1, 0])
        else:
            xw = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
            x = fd.ops.slice(xw, [0, 1], [m, k + 1])
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.linear(x, w))
    rng = np.random.default_rng(4)
    x_shape = (k, m) if layout == "transposed" else (m, k + 1)
    inputs = [rng.standard_normal(x_shape).astype(BF16), rng.standard_normal((n, k)).astype(BF16)]
    (segment,) = kernels(fd.explain(inputs))
    assert "gemv on tensor cores" in segment.heuristics
    check_against_reference(fd, inputs)
    code = fd.last_cuda_code()
    assert "braze_mma_m16n8k16_bf16(acc" in code and "_vw(acc" not in code


def test_an_empty_batch_of_rows_launches_nothing():
    # No rows in a batch: batch dims are not read as rows (each batch's m is 0), the output is empty.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.BFloat16)
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.linear(x, w))
    inputs = [np.zeros((3, 0, 40), BF16), np.zeros((12, 40), BF16)]
    for target in ("h100", "h100:matmul_gemv_mma=1"):
        assert "batch dims read as rows" not in str(fd.explain(inputs, target=target))
        (out,) = fd.execute(inputs, target=target)
        assert out.shape == (3, 0, 12)


@pytest.mark.parametrize("m, tuning, schedule", [(7, "matmul_gemv_mma=0", "matmul gemv:"),
                                                (1, "matmul_gemv_mma=1", "matmul gemv on tensor cores"),
                                                (40, "matmul_gemv=1", "matmul gemv:"),
                                                (1, "", "matmul gemv:")])
def test_the_tuning_picks_the_gemv(m, tuning, schedule):
    with FusionDefinition() as fd:
        define_weight_int8_linear(fd)
    inputs = int8_linear_inputs((m,), 384, 97, m)
    target = f"h100:{tuning}" if tuning else "h100"
    (segment,) = kernels(fd.explain(inputs, target=target))
    assert segment.heuristics.startswith(schedule)
    check_against_reference(fd, inputs, target=target)
