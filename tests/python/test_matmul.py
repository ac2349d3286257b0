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


def define_weight_int8_linear(fd, group=None, n=None, k=None, x_rank=2):
    """Seed 003: bf16 activations x int8 weights [N, K] dequantized by a bf16 scale per output channel, or
    per channel and group of `group` K elements (scales [N, K / group]; the fusion then needs N and K).
    The activations have x_rank dims (batch dims before the rows)."""
    x = fd.define_tensor(shape=[-1] * x_rank, contiguity=[True] * x_rank, dtype=DataType.BFloat16)
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
    # One row takes the GEMV schedule (16-byte loads of the int8 weights along K), 2 to 64 rows the GEMV
    # on tensor cores (test_gemv_tensor_cores.py); N = 97 leaves a block's last columns empty.
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
    assert "16-element loads along K" in segment.heuristics
    assert segment.heuristics.startswith("matmul gemv:" if m == 1 else "matmul gemv on tensor cores: mma.m16n8k16")
    (out,) = fd.execute(inputs)
    expected = braze.execute.reference(fd, inputs)[0]
    np.testing.assert_allclose(out.astype(np.float64), np.asarray(expected).astype(np.float64), rtol=1e-2, atol=1e-2)
    if m > 1:
        assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in fd.last_cuda_code()


@pytest.mark.parametrize("m, tuning, schedule", [(7, "matmul_gemv=0", "mma.m16n8k16"), (16, "matmul_gemv=0", "mma.m16n8k16"),
                                                (40, "matmul_gemv=1", "matmul gemv:"), (65, "matmul_gemv=1", "mma.m16n8k16")])
def test_weight_only_int8_linear_follows_the_gemv_tuning(m, tuning, schedule):
    # Tuned off, a few rows take the tensor cores' tiled schedule; tuned on, up to 64 rows take the scalar
    # GEMV (a sum per row and column per lane), more the tensor cores still. Either way the kernel matches
    # the reference.
    n, k = 97, 384
    with FusionDefinition() as fd:
        define_weight_int8_linear(fd)
    rng = np.random.default_rng(m)
    inputs = [rng.standard_normal((m, k)).astype(BF16), rng.integers(-128, 128, (n, k)).astype(np.int8),
              (rng.random(n) * 0.01).astype(BF16)]
    target = f"h100:{tuning}"
    (segment,) = kernels(fd.explain(inputs, target=target))
    assert schedule in segment.heuristics
    (out,) = fd.execute(inputs, target=target)
    expected = braze.execute.reference(fd, inputs)[0]
    np.testing.assert_allclose(out.astype(np.float64), np.asarray(expected).astype(np.float64), rtol=1e-2, atol=1e-2)


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
    assert any(kind == "matmul" and "Float operands; mma.sync takes bf16, f16, (u)int8, e4m3fn or e5m2" in why
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


def define_int8_linear_with_bias(fd):
    """s8 x s8 linear with an int32 bias: int32 sums, the bias added in integers."""
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8)
    w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8)
    b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int32)
    fd.add_output(fd.ops.linear(x, w, b))


def test_integer_linear_adds_its_bias_in_integers():
    with FusionDefinition() as fd:
        define_int8_linear_with_bias(fd)
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


E4M3, E5M2 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2


def define_scaled_mm(fd, dtype, per_row_column, out_dtype):
    """torch._scaled_mm as it is called: mat2 column-major (the transpose of a row-major [N, K])."""
    a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
    bt = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
    if per_row_column:
        sa = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float)
        sb = fd.define_tensor(shape=[1, -1], contiguity=[None, True], dtype=DataType.Float)
    else:
        sa = sb = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
    fd.add_output(fd.ops.scaled_mm(a, fd.ops.permute(bt, [1, 0]), sa, sb, out_dtype=out_dtype))


@pytest.mark.parametrize("np_dtype,dtype,per_row_column", [(E4M3, DataType.Float8_e4m3fn, True),
                                                           (E5M2, DataType.Float8_e5m2, False)])
def test_scaled_mm_is_one_staged_fp8_kernel_with_the_scales_in_its_epilogue(np_dtype, dtype, per_row_column):
    m, k, n = 70, 160, 40  # K past two 64-element slices; M and N past a 64 x 64 block tile
    with FusionDefinition() as fd:
        define_scaled_mm(fd, dtype, per_row_column, DataType.BFloat16)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np_dtype)
    bt = rng.standard_normal((n, k)).astype(np_dtype)
    scales = ([(rng.random((m, 1)) + 0.5).astype(np.float32), (rng.random((1, n)) + 0.5).astype(np.float32)]
              if per_row_column else [np.array(0.75, np.float32)])
    inputs = [a, bt] + scales
    (segment,) = kernels(fd.explain(inputs))
    assert segment.scheduler == "matmul"
    assert "mma.m16n8k32" in segment.heuristics and "cp.async pipeline" in segment.heuristics
    (out,) = fd.execute(inputs)
    sa, sb = (scales[0], scales[1]) if per_row_column else (scales[0], scales[0])
    exact = (a.astype(np.float64) @ bt.astype(np.float64).T) * sa.astype(np.float64) * sb.astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), exact, rtol=1e-2, atol=1e-2)  # bf16 rounding
    np.testing.assert_array_equal(out, braze.execute.reference(fd, inputs)[0])
    suffix = "e4m3" if dtype == DataType.Float8_e4m3fn else "e5m2"
    assert f"mma.sync.aligned.m16n8k32.row.col.f32.{suffix}.{suffix}.f32" in fd.last_cuda_code()
    # An A100 (sm_80) has no fp8 mma: the plan says so.
    (refused,) = fd.explain(inputs, target="a100").segments
    assert refused.scheduler is None and any("needs sm_89" in why for _, why in refused.refusals)


def test_scaled_mm_checks_its_operands_by_name():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float8_e4m3fn)
        with pytest.raises(braze.BrazeValueError, match="scaled_mm: mat1 must be a 2-D fp8 tensor"):
            fd.ops.scaled_mm(a, b, 1.0, 1.0)
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float8_e4m3fn)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float8_e4m3fn)
        s3 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float)
        with pytest.raises(braze.BrazeValueError, match=r"scaled_mm: scale_a must be a Float tensor of one element, \[M, 1\] or \[1, N\]"):
            fd.ops.scaled_mm(a, b, s3, 1.0)


def test_scaled_mm_of_fnuz_operands_runs_on_the_host_and_says_why():
    # The fnuz formats (MIGraphX's) have no mma.sync: the segment is refused by name and the reference runs it.
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float8_e4m3fnuz)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float8_e4m3fnuz)
        fd.add_output(fd.ops.scaled_mm(a, b, 0.5, 2.0, out_dtype=DataType.Float))
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((8, 32)).astype(ml_dtypes.float8_e4m3fnuz),
              rng.standard_normal((32, 8)).astype(ml_dtypes.float8_e4m3fnuz)]
    (segment,) = [s for s in fd.explain(inputs).segments if "matmul" in s.ops]
    assert segment.scheduler is None
    assert any("Float8_e4m3fnuz operands; mma.sync takes" in why for _, why in segment.refusals)
    (out,) = fd.execute(inputs)
    np.testing.assert_allclose(out, inputs[0].astype(np.float64) @ inputs[1].astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("dtype", [DataType.Float8_e4m3fn, DataType.Int8])
def test_a_quantize_after_the_matmul_is_in_its_epilogue(dtype):
    # MIGraphX's complaint (seed 000): a quantize after a GEMM became a kernel of its own. Here it is the
    # GEMM kernel's epilogue, and the quantized values equal the reference's.
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        bias = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        y = fd.ops.linear(a, b, bias, DataType.Float)
        fd.add_output(fd.ops.quantize(y, 0.05, dtype=dtype))
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((40, 64)).astype(BF16), rng.standard_normal((24, 64)).astype(BF16),
              rng.standard_normal(24).astype(BF16)]
    (segment,) = fd.explain(inputs).segments
    assert segment.scheduler == "matmul" and "quantize" in segment.ops
    (out,) = fd.execute(inputs)
    np.testing.assert_array_equal(np.asarray(out).astype(np.float32),
                                  np.asarray(braze.execute.reference(fd, inputs)[0]).astype(np.float32))


def define_qkv_attention_scores(fd, batch, seq, heads, head_dim, qdtype):
    """Seed 000 (MIGraphX, BERT / DistilGPT2): a horizontally fused QKV linear with bias, sliced into q,
    k and v, each reshaped to heads and permuted, q and k quantized (per tensor), then q k^T on the
    quantized values. Outputs: the scores and v."""
    hidden = heads * head_dim
    x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.BFloat16)
    w = fd.define_tensor(shape=[-1, -1], contiguity=[True] * 2, dtype=DataType.BFloat16)
    b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    y = fd.ops.linear(x, w, b)

    def head_split(i, order):
        part = fd.ops.slice(y, [0, 0, i * hidden], [batch, seq, (i + 1) * hidden])
        return fd.ops.permute(fd.ops.reshape(part, [batch, seq, heads, head_dim]), order)

    q, k, v = head_split(0, [0, 2, 1, 3]), head_split(1, [0, 2, 3, 1]), head_split(2, [0, 2, 1, 3])
    qq = fd.ops.quantize(q, 0.05, dtype=qdtype)
    kq = fd.ops.quantize(k, 0.05, dtype=qdtype)
    # fp8 products accumulate in float; int8 ones in int32 (the XLA rule: exact, then whatever cast follows).
    fd.add_output(fd.ops.matmul(qq, kq, DataType.Float if qdtype == DataType.Float8_e4m3fn else DataType.Int32))
    fd.add_output(v)


@pytest.mark.parametrize("qdtype", [DataType.Float8_e4m3fn, DataType.Int8])
def test_migraphx_qkv_attention_scores_are_two_matmul_kernels(qdtype):
    # Both GEMMs on tensor cores, and no kernel of its own for the quantize: it is computed as the second
    # GEMM loads its operands (the slices, reshapes and permutes are index maps into the first's output).
    batch, seq, heads, head_dim = 2, 24, 2, 16
    with FusionDefinition() as fd:
        define_qkv_attention_scores(fd, batch, seq, heads, head_dim, qdtype)
    rng = np.random.default_rng(6)
    hidden = heads * head_dim
    inputs = [rng.standard_normal((batch, seq, hidden)).astype(BF16),
              (rng.standard_normal((3 * hidden, hidden)) * 0.2).astype(BF16), rng.standard_normal(3 * hidden).astype(BF16)]
    plan = fd.explain(inputs)
    matmuls = kernels(plan)
    assert len(matmuls) == 2 and all(s.scheduler == "matmul" for s in matmuls), str(plan)
    assert "linear" in matmuls[0].ops and "quantize" in matmuls[1].ops and "matmul" in matmuls[1].ops
    assert all(s.kind == "alias" for s in plan.segments if s.kind != "kernel")  # v: a view of the first output
    got = fd.execute(inputs)
    for g, want in zip(got, braze.execute.reference(fd, inputs)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(want))


@pytest.mark.parametrize("target", ["mi300x", "a100"])
def test_the_gemv_needs_no_tensor_cores(target):
    # An AMD GPU (HIP, 64-lane wavefronts) and an sm_80 GPU both run the weight-only GEMV as a kernel; an
    # fp8 or AMD tensor-core matmul is refused by name instead (test_without_mma_the_plan_says_why).
    with FusionDefinition() as fd:
        define_weight_int8_linear(fd)
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal((3, 256)).astype(BF16), rng.integers(-128, 128, (97, 256)).astype(np.int8),
              (rng.random(97) * 0.01).astype(BF16)]
    (segment,) = kernels(fd.explain(inputs, target=target))
    assert segment.scheduler == "matmul" and "matmul gemv" in segment.heuristics
    (out,) = fd.execute(inputs, target=target)
    expected = np.asarray(braze.execute.reference(fd, inputs)[0]).astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), expected, rtol=1e-2, atol=1e-2)  # sums in another order
    if target == "mi300x":
        assert "braze_block_reduce" in braze.execute.hip_code_for(fd, inputs)


def test_a_zero_point_laid_out_unlike_its_scale_is_read_at_its_own_strides():
    """The reference (and so every host step) read the zero point at the scale's offsets: a strided zero
    point gave [4, 5, 6, 7] for [4, 6, 8, 10], and an expanded one beside a contiguous scale read past it."""
    from braze import execute as bx

    x = np.ones((32, 4), np.int8)
    w = np.ones((4, 4), np.int8)
    scale = np.ones(4, np.float32)
    zp = np.arange(8, dtype=np.int32)[::2]
    with FusionDefinition() as fd:
        X = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8)
        W = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8)
        S = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        Z = fd.define_tensor(shape=[-1], contiguity=[False], dtype=DataType.Int32)
        fd.add_output(fd.ops.quantize(fd.ops.cast(fd.ops.matmul(X, W), DataType.Float), S, Z, axis=1))
    want = np.broadcast_to(4 + zp, (32, 4))
    for run in (fd.execute, lambda i: fd.execute(i, target="mi300x"), lambda i: bx.reference(fd, i)):
        np.testing.assert_array_equal(run([x, w, scale, zp])[0], want)
    with FusionDefinition() as fd:
        Q = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8)
        S = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        Z = fd.define_tensor(shape=[-1], contiguity=[False], dtype=DataType.Int32)
        fd.add_output(fd.ops.dequantize(Q, S, Z, axis=1))
    inputs = [np.zeros((2, 4096), np.int8), np.ones(4096, np.float32), np.broadcast_to(np.int32(3), (4096,))]
    for run in (fd.execute, lambda i: bx.reference(fd, i)):
        np.testing.assert_array_equal(run(inputs)[0], np.full((2, 4096), -3.0, np.float32))


def test_quantization_and_linear_operands_torch_refuses():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        s = fd.define_tensor(shape=[1], contiguity=[None], dtype=DataType.Float)
        z = fd.define_tensor(shape=[1], contiguity=[None], dtype=DataType.Float)
        with pytest.raises(TypeError, match=r"quantize: the zero_point T2 must be an integer tensor, got Float"):
            fd.ops.quantize(x, s, z, dtype=DataType.Int8)
        with pytest.raises(TypeError, match=r"quantize: zero_point must be an int or an integer Scalar, got float 2.7"):
            fd.ops.quantize(x, 0.5, 2.7)
        q = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8)
        wq = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8)
        with pytest.raises(TypeError, match=r"linear: the bias T\d+ is Float but the operands are Int8"):
            fd.ops.linear(q, wq, x)
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float8_e4m3fn)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float8_e4m3fn)
        with pytest.raises(ValueError, match=r"scaled_mm: scale_a must be a Float tensor of one element, \[M, 1\]"):
            fd.ops.scaled_mm(a, b, x, s, out_dtype=DataType.Float)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.quantize(x, 0.5, 3))  # an int zero point stays fine
    (out,) = fd.execute([np.array([1.0, -2.0], np.float32)])
    np.testing.assert_array_equal(out, [5, -1])


def test_an_empty_batch_broadcast_against_one():
    from braze import execute as bx

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.matmul(x, y))
    inputs = [np.ones((0, 5, 16), np.float32), np.ones((16, 3), np.float32)]
    for run in (fd.execute, lambda i: bx.reference(fd, i)):
        assert run(inputs)[0].shape == (0, 5, 3)
