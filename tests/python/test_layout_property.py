"""Property test: whatever the shape and memory layout of the inputs (transposed, strided, reversed,
expanded), a fusion defined from their sizes and strides computes what numpy computes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import assert_matches, run


@st.composite
def strided_arrays(draw):
    """A float32 array of rank 1-3 with a random dim order in memory, maybe gaps or a reversed last
    dim, and maybe a stride-0 expansion of one dim. The reference is computed from the view itself."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    seed = draw(st.integers(0, 2**31 - 1))
    base = np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)
    order = draw(st.permutations(range(rank)))
    view = np.ascontiguousarray(base.transpose(order)).transpose(np.argsort(order))  # same values, permuted memory
    if draw(st.booleans()):
        # Every other element of a doubled array (gaps: contiguity False), or reversed (negative stride).
        view = np.repeat(view, 2, axis=-1)[..., ::2] if draw(st.booleans()) else view[..., ::-1]
    if draw(st.booleans()):
        d = draw(st.integers(0, rank - 1))
        view = np.broadcast_to(np.take(view, [0], axis=d), view.shape)
    return view


@settings(max_examples=60, deadline=None)
@given(strided_arrays(), st.sampled_from(["add-mul", "sum", "permute-exp"]))
def test_any_layout_matches_numpy(x, fusion):
    if fusion == "add-mul":
        (out,), _ = run(lambda fd, t: fd.ops.mul(fd.ops.add(t, 1.0), t), [x])
        expected = (x.astype(np.float64) + 1.0) * x
    elif fusion == "sum":
        (out,), _ = run(lambda fd, t: fd.ops.sum(t, dims=[0]), [x])
        expected = x.astype(np.float64).sum(axis=0)
    else:
        dims = list(range(x.ndim))[::-1]
        (out,), _ = run(lambda fd, t: fd.ops.exp(fd.ops.permute(t, dims)), [x])
        expected = np.exp(x.astype(np.float64).transpose(dims))
    assert_matches(out, expected, np.float32, f"{fusion} on shape {x.shape} strides {x.strides}")
