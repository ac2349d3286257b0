"""fd.ops.embedding_fwd: torch.nn.functional.embedding's forward, as nvFuser's frontend names it.

Lightning Thunder hands an embedding to nvFuser as index_select when it has no max_norm, and as
embedding_fwd when it has one. With max_norm, torch renormalizes in place the rows of the weight that
the indices name (torch.embedding_renorm_) before it reads them; nvFuser runs torch's own embedding,
so its weight is updated too. braze records the same as ops of the definition: the rows picked, their
norms, the scaled rows (the output), and the weight with those rows written back as an in-place
update of the weight input (the update is not an output execute returns, by nvFuser's convention).
"""

from __future__ import annotations

import math

from . import _C
from ._C import BrazeValueError
from . import _convert as cv
from . import dtypes
from .handles import Scalar, Tensor

DataType = _C.DataType

# torch.embedding_renorm_ scales a row by max_norm / (norm + this).
_RENORM_EPSILON = 1e-7


class EmbeddingOps:
    def embedding_fwd(self, input, weight, padding_idx=None, max_norm=None, norm_type=None,
                      scale_grad_by_freq=None, sparse=None):
        """fd.ops.embedding_fwd(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse):
        torch.nn.functional.embedding: the rows of the 2-D weight at the integer indices of input, shaped
        input's shape + [embedding dim]. padding_idx, scale_grad_by_freq and sparse change only the backward:
        checked, not used. With max_norm, a row whose norm_type-norm (2 when None) is above max_norm is
        scaled by max_norm / (norm + 1e-7) in the output and, where weight is a fusion input, in weight
        itself (in place, as torch does), which must then be floating; norm_type is taken exactly (1, 2, inf
        and 0 included), a symbolic one by run-time selection among the forms."""
        self._begin("embedding_fwd")
        fd = self._fd
        x = cv.tensor(fd, input, "embedding_fwd", "input")
        w = cv.tensor(fd, weight, "embedding_fwd", "weight")
        if w.ndim != 2:
            raise BrazeValueError(f"embedding_fwd: weight {w.name} must be 2-D ([num_embeddings, embedding_dim]), "
                                  f"got rank {w.ndim}")
        if x.dtype not in (DataType.Int32, DataType.Int64):
            raise BrazeValueError(f"embedding_fwd: input {x.name} must hold integer indices (Int32 or Int64), got "
                                  f"{x.dtype}")
        if padding_idx is not None:
            cv.integer_scalar(fd, padding_idx, "embedding_fwd", "padding_idx")
        for name, flag in (("scale_grad_by_freq", scale_grad_by_freq), ("sparse", sparse)):
            if flag is not None and not isinstance(flag, Scalar):
                cv.flag(flag, "embedding_fwd", name)
        index = self._wrap(x)
        table = self._wrap(w)
        flat = self.reshape(index, [-1]) if x.ndim != 1 else index
        rows = self.index_select(table, flat, 0)
        if max_norm is not None:
            rows = self._renormed_rows(rows, flat, table, max_norm, norm_type)
        if x.ndim == 1:
            return rows
        return self.reshape(rows, [index.size(d) for d in range(x.ndim)] + [table.size(1)])

    def _renormed_rows(self, rows, flat, table, max_norm, norm_type):
        """The picked rows scaled as torch.embedding_renorm_ scales them, written back into the weight
        where it is a fusion input."""
        fd = self._fd
        if not dtypes.is_floating(table._val.dtype):
            raise BrazeValueError(f"embedding_fwd: max_norm renormalizes the weight's rows, which must be floating, "
                                  f"got {table._val.name} of {table._val.dtype} (torch's norm refuses it too)")
        if table._val.is_fusion_input and any(v.id == table._val.id for v in fd._fusion.aliased_inputs()):
            raise BrazeValueError(f"embedding_fwd: the weight {table._val.name} is updated in place already (by "
                                  "another embedding_fwd with max_norm, or add_output(..., alias_input=)): braze "
                                  "writes one update per input; renormalize once, or pass a copy of the weight")
        limit = self._wrap(cv.scalar(fd, max_norm, "embedding_fwd", "max_norm", DataType.Double))
        p = 2.0 if norm_type is None else norm_type
        cv.scalar(fd, p, "embedding_fwd", "norm_type", DataType.Double)
        # torch's renorm kernels take the norm in the accumulation type: Double for a Double weight.
        compute = DataType.Double if rows._val.dtype == DataType.Double else DataType.Float
        r = self.cast(rows, compute)
        norm = self._row_norm(r, p)
        scale = self.where(self.gt(norm, limit), self.div(limit, self.add(norm, _RENORM_EPSILON)), 1.0)
        scaled = self.cast(self.mul(r, self.broadcast_in_dim(scale, self.shape(r), [0])), rows._val.dtype)
        if table._val.is_fusion_input:
            at = self.expand(self.broadcast_in_dim(flat, [flat.size(0), 1], [0]), self.shape(scaled))
            fd.add_output(self.scatter(table, at, scaled, 0), alias_input=table)
        return scaled

    def _row_norm(self, r, p):
        """The p-norm of each row of the 2-D r (a constant p exactly, as torch.norm takes it)."""
        if isinstance(p, Scalar) and p.value is not None:
            p = p.value
        if isinstance(p, Tensor):
            raise TypeError("embedding_fwd: norm_type must be a Scalar or a Python number, got a Tensor")
        if isinstance(p, Scalar):  # symbolic: each form computed, the one p names taken at run time
            general = self.pow(self.sum(self.pow(self.abs(r), p), [1]), self.reciprocal(p))
            largest = self.max(self.abs(r), [1])
            nonzeros = self.sum(self.cast(self.ne(r, 0.0), r._val.dtype), [1])
            return self.where(self.eq(p, math.inf), largest, self.where(self.eq(p, 0.0), nonzeros, general))
        p = float(p)
        if math.isnan(p) or p < 0:
            raise BrazeValueError(f"embedding_fwd: norm_type must be a non-negative number or inf, got {p}")
        if p == math.inf:
            return self.max(self.abs(r), [1])
        if p == 0:
            return self.sum(self.cast(self.ne(r, 0.0), r._val.dtype), [1])
        if p == 1:
            return self.sum(self.abs(r), [1])
        if p == 2:
            return self.sqrt(self.sum(self.mul(r, r), [1]))
        return self.pow(self.sum(self.pow(self.abs(r), p), [1]), 1.0 / p)
