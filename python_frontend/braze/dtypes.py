"""numpy dtype <-> braze DataType, and Python number -> DataType.

numpy has no bfloat16 or fp8 types of its own; ml_dtypes provides them (as JAX does), so they
are imported lazily and only required when such a tensor is used.
"""

from __future__ import annotations

import numpy as np

from . import _C
from ._C import DataType

# Made from the C++ dtype table (ir/data_type.cpp): the one place a dtype's names live.
_NATIVE = {np.dtype(name): dtype for dtype, name, native, _ in _C.dtype_table() if native}
NUMPY_NATIVE = frozenset(_NATIVE.values())
# The ml_dtypes attribute name of each braze type numpy lacks (bfloat16 and the fp8 types).
_ML_DTYPES = {dtype: name for dtype, name, native, _ in _C.dtype_table() if not native}
# torch's (and JAX's) attribute name of each type.
ARRAY_NAMES = {dtype: name for dtype, name, _, _ in _C.dtype_table()}


def _ml_dtypes():
    try:
        import ml_dtypes
    except ImportError as e:  # pragma: no cover - ml_dtypes is a dependency
        raise ImportError("bfloat16 and fp8 tensors need the ml_dtypes package (pip install ml_dtypes)") from e
    return ml_dtypes


def to_numpy_dtype(dtype: DataType) -> np.dtype:
    """The numpy dtype braze returns for `dtype` (ml_dtypes types for bf16 and fp8)."""
    for np_dtype, braze_dtype in _NATIVE.items():
        if braze_dtype == dtype:
            return np_dtype
    if dtype in _ML_DTYPES:
        return np.dtype(getattr(_ml_dtypes(), _ML_DTYPES[dtype]))
    raise TypeError(f"DataType.{dtype.name} has no numpy equivalent")


def from_numpy_dtype(np_dtype) -> DataType | None:
    """The braze DataType of a numpy dtype, or None if braze has no such type."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype in _NATIVE:
        return _NATIVE[np_dtype]
    # ml_dtypes types are recognized by name, so ml_dtypes is imported only when one shows up.
    for braze_dtype, name in _ML_DTYPES.items():
        if np_dtype.name == name:
            return braze_dtype
    return None


def python_scalar_dtype(value) -> DataType:
    """nvFuser's inference for define_scalar: bool -> Bool, int -> Int64, float -> Double."""
    value = python_number(value)
    if isinstance(value, bool):
        return DataType.Bool
    if isinstance(value, int):
        return DataType.Int64
    if isinstance(value, float):
        return DataType.Double
    raise TypeError(f"expected a bool, int or float, got {type(value).__name__} {value!r}")


class UnsupportedDataType:
    """A dtype nvFuser names that braze leaves out (the complex types): scripts that name it import,
    and using it raises an error that says so."""

    def __init__(self, name: str, why: str):
        self.name, self.why = name, why

    def __repr__(self) -> str:
        return f"DataType.{self.name}"


_COMPLEX_WHY = "braze has no complex dtypes (the README says why)"
for _name in ("ComplexFloat", "ComplexDouble"):
    setattr(DataType, _name, UnsupportedDataType(_name, _COMPLEX_WHY))
# Named by nvFuser 0.2.27, whose API level braze reports: Lightning Thunder's nvFuser executor reads
# DataType.UInt64 when it is imported, so the name must exist even though braze has no such dtype.
setattr(DataType, "UInt64", UnsupportedDataType("UInt64", "braze's only unsigned integer dtype is UInt8"))
setattr(DataType, "Float8_e8m0fnu", UnsupportedDataType(
    "Float8_e8m0fnu", "braze's 8-bit float dtypes are Float8_e4m3fn, Float8_e5m2 and their fnuz forms"))

_FLOATING = {DataType.Double, DataType.Float, DataType.Half, DataType.BFloat16, DataType.Float8_e4m3fn,
             DataType.Float8_e5m2, DataType.Float8_e4m3fnuz, DataType.Float8_e5m2fnuz}


def is_floating(dtype: DataType) -> bool:
    return dtype in _FLOATING


def _is_ml_dtypes_scalar(value) -> bool:
    # ml_dtypes scalars (bfloat16(1.5)) derive from np.generic but not from np.floating.
    return isinstance(value, np.generic) and from_numpy_dtype(value.dtype) in _ML_DTYPES


def is_python_number(value) -> bool:
    """A Python or numpy bool/int/float (ml_dtypes floats included)."""
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)) or _is_ml_dtypes_scalar(value)


def python_number(value):
    """A numpy scalar as the Python number it holds; Python numbers unchanged."""
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        return value.item()
    if _is_ml_dtypes_scalar(value):
        return float(value)
    return value
