"""Reduction and normalization fd.ops: sum, prod, max, min, any, all, var, var_mean, welford.

nvFuser binds three overloads of each reduction, `(arg, dtype)`, `(arg, dim: int, keepdim, dtype)`
and `(arg, dims: list, keepdim, dtype)`; one Python signature accepts all three.
"""

from __future__ import annotations

from . import _C
from . import _convert as cv

DataType = _C.DataType


def _reduction_method(name: str):
    def op(self, arg, dims=None, keepdim=False, dtype=DataType.Null, *, dim=None):
        self._begin(name)
        x = cv.tensor(self._fd, arg, name, "arg")
        if isinstance(dims, DataType):  # the (arg, dtype) overload called positionally
            dims, dtype = None, dims
        if dims is not None and dim is not None:
            raise TypeError(f"{name}: give dim or dims, not both")
        if dim is not None:
            dims = dim
        dims = list(range(x.ndim)) if dims is None else cv.ints(dims, name, "dims")
        keepdim = cv.flag(keepdim, name, "keepdim")
        dtype = cv.data_type(dtype, name, "dtype")
        return self._wrap(_C.reduce(name, x, dims, keepdim, dtype))

    op.__name__ = name
    op.__doc__ = (
        f"fd.ops.{name}(arg, dims=None, keepdim=False, dtype=DataType.Null); also {name}(arg, dim=d) and "
        f"{name}(arg, dtype). dims=None reduces every dim; negative dims count from the end."
    )
    return op


def _correction(x, op):
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{op}: correction must be a number, got {cv.describe(x)}")
    return float(x)


class ReductionOps:
    sum = _reduction_method("sum")
    prod = _reduction_method("prod")
    max = _reduction_method("max")
    min = _reduction_method("min")
    any = _reduction_method("any")
    all = _reduction_method("all")

    def var(self, arg, dims, correction=1, keepdim=False):
        """fd.ops.var(arg, dims, correction=1, keepdim=False). (nvFuser has no default for correction.)"""
        self._begin("var")
        x = cv.tensor(self._fd, arg, "var", "arg")
        dims = cv.ints(dims, "var", "dims")
        return self._wrap(_C.var(x, dims, _correction(correction, "var"), cv.flag(keepdim, "var", "keepdim")))

    def var_mean(self, arg, dims, correction=1, keepdim=False):
        """fd.ops.var_mean(arg, dims, correction=1, keepdim=False) -> (var, mean)."""
        self._begin("var_mean")
        x = cv.tensor(self._fd, arg, "var_mean", "arg")
        dims = cv.ints(dims, "var_mean", "dims")
        var, mean = _C.var_mean(
            x, dims, _correction(correction, "var_mean"), cv.flag(keepdim, "var_mean", "keepdim")
        )
        return self._wrap(var), self._wrap(mean)

    def welford(self, arg, dims):
        """fd.ops.welford(arg, dims) -> (avg, var_sum, n); var = var_sum / (n - correction)."""
        self._begin("welford")
        x = cv.tensor(self._fd, arg, "welford", "arg")
        avg, var_sum, n = _C.welford(x, cv.ints(dims, "welford", "dims"))
        return self._wrap(avg), self._wrap(var_sum), self._wrap(n)
