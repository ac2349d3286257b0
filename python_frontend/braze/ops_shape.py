"""Shape and data-movement fd.ops: broadcast, broadcast_in_dim, expand, reshape, permute, squeeze,
slice, pad, cat, set, segment_set, full, iota, and the shape queries size, shape, tensor_sizes, at.

Shape arguments accept what nvFuser's Vector accepts: a list or tuple of ints and Scalars
(a vector from define_vector or fd.ops.shape is such a list in braze).
"""

from __future__ import annotations

import numbers

from . import _C
from ._C import BrazeValueError, BrazeIndexError
from . import _convert as cv

DataType = _C.DataType


class ShapeOps:
    def broadcast(self, arg, is_broadcast_dim):
        """fd.ops.broadcast(arg, is_broadcast_dim): insert size-1 dims where the list is True."""
        self._begin("broadcast")
        x = cv.tensor(self._fd, arg, "broadcast", "arg")
        if not isinstance(is_broadcast_dim, (list, tuple)):
            raise TypeError(f"broadcast: is_broadcast_dim must be a list of bools, got {cv.describe(is_broadcast_dim)}")
        flags = [cv.flag(b, "broadcast", f"is_broadcast_dim[{i}]") for i, b in enumerate(is_broadcast_dim)]
        return self._wrap(_C.broadcast(x, flags))

    def broadcast_in_dim(self, arg, shape, broadcast_dims):
        """fd.ops.broadcast_in_dim(arg, shape, broadcast_dims): input dim j becomes output dim broadcast_dims[j]."""
        self._begin("broadcast_in_dim")
        fd = self._fd
        x = cv.tensor(fd, arg, "broadcast_in_dim", "arg")
        sizes = cv.shape(fd, shape, "broadcast_in_dim", "shape")
        dims = cv.ints(broadcast_dims, "broadcast_in_dim", "broadcast_dims", allow_single=False)
        return self._wrap(_C.broadcast_in_dim(x, sizes, dims))

    def expand(self, arg, shape):
        """fd.ops.expand(arg, shape): same rank; -1 keeps a dim's size."""
        self._begin("expand")
        x = cv.tensor(self._fd, arg, "expand", "arg")
        return self._wrap(_C.expand(x, cv.shape(self._fd, shape, "expand", "shape")))

    def reshape(self, arg, new_shape):
        """fd.ops.reshape(arg, new_shape); one entry may be -1 (inferred)."""
        self._begin("reshape")
        x = cv.tensor(self._fd, arg, "reshape", "arg")
        return self._wrap(_C.reshape(x, cv.shape(self._fd, new_shape, "reshape", "new_shape")))

    def permute(self, arg, dims):
        """fd.ops.permute(arg, dims): out.shape[i] = arg.shape[dims[i]] (torch semantics)."""
        self._begin("permute")
        x = cv.tensor(self._fd, arg, "permute", "arg")
        return self._wrap(_C.permute(x, cv.ints(dims, "permute", "dims", allow_single=False)))

    def squeeze(self, arg, dims, squeeze_expanded=False):
        """fd.ops.squeeze(arg, dims, squeeze_expanded=False): remove size-1 (broadcast) dims."""
        self._begin("squeeze")
        x = cv.tensor(self._fd, arg, "squeeze", "arg")
        dims = cv.ints(dims, "squeeze", "dims")
        return self._wrap(_C.squeeze(x, dims, cv.flag(squeeze_expanded, "squeeze", "squeeze_expanded")))

    def slice(self, arg, start_indices, end_indices, strides=None, manual_normalization=False):
        """fd.ops.slice(arg, start_indices, end_indices, strides=None, manual_normalization=False).

        As in nvFuser, a constant start is >= 0 and a constant end is >= its start; ends past the
        extent are clamped. Symbolic indices (Scalars) are normalized at execute as Python does
        (negative ones count from the end) unless manual_normalization is set.
        """
        self._begin("slice")
        fd = self._fd
        x = cv.tensor(fd, arg, "slice", "arg")
        _check_constant_slice_indices(start_indices, end_indices, x.name)
        starts = cv.shape(fd, start_indices, "slice", "start_indices")
        ends = cv.shape(fd, end_indices, "slice", "end_indices")
        steps = [] if strides is None else cv.shape(fd, strides, "slice", "strides")
        manual = cv.flag(manual_normalization, "slice", "manual_normalization")
        return self._wrap(_C.slice(x, starts, ends, steps, manual))

    def pad(self, arg, pad_widths, value=None):
        """fd.ops.pad(arg, pad_widths, value=None): (left, right) pairs from the last dim, like F.pad."""
        self._begin("pad")
        fd = self._fd
        x = cv.tensor(fd, arg, "pad", "arg")
        widths = cv.shape(fd, pad_widths, "pad", "pad_widths")
        return self._wrap(_C.pad(x, widths, cv.optional_scalar(fd, value, "pad", "value")))

    def cat(self, tensors, dim=0, manual_padding=False):
        """fd.ops.cat(tensors, dim=0, manual_padding=False)."""
        self._begin("cat")
        if not isinstance(tensors, (list, tuple)):
            raise TypeError(f"cat: tensors must be a list of Tensors, got {cv.describe(tensors)}")
        xs = [cv.tensor(self._fd, t, "cat", f"tensors[{i}]") for i, t in enumerate(tensors)]
        if cv.flag(manual_padding, "cat", "manual_padding"):
            raise BrazeValueError("cat: manual_padding=True is not supported (braze pads and concatenates itself)")
        return self._wrap(_C.cat(xs, cv.integer(dim, "cat", "dim")))

    def stride_order(self, arg, stride_order):
        """fd.ops.stride_order(arg, stride_order): a copy of arg allocated in that order (stride_order[d]
        is dim d's place counted from the innermost: [1, 0] row-major, [0, 1] column-major); a fusion
        output made by it comes back with those strides."""
        self._begin("stride_order")
        x = cv.tensor(self._fd, arg, "stride_order", "arg")
        return self._wrap(_C.stride_order(x, cv.ints(stride_order, "stride_order", "stride_order", allow_single=False)))

    def set(self, arg):
        """fd.ops.set(arg): the same values; as nvFuser does, an output that is set of an input is that
        input's memory (a view), not a new tensor (Thunder writes `set` + `alias_input=` for in-place ops)."""
        self._begin("set")
        return self._wrap(_C.set(cv.tensor(self._fd, arg, "set", "arg")))

    def segment_set(self, arg):
        """fd.ops.segment_set(arg): a copy that is also a segment boundary."""
        self._begin("segment_set")
        return self._wrap(_C.segment_set(cv.tensor(self._fd, arg, "segment_set", "arg")))

    def full(self, shape, fill_value, dtype):
        """fd.ops.full(shape, fill_value, dtype)."""
        self._begin("full")
        fd = self._fd
        sizes = cv.shape(fd, shape, "full", "shape")
        dtype = cv.data_type(dtype, "full", "dtype")
        return self._wrap(_C.full(sizes, cv.scalar(fd, fill_value, "full", "fill_value", dtype), dtype))

    def iota(self, length, start=None, step=None, dtype=DataType.Int64):
        """fd.ops.iota(length, start=None, step=None, dtype=DataType.Int64): start + i * step."""
        self._begin("iota")
        fd = self._fd
        dtype = cv.data_type(dtype, "iota", "dtype")
        n = cv.integer_scalar(fd, length, "iota", "length")
        # Python numbers for start and step take the requested dtype, which nvFuser requires them to match.
        first = cv.optional_scalar(fd, start, "iota", "start", dtype)
        delta = cv.optional_scalar(fd, step, "iota", "step", dtype)
        return self._wrap(_C.iota(n, first, delta, dtype))

    def size(self, arg, dim):
        """fd.ops.size(arg, dim) -> Scalar (a constant when the extent is static)."""
        self._begin("size")
        x = cv.tensor(self._fd, arg, "size", "arg")
        return self._wrap(_C.size(x, cv.integer(dim, "size", "dim")))

    def shape(self, arg):
        """fd.ops.shape(arg) -> list of Scalars, one per dim."""
        self._begin("shape")
        return [self._wrap(s) for s in _C.shape(cv.tensor(self._fd, arg, "shape", "arg"))]

    def tensor_sizes(self, arg):
        """fd.ops.tensor_sizes(arg): the same as fd.ops.shape(arg)."""
        return self.shape(arg)

    def at(self, vector, index):
        """fd.ops.at(vector, index): an element of a shape list."""
        if not isinstance(vector, (list, tuple)):
            raise TypeError(f"at: vector must be a list of Scalars, got {cv.describe(vector)}")
        i = cv.integer(index, "at", "index")
        if not -len(vector) <= i < len(vector):
            raise BrazeIndexError(f"at: index {i} is out of range for a vector of size {len(vector)}")
        return vector[i]


def _check_constant_slice_indices(starts, ends, name):
    """nvFuser's frontend checks of the int entries of slice's index lists (the C++ builder, for C++
    callers, normalizes negative constants as Python does)."""
    if not isinstance(starts, (list, tuple)) or not isinstance(ends, (list, tuple)):
        return  # cv.shape names the argument that is not a list
    for d, (start, end) in enumerate(zip(starts, ends)):
        start_const = isinstance(start, numbers.Integral) and not isinstance(start, bool)
        end_const = isinstance(end, numbers.Integral) and not isinstance(end, bool)
        if start_const and start < 0:
            raise BrazeValueError(f"slice: start_indices[{d}] = {start} must be >= 0 (slicing {name}) [nvFuser: Slice "
                                  "operation start_indices must be greater than or equal to 0.]")
        if start_const and end_const and end < start:
            raise BrazeValueError(
                f"slice: end_indices[{d}] = {end} must be >= start_indices[{d}] = {start} (slicing {name}) [nvFuser: "
                "Slice operation end_indices must be greater than or equal to start_indices.]")
