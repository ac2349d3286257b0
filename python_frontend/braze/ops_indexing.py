"""Indexing, matmul and quantization fd.ops: index_select, select, gather, take_along_axis,
matmul, bmm, linear, scaled_mm (torch._scaled_mm), and braze's own quantize / dequantize.
"""

from __future__ import annotations

from . import _C
from ._C import BrazeValueError
from . import _convert as cv
from . import dtypes
from .handles import Tensor

DataType = _C.DataType


class IndexingOps:
    def _indexed(self, name, arg, arg_name, index, dim):
        """The shared body of index_select / gather / take_along_axis: check, then build with _C.<name>."""
        self._begin(name)
        x = cv.tensor(self._fd, arg, name, arg_name)
        idx = cv.tensor(self._fd, index, name, "index")
        if dtypes.is_floating(idx.dtype):
            # A floating index is converted to Int64 (truncating), as nvFuser's kernels index with it:
            # Lightning Thunder's cross entropy passes where(target != ignore, target, 0.0), a Float.
            idx = _C.cast(idx, DataType.Int64)
        return self._wrap(getattr(_C, name)(x, idx, cv.integer(dim, name, "dim")))

    def index_select(self, arg, index, dim):
        """fd.ops.index_select(arg, index, dim): out[..., i, ...] = arg[..., index[i], ...]."""
        return self._indexed("index_select", arg, "arg", index, dim)

    def select(self, arg, index, dim):
        """fd.ops.select(arg, index, dim): the slice at `index` along dim, which is removed; a negative
        index counts from the end, as torch.select's does.

        Recorded as full([1], index) -> index_select -> squeeze (braze has no select op of its own), with
        a negative index (a symbolic one, or a negative constant) first moved up by the dim's extent where
        that makes it an index (one below -extent stays as it is, for the index check to name it).
        """
        self._begin("select")
        fd = self._fd
        x = cv.tensor(fd, arg, "select", "arg")
        i = cv.integer_scalar(fd, index, "select", "index")
        dim = cv.integer(dim, "select", "dim")
        if i.value is None or i.value < 0:
            index, extent = self._wrap(i), self.size(self._wrap(x), dim)
            wrapped = self.add(index, extent)
            from_end = self.logical_and(self.lt(index, 0), self.ge(wrapped, 0))
            i = self.where(from_end, wrapped, index)._val
        one = cv.constant(fd, 1, DataType.Int64)
        picked = _C.index_select(x, _C.full([one], i, DataType.Int64), dim)
        return self._wrap(_C.squeeze(picked, [dim], False))

    def gather(self, arg1, index, dim):
        """fd.ops.gather(arg1, index, dim): torch.gather (index may be smaller on other dims)."""
        return self._indexed("gather", arg1, "arg1", index, dim)

    def take_along_axis(self, arg1, index, dim):
        """fd.ops.take_along_axis(arg1, index, dim): numpy's take_along_axis."""
        return self._indexed("take_along_axis", arg1, "arg1", index, dim)

    def matmul(self, arg1, arg2, /, dtype=DataType.Null):
        """fd.ops.matmul(a, b): torch.matmul shapes. Integer operands accumulate exactly (Int32 result
        by default); braze's dtype= overrides the result type."""
        self._begin("matmul")
        fd = self._fd
        a = cv.tensor(fd, arg1, "matmul", "arg1")
        b = cv.tensor(fd, arg2, "matmul", "arg2")
        return self._wrap(_C.matmul(a, b, cv.data_type(dtype, "matmul", "dtype")))

    def bmm(self, mat1, mat2, /):
        """fd.ops.bmm(mat1, mat2): batched matmul of two 3-D tensors."""
        self._begin("bmm")
        fd = self._fd
        a = cv.tensor(fd, mat1, "bmm", "mat1")
        b = cv.tensor(fd, mat2, "bmm", "mat2")
        if a.ndim != 3 or b.ndim != 3:
            raise BrazeValueError(f"bmm: expected 3-D tensors, got {a.name} of rank {a.ndim} and {b.name} of rank {b.ndim}")
        return self._wrap(_C.matmul(a, b, DataType.Null))

    def linear(self, arg1, arg2, bias=None, dtype=DataType.Null):
        """fd.ops.linear(input, weight, bias=None) = input @ weight.T + bias; weight is [out, in].
        braze's dtype= overrides the result type, as for matmul."""
        self._begin("linear")
        fd = self._fd
        a = cv.tensor(fd, arg1, "linear", "arg1")
        w = cv.tensor(fd, arg2, "linear", "arg2")
        b = cv.optional_tensor(fd, bias, "linear", "bias")
        return self._wrap(_C.linear(a, w, b, cv.data_type(dtype, "linear", "dtype")))

    def scaled_mm(self, mat1, mat2, scale_a, scale_b, bias=None, out_dtype=None):
        """fd.ops.scaled_mm(mat1, mat2, scale_a, scale_b, bias=None, out_dtype=None): torch._scaled_mm.

        mat1 [M, K] times mat2 [K, N], both fp8 (e4m3fn, e5m2 or the fnuz pair), accumulated in float32;
        times scale_a (Float: one element for the tensor, or [M, 1] per row) and scale_b (one element, or
        [1, N] per column); plus bias [N]; converted to out_dtype (mat1's dtype by default). Recorded as
        matmul (Float result), mul, mul, add and cast: one matmul kernel with the scales in its epilogue.
        Declare a per-row or per-column scale's size-1 dim as 1, as for any broadcast.
        """
        self._begin("scaled_mm")
        fd = self._fd
        fp8 = (DataType.Float8_e4m3fn, DataType.Float8_e5m2, DataType.Float8_e4m3fnuz, DataType.Float8_e5m2fnuz)
        a = cv.tensor(fd, mat1, "scaled_mm", "mat1")
        b = cv.tensor(fd, mat2, "scaled_mm", "mat2")
        for name, t in (("mat1", a), ("mat2", b)):
            if t.ndim != 2 or t.dtype not in fp8:
                raise BrazeValueError(f"scaled_mm: {name} must be a 2-D fp8 tensor (e4m3fn, e5m2, e4m3fnuz or e5m2fnuz), "
                                      f"got {t.name} of rank {t.ndim} and dtype {t.dtype}")
        y = _C.matmul(a, b, DataType.Float)
        for name, scale, per in (("scale_a", scale_a, 0), ("scale_b", scale_b, 1)):
            s = self._quant_param(scale, "scaled_mm", name, DataType.Float)
            _check_scale_shape(name, s, a if per == 0 else b, per)
            # A 1-D scale of more than one element would broadcast along the columns whichever of M or N
            # it means: torch._scaled_mm refuses it, and so does braze.
            if s.dtype != DataType.Float or s.ndim > 2 or (s.ndim == 1 and list(s.static_shape) != [1]):
                raise BrazeValueError(f"scaled_mm: {name} must be a Float tensor of one element, [M, 1] or [1, N], "
                                      f"got {s.name} of rank {s.ndim} and dtype {s.dtype}")
            y = self.mul(self._wrap(y), self._wrap(s))._val
        if bias is not None:
            bv = cv.tensor(fd, bias, "scaled_mm", "bias")
            if bv.ndim != 1:
                raise BrazeValueError(f"scaled_mm: bias must be 1-D [N], got {bv.name} of rank {bv.ndim}")
            n, given = list(b.static_shape)[1], list(bv.static_shape)[0]
            if n >= 0 and given >= 0 and given != n:  # torch refuses a bias of another size, [1] included
                raise BrazeValueError(f"scaled_mm: bias must have N = {n} entries, got {bv.name} of {given}")
            y = self.add(self._wrap(y), self.cast(self._wrap(bv), DataType.Float))._val
        dtype = a.dtype if out_dtype is None else cv.data_type(out_dtype, "scaled_mm", "out_dtype")
        return self.cast(self._wrap(y), dtype)

    def quantize(self, x, scale, zero_point=None, dtype=DataType.Int8, axis=None, block_shape=None):
        """fd.ops.quantize(x, scale, zero_point=None, dtype=DataType.Int8, axis=None, block_shape=None).

        q = saturate(round_half_even(x / scale) + zero_point). Per tensor (a one-element scale, or a
        Scalar / Python number), per channel (a 1-D scale with axis=), or per block (block_shape=).
        """
        return self._quant("quantize", _C.quantize, x, scale, zero_point, dtype, axis, block_shape)

    def dequantize(self, q, scale, zero_point=None, dtype=DataType.Float, axis=None, block_shape=None):
        """fd.ops.dequantize(q, scale, zero_point=None, dtype=DataType.Float, axis=None, block_shape=None).

        x = (q - zero_point) * scale; the same granularities as quantize.
        """
        return self._quant("dequantize", _C.dequantize, q, scale, zero_point, dtype, axis, block_shape)

    def _quant(self, op, builder, x, scale, zero_point, dtype, axis, block_shape):
        self._begin(op)
        fd = self._fd
        t = cv.tensor(fd, x, op, "x" if op == "quantize" else "q")
        s = self._quant_param(scale, op, "scale", DataType.Float)
        zp = None if zero_point is None else self._quant_param(zero_point, op, "zero_point", DataType.Int32)
        dtype = cv.data_type(dtype, op, "dtype")
        _check_zero_point_constant(op, zero_point, dtype)
        axis = None if axis is None else cv.integer(axis, op, "axis")
        blocks = [] if block_shape is None else cv.ints(block_shape, op, "block_shape", allow_single=False)
        return self._wrap(builder(t, s, zp, dtype, axis, blocks))

    def _quant_param(self, x, op, arg, number_dtype):
        """A scale or zero point: a Tensor, or a Scalar / number made into a 0-D tensor (per tensor)."""
        fd = self._fd
        if isinstance(x, Tensor):
            return cv.tensor(fd, x, op, arg)
        if number_dtype == DataType.Int32:  # a zero point: an integer, as torch's quantize takes
            s = cv.integer_scalar(fd, x, op, arg)
            if _is_integer_number(x) and not -2**31 <= int(x) < 2**31:
                raise BrazeValueError(f"{op}: {arg} {x} does not fit Int32")
            return _C.full([], s, DataType.Int32)
        s = cv.scalar(fd, x, op, arg, number_dtype)  # a TypeError naming op and arg for anything else
        return _C.full([], s, s.dtype)


def _check_zero_point_constant(op, zero_point, dtype):
    """A zero point given as a number must lie in the quantized dtype's range, as torch requires (saturated,
    it moved every value to the dtype's bound)."""
    if op != "quantize" or not _is_integer_number(zero_point):
        return
    zero_point = int(zero_point)
    numpy_dtype = dtypes.to_numpy_dtype(dtype)
    if numpy_dtype is None or numpy_dtype.kind not in "iu":
        return
    import numpy as np
    bounds = np.iinfo(numpy_dtype)
    if not bounds.min <= zero_point <= bounds.max:
        raise BrazeValueError(f"quantize: zero_point {zero_point} is outside {dtype.name}'s range "
                              f"[{bounds.min}, {bounds.max}]")


def _check_scale_shape(name, scale, operand, per):
    """scaled_mm's scale of rank 2 is [M, 1] (scale_a, per row of mat1) or [1, N] (scale_b, per column of
    mat2), as torch._scaled_mm takes them; checked where the sizes are static (a broadcast dim is)."""
    if scale.ndim != 2:
        return
    shape, extent = list(scale.static_shape), list(operand.static_shape)[per]
    want = [extent, 1] if per == 0 else [1, extent]
    other = 1 - per
    if shape[other] not in (1, -1) or (extent >= 0 and shape[per] not in (1, -1, extent)):
        label = "[M, 1]" if per == 0 else "[1, N]"
        raise BrazeValueError(f"scaled_mm: {name} must be one element or {label} = {want}, "
                              f"got {scale.name} of shape {shape}")


def _is_integer_number(x):
    """A Python or numpy integer (not a bool): what a constant zero point is given as."""
    import numpy as np
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))
