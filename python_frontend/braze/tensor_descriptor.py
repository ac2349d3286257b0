"""How define_tensor's arguments become a shape, a contiguity list and a stride order, following
nvFuser (csrc/python_utils.{h,cpp}).

Conventions, as in nvFuser:
- stride_order[d] = k: logical dim d has the k-th smallest stride (0 = innermost). Logical dim d
  sits at allocation position rank-1-stride_order[d]; allocation order runs outermost first.
- When a stride_order is given, contiguity is listed in allocation order, not logical order.
- Contiguity None marks a broadcast dim (size 1) or an expanded one (stride 0, size > 1).
"""

from __future__ import annotations

import numpy as np

from . import _convert as cv
from ._C import BrazeValueError


def define_tensor_layout(contiguity, stride_order, op: str = "define_tensor"):
    """define_tensor's contiguity and stride_order as the C++ definition takes them: contiguity one flag
    (None: nvFuser's False, nothing assumed) or a list of True/False/None, stride_order a list of ints.
    Only Python types are checked here; their meaning (lengths, permutation, broadcast dims) is checked
    once, by the C++ definition (csrc/ir/ops_data.cpp)."""
    order = [] if stride_order is None else cv.ints(stride_order, op, "stride_order", allow_single=False)
    if contiguity is None or isinstance(contiguity, (bool, np.bool_)):
        return (None if contiguity is None else bool(contiguity)), order
    if not isinstance(contiguity, (list, tuple)):
        raise TypeError(f"{op}: contiguity must be a bool or a list of bool/None, got {cv.describe(contiguity)}")
    out = []
    for i, c in enumerate(contiguity):
        if c is not None and not isinstance(c, (bool, np.bool_)):
            raise TypeError(f"{op}: contiguity[{i}] must be True, False or None, got {cv.describe(c)}")
        out.append(None if c is None else bool(c))
    return out, order


def compute_contiguity(sizes, strides) -> list:
    """nvFuser's older helper: contiguity in logical order; size-1 and stride-0 dims get None."""
    sizes, strides = list(sizes), list(strides)
    if len(sizes) != len(strides):
        raise BrazeValueError(f"compute_contiguity: {len(sizes)} sizes but {len(strides)} strides")
    return _contiguity_in_order(sizes, strides, list(range(len(sizes))))


def _contiguity_in_order(sizes, strides, order) -> list:
    """Contiguity of the dims listed in `order` (outermost first), as nvFuser computes it."""
    out = [None] * len(order)
    expected = 1  # the stride the next (outer) non-broadcast dim has when contiguous
    for pos in reversed(range(len(order))):
        d = order[pos]
        if sizes[d] == 1 or strides[d] == 0:
            continue  # broadcast or expanded: None
        out[pos] = strides[d] == expected
        expected = strides[d] * sizes[d]
    return out


def compute_tensor_descriptor(sizes, strides) -> tuple[list, list[int]]:
    """(contiguity in allocation order, stride_order) of a strided array, as nvFuser's
    computeTensorDescriptor: non-stride-0 dims sorted by descending stride (stable, so ties keep
    logical order), stride-0 dims keep their logical position.

    sizes [2,1,3,1,4], strides [24,4,8,4,2] -> ([True, True, None, None, False], [4, 2, 3, 1, 0]).
    """
    sizes, strides = [int(s) for s in sizes], [int(s) for s in strides]
    rank = len(sizes)
    if len(strides) != rank:
        raise BrazeValueError(f"define_tensor: {rank} sizes but {len(strides)} strides")
    moving = [d for d in range(rank) if strides[d] != 0]
    by_stride = sorted(moving, key=lambda d: -strides[d])  # sorted() is stable
    order = list(range(rank))
    for slot, d in zip(moving, by_stride):
        order[slot] = d
    stride_order = [0] * rank
    for pos, d in enumerate(order):
        stride_order[d] = rank - 1 - pos
    return _contiguity_in_order(sizes, strides, order), stride_order


def descriptor_shape(sizes, strides, static_sizes: bool) -> list[int]:
    """define_tensor(sizes=, strides=) shape: -1 (symbolic) except size-1 dims, unless static_sizes.

    A size-1 dim with stride 0 is still a broadcast; a larger one with stride 0 is expanded and
    stays symbolic.
    """
    if static_sizes:
        return [int(s) for s in sizes]
    return [1 if int(s) == 1 else -1 for s in sizes]
