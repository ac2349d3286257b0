"""The device the Python tests that run kernels use, chosen by the same switch as the C++ tests:
BRAZE_TEST_DEVICE=sim (numpy inputs, run on the simulated device) or cuda (the inputs copied to torch
CUDA tensors with their sizes, strides and address modulo 256, since plans depend on alignment; the
outputs copied back as numpy arrays); by default cuda where torch sees a GPU, else sim. helpers.run,
which the op and layout tests use, executes through it."""

from __future__ import annotations

import functools
import os

import numpy as np

from braze import dtypes


@functools.cache
def name() -> str:
    chosen = os.environ.get("BRAZE_TEST_DEVICE", "")
    if chosen not in ("", "sim", "cuda"):
        raise RuntimeError(f"BRAZE_TEST_DEVICE={chosen}: expected sim or cuda")
    if chosen == "sim":
        return "sim"
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if chosen == "cuda" and not gpu:
        raise RuntimeError("BRAZE_TEST_DEVICE=cuda, but torch sees no CUDA device (or is not installed)")
    return "cuda" if gpu else "sim"


_SAME_WIDTH = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _to_cuda(array: np.ndarray):
    """A torch CUDA tensor with the array's values, sizes and strides, its first element at the array's
    address modulo 256. None for what this copy does not reproduce (negative strides)."""
    import torch

    item = array.itemsize
    strides = [s // item for s in array.strides]
    if any(s < 0 for s in strides) or any(s % item for s in array.strides):
        return None
    torch_dtype = getattr(torch, dtypes.ARRAY_NAMES[dtypes.from_numpy_dtype(array.dtype)])
    span = 0 if array.size == 0 else 1 + sum((n - 1) * s for n, s in zip(array.shape, strides))
    raw = np.lib.stride_tricks.as_strided(array, shape=(span,), strides=(item,)).view(np.uint8)
    pad = array.__array_interface__["data"][0] % 256
    memory = torch.empty(pad + raw.size, dtype=torch.uint8, device="cuda")
    memory[pad:].copy_(torch.from_numpy(np.ascontiguousarray(raw)))
    return memory[pad:].view(torch_dtype).as_strided(array.shape, strides)


def _to_numpy(tensor, np_dtype) -> np.ndarray:
    import torch

    same_width = getattr(torch, _SAME_WIDTH[tensor.element_size()])
    return tensor.contiguous().view(same_width).cpu().numpy().view(np_dtype)


def _on_device(fd, inputs) -> list:
    """The inputs as the test device runs them: CUDA copies where that device is a GPU, else (and where
    the GPU path would refuse the case) the numpy inputs themselves."""
    if name() == "sim":
        return inputs
    if any(s.kind == "kernel" and s.scheduler is None for s in fd.explain(inputs).segments):
        # A segment no scheduler takes (a float32 matmul) has no GPU kernel and the GPU
        # path refuses it: the simulated device runs the case.
        return inputs
    moved = [_to_cuda(x) if isinstance(x, np.ndarray) else x for x in inputs]
    if any(m is None for m in moved):
        return inputs  # a layout the copy does not reproduce: the simulated device runs it
    return moved


def explain(fd, inputs):
    """fd.explain(inputs) against the cache that execute(fd, inputs) uses: the GPU's or the simulator's
    (each has its own, so a `cache` answer is only meaningful from the one that ran before)."""
    return fd.explain(_on_device(fd, inputs))


def execute(fd, inputs) -> list:
    """fd.execute(inputs) on the test device: numpy in, numpy (and Python numbers) out either way."""
    moved = _on_device(fd, inputs)
    if moved is inputs:
        return fd.execute(inputs)
    outputs = fd.execute(moved)
    by_name = {n: d for d, n in dtypes.ARRAY_NAMES.items()}  # torch's dtype names are numpy's / ml_dtypes'
    result = []
    for out in outputs:
        if hasattr(out, "is_cuda"):
            braze_dtype = by_name[str(out.dtype).removeprefix("torch.")]
            result.append(_to_numpy(out, dtypes.to_numpy_dtype(braze_dtype)))
        else:
            result.append(out)
    return result
