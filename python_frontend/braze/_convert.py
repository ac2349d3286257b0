"""Argument conversion for fd.ops and the define_* methods.

nvFuser only accepts Tensor and Scalar operands; braze also accepts Python numbers (as
constants: bool -> Bool, int -> Int64, float -> Double) and lists of ints/Scalars for shapes.
Every error names the op and the argument, and says what was expected.
"""

from __future__ import annotations

import numpy as np

from . import _C, dtypes
from ._C import BrazeValueError
from .handles import Scalar, Tensor, Value


def describe(x) -> str:
    """How an unexpected argument is shown in an error message."""
    if isinstance(x, Value):
        return f"{type(x).__name__} {x.name}"
    if isinstance(x, np.ndarray):
        return f"a numpy array of shape {x.shape} (arrays are passed to fd.execute, not to ops)"
    return f"{type(x).__name__} {x!r}"


def _check_owner(fd, x: Value, op: str, arg: str):
    if x._fd is not fd:
        raise BrazeValueError(f"{op}: {arg} {x.name} belongs to another FusionDefinition")


def constant(fd, value, dtype=None):
    """A constant Scalar in fd's fusion (dtype inferred from the Python type when None)."""
    value = dtypes.python_number(value)
    if dtype is None or dtype == _C.DataType.Null:
        dtype = dtypes.python_scalar_dtype(value)
    return _C.constant(fd._fusion, value, dtype)


def val(fd, x, op: str, arg: str):
    """The C++ value of a Tensor, Scalar or Python number."""
    if isinstance(x, Value):
        _check_owner(fd, x, op, arg)
        return x._val
    if dtypes.is_python_number(x):
        return constant(fd, x)
    raise TypeError(f"{op}: {arg} must be a Tensor, a Scalar or a Python number, got {describe(x)}")


def tensor(fd, x, op: str, arg: str):
    """The C++ value of a Tensor (anything else is a TypeError naming op and argument)."""
    if isinstance(x, Tensor):
        _check_owner(fd, x, op, arg)
        return x._val
    raise TypeError(f"{op}: {arg} must be a Tensor, got {describe(x)}")


def optional_tensor(fd, x, op: str, arg: str):
    return None if x is None else tensor(fd, x, op, arg)


def scalar(fd, x, op: str, arg: str, dtype=None):
    """The C++ value of a Scalar or Python number (a number becomes a constant of `dtype`)."""
    if isinstance(x, Scalar):
        _check_owner(fd, x, op, arg)
        return x._val
    if dtypes.is_python_number(x):
        return constant(fd, x, dtype)
    raise TypeError(f"{op}: {arg} must be a Scalar or a Python number, got {describe(x)}")


def integer_scalar(fd, x, op: str, arg: str):
    """An Int64 scalar from an int or an integer Scalar: a count, an index or a diagonal, which torch and
    nvFuser refuse as a float (rather than truncating 2.5 to 2)."""
    if isinstance(x, (float, np.floating)) or (isinstance(x, Scalar) and dtypes.is_floating(x.dtype)):
        raise TypeError(f"{op}: {arg} must be an int or an integer Scalar, got {describe(x)}")
    return scalar(fd, x, op, arg, _C.DataType.Int64)


def optional_scalar(fd, x, op: str, arg: str, dtype=None):
    return None if x is None else scalar(fd, x, op, arg, dtype)


def shape(fd, xs, op: str, arg: str) -> list:
    """A list of Int64 scalars from a list/tuple of ints and Scalars (nvFuser's Vector)."""
    if not isinstance(xs, (list, tuple)):
        raise TypeError(f"{op}: {arg} must be a list of ints or Scalars, got {describe(xs)}")
    out = []
    for i, x in enumerate(xs):
        if isinstance(x, (bool, np.bool_)) or not (isinstance(x, (int, np.integer, Scalar))):
            raise TypeError(f"{op}: {arg}[{i}] must be an int or an integer Scalar, got {describe(x)}")
        out.append(scalar(fd, x, op, f"{arg}[{i}]", _C.DataType.Int64))
    return out


def ints(xs, op: str, arg: str, allow_single: bool = True) -> list:
    """A list of Python ints from an int (if allowed) or a list/tuple of ints."""
    if allow_single and isinstance(xs, (int, np.integer)) and not isinstance(xs, (bool, np.bool_)):
        return [int(xs)]
    if not isinstance(xs, (list, tuple)):
        raise TypeError(f"{op}: {arg} must be a list of ints, got {describe(xs)}")
    for i, x in enumerate(xs):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            raise TypeError(f"{op}: {arg}[{i}] must be an int, got {describe(x)}")
    return [int(x) for x in xs]


def integer(x, op: str, arg: str) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{op}: {arg} must be an int, got {describe(x)}")
    return int(x)


def flag(x, op: str, arg: str) -> bool:
    """A bool argument; 0 and 1 are accepted because nvFuser prints some flags that way."""
    if isinstance(x, (bool, np.bool_)) or (isinstance(x, (int, np.integer)) and x in (0, 1)):
        return bool(x)
    raise TypeError(f"{op}: {arg} must be a bool, got {describe(x)}")


def data_type(x, op: str, arg: str):
    if isinstance(x, _C.DataType):
        return x
    if isinstance(x, dtypes.UnsupportedDataType):
        raise TypeError(f"{op}: {arg} is {x!r}: {x.why}")
    raise TypeError(f"{op}: {arg} must be a DataType (e.g. DataType.Float), got {describe(x)}")
