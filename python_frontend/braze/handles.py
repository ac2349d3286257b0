"""Tensor and Scalar: the Python handles of values in a FusionDefinition.

They hold the C++ handle (owned by the fusion) and the FusionDefinition, which keeps the fusion
alive while a handle exists. Like nvFuser's, they carry no data; operators record ops
(`t0 + t1` records `fd.ops.add(t0, t1)`), with nvFuser's meanings: `/` is `div` (C division,
truncating for integers) and `%` is `mod`.
"""

from __future__ import annotations

from . import dtypes


def _is_operand(x) -> bool:
    return isinstance(x, Value) or dtypes.is_python_number(x)


def _binary(name: str, reflected: bool = False):
    def method(self, other):
        if not _is_operand(other):
            return NotImplemented  # lets Python try the other operand, then raise its TypeError
        op = getattr(self._fd.ops, name)
        return op(other, self) if reflected else op(self, other)

    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    method.__doc__ = f"Records fd.ops.{name}."
    return method


def _unary(name: str):
    def method(self):
        return getattr(self._fd.ops, name)(self)

    method.__doc__ = f"Records fd.ops.{name}."
    return method


class Value:
    """Common base of Tensor and Scalar."""

    __slots__ = ("_val", "_fd")

    def __init__(self, val, fd):
        self._val = val
        self._fd = fd

    @property
    def index(self) -> int:
        """The value's number: T3 and S3 have index 3 (nvFuser's state index)."""
        return self._val.id

    @property
    def name(self) -> str:
        return self._val.name

    @property
    def dtype(self):
        return self._val.dtype

    # Handles are hashable by identity even though == records an `eq` op (as in nvFuser).
    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError(
            f"{self.name} is a symbolic value of a fusion definition; it has no truth value "
            "(comparisons such as `a == b` record an `eq` op instead of comparing)"
        )

    __add__ = _binary("add")
    __radd__ = _binary("add", reflected=True)
    __sub__ = _binary("sub")
    __rsub__ = _binary("sub", reflected=True)
    __mul__ = _binary("mul")
    __rmul__ = _binary("mul", reflected=True)
    __truediv__ = _binary("div")  # nvFuser maps `/` to div (C semantics), not truediv
    __rtruediv__ = _binary("div", reflected=True)
    __pow__ = _binary("pow")
    __rpow__ = _binary("pow", reflected=True)
    __mod__ = _binary("mod")
    __rmod__ = _binary("mod", reflected=True)
    __eq__ = _binary("eq")
    __ne__ = _binary("ne")
    __lt__ = _binary("lt")
    __le__ = _binary("le")
    __gt__ = _binary("gt")
    __ge__ = _binary("ge")
    __and__ = _binary("bitwise_and")
    __rand__ = _binary("bitwise_and", reflected=True)
    __or__ = _binary("bitwise_or")
    __ror__ = _binary("bitwise_or", reflected=True)
    __xor__ = _binary("bitwise_xor")
    __rxor__ = _binary("bitwise_xor", reflected=True)
    __lshift__ = _binary("bitwise_left_shift")
    __rlshift__ = _binary("bitwise_left_shift", reflected=True)
    __rshift__ = _binary("bitwise_right_shift")
    __rrshift__ = _binary("bitwise_right_shift", reflected=True)
    __neg__ = _unary("neg")
    __abs__ = _unary("abs")
    __invert__ = _unary("bitwise_not")


class Tensor(Value):
    """A tensor of a fusion definition (a fusion input, or the result of an op)."""

    __slots__ = ()

    @property
    def ndim(self) -> int:
        return self._val.ndim

    def shape(self) -> list:
        """The extent of every dim as Scalars (records fd.ops.shape)."""
        return self._fd.ops.shape(self)

    def size(self, dim: int):
        """The extent of dim `dim` as a Scalar (records fd.ops.size)."""
        return self._fd.ops.size(self, dim)

    def __repr__(self) -> str:
        return f"Tensor(index={self.index}, ndim={self.ndim})"


class Scalar(Value):
    """A scalar of a fusion definition: a constant, a symbolic input, or the result of an op."""

    __slots__ = ()

    @property
    def value(self):
        """The constant's value, or None for a symbolic scalar."""
        return self._val.value

    def __repr__(self) -> str:
        return f"Scalar(index={self.index})"


def wrap(val, fd):
    """The Python handle of a C++ value."""
    return Tensor(val, fd) if val.is_tensor else Scalar(val, fd)
