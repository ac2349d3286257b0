"""fd.ops whose elements depend on other positions than their own, and the random tensors: cumsum,
topk, argsort, scatter, index_put_accumulate, triu, uniform, normal, rand_like, randn_like.

cumsum, topk, argsort, scatter and index_put_accumulate each run in a scan kernel of their own (scheduler/scan: one
thread per line, applying the index's entries in order, so the results are deterministic). The random ops are computed per element (Philox of the element's position) in pointwise kernels, and
triu is recorded as iota, comparisons and where, so both run in kernels everywhere.
"""

from __future__ import annotations

from . import _C
from . import _convert as cv
from . import dtypes
from ._C import BrazeValueError
from .handles import Tensor

DataType = _C.DataType


class ScanScatterOps:
    @staticmethod
    def _zero_dim_checked(x, dim, op):
        """dim as an int; for a 0-d x, one torch takes there (0 or -1)."""
        dim = cv.integer(dim, op, "dim")
        if x.ndim == 0 and dim not in (0, -1):
            raise IndexError(f"{op}: dim {dim} is out of range for the 0-d tensor {x.name} (expected 0 or -1)")
        return dim

    def _line_of(self, x, dim, op):
        """(x, dim) to scan; a 0-d x (dim 0 or -1, as torch takes it) as a line of one element."""
        dim = self._zero_dim_checked(x, dim, op)
        if x.ndim != 0:
            return x, dim
        return _C.reshape(x, [cv.constant(self._fd, 1, DataType.Int64)]), 0

    @staticmethod
    def _as_scalar_tensor(line, x):
        """A result of _line_of's line back as a 0-d tensor where x was one."""
        return _C.reshape(line, []) if x.ndim == 0 else line

    def cumsum(self, arg, dim):
        """fd.ops.cumsum(arg, dim): torch.cumsum (integers and bools accumulate in Int64); of a 0-d tensor,
        its value."""
        self._begin("cumsum")
        x = cv.tensor(self._fd, arg, "cumsum", "arg")
        line, d = self._line_of(x, dim, "cumsum")
        return self._wrap(self._as_scalar_tensor(_C.cumsum(line, d), x))

    def topk(self, arg, k, dim=-1, largest=True, sorted=False):
        """fd.ops.topk(arg, k, dim=-1, largest=True, sorted=False): torch.topk; returns (values, indices).
        The k are always in order (largest first, or smallest first), ties by lower index, NaN above every
        number; k is an int or a scalar of the definition."""
        self._begin("topk")
        fd = self._fd
        x = cv.tensor(fd, arg, "topk", "arg")
        count = cv.integer_scalar(fd, k, "topk", "k")
        largest, sorted = cv.flag(largest, "topk", "largest"), cv.flag(sorted, "topk", "sorted")
        if x.ndim == 0:
            self._zero_dim_checked(x, dim, "topk")
            # torch.topk of a 0-d tensor gives the tensor and index 0 for k of 0 or 1 alike.
            if count.value is None or count.value not in (0, 1):
                raise BrazeValueError(f"topk: k must be a constant 0 or 1 for the 0-d tensor {x.name}, got "
                                      f"{'a symbolic k' if count.value is None else count.value}")
            return self._wrap(_C.set(x)), self._wrap(_C.full([], cv.constant(fd, 0, DataType.Int64), DataType.Int64))
        values, indices = _C.topk(x, count, cv.integer(dim, "topk", "dim"), largest, sorted)
        return self._wrap(values), self._wrap(indices)

    def argsort(self, arg, dim=-1, descending=False, stable=False):
        """fd.ops.argsort(arg, dim=-1, descending=False, stable=False): torch.argsort (Int64 indices);
        always stable (ties keep index order), NaN above every number."""
        self._begin("argsort")
        fd = self._fd
        x = cv.tensor(fd, arg, "argsort", "arg")
        line, d = self._line_of(x, dim, "argsort")
        order = _C.argsort(line, d, cv.flag(descending, "argsort", "descending"), cv.flag(stable, "argsort", "stable"))
        return self._wrap(self._as_scalar_tensor(order, x))

    def scatter(self, arg1, index, src, dim):
        """fd.ops.scatter(arg1, index, src, dim): torch.scatter out of place: out = arg1 with
        out[..., index[i, j], ...] = src[i, j] along dim (the last write wins where index repeats). src
        may be a number or a Scalar (every position index names gets it), as nvFuser's newer releases take."""
        self._begin("scatter")
        fd = self._fd
        x = cv.tensor(fd, arg1, "scatter", "arg1")
        idx = cv.tensor(fd, index, "scatter", "index")
        if not isinstance(src, Tensor):
            src = self.full(self.shape(self._wrap(idx)), src, x.dtype)
        s = cv.tensor(fd, src, "scatter", "src")
        return self._wrap(_C.scatter(x, idx, s, cv.integer(dim, "scatter", "dim")))

    def index_put_accumulate(self, acc, index, value):
        """fd.ops.index_put_accumulate(acc, index, value): acc.index_put_((index,), value,
        accumulate=True) out of place; rows of value add into the rows of acc that index names
        (negative indices count from the end, as in torch)."""
        self._begin("index_put_accumulate")
        fd = self._fd
        a = cv.tensor(fd, acc, "index_put_accumulate", "acc")
        idx = cv.tensor(fd, index, "index_put_accumulate", "index")
        v = cv.tensor(fd, value, "index_put_accumulate", "value")
        return self._wrap(_C.index_put_accumulate(a, idx, v))

    def triu(self, input, diagonal=0):
        """fd.ops.triu(input, diagonal=0): torch.triu; zeroes the elements below the diagonal of the
        last two dims (recorded as iota, sub, ge and where)."""
        self._begin("triu")
        fd = self._fd
        x = cv.tensor(fd, input, "triu", "input")
        if x.ndim < 2:
            raise BrazeValueError(f"triu: input {x.name} has rank {x.ndim}; it needs at least 2 dims [nvFuser: input "
                                  f"tensor for triu must have 2 or more dims, but got {x.ndim} dims]")
        k = cv.integer_scalar(fd, diagonal, "triu", "diagonal")
        rows = self.iota(self.size(self._wrap(x), x.ndim - 2), dtype=DataType.Int64)
        cols = self.iota(self.size(self._wrap(x), x.ndim - 1), dtype=DataType.Int64)
        shape = self.shape(self._wrap(x))
        rows = self.broadcast_in_dim(rows, shape, [x.ndim - 2])
        cols = self.broadcast_in_dim(cols, shape, [x.ndim - 1])
        keep = self.ge(self.sub(cols, rows), self._wrap(k))
        zero = self._wrap(_C.cast(cv.constant(fd, 0), x.dtype))
        return self.where(keep, self._wrap(x), zero)

    def uniform(self, minval, maxval, shape, dtype=DataType.Float, rng_seed=None, rng_offset=None):
        """fd.ops.uniform(minval, maxval, shape, dtype=DataType.Float, rng_seed=, rng_offset=):
        numbers in [minval, maxval), element i a function of (rng_seed, rng_offset, i) only."""
        return self._random("uniform", _C.uniform, minval, maxval, shape, dtype, rng_seed, rng_offset)

    def normal(self, mean, std, shape, dtype=DataType.Float, rng_seed=None, rng_offset=None):
        """fd.ops.normal(mean, std, shape, dtype=DataType.Float, rng_seed=, rng_offset=)."""
        return self._random("normal", _C.normal, mean, std, shape, dtype, rng_seed, rng_offset)

    def rand_like(self, arg, rng_seed=None, rng_offset=None):
        """fd.ops.rand_like(arg, rng_seed=, rng_offset=): uniform in [0, 1) of arg's shape and dtype."""
        x = cv.tensor(self._fd, arg, "rand_like", "arg")
        return self._random("rand_like", _C.uniform, 0.0, 1.0, self.shape(self._wrap(x)), x.dtype, rng_seed,
                            rng_offset)

    def randn_like(self, arg, rng_seed=None, rng_offset=None):
        """fd.ops.randn_like(arg, rng_seed=, rng_offset=): standard normal of arg's shape and dtype."""
        x = cv.tensor(self._fd, arg, "randn_like", "arg")
        return self._random("randn_like", _C.normal, 0.0, 1.0, self.shape(self._wrap(x)), x.dtype, rng_seed,
                            rng_offset)

    def _random(self, op, builder, a, b, shape, dtype, rng_seed, rng_offset):
        self._begin(op)
        fd = self._fd
        if rng_seed is None and rng_offset is None:
            rng_seed, rng_offset = fd._drawn_seed_and_offset()  # each execute draws them (generator.py)
        elif rng_seed is None or rng_offset is None:
            raise TypeError(f"{op}: give both rng_seed= and rng_offset=, or neither (each execute then draws them "
                            "from torch's generator, or braze's)")
        if op.endswith("_like") and not dtypes.is_floating(dtype):
            raise TypeError(f"{op}: draws numbers of arg's dtype, which must be floating, got {dtype} (as torch's "
                            f"{op} refuses an integer tensor)")
        return self._wrap(builder(
            cv.scalar(fd, a, op, "minval" if builder is _C.uniform else "mean", DataType.Double),
            cv.scalar(fd, b, op, "maxval" if builder is _C.uniform else "std", DataType.Double),
            cv.shape(fd, shape, op, "shape"),
            cv.integer_scalar(fd, rng_seed, op, "rng_seed"),
            cv.integer_scalar(fd, rng_offset, op, "rng_offset"),
            cv.data_type(dtype, op, "dtype"),
        ))
