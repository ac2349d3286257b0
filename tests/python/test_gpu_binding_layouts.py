"""The GPU binding lays out outputs as the host path does, checked without a GPU: random fusions (the
fuzzers' general cases, meta-op chains under their bookending policies, and in-place updates) run through a
cache made with `no_device="h100"` (planned for an H100, nothing launched, numpy arrays standing for device
tensors) and through fd.execute on the simulated device. Each output must have the same shape and strides (over its
dims longer than 1), an output the host path returns as a view of an input must be a view at the same
address on the GPU path, and an output the host path copies must not point into an input. Cases whose
inputs numpy cannot export through DLPack (bfloat16 arrays, read-only broadcasts) are skipped, as are
those the reference rejects."""

from __future__ import annotations

import ctypes
import os

import numpy as np

from braze import _C
from fuzz_fusions import defined, generate, generate_in_place
from fuzz_views import generate_views

CASES = int(os.environ.get("BRAZE_FUZZ_LAYOUT_CASES", "1000"))
FIRST = int(os.environ.get("BRAZE_FUZZ_SEED", "0"))


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _layout(x):
    """(address, shape, strides in elements) of a numpy array or of a tensor the binding returns for a
    device (read from its DLPack capsule: a DLManagedTensor begins with its DLTensor)."""
    if isinstance(x, np.ndarray):
        return x.ctypes.data, tuple(x.shape), tuple(s // x.itemsize for s in x.strides)
    capsule = x.__dlpack__()
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    return (t.data or 0) + t.byte_offset, shape, strides


class _Allocations:
    """Output memory for the binding: numpy buffers laid out as asked (never written: nothing runs)."""

    ITEM = {"Float": np.float32, "Double": np.float64, "Half": np.float16, "BFloat16": np.uint16, "Int64": np.int64,
            "Int32": np.int32, "Int16": np.int16, "Int8": np.int8, "UInt8": np.uint8, "Bool": np.uint8}

    def __call__(self, sizes, strides, dtype, device):
        span = 1 + sum((n - 1) * s for n, s in zip(sizes, strides)) if all(sizes) else 1
        base = np.zeros(span, self.ITEM[dtype])
        view = np.lib.stride_tricks.as_strided(base, shape=sizes, strides=[s * base.itemsize for s in strides])
        return view, base.ctypes.data


def _compare(seed, source, host, gpu, arrays):
    assert len(host) == len(gpu)
    for i, (h, g) in enumerate(zip(host, gpu)):
        address, shape, strides = _layout(g)
        where = f"case {seed}, output {i}"
        assert shape == h.shape, f"{where}: {shape} on the GPU path, {h.shape} on the host\n{source}"
        long_dims = [d for d, n in enumerate(h.shape) if n > 1]
        host_strides = _layout(h)[2]
        if strides is None:  # DLPack's null strides: row-major
            strides = tuple(int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape)))
        assert [strides[d] for d in long_dims] == [host_strides[d] for d in long_dims], (
            f"{where}: strides {strides} on the GPU path, {host_strides} on the host\n{source}")
        if any(np.shares_memory(h, x) for x in arrays):
            assert h.size == 0 or address == h.ctypes.data, f"{where}: a view of another address\n{source}"
        else:
            inside = [x for x in arrays if x.size and x.ctypes.data <= address < x.ctypes.data + x.nbytes]
            assert not inside, f"{where}: the host copies it, the GPU path points into an input\n{source}"


def _run(generator, label):
    """(cases compared, cases numpy could hand over through DLPack)."""
    checked = eligible = 0
    for seed in range(FIRST, FIRST + CASES):
        source = generator(seed)
        if source is None:  # generate_in_place draws no update for this seed
            continue
        scope = defined(source, f"{label} case {seed}")
        if scope is None:
            continue
        fd, inputs, bookend = scope["fd"], scope["inputs"], scope.get("bookend", "auto")
        if any(isinstance(x, np.ndarray) and (not x.flags.writeable or x.dtype.name == "bfloat16") for x in inputs):
            continue  # numpy exports neither bfloat16 nor read-only arrays through DLPack
        eligible += 1
        try:
            host = fd.execute(inputs, bookend=bookend)
        except ValueError:
            continue
        cache = _C.FusionCache(fd._fusion, bookend, no_device="h100")
        gpu = cache.run(inputs, 0, "dlpack", _Allocations())
        _compare(seed, source, host, gpu, [x for x in inputs if isinstance(x, np.ndarray)])
        checked += 1
    return checked, eligible


def test_outputs_of_random_fusions_are_laid_out_as_on_the_host():
    checked, eligible = _run(generate, "fuzz")
    # About 40% of the general cases have only inputs numpy can hand over; the reference rejects a few.
    assert eligible >= CASES // 5 and checked >= 0.9 * eligible, f"{checked} of {eligible} of {CASES} cases compared"


def test_outputs_of_meta_op_chains_are_the_same_views_as_on_the_host():
    checked, eligible = _run(generate_views, "view")
    assert eligible >= CASES // 3 and checked >= 0.9 * eligible, f"{checked} of {eligible} of {CASES} cases compared"


def test_outputs_of_in_place_updates_are_laid_out_as_on_the_host():
    """Updates of inputs (alias_input): the outputs the GPU path returns are those the host path returns (an
    aliased output not returned, as nvFuser's convention), laid out alike."""
    checked, eligible = _run(generate_in_place, "in-place")
    assert eligible >= CASES // 5 and checked >= 0.9 * eligible, f"{checked} of {eligible} of {CASES} cases compared"
