"""fd.execute on GPU tensors: torch (and CuPy) inputs through DLPack, the FusionCache, outputs of the
inputs' framework on the caller's stream, views of inputs as views. Every result is compared with the
reference evaluator on the same data (braze.execute.reference). Skips without torch and a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from braze import DataType, FusionDefinition
from braze import execute as bx

from test_explain import define_rope, rope_inputs
from test_shape_generic import sizeless_layer_norm

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("GPU tests skipped: torch sees no CUDA device", allow_module_level=True)

import ml_dtypes  # noqa: E402

BF16 = ml_dtypes.bfloat16


def to_numpy(t):
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(BF16)
    return t.numpy()


def host_like(t):
    """The tensor's values as a numpy array (the reference's result does not depend on strides)."""
    return to_numpy(t.contiguous())


def check(fd, inputs, outputs, rtol=2e-2, atol=2e-2):
    want = bx.reference(fd, [host_like(x) if isinstance(x, torch.Tensor) else x for x in inputs])
    assert len(outputs) == len(want)
    for got, w in zip(outputs, want):
        assert isinstance(got, torch.Tensor) and got.is_cuda
        np.testing.assert_allclose(to_numpy(got).astype(np.float64), np.asarray(w).astype(np.float64), rtol=rtol,
                                   atol=atol)


def layer_norm(fd, rows, hidden):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    xf = fd.ops.cast(x, DataType.Float)
    var, mean = fd.ops.var_mean(xf, dims=[1], correction=0, keepdim=False)
    y = fd.ops.mul(fd.ops.sub(xf, fd.ops.broadcast_in_dim(mean, [rows, hidden], [0])),
                   fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5))), [rows, hidden], [0]))
    y = fd.ops.mul(y, fd.ops.cast(fd.ops.broadcast_in_dim(w, [rows, hidden], [1]), DataType.Float))
    fd.add_output(fd.ops.cast(y, DataType.BFloat16))


def test_layer_norm_on_torch_tensors_is_cached_per_signature():
    with FusionDefinition() as fd:
        layer_norm(fd, 64, 1600)
    x = torch.randn(64, 1600, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(1600, dtype=torch.bfloat16, device="cuda")
    out = fd.execute([x, w])
    check(fd, [x, w], out)
    assert out[0].shape == (64, 1600) and out[0].dtype == torch.bfloat16
    assert "braze_s" in fd.last_cuda_code()
    fd.execute([torch.randn_like(x), w])
    assert len(fd._gpu_caches["auto"]) == 1
    # x two bytes off 16-byte alignment: another plan, still correct.
    big = torch.randn(64 * 1600 + 1, dtype=torch.bfloat16, device="cuda")
    shifted = big[1:].view(64, 1600)
    check(fd, [shifted, w], fd.execute([shifted, w]))
    assert len(fd._gpu_caches["auto"]) == 2


def test_new_row_counts_reuse_compiled_kernels_and_explain_says_so():
    with FusionDefinition() as fd:
        sizeless_layer_norm(fd)
    w = torch.randn(1600, dtype=torch.bfloat16, device="cuda")
    first = [torch.randn(2, 128, 1600, dtype=torch.bfloat16, device="cuda"), w]
    assert fd.explain(first).cache == "new kernel"
    check(fd, first, fd.execute(first))
    assert fd.explain(first).cache == "hit"
    for batch, seq in [(1, 7), (3, 1000), (4, 4096), (1, 2)]:
        inputs = [torch.randn(batch, seq, 1600, dtype=torch.bfloat16, device="cuda"), w]
        plan = fd.explain(inputs)
        assert plan.cache == "new launch parameters", plan.cache_why
        check(fd, inputs, fd.execute(inputs))
    cache = fd._gpu_caches["auto"]
    assert len(cache) == 5 and cache.kernel_count() == 1


def test_torch_outputs_come_from_torchs_allocator_and_a_cuda_graph_captures_execute():
    with FusionDefinition() as fd:
        sizeless_layer_norm(fd)
    x = torch.randn(4, 64, 1600, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(1600, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    (out,) = fd.execute([x, w])
    assert torch.cuda.memory_allocated() - before >= out.numel() * out.element_size()
    check(fd, [x, w], [out])
    # Warmed up on a side stream (as torch's docs ask), then captured: replays recompute the output
    # from whatever the static input holds.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fd.execute([x, w])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        (static_out,) = fd.execute([x, w])
    for seed in range(2):
        torch.manual_seed(seed)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        check(fd, [x, w], [static_out])


def test_views_of_inputs_share_their_memory():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.permute(x, [1, 0]))
        fd.add_output(fd.ops.mul(x, fd.define_scalar(2.0)))
    x = torch.randn(5, 7, device="cuda")
    view, doubled = fd.execute([x])
    assert view.data_ptr() == x.data_ptr()
    assert view.stride() == (1, 7)
    torch.testing.assert_close(view, x.t())
    torch.testing.assert_close(doubled, x * 2)


def test_transposed_inputs_scalars_and_reductions():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[0, 1])
        s = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.sum(fd.ops.mul(x, s), [1]))
        fd.add_output(fd.ops.add(x, s))
    x = torch.randn(300, 17, device="cuda").t()  # [17, 300], stride-1 dim first
    out = fd.execute([x, 0.5])
    torch.testing.assert_close(out[0], (x * 0.5).sum(1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out[1], x + 0.5)


def test_grid_reduction_of_few_long_rows():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, [1]))
    x = torch.randn(3, 1 << 20, device="cuda")
    for _ in range(3):  # the semaphores must be reset for the next launch
        (out,) = fd.execute([x])
        torch.testing.assert_close(out, x.double().sum(1).float(), rtol=1e-4, atol=1e-2)


def test_rope_on_a_side_stream():
    cfg = dict(B=2, T=64, n_head=8, n_groups=2, hs=64, n_elem=32)
    with FusionDefinition() as fd:
        define_rope(fd, **cfg)
    host = rope_inputs(**cfg)
    inputs = [torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16).cuda() for a in host]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = fd.execute(inputs)
    stream.synchronize()
    want = bx.reference(fd, host)
    for got, w in zip(out, want):
        np.testing.assert_allclose(to_numpy(got).astype(np.float32), np.asarray(w).astype(np.float32), rtol=2e-2,
                                   atol=2e-2)


def test_cupy_inputs_give_cupy_outputs():
    cupy = pytest.importorskip("cupy")
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))
    x = cupy.linspace(-1, 1, 1000, dtype=cupy.float32)
    (out,) = fd.execute([x])
    assert isinstance(out, cupy.ndarray)
    cupy.testing.assert_allclose(out, cupy.exp(x), rtol=1e-5)


def test_inputs_on_the_cpu_and_the_gpu_are_refused():
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(a, b))
    with pytest.raises(ValueError, match="input 1"):
        fd.execute([torch.ones(4, device="cuda"), torch.ones(4)])


def test_freed_blocks_are_reused_on_their_stream_and_kept_out_of_a_captured_graph():
    from braze import _C

    # A grid reduction: its partial sums and semaphores are a workspace from braze's pool on every run.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(x, [1]))
    x = torch.randn(3, 1 << 20, device="cuda")
    want = x.double().sum(1).float()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    # stream=: the outputs come from braze's pool too.
    (out,) = fd.execute([x], stream=side.cuda_stream)
    del out
    hits, misses, _, _ = _C.block_cache_counts(x.device.index)
    for _ in range(10):
        (out,) = fd.execute([x], stream=side.cuda_stream)
        side.synchronize()
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-2)
        del out
    now_hits, now_misses, cached_bytes, _ = _C.block_cache_counts(x.device.index)
    assert now_misses == misses, "steady-state executes reuse the blocks freed on their stream"
    assert now_hits >= hits + 10, "at least the output of every execute"
    assert cached_bytes > 0

    # Captured on the stream that holds those blocks: the graph's workspace is its own, not a cached block.
    with torch.cuda.stream(side):
        fd.execute([x])
    before = _C.block_cache_counts(x.device.index)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        (static_out,) = fd.execute([x])
    after = _C.block_cache_counts(x.device.index)
    assert after[0] == before[0], "the capture took no cached block"
    assert after[2:] == before[2:], "and gave none: its workspace was the graph's own"
    for seed in range(2):
        torch.manual_seed(seed)
        x.copy_(torch.randn_like(x))
        graph.replay()
        side.wait_stream(torch.cuda.current_stream())
        (eager,) = fd.execute([x], stream=side.cuda_stream)  # reuses the cached blocks meanwhile
        torch.cuda.synchronize()
        torch.testing.assert_close(static_out, x.double().sum(1).float(), rtol=1e-4, atol=1e-2)
        torch.testing.assert_close(eager, static_out)
    assert _C.empty_cache() > 0
    assert _C.block_cache_counts(x.device.index)[2] == 0
