"""The Python side of the GPU path, checked without a GPU: which inputs count as GPU tensors, which
stream a torch caller's work goes on, and that fd.explain and fd.execute hand GPU inputs to the
fusion's FusionCache. A stand-in `torch` module (only what braze reads) and a recording cache replace
the real ones; test_gpu_execute.py runs the same path on a real GPU."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from braze import DataType, FusionDefinition
from braze import execute as bx


class FakeTensor:
    """What braze reads of a torch tensor on the GPU."""

    def __init__(self, device=0, requires_grad=False):
        self.is_cuda = True
        self.requires_grad = requires_grad
        self._device = device

    def get_device(self):
        return self._device

    def detach(self):
        return FakeTensor(self._device)


@pytest.fixture
def fake_torch(monkeypatch):
    torch = types.ModuleType("torch")
    torch.Tensor = FakeTensor
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0x5000 + device)
    torch.empty_strided = None  # never called by the recording cache
    monkeypatch.setitem(sys.modules, "torch", torch)
    FakeTensor.__module__ = "torch"
    return torch


class RecordingCache:
    """Records the calls; run_torch takes, like the real one, only a list (of tensors and numbers)."""

    def __init__(self):
        self.calls = []

    def run(self, inputs, stream, framework, allocate=None):
        self.calls.append(("run", inputs, stream, framework, allocate))
        return ["output"]

    def run_torch(self, inputs, allocate=None, torch_outputs=False):
        if type(inputs) is not list:
            return None
        self.calls.append(("run_torch", inputs, allocate, torch_outputs))
        return ["torch output"]

    def torch_runner(self, torch_outputs=True, updated=(), drawn=(), draw=None):
        """run_torch as a function of the inputs alone: what FusionDefinition.execute's C method calls (the
        in-place rules for `updated` and the seeds `draw` gives are the binding's, tested with it)."""
        return lambda inputs: self.run_torch(inputs, None, torch_outputs)

    def explain(self, inputs):
        self.calls.append(("explain", inputs))
        return "plan", "new launch parameters", "kernels compiled already"


def test_torch_tensors_are_routed_to_the_cache_on_the_current_stream(fake_torch):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, x))
    cache = RecordingCache()
    fd.__dict__["_gpu_caches"] = {"auto": cache}
    grad = FakeTensor(device=1, requires_grad=True)
    assert bx._on_cuda(grad) and not bx._on_cuda(np.zeros(3))
    assert fd.execute((grad,)) == ["output"]  # a tuple: run_torch declines, the general path runs it
    (_, inputs, stream, framework, allocate) = cache.calls[0]
    assert stream == 0x5001 and framework == "torch"  # the current stream of the input's device
    assert not inputs[0].requires_grad  # detached: torch refuses __dlpack__ on tensors that need grad
    assert allocate is not None  # outputs from torch's allocator, on its current stream
    fd.execute([FakeTensor()], stream=7)
    assert cache.calls[1][2] == 7 and cache.calls[1][4] is None  # another stream: braze's pool
    # No keywords: the cache's one-pass run_torch first, with torch's allocator (torch.empty_strided,
    # called from C++); the general path only when it declines (above: a tuple).
    plain = FakeTensor(device=2)
    assert fd.execute([plain, 3]) == ["torch output"]
    (what, inputs, allocate, torch_outputs) = cache.calls[2]
    assert what == "run_torch" and inputs[0] is plain and inputs[1] == 3 and allocate is None and torch_outputs

    plan = fd.explain([FakeTensor()])
    assert plan.cache == "new launch parameters" and plan.cache_why == "kernels compiled already"
    assert plan.plan == "plan" and "cache: new launch parameters" in str(plan)
    # Before the fusion has a GPU cache, the one-pass route declines: the general path makes the cache.
    del fd.__dict__["_gpu_caches"]
    assert bx._execute_torch(fd, [plain]) is None


def test_without_the_raw_stream_function_the_public_api_is_used(fake_torch):
    del fake_torch._C._cuda_getCurrentRawStream
    fake_torch.cuda = types.SimpleNamespace(current_stream=lambda device: types.SimpleNamespace(cuda_stream=0x77))
    assert bx._current_stream("torch", [FakeTensor()]) == 0x77


def test_torch_outputs_come_from_empty_strided(fake_torch, monkeypatch):
    made = []

    class Out:
        def __init__(self, sizes, strides, dtype, device):
            made.append((list(sizes), list(strides), dtype, device))

        def data_ptr(self):
            return 0xABC000

    fake_torch.bfloat16, fake_torch.float32 = "torch.bfloat16", "torch.float32"
    fake_torch.empty_strided = lambda sizes, strides, dtype, device: Out(sizes, strides, dtype, device)
    allocate = bx._torch_allocator(fake_torch)
    tensor, address = allocate([2, 3], [3, 1], "BFloat16", 1)
    assert address == 0xABC000 and made == [([2, 3], [3, 1], "torch.bfloat16", 1)]
    assert allocate([0, 3], [3, 1], "Float", 0) is None  # empty: braze's pool
    assert allocate([2], [1], "Float8_e4m3fnuz", 0) is None  # a dtype this torch lacks
    assert bx._torch_allocator(fake_torch) is allocate  # made once per torch module
    # BRAZE_TORCH_OUTPUTS=0 (read when a torch module is first seen) leaves outputs to braze's pool.
    monkeypatch.setenv("BRAZE_TORCH_OUTPUTS", "0")
    assert bx._torch_allocator(types.ModuleType("torch")) is None


class RocmArray:
    """A DLPack producer on an AMD GPU (what CuPy on ROCm or JAX on ROCm hand over)."""

    def __dlpack_device__(self):
        return (10, 0)


def test_rocm_tensors_go_to_the_fusions_hip_cache(fake_torch):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, x))
    assert bx._on_cuda(RocmArray()) and bx._platform_of([RocmArray()]) == "hip"
    assert bx._platform_of([FakeTensor()]) == "cuda"
    cuda, hip = RecordingCache(), RecordingCache()
    fd.__dict__["_gpu_caches"] = {"auto": cuda, ("auto", "hip"): hip}
    assert fd.execute([RocmArray()], stream=5) == ["output"]
    assert hip.calls[0][0] == "run" and hip.calls[0][3] == "dlpack" and not cuda.calls
    fake_torch.version = types.SimpleNamespace(hip="6.2.41133")  # torch's ROCm build calls its tensors "cuda"
    assert bx._platform_of([3, FakeTensor()]) == "hip"
    fd.execute((FakeTensor(),))
    assert hip.calls[1][3] == "torch" and not cuda.calls


def test_a_hip_cache_without_an_amd_gpu_names_the_missing_runtime():
    from braze import _C

    with FusionDefinition() as fd:  # no tensor input: the run reaches the device at once
        s = fd.define_scalar(DataType.Double)
        fd.add_output(fd.ops.full([3], s, DataType.Float))
    with pytest.raises(ValueError, match="platform='rocm': expected 'cuda' or 'hip'"):
        _C.FusionCache(fd._fusion, "auto", platform="rocm")
    cache = _C.FusionCache(fd._fusion, "auto", platform="hip")
    if "hip device 0" in dict(_C.config_report()):
        pytest.skip("an AMD GPU is present")
    with pytest.raises(RuntimeError, match="no HIP runtime: "):
        cache.run([1.0], 0, "dlpack")
