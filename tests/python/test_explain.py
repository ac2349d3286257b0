"""fd.explain: the plan braze makes for given inputs (alias segments, kernels, schedulers, cut
reasons, bookending), and planned execution: alias outputs share the input's memory, and results
equal an independent numpy computation."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

from braze import DataType, FusionDefinition

from helpers import BF16, assert_matches

# ---- litGPT qkv split + RoPE (litgpt 0.5.0), as Thunder's benchmark defines it -----------------------


def define_rope(fd, B, T, n_head, n_groups, hs, n_elem):
    q_per_kv = n_head // n_groups
    shape = [B, T, (n_head + 2 * n_groups) * hs]
    qkv = fd.define_tensor(shape=shape, contiguity=[None if n == 1 else True for n in shape], dtype=DataType.BFloat16)
    cos = fd.define_tensor(shape=[T, n_elem], contiguity=[True, True], dtype=DataType.BFloat16)
    sin = fd.define_tensor(shape=[T, n_elem], contiguity=[True, True], dtype=DataType.BFloat16)
    x = fd.ops.reshape(qkv, [B, T, n_groups, q_per_kv + 2, hs])
    x = fd.ops.permute(x, [0, 2, 3, 1, 4])

    def split(lo, hi):
        return fd.ops.slice(x, [0, 0, lo, 0, 0], [B, n_groups, hi, T, hs], [1, 1, 1, 1, 1])

    q, k, v = split(0, q_per_kv), split(q_per_kv, q_per_kv + 1), split(q_per_kv + 1, q_per_kv + 2)
    if n_groups != n_head:
        k = fd.ops.expand(k, [B, n_groups, q_per_kv, T, hs])
        v = fd.ops.expand(v, [B, n_groups, q_per_kv, T, hs])
    q, k, v = (fd.ops.reshape(t, [B, -1, T, hs]) for t in (q, k, v))

    def last(t, lo, hi):
        return fd.ops.slice(t, [0, 0, 0, lo], [B, n_head, T, hi], [1, 1, 1, 1])

    def rope(t):
        part = last(t, 0, n_elem)
        x1, x2 = last(part, 0, n_elem // 2), last(part, n_elem // 2, n_elem)
        rotated = fd.ops.cat([fd.ops.cast(fd.ops.neg(x2), DataType.BFloat16), x1], -1)
        shape = [B, n_head, T, n_elem]
        cos_b = fd.ops.broadcast_in_dim(cos, shape, [2, 3])
        sin_b = fd.ops.broadcast_in_dim(sin, shape, [2, 3])
        roped = fd.ops.cast(fd.ops.add(fd.ops.mul(part, cos_b), fd.ops.mul(rotated, sin_b)), DataType.BFloat16)
        return fd.ops.cat([roped, last(t, n_elem, hs)], -1)

    fd.add_output(rope(q))
    fd.add_output(rope(k))
    fd.add_output(v)


def rope_numpy(qkv, cos, sin, n_head, n_groups, hs, n_elem):
    B, T, _ = qkv.shape
    q_per_kv = n_head // n_groups
    x = qkv.reshape(B, T, n_groups, q_per_kv + 2, hs).transpose(0, 2, 3, 1, 4)
    q, k, v = x[:, :, :q_per_kv], x[:, :, q_per_kv:q_per_kv + 1], x[:, :, q_per_kv + 1:]
    if n_groups != n_head:
        k = np.broadcast_to(k, (B, n_groups, q_per_kv, T, hs))
        v = np.broadcast_to(v, (B, n_groups, q_per_kv, T, hs))
    q, k, v = (t.reshape(B, -1, T, hs) for t in (q, k, v))

    def rope(t):
        part = t[..., :n_elem].astype(np.float32)
        x1, x2 = part[..., : n_elem // 2], part[..., n_elem // 2:]
        rotated = np.concatenate([-x2, x1], axis=-1)
        roped = (part * cos.astype(np.float32) + rotated * sin.astype(np.float32)).astype(BF16)
        return np.concatenate([roped, t[..., n_elem:]], axis=-1)

    return rope(q), rope(k), v


def rope_inputs(B, T, n_head, n_groups, hs, n_elem, seed=0):
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal((B, T, (n_head + 2 * n_groups) * hs)).astype(BF16),
        rng.standard_normal((T, n_elem)).astype(BF16),
        rng.standard_normal((T, n_elem)).astype(BF16),
    ]


@pytest.mark.parametrize(
    "config",
    [
        dict(B=2, T=6, n_head=4, n_groups=4, hs=8, n_elem=8),  # multi-head (Llama-2 style)
        dict(B=1, T=5, n_head=8, n_groups=2, hs=8, n_elem=4),  # grouped-query (Llama-3 style), partial rope
    ],
    ids=["mha", "gqa"],
)
def test_litgpt_rope_is_one_kernel_and_matches_numpy(config):
    with FusionDefinition() as fd:
        define_rope(fd, **config)
    inputs = rope_inputs(**config)
    plan = fd.explain(inputs)
    assert plan.kernel_count == 1, str(plan)
    (kernel,) = [s for s in plan.segments if s.kind == "kernel"]
    assert kernel.scheduler == "pointwise"
    q, k, v = fd.execute(inputs)
    want = rope_numpy(*inputs, **{k_: config[k_] for k_ in ("n_head", "n_groups", "hs", "n_elem")})
    for name, got, expected in zip("qkv", (q, k, v), want):
        assert_matches(got, np.asarray(expected).astype(np.float64), BF16, name)
    if config["n_groups"] == config["n_head"]:
        # v is a view of qkv: an alias segment, sharing the input's memory as torch's view would.
        assert plan.alias_count == 1 and np.shares_memory(v, inputs[0])
    else:
        # expand then reshape cannot be a view: the one kernel writes v too.
        assert len(kernel.outputs) == 3 and not np.shares_memory(v, inputs[0])


def test_meta_only_outputs_are_views_of_the_input():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(x, [-1, 8]))
        fd.add_output(fd.ops.permute(x, [2, 0, 1]))
        fd.add_output(fd.ops.slice(x, [0, 1, 0], [4, 6, 8], [1, 2, 1]))
    x = np.random.default_rng(1).standard_normal((4, 6, 8)).astype(np.float32)
    plan = fd.explain([x])
    assert plan.kernel_count == 0 and plan.alias_count == 3
    assert all(s.kind == "alias" and s.scheduler == "alias" for s in plan.segments)
    outs = fd.execute([x])
    for got, want in zip(outs, [x.reshape(-1, 8), x.transpose(2, 0, 1), x[:, 1:6:2, :]]):
        np.testing.assert_array_equal(got, want)
        assert np.shares_memory(got, x)
        assert got.strides == want.strides  # strides like numpy's own views


def test_seed_layer_norm_plan_is_one_inner_persistent_kernel():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.BFloat16)
        w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        xf = fd.ops.cast(x, DataType.Float)
        var, mean = fd.ops.var_mean(xf, dims=[2], correction=0, keepdim=False)
        shape = [4, 3, 1]
        rstd = fd.ops.rsqrt(fd.ops.add(fd.ops.broadcast_in_dim(var, shape, [0, 1]), 1e-5))
        full = [4, 3, 16]
        centered = fd.ops.sub(xf, fd.ops.broadcast_in_dim(fd.ops.broadcast_in_dim(mean, shape, [0, 1]), full, [0, 1, 2]))
        normed = fd.ops.mul(centered, fd.ops.broadcast_in_dim(rstd, full, [0, 1, 2]))
        fd.add_output(fd.ops.cast(fd.ops.mul(normed, fd.ops.cast(fd.ops.broadcast_in_dim(w, full, [2]), DataType.Float)), DataType.BFloat16))
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((4, 3, 16)).astype(BF16), rng.standard_normal(16).astype(BF16)]
    plan = fd.explain(inputs)
    (kernel,) = plan.segments
    # 16 bf16 per row: 16-byte vectors of 8; the row stays in registers.
    assert (kernel.kind, kernel.scheduler, kernel.vectorize) == ("kernel", "inner_persistent", 8)
    assert "inner persistent" in kernel.heuristics and "vectorize 8" in kernel.heuristics
    assert [name for name, _ in kernel.refusals] == ["alias"]
    assert "var_mean" in kernel.ops and kernel.inputs == ["T0", "T1"]
    text = str(plan)
    assert "inner_persistent" in text and "bookending (policy auto)" in text
    assert plan.to_dot().startswith("digraph plan {")
    both = fd.explain(inputs, bookend="both")
    assert both.kernel_count == 1 and both.alias_count == 1  # the weight's broadcast becomes a view
    (out,) = fd.execute(inputs, bookend="both")
    (ref,) = fd.execute(inputs, bookend="none")
    np.testing.assert_array_equal(out.astype(np.float32), ref.astype(np.float32))


def test_cuts_name_their_reason():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        s = fd.ops.sum(x, dims=[0], keepdim=True)
        fd.add_output(fd.ops.sub(x, fd.ops.expand(s, [5, 7])))
        e = fd.ops.segment_set(fd.ops.exp(x))
        fd.add_output(fd.ops.log(e))
    x = np.random.default_rng(3).random((5, 7)).astype(np.float32) + 0.5
    plan = fd.explain([x])
    reasons = {reason for _, _, _, reason, _ in plan.cuts}
    # exp(x) joins the sum's kernel in blocks of its own; the sum's result then reaches the sub only past it.
    assert reasons == {"would create a cycle", "segment_set"}, str(plan)
    a, b = fd.execute([x])
    np.testing.assert_allclose(a, x - x.sum(axis=0, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(b, x, rtol=1e-6)


def test_bad_bookend_policy_is_a_value_error():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))
    with pytest.raises(ValueError, match="bookend='sometimes'"):
        fd.explain([np.ones(3, np.float32)], bookend="sometimes")


def test_explain_checks_inputs_like_execute():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))
    with pytest.raises(TypeError, match="input 0 .*expected dtype Float, got Double"):
        fd.explain([np.ones(3)])


def test_braze_dump_segments_prints_the_plan_at_execute():
    script = textwrap.dedent(
        """
        import numpy as np
        from braze import DataType, FusionDefinition
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
            fd.add_output(fd.ops.permute(fd.ops.exp(x), [1, 0]))
        fd.execute([np.ones((2, 3), np.float32)])
        """
    )
    env = dict(os.environ, BRAZE_DUMP="segments")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "plan: 1 segment(s), 1 kernel(s), 0 alias" in result.stderr
    assert "output T1 -> permute -> T2" in result.stderr


def test_dump_after_a_pipeline_step_prints_its_ir(tmp_path):
    """BRAZE_DUMP=after:<step> prints what that step of the pipeline made (exec/pipeline.h), to stderr."""
    script = tmp_path / "dump.py"
    script.write_text(
        "import numpy as np\n"
        "from braze import FusionDefinition, DataType\n"
        "with FusionDefinition() as fd:\n"
        "    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)\n"
        "    fd.add_output(fd.ops.sum(fd.ops.mul(x, x), dims=[1]))\n"
        "fd.execute([np.ones((4, 8), np.float32)])\n")
    env = dict(os.environ, BRAZE_DUMP="after:segment,after:heuristics,after:lower,after:emit")
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    assert "== after segment ==" in result.stderr
    assert "kernel reduction" in result.stderr  # the plan's table: segment 0 is a reduction kernel
    assert "== after heuristics ==\nsegment 0: inner reduction: vectorize 4" in result.stderr
    assert "== after lower ==" in result.stderr
    assert "kernel braze_s0_reduction" in result.stderr and "block_reduce<sum" in result.stderr
    # emit: each kernel's source as its device's compiler takes it, with the arch it is compiled for.
    assert "== after emit ==\n// braze_s0_reduction (sm_90)\n" in result.stderr
    assert 'extern "C" __global__ void __launch_bounds__' in result.stderr
    assert "== after bind ==" not in result.stderr  # only the steps asked for


def test_an_amd_target_plans_for_its_wavefront_and_runs_on_the_simulator():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        xf = fd.ops.cast(x, DataType.Float)
        var, mean = fd.ops.var_mean(xf, dims=[1], correction=0, keepdim=False)
        centered = fd.ops.sub(xf, fd.ops.broadcast_in_dim(mean, shape=x.shape(), broadcast_dims=[0]))
        fd.add_output(fd.ops.cast(centered, DataType.BFloat16))
    xs = np.random.default_rng(0).standard_normal((6, 1600)).astype(ml_dtypes.bfloat16)
    for target, arch in (("mi300x", "gfx942"), ("mi210", "gfx90a"), ("h100", "sm_90")):
        plan = fd.explain([xs], target=target)
        assert arch in plan.device and arch in str(plan)
        (out,) = fd.execute([xs], target=target)
        expected = xs.astype(np.float32) - xs.astype(np.float32).mean(1, keepdims=True)
        np.testing.assert_allclose(out.astype(np.float32), expected, rtol=2e-2, atol=2e-2)
    assert "wavefront 64" in fd.explain([xs], target="mi300x").device


def test_hip_code_is_the_same_kernels_in_the_hip_dialect():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.cast(x, DataType.Float), [1]), DataType.BFloat16))
    xs = np.random.default_rng(1).standard_normal((5, 3000)).astype(ml_dtypes.bfloat16)
    with pytest.raises(RuntimeError, match="last_hip_code: nothing has been executed yet"):
        fd.last_hip_code()
    hip = fd.hip_code_for([xs], target="mi300x")
    assert "#define BRAZE_WARP_LANES __AMDGCN_WAVEFRONT_SIZE" in hip and "cuda_fp16.h" not in hip
    assert "braze_block_reduce<64," in hip  # planned for a wavefront of 64
    assert "AMD Instinct MI300X (gfx942, HIP kernels" in fd.explain([xs], target="mi300x").device
    cuda = fd.cuda_code_for([xs])
    assert "#include <cuda_bf16.h>" in cuda and "braze_block_reduce<32," in cuda
    (out,) = fd.execute([xs], target="mi300x")
    np.testing.assert_allclose(out.astype(np.float32), xs.astype(np.float32).sum(1), rtol=2e-2, atol=0.1)
    assert fd.last_hip_code() == hip
    # A plan for a wavefront of 64 has no CUDA spelling: the error points to the HIP code.
    with pytest.raises(ValueError, match="planned for a wavefront of 64 lanes.*fd.last_hip_code"):
        fd.last_cuda_code()
    # One printer: kernels planned for an A100 differ between the dialects only in the preamble.
    (out,) = fd.execute([xs], target="a100")
    cuda, hip = fd.last_cuda_code(), fd.last_hip_code()
    assert "braze_block_reduce<32," in hip and cuda != hip
    assert cuda[cuda.index('extern "C"'):] == hip[hip.index('extern "C"'):]


def test_a_new_row_count_of_a_known_shape_class_keeps_its_segmentation():
    # Row-centred x and the column sums of its square: one inner-outer persistent segment.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        centred = fd.ops.sub(x, fd.ops.sum(x, dims=[1], keepdim=True))
        fd.add_output(centred)
        fd.add_output(fd.ops.sum(fd.ops.mul(centred, centred), dims=[0]))
    rng = np.random.default_rng(5)

    def run(rows):
        xs = rng.standard_normal((rows, 40)).astype(np.float32)
        got = fd.execute([xs])
        want = xs - xs.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1], (want * want).sum(axis=0), rtol=1e-4)
        return xs

    first = fd.explain([run(136)])
    assert "segmented for other sizes" not in str(first)
    # 152 rows: the same power of two and divisibility by 8 as 136, so the same shape class.
    xs = run(152)
    plan = fd.explain([xs])
    assert plan.cache == "hit"
    assert "segmented for other sizes of the same shape class" in str(plan), str(plan)
    assert [(s.kind, s.scheduler) for s in plan.segments] == [(s.kind, s.scheduler) for s in first.segments]
    # 256 rows: another power of two, segmented afresh.
    assert "segmented for other sizes" not in str(fd.explain([run(256)]))


def test_a_shape_class_keeps_the_extents_its_definition_fixes():
    # The hidden size is fixed by the definition: the class's segmentation is planned at 200 columns, and
    # row counts of one class (136 and 152) share it.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 200], contiguity=[True, True], dtype=DataType.Float)
        centred = fd.ops.sub(x, fd.ops.sum(x, dims=[1], keepdim=True))
        fd.add_output(centred)
        fd.add_output(fd.ops.sum(fd.ops.mul(centred, centred), dims=[0]))
    rng = np.random.default_rng(6)
    # 216 columns are refused, though of 200's class: the class's segmentation is still planned at 200.
    with pytest.raises(ValueError, match="200"):
        fd.execute([rng.standard_normal((168, 216)).astype(np.float32)])
    for rows in (152, 136):
        xs = rng.standard_normal((rows, 200)).astype(np.float32)
        got = fd.execute([xs])
        want = xs - xs.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1], (want * want).sum(axis=0), rtol=1e-4)
    plan = str(fd.explain([rng.standard_normal((152, 200)).astype(np.float32)]))
    assert "segmented for other sizes of the same shape class, [136, 200]" in plan, plan


def test_sizes_a_reshape_fixes_plan_each_signature_on_its_own():
    # Rows of 200 split as [2, 100]: the class's representative (136 columns) cannot be reshaped so, and
    # row counts of one class (300 and 268) are then each planned for their own sizes.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.reshape(x, [-1, 2, 100]), dims=[2]))
    rng = np.random.default_rng(7)
    for rows in (300, 268):
        xs = rng.standard_normal((rows, 200)).astype(np.float32)
        np.testing.assert_allclose(fd.execute([xs])[0], xs.reshape(rows, 2, 100).sum(axis=2), rtol=1e-5, atol=1e-4)
        assert "segmented for other sizes" not in str(fd.explain([xs]))
