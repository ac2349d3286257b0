"""Where braze refuses what nvFuser refuses, its message carries nvFuser's key phrase next to braze's own
detail, so tests and tools written against nvFuser's messages (its opinfo error tests match them by
regular expression) still match. Each case: a definition step that is wrong, and nvFuser's phrase. Where
braze accepts what nvFuser refuses (a broader op), braze keeps its behavior; those are not listed."""

from __future__ import annotations

import re

import pytest

from braze import DataType, FusionDefinition

F = DataType.Float


def tensor(fd, shape, dtype=F):
    return fd.define_tensor(shape=shape, contiguity=[None if n == 1 else True for n in shape], dtype=dtype)


CASES = [
    # slice
    ("slice_negative_start", lambda fd: fd.ops.slice(tensor(fd, [4, 6]), [-1, 0], [2, 3]),
     "Slice operation start_indices must be greater than or equal to 0."),
    ("slice_end_before_start", lambda fd: fd.ops.slice(tensor(fd, [4, 6]), [3, 0], [2, 3]),
     "Slice operation end_indices must be greater than or equal to start_indices."),
    ("slice_rank", lambda fd: fd.ops.slice(tensor(fd, [4, 6]), [0, 0, 0], [1, 1, 1]),
     "Number of tensor dimensions does not match slice dimensions!"),
    ("slice_starts_vs_strides", lambda fd: fd.ops.slice(tensor(fd, [4, 6]), [0, 0, 0], [1, 1], [1, 1]),
     "Slice start_indices and strides don't match!"),
    ("slice_ends_vs_starts", lambda fd: fd.ops.slice(tensor(fd, [4, 6]), [0, 0], [1, 1, 1], [1, 1]),
     "Slice indexing attribute dimensions don't match!"),
    # pad
    ("pad_too_many_widths", lambda fd: fd.ops.pad(tensor(fd, [4]), [1, 1, 1, 1]),
     "Number of pad widths must be at most twice the input dimension"),
    ("pad_odd_widths", lambda fd: fd.ops.pad(tensor(fd, [4, 4]), [1, 1, 1]), "Invalid number of padding widths"),
    # permute
    ("permute_duplicate", lambda fd: fd.ops.permute(tensor(fd, [2, 3, 4]), [0, 0, 1]), "duplicated dimension entries"),
    ("permute_out_of_range", lambda fd: fd.ops.permute(tensor(fd, [2, 3, 4]), [0, 1, 3]),
     "dims argument is out of range, expects"),
    ("permute_length", lambda fd: fd.ops.permute(tensor(fd, [2, 3, 4]), [0, 1]),
     "argument to have the same length as input"),
    # squeeze
    ("squeeze_out_of_range", lambda fd: fd.ops.squeeze(tensor(fd, [2, 1, 3]), [3]), "Squeeze dim is outside of Tensor size!"),
    ("squeeze_too_many", lambda fd: fd.ops.squeeze(tensor(fd, [1, 1, 1]), [0, 1, 2, 0]),
     "The dims to squeeze must be <= the number of dims of the input tensor"),
    # reshape
    ("reshape_numel", lambda fd: fd.ops.reshape(tensor(fd, [2, 3]), [4, 2]),
     "Total element counts across view operation must match"),
    ("reshape_two_minus_one", lambda fd: fd.ops.reshape(tensor(fd, [2, 3]), [-1, -1]), "A maximum of one value of -1"),
    # cat
    ("cat_empty", lambda fd: fd.ops.cat([], 0), "Attempting to concatenate empty list of tensors"),
    ("cat_dim", lambda fd: fd.ops.cat([tensor(fd, [2, 3]), tensor(fd, [2, 3])], 2), "Invalid dimension to cat"),
    ("cat_rank", lambda fd: fd.ops.cat([tensor(fd, [2, 3]), tensor(fd, [2, 3, 1])], 0), "Unexpected number of dimensions"),
    # broadcast_in_dim
    ("broadcast_in_dim_missing_axis", lambda fd: fd.ops.broadcast_in_dim(tensor(fd, [2, 3]), [2, 3, 4], [0]),
     "The broadcast dimensions should match the input dimensions."),
    ("broadcast_in_dim_smaller", lambda fd: fd.ops.broadcast_in_dim(tensor(fd, [2, 3]), [2], [0, 1]),
     "The new shape is expected to be greater-then-or-equal to the input"),
    ("broadcast_in_dim_order", lambda fd: fd.ops.broadcast_in_dim(tensor(fd, [2, 3]), [3, 2, 4], [1, 0]),
     "Broadcast dimension is not greater than the previous value."),
    ("broadcast_in_dim_range", lambda fd: fd.ops.broadcast_in_dim(tensor(fd, [2, 3]), [2, 3], [0, 2]),
     "Invalid broadcast_dims value."),
    # topk, where, iota, random, triu, define_tensor, size
    ("topk_k_too_large", lambda fd: fd.ops.topk(tensor(fd, [3, 7]), 16, dim=1), "selected index k out of range"),
    ("topk_negative_k", lambda fd: fd.ops.topk(tensor(fd, [3, 7]), -1, dim=1), "Unexpected size of axis"),
    ("topk_dim", lambda fd: fd.ops.topk(tensor(fd, [3, 7]), 2, dim=2), "Tried to access out of boundary index"),
    ("where_condition", lambda fd: fd.ops.where(tensor(fd, [3]), tensor(fd, [3]), tensor(fd, [3])),
     "Condition should be of DataType Bool"),
    ("random_dtype", lambda fd: fd.ops.uniform(0.0, 1.0, [3], dtype=DataType.Int, rng_seed=1, rng_offset=0),
     "Random distributions only create floating point types"),
    ("triu_rank", lambda fd: fd.ops.triu(tensor(fd, [3])), "input tensor for triu must have 2 or more dims, but got 1 dims"),
    ("define_tensor_shape", lambda fd: fd.define_tensor(shape=[-2], contiguity=[True], dtype=F),
     "The value -2 at index 0 was neither symbolic(-1), zero_element(0), broadcast(1), or static(>1)"),
    ("size_dim", lambda fd: fd.ops.size(tensor(fd, [2, 3]), 2), "Tried to access out of boundary index"),
]


@pytest.mark.parametrize("name, step, phrase", CASES, ids=[c[0] for c in CASES])
def test_refusals_carry_nvfusers_phrase(name, step, phrase):
    with pytest.raises((RuntimeError, ValueError, TypeError, IndexError)) as caught:
        with FusionDefinition() as fd:
            step(fd)
    assert re.search(re.escape(phrase), str(caught.value)), f"{name}: {caught.value}"
