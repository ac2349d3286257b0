"""Reproducers: one runnable script that rebuilds a fusion, recreates its inputs exactly (values, sizes,
strides, 16-byte alignment, and the GPU for torch tensors) and executes it, for bug reports.

    fd.execute(inputs, print_repro=True)   # prints the script before running, and the error if it raises
    BRAZE_REPRO_DIR=/some/dir              # on an error, writes it there; the error's notes name the file
    fd.repro_script(inputs)                # the script, error or not

Inputs up to 16 MiB in all are embedded byte for byte (compressed), so an error that depends on the
values (an index out of range, a division by zero) happens again; larger inputs are described and
filled with random values, which reproduces errors of layout and shape. The script starts with the
versions braze.config() reports, as comments.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import zlib

import numpy as np

from . import dtypes

_MAX_EMBEDDED_BYTES = 16 << 20
_ALIGNMENT = 64  # bytes: any misalignment a plan depends on (16-byte vectors) is kept modulo this

# What the script defines before its inputs: a strided, misaligned array or tensor with given values.
_HELPERS = '''
def strided(base, shape, strides):
    """as_strided of `base` with element `strides`, through an unsigned view of its width (numpy cannot
    read some ml_dtypes type strings: float8_e5m2's is '<f1')."""
    raw = base.view(np.dtype(f"u{base.itemsize}"))
    return np.lib.stride_tricks.as_strided(raw, shape, [s * base.itemsize for s in strides]).view(base.dtype)


def filled(dtype, shape, strides, data=None):
    """The elements a strided tensor spans, holding `data` (else random values) where it reads them."""
    import ml_dtypes  # noqa: F401 - registers bfloat16 and the fp8 types with numpy
    dt = np.dtype(dtype)
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    buffer = np.zeros(span, dt)
    if span:
        view = strided(buffer, shape, strides)
        if data is not None:
            view[...] = np.frombuffer(zlib.decompress(base64.b64decode(data)), dt).reshape(shape)
        else:
            view[...] = np.random.default_rng(0).standard_normal(shape).astype(dt)
    return buffer


def host_tensor(dtype, shape, strides, misalign, data=None):
    """A numpy array of `shape` and element `strides`, `misalign` bytes past a 64-byte boundary."""
    buffer = filled(dtype, shape, strides, data)
    raw = np.zeros(buffer.nbytes + 128, np.uint8)
    start = (misalign - raw.ctypes.data) % 64
    raw[start:start + buffer.nbytes] = buffer.view(np.uint8)
    base = raw[start:start + buffer.nbytes].view(buffer.dtype)
    return strided(base, shape, strides)


def cuda_tensor(dtype, shape, strides, misalign, device, data=None):
    """The same as a torch tensor on GPU `device` (torch allocations are 512-byte aligned)."""
    import torch
    buffer = filled(dtype.replace("torch.", ""), shape, strides, data)
    torch_dtype = getattr(torch, dtype.replace("torch.", ""))
    pad = misalign // buffer.itemsize
    storage = torch.zeros(buffer.size + pad, dtype=torch_dtype, device=f"cuda:{device}")
    storage[pad:].copy_(torch.from_numpy(buffer.view(np.uint8).copy()).view(torch_dtype))
    return storage.as_strided(shape, strides, pad)
'''


def script(fd, inputs, error=None, keywords=None) -> str:
    """A runnable script that rebuilds `fd`, recreates `inputs` and executes them (with execute's
    `keywords` that a script can hold: bookend, target); `error` (the one raised, if any) is named at
    the top."""
    lines = ["# braze reproducer: run it with python to execute the fusion on these inputs again."]
    if error is not None:
        first = str(error).splitlines()[0] if str(error) else ""
        lines.append(f"# It raised {type(error).__name__}: {first}")
    lines += [f"#   {key}: {value}" for key, value in _versions().items()]
    lines += ["import base64", "import zlib", "", "import numpy as np", ""]
    lines.append(repr(fd).rstrip())
    lines.append(_HELPERS)
    lines.append("inputs = [")
    embed = _total_bytes(inputs) <= _MAX_EMBEDDED_BYTES
    for i, value in enumerate(inputs):
        lines.append(f"    {_describe(i, value, embed)},")
    kept = {k: v for k, v in (keywords or {}).items() if k in ("bookend", "target") and isinstance(v, str)}
    call = "".join(f", {k}={v!r}" for k, v in kept.items())
    lines += ["]", f"outputs = fd.execute(inputs{call})", "print([getattr(o, 'shape', o) for o in outputs])", ""]
    return "\n".join(lines)


def report(fd, inputs, error, printed: bool, keywords=None) -> None:
    """What execute does when it raises: after the script print_repro=True printed before the run
    (`printed`), a line naming the error; the script, with the error at its top, written to
    $BRAZE_REPRO_DIR and named in the error's notes. Never raises itself: a reproducer that cannot be
    made must not hide the error it was made for."""
    if printed:
        first = str(error).splitlines()[0] if str(error) else ""
        print(f"# The execute this reproducer repeats raised {type(error).__name__}: {first}")
    directory = os.environ.get("BRAZE_REPRO_DIR")
    if not directory:
        return
    try:
        text = script(fd, inputs, error, keywords)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"braze_repro_{hashlib.sha256(text.encode()).hexdigest()[:12]}.py")
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        _note(error, f"braze: reproducer written to {path}")
    except Exception as failure:  # noqa: BLE001 - see the docstring
        _note(error, f"braze: no reproducer could be written ({type(failure).__name__}: {failure})")


def _note(error, text) -> None:
    try:
        if hasattr(error, "add_note"):  # Python 3.11+
            error.add_note(text)
        else:  # pragma: no cover - older Pythons show it on stderr instead
            print(text, file=sys.stderr)
    except Exception:  # noqa: BLE001, S110 - the error being raised matters more than this note
        pass


def _versions() -> dict:
    try:
        from .config import config

        return config()
    except Exception as failure:  # noqa: BLE001 - versions are a courtesy, not a reason to fail
        return {"config": f"unavailable ({failure})"}


def _flat(inputs) -> list:
    return [y for x in inputs for y in (x if isinstance(x, (list, tuple)) else [x])]


def _total_bytes(inputs) -> int:
    total = 0
    for value in _flat(inputs):
        nbytes = getattr(value, "nbytes", None)
        if nbytes is None and hasattr(value, "element_size"):
            nbytes = value.numel() * value.element_size()
        total += int(nbytes or 0)
    return total


def _describe(i, value, embed) -> str:
    if isinstance(value, (list, tuple)):  # a define_vector input
        return "[" + ", ".join(_describe(i, v, embed) for v in value) + "]"
    if dtypes.is_python_number(value):
        number = dtypes.python_number(value)
        return repr(number) if not isinstance(number, float) or np.isfinite(number) else f"float('{number}')"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return _describe_torch(value, embed)
    if isinstance(value, np.ndarray):
        return _describe_host(value, embed)
    raise TypeError(f"input {i}: a {type(value).__name__} cannot be written into a reproducer (numpy arrays, torch "
                    "tensors and Python numbers can)")


def _payload(contiguous: np.ndarray, embed) -> str:
    if not embed:
        return ""
    data = base64.b64encode(zlib.compress(contiguous.reshape(-1).view(np.uint8).tobytes(), 6)).decode()
    return f", data={data!r}"


def _describe_host(array: np.ndarray, embed) -> str:
    if any(s < 0 or s % array.itemsize for s in array.strides):  # as execute takes it: a copy
        array = np.array(array, order="K", copy=True)
    strides = [s // array.itemsize for s in array.strides]
    misalign = array.__array_interface__["data"][0] % _ALIGNMENT
    if dtypes.from_numpy_dtype(array.dtype) is None:
        raise TypeError(f"numpy dtype {array.dtype} is not one braze takes")
    return (f"host_tensor({array.dtype.name!r}, {list(array.shape)}, {strides}, {misalign}"
            f"{_payload(np.ascontiguousarray(array), embed)})")


def _describe_torch(tensor, embed) -> str:
    name = str(tensor.dtype)  # "torch.bfloat16"
    shape, strides = list(tensor.shape), list(tensor.stride())
    payload = ""
    if embed:
        host = tensor.detach().contiguous().cpu()
        # reshape(-1): numpy cannot reinterpret the bytes of a 0-d array of a wider type.
        payload = _payload(host.reshape(-1).view(_TORCH_BYTE_VIEWS[host.element_size()]).numpy(), True)
    if not tensor.is_cuda:
        return f"host_tensor({name.replace('torch.', '')!r}, {shape}, {strides}, 0{payload})"
    misalign = tensor.data_ptr() % _ALIGNMENT
    return f"cuda_tensor({name!r}, {shape}, {strides}, {misalign}, {tensor.get_device()}{payload})"


class _ByteViews(dict):
    """torch dtype of each element size, for viewing any tensor's bytes as integers numpy can hold."""

    def __missing__(self, size):
        import torch

        value = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
        self[size] = value
        return value


_TORCH_BYTE_VIEWS = _ByteViews()
