"""torch dtypes and Python scalar types <-> braze DataTypes, as nvfuser.pytorch_utils maps them, and
the conversion of host outputs to torch CPU tensors.

torch is imported only when a function here needs it; without it they raise an ImportError that says
so (braze itself runs on numpy arrays without torch).
"""

from __future__ import annotations

import functools

import numpy as np

from . import _C, dtypes
from ._C import DataType


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("this needs PyTorch (pip install torch); braze runs without it on numpy arrays") from e
    return torch


@functools.cache
def _to_braze():
    """torch and its dtypes' DataTypes, made once (from_torch asks for every torch input of an execute)."""
    torch = _torch()
    table = {getattr(torch, name): dtype for dtype, name, _, _ in _C.dtype_table() if hasattr(torch, name)}
    return torch, table


def torch_dtype_to_nvfuser_dtype(dtype):
    """The DataType of a torch dtype (torch.float32 -> DataType.Float), or of a Python scalar type
    (float -> Double, int -> Int64, bool -> Bool). Complex types raise: braze has none."""
    if dtype in (bool, int, float, complex):
        return python_scalar_to_nvfuser_dtype(dtype)
    torch, table = _to_braze()
    if dtype in table:
        return table[dtype]
    if isinstance(dtype, torch.dtype) and dtype.is_complex:
        raise TypeError(f"{dtype}: braze has no complex dtypes (the README says why)")
    raise TypeError(f"{dtype!r} has no braze DataType")


def python_scalar_to_nvfuser_dtype(scalar_or_type):
    """DataType of a Python scalar or scalar type: bool -> Bool, int -> Int64, float -> Double."""
    kind = scalar_or_type if isinstance(scalar_or_type, type) else type(scalar_or_type)
    if kind is complex:
        raise TypeError("complex: braze has no complex dtypes (the README says why)")
    mapping = {bool: DataType.Bool, int: DataType.Int64, float: DataType.Double}
    if kind not in mapping:
        raise TypeError(f"{kind.__name__} is not a Python scalar type (bool, int or float)")
    return mapping[kind]


def nvfuser_dtype_to_torch_dtype(dtype):
    """The torch dtype of a DataType (DataType.BFloat16 -> torch.bfloat16)."""
    torch = _torch()
    name = dtypes.ARRAY_NAMES.get(dtype)
    if name is None or not hasattr(torch, name):
        raise TypeError(f"DataType.{dtype.name} has no torch dtype in torch {torch.__version__}")
    return getattr(torch, name)


def to_torch(array: np.ndarray):
    """A torch CPU tensor sharing the memory of a host output (ml_dtypes arrays through their bits)."""
    torch = _torch()
    if dtypes.from_numpy_dtype(array.dtype) in dtypes.NUMPY_NATIVE:
        return torch.from_numpy(array)
    # bfloat16 and the fp8 types: torch reads numpy's integer view of the same bytes.
    bits = array.view(np.int16 if array.itemsize == 2 else np.int8)
    return torch.from_numpy(bits).view(nvfuser_dtype_to_torch_dtype(dtypes.from_numpy_dtype(array.dtype)))


def from_torch(tensor, what: str) -> np.ndarray:
    """The numpy array sharing a torch CPU tensor's memory and strides (bfloat16 and fp8 through
    their bits, which numpy's DLPack import cannot take)."""
    torch = _torch()
    if tensor.device.type != "cpu":
        raise RuntimeError(f"{what}: a torch tensor on {tensor.device}, which is neither the CPU nor a CUDA GPU")
    try:
        dtype = torch_dtype_to_nvfuser_dtype(tensor.dtype)
    except TypeError as e:
        raise TypeError(f"{what}: {e}") from None
    tensor = tensor.detach().resolve_conj().resolve_neg()
    if dtype in dtypes.NUMPY_NATIVE:
        return tensor.numpy()
    bits = tensor.view(torch.int16 if tensor.element_size() == 2 else torch.int8).numpy()
    return bits.view(dtypes.to_numpy_dtype(dtype))
