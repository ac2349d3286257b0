"""The GPU binding (FusionCache.run / explain / cuda_code) end to end without a GPU: a cache made with
`no_device="h100"` plans for an H100 and launches nothing, and host arrays stand for device tensors.
What is checked: inputs through DLPack (numpy) and through a torch tensor's own attributes (a stand-in
torch module), plans per signature sharing kernels, the output allocator's arguments and returned
objects, explain's cache answers and the errors for inputs it cannot take."""

from __future__ import annotations

import ctypes
import sys
import types

import ml_dtypes
import numpy as np
import pytest

from braze import DataType, FusionDefinition, _C, execute

from test_shape_generic import sizeless_layer_norm

BF16 = ml_dtypes.bfloat16


def layer_norm_cache(dtype=DataType.Float):
    with FusionDefinition() as fd:
        sizeless_layer_norm(fd, dtype)
    return fd, _C.FusionCache(fd._fusion, "auto", no_device="h100")


class Allocations:
    """An output allocator handing out numpy arrays (never written: nothing runs)."""

    def __init__(self):
        self.asked = []

    def __call__(self, sizes, strides, dtype, device):
        self.asked.append((list(sizes), list(strides), dtype, device))
        array = np.empty(sizes, dtype=np.uint16 if dtype == "BFloat16" else np.float32)
        return array, array.ctypes.data


def test_numpy_stand_ins_plan_share_kernels_and_fill_allocated_outputs():
    fd, cache = layer_norm_cache()
    w = np.zeros(1600, np.float32)
    allocate = Allocations()
    for batch, seq in [(2, 3), (4, 128), (1, 1000)]:
        x = np.zeros((batch, seq, 1600), np.float32)
        (out,) = cache.run([x, w], 0, "dlpack", allocate)
        assert out.shape == (batch, seq, 1600)
        assert allocate.asked[-1] == ([batch, seq, 1600], [seq * 1600, 1600, 1], "Float", 0)
    assert len(cache) == 3 and cache.kernel_count() == 1
    plan, answer, why = cache.explain([np.zeros((8, 8, 1600), np.float32), w])
    assert answer == "new launch parameters", why
    assert "inner persistent" in str(plan)
    assert cache.explain([np.zeros((4, 128, 1600), np.float32), w])[1] == "hit"
    assert "braze_s0_inner_persistent" in cache.cuda_code([np.zeros((4, 128, 1600), np.float32), w])[0]


def test_inputs_it_cannot_take_are_named():
    _, cache = layer_norm_cache()
    with pytest.raises(TypeError, match="input 1: a str is neither a number nor a tensor"):
        cache.run([np.zeros((2, 3, 1600), np.float32), "w"], 0, "dlpack", Allocations())
    with pytest.raises(ValueError, match=r"input 1 \(T1\): expected rank 1, got a tensor of shape \[2, 1600\]"):
        cache.run([np.zeros((2, 3, 1600), np.float32), np.zeros((2, 1600), np.float32)], 0, "dlpack", Allocations())
    with FusionDefinition() as fd:
        sizeless_layer_norm(fd, DataType.Float)
    real_device = _C.FusionCache(fd._fusion, "auto")
    with pytest.raises(Exception, match="input 0: on DLPack device type 1, not CUDA"):
        real_device.run([np.zeros((2, 3, 1600), np.float32), np.zeros(1600, np.float32)], 0, "dlpack")


class StandInTensor:
    """The attributes braze reads of a torch.Tensor, over a numpy array."""

    requires_grad = False
    negative = False

    def __init__(self, array, torch, strides=None):
        self.array, self.dtype, self.is_cuda = array, torch.bfloat16, True
        self._strides = strides

    def is_neg(self):
        return self.negative

    @property
    def shape(self):
        return self.array.shape

    def stride(self):
        return self._strides or tuple(s // self.array.itemsize for s in self.array.strides)

    def data_ptr(self):
        return self.array.ctypes.data

    def get_device(self):
        return 0


def test_torch_tensors_are_read_through_their_attributes(monkeypatch):
    torch = types.ModuleType("torch")
    torch.Tensor = StandInTensor
    torch.bfloat16 = object()
    monkeypatch.setitem(sys.modules, "torch", torch)
    _, cache = layer_norm_cache(DataType.BFloat16)
    x = StandInTensor(np.zeros((3, 5, 1600), BF16), torch)
    w = StandInTensor(np.zeros(1600, BF16), torch)
    allocate = Allocations()
    (out,) = cache.run([x, w], 0, "torch", allocate)  # no __dlpack__: the stand-in has none
    assert out.shape == (3, 5, 1600)
    plan, answer, _ = cache.explain([x, w])
    assert answer == "hit"
    # A transposed view (strides from stride()): refused by name, as the definition says contiguous.
    xt = StandInTensor(np.zeros((5, 3, 1600), BF16).transpose(1, 0, 2), torch)
    with pytest.raises(ValueError, match=r"input 0 \(T0\): dim 1 was defined as contiguous .* strides \[1600, 4800, 1\]"):
        cache.run([xt, w], 0, "torch", allocate)
    # Another dtype than torch's bfloat16 (one braze does not map): the DLPack path, which the
    # stand-in lacks, says so.
    odd = StandInTensor(np.zeros((3, 5, 1600), BF16), torch)
    odd.dtype = object()
    with pytest.raises(TypeError, match="input 0: a test_gpu_binding_no_device.StandInTensor is neither a number nor a tensor"):
        cache.run([odd, w], 0, "torch", allocate)


class Output:
    """What the stand-in torch.empty_strided returns: a tensor braze asks only for its address."""

    buffer = np.empty(3 * 5 * 1600, np.uint16)

    def data_ptr(self):
        return self.buffer.ctypes.data


def stand_in_torch(monkeypatch):
    """A torch module with the stand-in tensor type, torch.bfloat16, a current stream, and an
    empty_strided that records what it is asked for in `torch.made`."""
    torch = types.ModuleType("torch")
    torch.made = []

    def empty_strided(sizes, strides, dtype, device):
        torch.made.append((list(sizes), list(strides), dtype, device))
        return Output()

    torch.Tensor, torch.bfloat16, torch.empty_strided = StandInTensor, object(), empty_strided
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0)
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def cached_stand_in_layer_norm(monkeypatch):
    """A bf16 layer norm on a cache that launches nothing, executed once on stand-in tensors (which opens
    the torch fast path): (torch, fd, cache, x, w)."""
    torch = stand_in_torch(monkeypatch)
    fd, cache = layer_norm_cache(DataType.BFloat16)
    fd.__dict__["_gpu_caches"] = {"auto": cache}
    x = StandInTensor(np.zeros((3, 5, 1600), BF16), torch)
    w = StandInTensor(np.zeros(1600, BF16), torch)
    fd.execute([x, w])
    return torch, fd, cache, x, w


def test_fd_execute_on_torch_tensors_takes_the_one_pass_route(monkeypatch):
    torch = stand_in_torch(monkeypatch)
    made = torch.made
    fd, cache = layer_norm_cache(DataType.BFloat16)
    fd.__dict__["_gpu_caches"] = {"auto": cache}  # the real binding, planning for an H100, no launch
    x = StandInTensor(np.zeros((3, 5, 1600), BF16), torch)
    w = StandInTensor(np.zeros(1600, BF16), torch)
    (out,) = fd.execute([x, w])
    assert isinstance(out, Output) and made == [([3, 5, 1600], [8000, 1600, 1], torch.bfloat16, 0)]
    assert "braze_s0_inner_persistent" in fd.last_cuda_code()
    # A size-1 dim's stride does not matter: the same signature, whatever torch says it is.
    one = StandInTensor(np.zeros((1, 5, 1600), BF16), torch, strides=(1, 1600, 1))
    other = StandInTensor(np.zeros((1, 5, 1600), BF16), torch, strides=(8000, 1600, 1))
    fd.execute([one, w])
    fd.execute([other, w])
    assert len(cache) == 2
    # A lazily negated view is refused by name rather than read without its sign.
    x.negative = True
    with pytest.raises(ValueError, match="input 0: a torch tensor with its negative bit set"):
        fd.execute([x, w])


class StandInDevice:
    """torch.device("cuda", 0) as braze sees it: hashable, printed as "cuda:0"."""

    def __str__(self):
        return "cuda:0"

    def __hash__(self):
        return hash("cuda:0")

    def __eq__(self, other):
        return isinstance(other, StandInDevice)


def test_every_call_form_takes_the_fast_path_to_one_prepared_plan(monkeypatch):
    """Positional, device= as an index, a string and a torch.device, and Thunder's form with its option
    keywords and its arguments' tuple: the same outputs from the same prepared plan, each through the one
    C++ pass (run_torch)."""
    torch = stand_in_torch(monkeypatch)
    made = torch.made
    fd, cache = layer_norm_cache(DataType.BFloat16)
    fd.__dict__["_gpu_caches"] = {"auto": cache}
    x = StandInTensor(np.zeros((3, 5, 1600), BF16), torch)
    w = StandInTensor(np.zeros(1600, BF16), torch)
    fd.execute([x, w])  # the first run makes the plan
    runs = []
    # No input updated in place and no seed drawn: the runner of the inputs alone, which
    # FusionDefinition.execute's C method calls without entering Python.
    runner = fd.__dict__["_torch_fast"]

    def counting(inputs):
        """The runner, counting the one-pass runs that reach it."""
        outputs = runner(inputs)
        runs.append(outputs is not None)  # None: declined, and the general path would run
        return outputs

    fd.__dict__["_torch_fast"] = counting
    forms = [{}, {"device": 0}, {"device": "cuda:0"}, {"device": StandInDevice()},
             {"device": StandInDevice(), "_enable_options": [], "_disable_options": []},
             {"device": 0, "_enable_options": ["kernel_profile"], "_disable_options": ["parallel_compile"]},
             {"profile": False, "capture_debug_output": False}]
    # Thunder 0.2.6's FusionDefinitionWrapper: its arguments' tuple, device=None or an index, and these.
    thunder = {"save_repro_inputs": False, "_enable_options": None, "_disable_options": None}
    calls = [([x, w], form) for form in forms] + [((x, w), {}), ((x, w), {"device": None, **thunder}),
                                                 ((x, w), {"device": 0, **thunder})]
    for inputs, form in calls:
        made.clear()
        (out,) = fd.execute(inputs, **form)
        assert isinstance(out, Output), form
        assert made == [([3, 5, 1600], [8000, 1600, 1], torch.bfloat16, 0)], form
    assert runs == [True] * len(calls)  # every form went straight through the C++ pass
    assert len(cache) == 1  # and hit the one prepared plan
    # What the fast path must not take: the CPU named as the device, and keywords it does not ignore.
    with pytest.raises(RuntimeError, match=r"execute\(device='cpu'\): the inputs are on a GPU"):
        fd.execute([x, w], device="cpu")
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        fd.execute([x, w], _enable_option=[])
    assert len(runs) == len(calls)


def test_outputs_come_from_torch_compiles_allocation_call_on_the_inputs_device(monkeypatch):
    """torch._C._dynamo.guards._empty_strided_cuda (sizes, strides, dtype; torch's current device) where
    torch has it; torch.empty_strided where it made the tensor on another device, and from then on where
    it does not take that call (out of memory aside)."""
    torch = stand_in_torch(monkeypatch)
    fast = []

    class OnDevice(Output):
        def __init__(self, device):
            self.device = device

        def get_device(self):
            return self.device

    current = {"device": 0, "fails": None}

    def empty_strided_cuda(sizes, strides, dtype):
        fast.append((sizes, strides, dtype))
        if current["fails"] is not None:
            raise current["fails"]("refused")
        return OnDevice(current["device"])

    class OutOfMemoryError(RuntimeError):
        pass

    torch.OutOfMemoryError = OutOfMemoryError
    torch._C._dynamo = types.SimpleNamespace(guards=types.SimpleNamespace(_empty_strided_cuda=empty_strided_cuda))
    torch._C._cuda_getDevice = lambda: current["device"]
    fd, cache = layer_norm_cache(DataType.BFloat16)
    fd.__dict__["_gpu_caches"] = {"auto": cache}
    x = StandInTensor(np.zeros((3, 5, 1600), BF16), torch)
    w = StandInTensor(np.zeros(1600, BF16), torch)
    (out,) = fd.execute([x, w])
    assert isinstance(out, OnDevice) and torch.made == []
    assert fast == [((3, 5, 1600), (8000, 1600, 1), torch.bfloat16)]  # exact tuples, as the call requires
    current["device"] = 1  # torch's current device is not the inputs': not asked to allocate there
    (out,) = fd.execute([x, w])
    assert not isinstance(out, OnDevice) and len(torch.made) == 1 and len(fast) == 1
    current["device"], current["fails"] = 0, OutOfMemoryError
    fd.execute([x, w])
    assert len(torch.made) == 2 and len(fast) == 2  # torch.empty_strided says what is out of memory
    current["fails"] = KeyboardInterrupt  # raised as it is
    with pytest.raises(KeyboardInterrupt):
        fd.execute([x, w])
    current["fails"] = RuntimeError  # a form this torch does not take: not asked again
    fd.execute([x, w])
    fd.execute([x, w])
    assert len(torch.made) == 4 and len(fast) == 4


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def read_capsule(capsule):
    """(address, DLPack device type, shape, strides) of an unversioned DLPack capsule, left unconsumed
    (its destructor then releases what it holds)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = DLTensor.from_address(get(capsule, b"dltensor"))
    return (t.data + t.byte_offset, t.device_type, [t.shape[d] for d in range(t.ndim)],
            [t.strides[d] for d in range(t.ndim)])


def test_views_of_inputs_reach_torch_through_its_cpp_dlpack_import(monkeypatch):
    """A view of an input goes to torch._C._from_dlpack as a capsule (not through torch.utils.dlpack's
    Python function, which asks torch for a Stream object first): its address, shape and strides."""
    torch = stand_in_torch(monkeypatch)
    imported = []
    torch._C._from_dlpack = lambda capsule: imported.append(read_capsule(capsule)) or "a torch view"
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.permute(x, [1, 0]))
        fd.add_output(fd.ops.cast(fd.ops.add(x, x), DataType.BFloat16))
    fd.__dict__["_gpu_caches"] = {"auto": _C.FusionCache(fd._fusion, "auto", no_device="h100")}
    x = StandInTensor(np.zeros((5, 7), BF16), torch)
    view, doubled = fd.execute([x])
    assert view == "a torch view" and isinstance(doubled, Output)
    assert imported == [(x.data_ptr(), 2, [7, 5], [1, 7])]  # CUDA (2), the transposed strides


def test_run_torch_takes_plain_cuda_tensors_on_the_current_stream_and_declines_the_rest(monkeypatch):
    asked = []
    torch = types.ModuleType("torch")
    torch.Tensor, torch.bfloat16 = StandInTensor, object()
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: asked.append(device) or 0)
    monkeypatch.setitem(sys.modules, "torch", torch)
    _, cache = layer_norm_cache(DataType.BFloat16)
    x = StandInTensor(np.zeros((3, 5, 1600), BF16), torch)
    w = StandInTensor(np.zeros(1600, BF16), torch)
    (out,) = cache.run_torch([x, w], Allocations())
    assert out.shape == (3, 5, 1600) and asked == [0]  # the stream of the inputs' device, asked once
    (out,) = cache.run_torch((x, w), Allocations())  # a tuple too: Thunder passes its arguments' tuple
    assert out.shape == (3, 5, 1600) and asked == [0, 0]

    class Subclass(StandInTensor):
        pass

    class Inputs(list):
        pass

    cpu = StandInTensor(np.zeros((3, 5, 1600), BF16), torch)
    cpu.is_cuda = False
    for declined in [Inputs([x, w]), [np.zeros((3, 5, 1600), np.float32), w], [Subclass(x.array, torch), w],
                     [cpu, w], [1.0, 2]]:
        assert cache.run_torch(declined, Allocations()) is None
    assert len(asked) == 2  # declining asks torch nothing
    del torch._C._cuda_getCurrentRawStream  # an old torch: the general path, which has a fallback
    sys.modules["torch"] = types.ModuleType("torch")  # and a new module object is looked at again
    sys.modules["torch"].__dict__.update(Tensor=StandInTensor, bfloat16=torch.bfloat16, _C=torch._C)
    assert cache.run_torch([x, w], Allocations()) is None



def test_cuda_graphs_switch_defaults_off_and_runs_multi_kernel_plans():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        mean = fd.ops.sum(x, dims=[0], keepdim=True)
        fd.add_output(fd.ops.sub(x, fd.ops.expand(mean, shape=fd.ops.shape(x))))
    cache = _C.FusionCache(fd._fusion, "auto", no_device="h100")
    assert cache.cuda_graphs is False
    cache.cuda_graphs = True
    x = np.zeros((29, 32), np.float32)
    allocate = Allocations()
    for _ in range(2):
        (out,) = cache.run([x], 0, "dlpack", allocate)
        assert out.shape == (29, 32)
    assert allocate.asked == [([29, 32], [32, 1], "Float", 0)] * 2
    assert cache.cuda_graphs is True and len(cache) == 1


def test_a_stand_in_torch_module_leaks_nothing_at_exit():
    # The binding keeps torch's Tensor type and dtypes; they are dropped at exit (atexit), before nanobind
    # checks for leaked instances. benchmarks/python/binding_overhead.py (a stand-in torch module, the
    # cached run on it) once ended with "nanobind: leaked ..." reports.
    import os
    import subprocess

    script = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "python", "binding_overhead.py")
    result = subprocess.run([sys.executable, script, "--calls", "3"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "leaked" not in result.stderr, result.stderr


def test_forgetting_the_gpu_plans_drops_the_fast_paths_hold_on_them(monkeypatch):
    """compare.py's sweeps plan each tuning in a fresh cache: after execute.forget_gpu_plans the next
    execute goes to the cache made then, not to the one the torch fast path held."""
    _, fd, cache, x, w = cached_stand_in_layer_norm(monkeypatch)
    fd.execute([x, w])
    assert "_torch_fast" in fd.__dict__ and len(cache) == 1
    execute.forget_gpu_plans(fd)
    _, fresh = layer_norm_cache(DataType.BFloat16)
    fd.__dict__["_gpu_caches"] = {"auto": fresh}  # what the next GPU execute makes, without a GPU
    fd.execute([x, w])
    assert len(fresh) == 1


def test_empty_cache_returns_braze_freed_device_memory_once():
    import braze

    # Without a GPU no device was ever used: nothing is held, and no driver is loaded to say so.
    # With one, the first call returns what earlier tests left and the second finds nothing.
    assert braze.empty_cache() >= 0
    assert braze.empty_cache() == 0
