"""fd.execute and fd.explain, through one path: a FusionCache per fusion (and bookending policy), which
maps an input signature to a prepared plan and runs it on a device. GPU inputs (torch, CuPy or JAX
tensors on a CUDA device, through DLPack) run on that GPU, on the caller's stream (torch's or CuPy's
current stream unless `stream=` is given), and come back as tensors of the inputs' framework. Host
inputs (numpy arrays, CPU tensors) run on the simulated device (host memory, kernels run by the CPU
simulator) planned for `target`: their memory is lent to it without a copy, and the outputs come back
as numpy arrays / Python numbers. Outputs that are views of an input (bookended meta ops) share its
memory, as torch's views do.

Checked here, with the input's index in every message: what only Python can see (GPU objects,
numpy dtypes braze lacks, read-only arrays updated in place). Everything the definition says about
an input (count, dtype, rank, extents, contiguity, expanded stride 0) is checked by the evaluator
(csrc/reference/input_check.cpp) before anything runs.
"""

from __future__ import annotations

import functools
import os
import re
import sys

import numpy as np

from . import _C, dtypes, generator
from ._C import BrazeValueError

_MIXED_INPUTS = "give every tensor input on one GPU, or every one on the CPU (numpy, run on the CPU simulator)"

# nvFuser's execute keywords: accepted so scripts written for nvFuser run, and ignored here because they
# configure its GPU executor (scheduling, profiling), which braze does not have; print_repro is acted on
# by FusionDefinition.execute (repro.py), and save_repro_inputs needs nothing: reproducers embed inputs.
_IGNORED_KWARGS = {
    "override_user_schedule",
    "capture_debug_output",
    "print_repro",
    "profile",
    "save_repro_inputs",
    "_enable_options",
    "_disable_options",
}


_BOOKEND_POLICIES = ("auto", "none", "outputs", "both")

# The keywords the torch fast path may see: those it ignores anyway (print_repro is FusionDefinition's).
# Thunder passes _enable_options and _disable_options on every execute; nvFuser scripts pass device=.
FAST_KWARGS = frozenset(_IGNORED_KWARGS - {"print_repro"})
# device= values seen, and whether each names a GPU (they are few: "cuda:0", a torch.device). FusionDefinition's
# C execute method reads this dict too: it is updated in place, never rebound.
GPU_DEVICE_NAMES: dict = {}


def names_a_gpu(device) -> bool:
    """Whether `device=` leaves GPU inputs on the fast path: None, an index, "cuda[:n]" or a CUDA
    torch.device. The general path handles the rest ("cpu" with GPU inputs is an error)."""
    if device is None or type(device) is int:
        return True
    try:
        known = GPU_DEVICE_NAMES.get(device)
    except TypeError:  # unhashable: the general path decides
        return False
    if known is None:
        # Only names are kept (an int key would answer for the floats and bools equal to it).
        known = str(device).split(":")[0] == "cuda"
        if len(GPU_DEVICE_NAMES) < 64:
            GPU_DEVICE_NAMES[device] = known
    return known


def execute(fd, inputs, device, kwargs) -> list:
    # Every call form that CUDA torch inputs come in (positional, device=, Thunder's option keywords)
    # takes the fast path once the fusion has run on a GPU: one C++ pass from the inputs to the launch.
    if (not kwargs or kwargs.keys() <= FAST_KWARGS) and names_a_gpu(device) and "torch" in sys.modules:
        outputs = _execute_torch(fd, inputs)
        if outputs is not None:
            return outputs
    bookend, kwargs_device, stream = "auto", "h100", None
    if kwargs:  # read, not consumed: FusionDefinition.execute keeps them for a reproducer
        bookend = kwargs.get("bookend", "auto")
        kwargs_device = kwargs.get("target", "h100")
        stream = kwargs.get("stream", None)
        unknown = sorted(set(kwargs) - _IGNORED_KWARGS - {"bookend", "target", "stream"})
        if unknown:
            raise TypeError(f"execute: unexpected keyword argument(s) {', '.join(unknown)}")
    flat = _flatten(inputs, fd)
    if any(_on_cuda(x) for x in flat):
        if device is not None and str(device) == "cpu":
            raise RuntimeError("execute(device='cpu'): the inputs are on a GPU; " + _MIXED_INPUTS)
        return _execute_gpu(fd, flat, _policy(bookend), stream)
    if device is not None and str(device) != "cpu":
        ordinal = _gpu_ordinal(device)
        if ordinal is not None and _without_tensors(fd, flat):
            return _execute_on_gpu(fd, flat, ordinal, _policy(bookend), stream)
        raise RuntimeError(f"execute(device={device!r}): the inputs are host (numpy) arrays, which run on the CPU "
                           "simulator; pass tensors on the GPU to run there")
    args, copied = _host_args(fd, inputs)
    # The planner checks count, tensor-vs-scalar, dtype, rank, static and broadcast extents, stride 0
    # on expanded dims and the declared contiguity, naming the input's index.
    cache = _host_cache(fd, _policy(bookend), _device_name(kwargs_device))
    outputs = cache.run_host(args)
    note_last_run(fd, cache, on_gpu=False)
    for original, copy in copied:
        np.copyto(original, copy)  # the in-place update must land in the user's array
    results = [_to_python(out) for out in outputs]
    # A view of a read-only input is read-only too, as numpy's own views are (writing through it would
    # change memory its owner made immutable, or fault on a read-only mapping).
    read_only = [a for a in flat if isinstance(a, np.ndarray) and not a.flags.writeable]
    for r in results:
        if read_only and isinstance(r, np.ndarray) and any(np.may_share_memory(r, a) for a in read_only):
            r.flags.writeable = False
    if _has_torch_tensor(flat):
        # torch CPU tensors in, torch CPU tensors out (sharing the outputs' memory).
        from .pytorch_utils import to_torch

        results = [to_torch(r) if isinstance(r, np.ndarray) else r for r in results]
    return results


def _is_torch_tensor(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _has_torch_tensor(flat) -> bool:
    return any(_is_torch_tensor(x) for x in flat)


def _on_cuda(x) -> bool:
    """A tensor on a GPU: a CUDA device (DLPack device type 2) or an AMD one (ROCm, 10, which torch's ROCm
    build calls "cuda" too), told without importing its framework."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return x.is_cuda  # an attribute read, where __dlpack_device__ is a Python method
    device = getattr(x, "__dlpack_device__", None)
    if device is None or isinstance(x, np.ndarray):
        return False
    try:
        return device()[0] in (_DL_CUDA, _DL_ROCM)
    except Exception:  # noqa: BLE001 - an object that cannot say where it lives is not a GPU tensor
        return False


_DL_CUDA, _DL_ROCM = 2, 10


def _platform_of(flat) -> str:
    """'hip' when the GPU tensors are on AMD GPUs (ROCm), else 'cuda'."""
    for x in flat:
        if _is_torch_tensor(x) and x.is_cuda:
            return "hip" if getattr(getattr(sys.modules["torch"], "version", None), "hip", None) else "cuda"
        device = getattr(x, "__dlpack_device__", None)
        if device is not None and not isinstance(x, np.ndarray):
            try:
                kind = device()[0]
            except Exception:  # noqa: BLE001
                continue
            if kind in (_DL_CUDA, _DL_ROCM):
                return "hip" if kind == _DL_ROCM else "cuda"
    return "cuda"


def _framework_of(flat) -> str:
    for x in flat:
        module = type(x).__module__.split(".")[0]
        if module == "torch":
            return "torch"
        if module == "cupy":
            return "cupy"
        if module in ("jax", "jaxlib"):
            return "jax"
    return "dlpack"


def _current_stream(framework, flat) -> int:
    """The caller's stream, as the framework of the inputs defines it."""
    if framework == "torch":
        torch = sys.modules["torch"]  # imported: the inputs are its tensors
        tensor = torch.Tensor
        device = next((x.get_device() for x in flat if isinstance(x, tensor) and x.is_cuda), None)
        if device is None:  # the GPU tensors are another framework's: the run names the CPU ones
            return 0
        return _torch_stream(torch, device)
    if framework == "cupy":
        import cupy

        return cupy.cuda.get_current_stream().ptr
    return 0  # the legacy default stream, which orders after the work of every blocking stream


def _torch_stream(torch, device) -> int:
    """torch's current stream on `device`, as a raw handle: as the one-pass route reads it (torch's C ABI
    or torch._C._cuda_getCurrentRawStream, without building a Stream object), or through the public API
    where a torch build has neither."""
    raw = _C._torch_current_stream(device)
    return raw if raw is not None else torch.cuda.current_stream(device).cuda_stream


def _readable(flat) -> list:
    """The inputs as DLPack exports them: torch refuses __dlpack__ on tensors that require grad, and
    braze only reads them."""
    return [x.detach() if getattr(x, "requires_grad", False) else x for x in flat]


def _host_cache(fd, bookend, target):
    """The fusion's cache on the simulated device, planning for `target` (one per policy and target)."""
    caches = fd.__dict__.setdefault("_host_caches", {})
    cache = caches.get((bookend, target))
    if cache is None:
        cache = caches[(bookend, target)] = _C.FusionCache(fd._fusion, bookend, simulate=target)
    return cache


def _gpu_cache(fd, bookend, platform="cuda"):
    """The fusion's cache for GPU inputs: keyed by the bookending policy alone for CUDA (the key the
    torch fast path looks up), with the platform for AMD GPUs."""
    caches = fd.__dict__.setdefault("_gpu_caches", {})
    key = bookend if platform == "cuda" else (bookend, platform)
    cache = caches.get(key)
    if cache is None:
        cache = caches[key] = _C.FusionCache(fd._fusion, bookend, platform=platform)
    return cache


def forget_gpu_plans(fd) -> None:
    """Drops the fusion's GPU caches and the torch fast path's hold on them, so that its next GPU
    execute plans afresh (reading BRAZE_TUNING again, as compare.py's sweeps need). Other definitions
    that share the caches (the same definition made again) keep them."""
    for name in ("_gpu_caches", "_torch_fast", "_last_gpu_cache", "_last_run_was_gpu"):
        fd.__dict__.pop(name, None)


def _torch_allocator(torch):
    """Outputs from torch's caching allocator: torch accounts for their memory, and a CUDA graph
    capture records them in its private pool (memory from braze's own pool would become the graph's
    allocations, which a replay cannot make while the captured outputs are alive). Used on the current
    stream only, the one torch's allocator orders the memory on. BRAZE_TORCH_OUTPUTS=0, set before the
    first GPU execute, turns it off."""
    if torch in _TORCH_ALLOCATORS:  # one per torch module, made on the first run
        return _TORCH_ALLOCATORS[torch]
    if os.environ.get("BRAZE_TORCH_OUTPUTS", "1") == "0":
        _TORCH_ALLOCATORS[torch] = None
        return None
    torch_dtypes = _TORCH_DTYPES.get(torch)
    if torch_dtypes is None:
        names = {dtype.name: name for dtype, name in dtypes.ARRAY_NAMES.items()}
        torch_dtypes = _TORCH_DTYPES[torch] = {k: getattr(torch, v) for k, v in names.items() if hasattr(torch, v)}
    empty_strided = torch.empty_strided

    def allocate(sizes, strides, dtype, device):
        torch_dtype = torch_dtypes.get(dtype)
        if torch_dtype is None or 0 in sizes:
            return None  # a dtype this torch lacks, or an empty tensor (address 0): braze's pool
        t = empty_strided(sizes, strides, dtype=torch_dtype, device=device)
        return t, t.data_ptr()

    _TORCH_ALLOCATORS[torch] = allocate
    return allocate


_TORCH_DTYPES: dict = {}
_TORCH_ALLOCATORS: dict = {}


def updated_inputs(fd) -> tuple:
    """The positions (among the fusion's inputs, drawn seeds included) of the inputs it updates in place."""
    positions = fd.__dict__.get("_updated_positions")
    if positions is None:
        aliased = {v.id for v in fd._fusion.aliased_inputs()}
        positions = tuple(i for i, v in enumerate(fd._fusion.inputs()) if v.id in aliased)
        fd.__dict__["_updated_positions"] = positions
    return positions


def check_torch_updates(fd, flat, positions) -> None:
    """torch's rule for an in-place op: a leaf tensor that requires grad may not be updated while grad is
    enabled (an optimizer step runs under torch.no_grad())."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return
    for p in positions:
        if p >= len(flat):
            continue  # too few inputs: the execute says so
        t = flat[p]
        if isinstance(t, torch.Tensor) and t.requires_grad and t.is_leaf:
            # The flat position: FusionDefinition.execute gives the message the caller's (renumber_input_error).
            raise BrazeValueError(f"input {p} ({fd._fusion.inputs()[p].name}) is updated in place "
                                  "(add_output(alias_input=)) but is a leaf tensor that requires grad: torch refuses "
                                  "an in-place update of one while grad is enabled; run it under torch.no_grad()")


def bump_torch_versions(flat, positions) -> None:
    """The autograd version counter of each torch tensor updated in place, as torch's in-place ops bump it:
    a backward that saved the old value then says so instead of using the new one."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    tensors = [flat[p] for p in positions if isinstance(flat[p], torch.Tensor) and not flat[p].is_inference()]
    if tensors:
        torch.autograd.graph.increment_version(tensors)


def _execute_torch(fd, inputs):
    """The cached execute's most common case, CUDA torch tensors (and numbers) on torch's current stream,
    in one C++ pass (FusionCache.run_torch); None when the inputs are anything else, or the fusion has
    not run on a GPU yet (the general path then makes its cache)."""
    caches = fd.__dict__.get("_gpu_caches")
    cache = caches.get("auto") if caches is not None else None
    if cache is None:
        return None
    # Outputs from torch's caching allocator (as _torch_allocator says why), torch.empty_strided called
    # from C++: no Python function in between.
    torch_outputs = _torch_allocator(sys.modules["torch"]) is not None
    outputs = cache.run_torch(plain_list(inputs), None, torch_outputs)
    if outputs is not None:
        note_last_run(fd, cache, on_gpu=True)
        if getattr(fd, "_vector_sizes", None):
            return outputs  # a define_vector input comes as a list, which the runner never takes
        # FusionDefinition.execute goes straight to the C++ pass from now on, until another kind of run: a
        # function of the caller's inputs alone, which follows torch's autograd rules for the inputs the
        # fusion updates in place and draws the seeds of its random ops (generator.drawer).
        drawn = generator.drawn_positions(fd)
        fd._torch_fast = cache.torch_runner(torch_outputs, list(updated_inputs(fd)), list(drawn),
                                            generator.drawer(len(drawn)) if drawn else None)
    return outputs


def note_last_run(fd, cache, on_gpu: bool) -> None:
    """Records the cache the last execute ran on (what last_cuda_code and last_hip_code show) and closes
    the torch fast paths: they record nothing themselves, so they stay open only while the last run is
    theirs. The next GPU execute reopens them (_execute_torch)."""
    state = fd.__dict__
    state["_last_gpu_cache" if on_gpu else "_last_host_cache"] = cache
    state["_last_run_was_gpu"] = on_gpu
    state.pop("_torch_fast", None)


def _stream_handle(stream) -> int:
    """A CUstream handle for execute(stream=...): an int, or a torch or CuPy stream."""
    if isinstance(stream, int):
        return stream
    # torch's default stream has handle 0: test for the attribute, not the value.
    handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else getattr(stream, "ptr", None)
    if handle is None:
        raise TypeError("execute(stream=...): expected a torch or CuPy stream, or a CUstream handle (int)")
    return handle


def _gpu_ordinal(device):
    """The GPU `device=` names (an index, "cuda", "cuda:n", a CUDA torch.device), or None."""
    if isinstance(device, bool):
        return None
    if isinstance(device, int):
        return device
    index = None if isinstance(device, str) else getattr(device, "index", None)  # a torch.device's
    name = str(device)
    if name.split(":")[0] != "cuda":
        return None
    if index is not None:
        return index
    if ":" in name:
        return int(name.split(":")[1])
    torch = sys.modules.get("torch")
    return torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else 0


def _without_tensors(fd, flat) -> bool:
    """Whether the inputs hold no tensor a device could be told from: only numbers, and 0-d tensors where
    the definition says CPU scalar (is_cpu=True)."""
    definitions = fd._fusion.inputs()
    for i, x in enumerate(flat):
        if dtypes.is_python_number(x) or isinstance(x, np.generic):
            continue
        cpu_scalar = i < len(definitions) and definitions[i].is_tensor and definitions[i].is_cpu
        if not (cpu_scalar and getattr(x, "ndim", None) == 0):
            return False
    return True


def _execute_on_gpu(fd, flat, ordinal, bookend, stream) -> list:
    """A fusion without GPU tensor inputs (full, iota, random ops; numbers and CPU scalars in) run on GPU
    `ordinal`, as execute(..., device=n) asks: torch tensors out where torch is imported."""
    torch = sys.modules.get("torch")
    if torch is not None and not torch.cuda.is_available():
        torch = None  # torch sees no GPU: braze's driver says what is missing, and outputs are DLPack objects
    platform = "hip" if torch is not None and getattr(getattr(torch, "version", None), "hip", None) else "cuda"
    caches = fd.__dict__.setdefault("_gpu_caches", {})
    key = (bookend, platform, "device", ordinal)
    cache = caches.get(key)
    if cache is None:
        cache = caches[key] = _C.FusionCache(fd._fusion, bookend, platform=platform, device=ordinal)
    allocate = None
    if stream is None:
        stream = _torch_stream(torch, ordinal) if torch is not None else 0
        allocate = _torch_allocator(torch) if torch is not None else None
    else:
        stream = _stream_handle(stream)
    flat = [np.asarray(x)[()] if isinstance(x, np.generic) else x for x in flat]
    outputs = cache.run(flat, stream, "torch" if torch is not None else "dlpack", allocate)
    note_last_run(fd, cache, on_gpu=True)
    return outputs


def _execute_gpu(fd, flat, bookend, stream) -> list:
    cache = _gpu_cache(fd, bookend, _platform_of(flat))
    framework = _framework_of(flat)
    allocate = None
    if stream is None:
        stream = _current_stream(framework, flat)
        if framework == "torch":
            allocate = _torch_allocator(sys.modules["torch"])
    else:
        stream = _stream_handle(stream)
    if framework == "torch" and any(getattr(x, "requires_grad", False) for x in flat):
        flat = _readable(flat)
    if framework == "jax" and fd._fusion.aliased_inputs():
        name = fd._fusion.aliased_inputs()[0].name
        raise BrazeValueError(f"the fusion updates input {name} in place (add_output(..., alias_input={name})), but "
                              "JAX arrays are immutable: pass torch or CuPy tensors, or return the new value instead")
    outputs = cache.run(flat, stream, framework, allocate)
    note_last_run(fd, cache, on_gpu=True)
    return outputs


def renumber_input_error(fd, error):
    """An error raised after the inputs are flattened names positions among them ("input 3 (T3): ...",
    "T5 (from input 3, T3)", "... of input 4"): where define_vector inputs or the drawn seeds of random ops
    stand before one, the message is given the caller's position instead ("input 1")."""
    vectors = fd.__dict__.get("_vector_sizes") or {}
    drawn = generator.drawn_positions(fd)
    if (not vectors and not drawn) or getattr(error, "_braze_caller_positions", False) or not error.args or \
            not isinstance(error.args[0], str):
        return

    def caller_position(match):
        flat = int(match.group(2))
        if any(p <= flat <= p + 1 for p in drawn):
            return match.group(0)  # a drawn seed or offset: no input of the caller's
        flat -= 2 * sum(1 for p in drawn if p < flat)
        position, start = 0, 0
        while flat >= start + vectors.get(position, 1):
            start, position = start + vectors.get(position, 1), position + 1
        where = f"input {position}" if position not in vectors else f"input {position}[{flat - start}]"
        return match.group(1) + where

    renumbered = re.sub(r"(^|[^\w-])input (\d+)\b", caller_position, error.args[0])
    error._braze_caller_positions = True
    error.args = (renumbered,) + error.args[1:]


def _in_caller_positions(function):
    """`function(fd, inputs, ...)` with its errors' input numbers the caller's (renumber_input_error)."""
    @functools.wraps(function)
    def wrapper(fd, *args, **kwargs):
        try:
            return function(fd, *args, **kwargs)
        except Exception as error:
            renumber_input_error(fd, error)
            raise
    return wrapper


class CachedPlan:
    """fd.explain's answer: the Plan for the inputs (its attributes are this object's), plus what
    running them costs against the fusion's cache: `cache` is "hit" (a prepared plan), "new launch
    parameters" (kernels compiled already, new grid and row counts) or "new kernel" (a compile), and
    `cache_why` says why."""

    def __init__(self, plan, cache, cache_why):
        self.plan, self.cache, self.cache_why = plan, cache, cache_why

    def __getattr__(self, name):
        return getattr(self.plan, name)

    def __str__(self):
        return f"{self.plan}\ncache: {self.cache} ({self.cache_why})"


@_in_caller_positions
def explain(fd, inputs, bookend, target="h100"):
    inputs = generator.with_placeholders(fd, _flatten(inputs, fd))
    flat = _flatten(inputs, fd)
    if any(_on_cuda(x) for x in flat):
        # The inputs' own GPU decides the heuristics; `target` only names one for host inputs.
        plan, cache, why = _gpu_cache(fd, _policy(bookend), _platform_of(flat)).explain(_readable(flat))
        return CachedPlan(plan, cache, why)
    args, _ = _host_args(fd, inputs)
    plan, cache, why = _host_cache(fd, _policy(bookend), _device_name(target)).explain_host(args)
    return CachedPlan(plan, cache, why)


@_in_caller_positions
def reference(fd, inputs, reduction_nudge: float = 0.0) -> list:
    """The reference evaluator's outputs (the oracle the simulator and the GPU are compared with).
    reduction_nudge: every floating sum, product, mean and variance scaled by 1 + it, to find the outputs a
    float accumulation order moves beyond a tolerance (condition estimation in differential tests)."""
    inputs = generator.with_placeholders(fd, _flatten(inputs, fd))
    args, _ = _host_args(fd, inputs)
    return [_to_python(out) for out in _C.evaluate(fd._fusion, args, reduction_nudge)]


@_in_caller_positions
def cuda_code_for(fd, inputs, bookend="auto", target="h100") -> str:
    inputs = generator.with_placeholders(fd, _flatten(inputs, fd))
    args, _ = _host_args(fd, inputs)
    return "\n".join(_C.cuda_code_for(fd._fusion, args, _policy(bookend), _device_name(target)))


@_in_caller_positions
def hip_code_for(fd, inputs, bookend="auto", target="mi300x") -> str:
    inputs = generator.with_placeholders(fd, _flatten(inputs, fd))
    args, _ = _host_args(fd, inputs)
    return "\n".join(_C.hip_code_for(fd._fusion, args, _policy(bookend), _device_name(target)))


@_in_caller_positions
def kernels_for(fd, inputs, bookend="auto", target="h100") -> list:
    """Each kernel braze generates for these inputs, with its launch shape and parameter bindings."""
    inputs = generator.with_placeholders(fd, _flatten(inputs, fd))
    args, _ = _host_args(fd, inputs)
    return _C.kernels_for(fd._fusion, args, _policy(bookend), _device_name(target))


def _device_name(target) -> str:
    """The GPU the heuristics plan for (host inputs run on the simulator as that GPU would): a preset
    name, optionally with tuning ("h100:max_chunks_per_thread=2,block_threads=256"; see HeuristicTuning
    in csrc/target/device_info.h)."""
    if not isinstance(target, str):
        raise TypeError(f"target={target!r}: expected a device name such as 'h100', 'a100' or 'mi300x'")
    return target


def _policy(bookend) -> str:
    if bookend not in _BOOKEND_POLICIES:
        raise BrazeValueError(f"bookend={bookend!r}: expected one of {', '.join(_BOOKEND_POLICIES)}")
    return bookend


def _host_args(fd, inputs):
    """HostTensors (numpy memory, borrowed) and Python numbers for the inputs, plus the (user array,
    copy) pairs of in-place inputs that had to be copied to be borrowed."""
    fusion = fd._fusion
    flat = _flatten(inputs, fd)
    aliased = {v.id for v in fusion.aliased_inputs()}
    definitions = fusion.inputs()
    args = []
    copied = []
    copied_positions, originals = [], []  # positions of the copied updated inputs; every array as given
    for i, value in enumerate(flat):
        # numpy scalars and 0-D arrays are interchangeable; take the form the definition expects.
        known = i < len(definitions)
        if known and definitions[i].is_tensor and isinstance(value, np.generic):
            value = np.asarray(value)
        elif known and not definitions[i].is_tensor and isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        if dtypes.is_python_number(value):
            args.append(dtypes.python_number(value))
            continue
        array = _input_array(i, value)
        in_place = i < len(definitions) and definitions[i].id in aliased
        if in_place and not array.flags.writeable:
            name = definitions[i].name
            raise BrazeValueError(f"input {i}: {name} is updated in place (add_output(..., alias_input={name})) but the array is read-only")
        borrowed = _wrappable(array)
        if borrowed is not array and in_place:
            copied.append((array, borrowed))
            copied_positions.append(i)
        originals.append((i, array))
        args.append(_wrap(borrowed))
    _check_copied_updates_overlap_nothing(definitions, copied_positions, originals)
    return args, copied


def _share_elements(a, b) -> bool:
    """Whether two arrays have a byte in common (even and odd columns do not), or it is too costly to tell."""
    try:
        return bool(np.shares_memory(a, b, max_work=100_000))
    except np.exceptions.TooHardError:
        return True


def _check_copied_updates_overlap_nothing(definitions, copied_positions, originals):
    """An updated input that had to be copied (negative strides) is written back after the run, out of the
    sight of the plan's own overlap checks, which see the copy: it must share no memory with another input
    (the other's update, or the values it is read for, would be lost or mixed)."""
    for u in copied_positions:
        updated = next(a for i, a in originals if i == u)
        for i, other in originals:
            if i != u and _share_elements(updated, other):
                first, second = min(i, u), max(i, u)
                raise BrazeValueError(
                    f"input {first} ({definitions[first].name}) shares memory with input {second} "
                    f"({definitions[second].name}), and input {u} is updated in place through a copy (its negative "
                    "strides): the update would be written over the other; pass a copy of one of them")


class _FlatInputs(list):
    """Inputs _flatten has spread already (a define_vector's list into its scalars): not read as the
    caller's form again."""


def plain_list(inputs):
    """`inputs` as a list of its own type: what FusionCache.run_torch takes (a subclass it leaves to the
    general path)."""
    return list(inputs) if type(inputs) is _FlatInputs else inputs


def _flatten(inputs, fd=None) -> list:
    """The inputs with each define_vector(n) input's list spread into its n scalars; with `fd`, a list of
    another length than its vector's is refused by name."""
    if isinstance(inputs, _FlatInputs):
        return inputs
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"execute: inputs must be a list, got {type(inputs).__name__}")
    vectors = getattr(fd, "_vector_sizes", {}) if fd is not None else None
    if vectors:
        _check_vector_inputs(inputs, fd, vectors)
    flat = _FlatInputs() if vectors else []  # only a spread vector could be read as the caller's form
    for position, x in enumerate(inputs):
        if isinstance(x, (list, tuple)):
            if vectors is not None and position in vectors and len(x) != vectors[position]:
                raise _at_caller_positions(BrazeValueError(
                    f"input {position}: expected a list of {vectors[position]} ints "
                    f"(define_vector({vectors[position]})), got {len(x)}"))
            flat.extend(x)  # a define_vector(n) input: one element per symbolic scalar
        else:
            flat.append(x)
    return flat


def _at_caller_positions(error):
    """An error whose input numbers are the caller's already (renumber_input_error leaves it)."""
    error._braze_caller_positions = True
    return error


def _check_vector_inputs(inputs, fd, vectors):
    """Where the definition has define_vector inputs, each takes one list at its place and nothing else
    does, so that every later message's input number is where the caller put it."""
    drawn = 2 * len(fd.__dict__.get("_drawn_inputs", []))  # a random op's seed and offset, not passed
    expected = len(fd._fusion.inputs()) - drawn - sum(n - 1 for n in vectors.values())
    if len(inputs) != expected:
        raise _at_caller_positions(BrazeValueError(
            f"execute: expected {expected} inputs (each define_vector input one list), got {len(inputs)}"))
    for position, x in enumerate(inputs):
        n = vectors.get(position)
        if n is None:
            if isinstance(x, (list, tuple)):
                raise _at_caller_positions(BrazeValueError(
                    f"input {position}: a {type(x).__name__}, but only a define_vector input takes one"))
            continue
        if not isinstance(x, (list, tuple)):
            raise _at_caller_positions(TypeError(
                f"input {position}: expected a list of {n} ints (define_vector({n})), got {type(x).__name__}"))
        for i, v in enumerate(x):
            if isinstance(v, (bool, np.bool_)):
                raise _at_caller_positions(TypeError(
                    f"input {position}[{i}]: a bool, expected an int (define_vector({n}))"))


def _input_array(i, value) -> np.ndarray:
    """The numpy array for tensor input i, or a clear error."""
    if isinstance(value, np.ndarray):
        array = value
    elif hasattr(value, "__cuda_array_interface__"):
        raise RuntimeError(f"input {i}: a GPU array without DLPack (only __cuda_array_interface__): pass a torch, "
                           "CuPy or JAX tensor (read through DLPack), or a numpy array")
    elif _is_torch_tensor(value):
        from .pytorch_utils import from_torch

        array = from_torch(value, f"input {i}")
    elif hasattr(value, "__dlpack__"):
        # A CPU tensor of another library (a torch CPU tensor) is read through DLPack without a copy.
        device = value.__dlpack_device__()[0] if hasattr(value, "__dlpack_device__") else None
        if device != 1:  # kDLCPU
            raise RuntimeError(f"input {i}: a tensor on DLPack device type {device}, which is neither the CPU nor a CUDA GPU")
        array = np.from_dlpack(value)
    else:
        raise TypeError(f"input {i}: expected a numpy array or a Python number, got {type(value).__name__}")
    if dtypes.from_numpy_dtype(array.dtype) is None:
        raise TypeError(f"input {i}: numpy dtype {array.dtype} is not supported by braze")
    return array


def _wrappable(array: np.ndarray) -> np.ndarray:
    """The array itself when HostTensor can borrow it; else a copy. Negative strides (and strides
    that are not a multiple of the item size) are copied with order='K', which keeps the dims'
    memory order, so the evaluator's contiguity check sees the copy's layout."""
    if all(s >= 0 and s % array.itemsize == 0 for s in array.strides):
        return array
    return np.array(array, order="K", copy=True)


def _wrap(array: np.ndarray):
    strides = [s // array.itemsize for s in array.strides]
    if array.size == 0:
        # numpy gives every dim of an empty array stride 0; no element is ever read, so describe it
        # as row-major rather than have it fail a contiguity check.
        strides = [int(np.prod(array.shape[d + 1:], dtype=np.int64)) for d in range(array.ndim)]
    address = array.__array_interface__["data"][0]
    dtype = dtypes.from_numpy_dtype(array.dtype)
    return _C.HostTensor.wrap(address, dtype, list(array.shape), strides, array)


def _to_python(out):
    if not isinstance(out, _C.HostTensor):
        return out
    raw = out._raw_array()
    want = dtypes.to_numpy_dtype(out.dtype)
    return raw if raw.dtype == want else raw.view(want)
