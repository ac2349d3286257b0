"""Elementwise fd.ops: every unary and binary op of braze's op table (generated from it, so the
two cannot drift apart), the ternary ops, cast, and nvFuser's add_alpha / sub_alpha.

Operands may be Tensors, Scalars or Python numbers; any Tensor operand makes the result a Tensor,
and tensor operands must have equal ranks (use broadcast_in_dim first), as in nvFuser.
"""

from __future__ import annotations

from . import _C
from . import _convert as cv


def _unary_method(name: str):
    def op(self, arg, /):
        self._begin(name)
        return self._wrap(_C.unary_op(name, cv.val(self._fd, arg, name, "arg")))

    op.__name__ = name
    op.__doc__ = f"fd.ops.{name}(arg): elementwise {name} of a Tensor or Scalar."
    return op


def _binary_method(name: str):
    def op(self, lhs, rhs, /):
        self._begin(name)
        a = cv.val(self._fd, lhs, name, "lhs")
        b = cv.val(self._fd, rhs, name, "rhs")
        return self._wrap(_C.binary_op(name, a, b))

    op.__name__ = name
    op.__doc__ = f"fd.ops.{name}(lhs, rhs): elementwise {name}; Scalars and Python numbers broadcast."
    return op


def _ternary_method(name: str, doc: str):
    def op(self, a, b, c, /):
        self._begin(name)
        args = [cv.val(self._fd, x, name, arg) for x, arg in zip((a, b, c), ("arg1", "arg2", "arg3"))]
        return self._wrap(_C.ternary_op(name, *args))

    op.__name__ = name
    op.__doc__ = doc
    return op


class ElementwiseOps:
    where = _ternary_method("where", "fd.ops.where(cond, a, b): a where cond (Bool) is true, else b.")
    lerp = _ternary_method("lerp", "fd.ops.lerp(start, end, weight) = start + weight * (end - start).")
    clamp = _ternary_method("clamp", "fd.ops.clamp(arg, min, max); keeps arg's dtype.")
    threshold = _ternary_method("threshold", "fd.ops.threshold(arg, threshold, value): value where arg <= threshold.")

    def addcmul(self, arg, tensor1, tensor2, value, /):
        """fd.ops.addcmul(arg, t1, t2, value) = arg + value * t1 * t2 (value must be a Scalar)."""
        self._begin("addcmul")
        fd = self._fd
        return self._wrap(
            _C.addcmul(
                cv.val(fd, arg, "addcmul", "arg"),
                cv.val(fd, tensor1, "addcmul", "tensor1"),
                cv.val(fd, tensor2, "addcmul", "tensor2"),
                cv.scalar(fd, value, "addcmul", "value"),
            )
        )

    def cast(self, arg, dtype):
        """fd.ops.cast(arg, dtype): convert a Tensor or Scalar; same dtype is a copy."""
        self._begin("cast")
        x = cv.val(self._fd, arg, "cast", "arg")
        return self._wrap(_C.cast(x, cv.data_type(dtype, "cast", "dtype")))

    def add_alpha(self, lhs, rhs, alpha, /):
        """fd.ops.add_alpha(a, b, alpha) = a + b * alpha (recorded as mul and add)."""
        return self.add(lhs, self.mul(rhs, self._scalar_operand(alpha, "add_alpha", "alpha")))

    def sub_alpha(self, lhs, rhs, alpha, /):
        """fd.ops.sub_alpha(a, b, alpha) = a - b * alpha (recorded as mul and sub)."""
        return self.sub(lhs, self.mul(rhs, self._scalar_operand(alpha, "sub_alpha", "alpha")))

    def imag(self, arg, /):
        """fd.ops.imag(arg): braze has no complex types, and nvFuser rejects imag of a real tensor."""
        self._begin("imag")
        x = cv.val(self._fd, arg, "imag", "arg")
        raise TypeError(
            f"imag: {x.name} has the real dtype DataType.{x.dtype.name}; imag needs a complex operand "
            "(braze has no complex types yet)"
        )

    def _scalar_operand(self, x, op, arg):
        self._begin(op)
        return self._wrap(cv.scalar(self._fd, x, op, arg))


def _install_generated_ops():
    """One method per unary and binary op in braze's op table (nvFuser's names)."""
    for name, category in _C.all_ops():
        if name in ElementwiseOps.__dict__:
            continue  # written by hand above
        if category == "unary":
            setattr(ElementwiseOps, name, _unary_method(name))
        elif category == "binary":
            setattr(ElementwiseOps, name, _binary_method(name))


_install_generated_ops()
