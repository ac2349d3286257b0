"""A reduction kernel writes an output that concatenates its per-row results (scheduler/reduction/row_cats.h):
a GQA backward's k and v grads joined into the kv linear's grad, as Thunder writes a cat (zero pads and an
add) or as fd.ops.cat, after permutes and before a reshape. One kernel instead of a reduction and a
pointwise join; values as the reference evaluator's, bit for bit where the sums are exact (-0 included:
pad + add makes it +0, cat keeps it). Pads that leave a gap or overlap are no cat: two kernels, still the
reference's values."""

import ml_dtypes
import numpy as np
import pytest

from braze import DataType, FusionDefinition, execute

from test_horizontal_reductions import kernels

F32 = DataType.Float


def tensor(fd, shape, dtype=F32):
    return fd.define_tensor(shape=[-1] * len(shape), contiguity=[True] * len(shape), dtype=dtype)


def sums_joined(fd, shape, dims, join, cat_dim, parts=2, permute=None):
    """`parts` sums of [shape] tensors over `dims`, maybe permuted, joined along cat_dim by pads and adds
    ("pads"), by fd.ops.cat ("cat"), or by pads that leave a gap ("gap") or overlap ("overlap")."""
    xs = [tensor(fd, shape) for _ in range(parts)]
    sums = [fd.ops.sum(x, dims=dims, keepdim=False, dtype=DataType.Null) for x in xs]
    if permute is not None:
        sums = [fd.ops.permute(s, dims=permute) for s in sums]
    if join == "cat":
        fd.add_output(fd.ops.cat(sums, cat_dim))
        return
    kept = [n for i, n in enumerate(shape) if i not in dims]
    if permute is not None:
        kept = [kept[i] for i in permute]
    rank, size = len(kept), kept[cat_dim]
    total = None
    for i, s in enumerate(sums):
        # Part i after i parts and before the rest; a gap: one more part's room after each; overlap: the
        # second part one element early.
        low, high = i * size, (parts - 1 - i) * size
        if join == "gap":
            high += size
        if join == "overlap" and i == 1:
            low, high = low - 1, high + 1
        widths = [0] * (2 * rank)
        pair = rank - 1 - cat_dim
        widths[2 * pair], widths[2 * pair + 1] = low, high
        padded = fd.ops.pad(s, widths)
        total = padded if total is None else fd.ops.add(total, padded)
    fd.add_output(total)


@pytest.mark.parametrize("join", ["pads", "cat"])
@pytest.mark.parametrize("shape, dims, cat_dim, permute", [
    ([6, 40, 9], [0], 1, None),        # an outer reduction, joined along the last dim
    ([6, 40, 9], [0], 0, None),        # joined along the first kept dim
    ([6, 40, 9], [0], 0, [1, 0]),      # permuted, then joined
    ([6, 40, 8], [0], 1, None),        # vectorized kept lanes (4 a thread)
    ([6, 40, 8], [0], 1, [1, 0]),      # the lanes' dim moved first by the permute
    ([30, 7, 50], [2], 1, None),       # an inner reduction's row sums
    ([50000, 3], [0], 0, None),        # few kept elements, a long reduced dim: split among blocks
])
def test_sums_joined_are_one_kernel(join, shape, dims, cat_dim, permute):
    with FusionDefinition() as fd:
        sums_joined(fd, shape, dims, join, cat_dim, parts=3, permute=permute)
    rng = np.random.default_rng(len(shape) + cat_dim)
    inputs = [rng.integers(-8, 8, shape).astype(np.float32) for _ in range(3)]  # exact sums
    plan = fd.explain(inputs)
    assert len(kernels(plan)) == 1, str(plan)
    if shape == [6, 40, 8]:
        assert "vectorize 4" in kernels(plan)[0].heuristics
    if shape == [50000, 3]:
        assert "split over" in kernels(plan)[0].heuristics
    (out,) = fd.execute(inputs)
    (want,) = execute.reference(fd, inputs)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("join", ["pads", "cat"])
def test_a_negative_zero_is_joined_as_the_reference_joins_it(join):
    # -sum(x) is -0 where the sum is 0: pad + add gives +0 there (the other pad's zero added), a cat keeps
    # -0.
    with FusionDefinition() as fd:
        xs = [tensor(fd, [2, 4]) for _ in range(2)]
        parts = [fd.ops.neg(fd.ops.sum(x, dims=[0], keepdim=False, dtype=DataType.Null)) for x in xs]
        if join == "cat":
            fd.add_output(fd.ops.cat(parts, 0))
        else:
            fd.add_output(fd.ops.add(fd.ops.pad(parts[0], [0, 4]), fd.ops.pad(parts[1], [4, 0])))
    inputs = [np.array([[1, 0, 2, 3], [-1, 0, -2, 5]], np.float32), np.array([[1, 0, 2, 3], [1, 0, -2, -3]], np.float32)]
    (out,) = fd.execute(inputs)
    (want,) = execute.reference(fd, inputs)
    assert len(kernels(fd.explain(inputs))) == 1
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))
    np.testing.assert_array_equal(out, want)
    assert np.signbit(out[out == 0]).any() == (join == "cat")


@pytest.mark.parametrize("join", ["gap", "overlap"])
def test_pads_that_are_no_cat_stay_a_join_of_their_own(join):
    # 20 rows: sums of 16 rows or fewer would be computed where the join reads them (test_small_reductions.py).
    with FusionDefinition() as fd:
        sums_joined(fd, [20, 12], [0], join, 0)
    rng = np.random.default_rng(8)
    inputs = [rng.integers(-8, 8, (20, 12)).astype(np.float32) for _ in range(2)]
    plan = fd.explain(inputs)
    assert len(kernels(plan)) == 2, str(plan)
    (out,) = fd.execute(inputs)
    np.testing.assert_array_equal(out, execute.reference(fd, inputs)[0])


def test_a_part_also_returned_permuted_keeps_the_join_apart():
    # The permuted sum is an output too: the join reads it (and stays a kernel of its own).
    with FusionDefinition() as fd:
        xs = [tensor(fd, [4, 6, 10]) for _ in range(2)]
        sums = [fd.ops.permute(fd.ops.sum(x, dims=[0], keepdim=False, dtype=DataType.Null), dims=[1, 0]) for x in xs]
        fd.add_output(sums[0])
        fd.add_output(fd.ops.cat(sums, 0))
    rng = np.random.default_rng(9)
    inputs = [rng.integers(-8, 8, (4, 6, 10)).astype(np.float32) for _ in range(2)]
    outs = fd.execute(inputs)
    for got, want in zip(outs, execute.reference(fd, inputs)):
        np.testing.assert_array_equal(got, want)


def test_bf16_parts_cast_after_their_sums_are_joined_in_bf16():
    # As a bf16 GQA backward: float sums cast to bf16, permuted, padded and added in bf16, reshaped.
    b, kv, rep, t, d = 2, 3, 2, 5, 8
    with FusionDefinition() as fd:
        grads = [tensor(fd, [b, kv, rep, t, d], DataType.BFloat16) for _ in range(2)]
        parts = [fd.ops.permute(fd.ops.cast(fd.ops.sum(fd.ops.cast(g, F32), dims=[2], keepdim=False, dtype=DataType.Null),
                                            DataType.BFloat16), dims=[0, 2, 1, 3]) for g in grads]
        joined = fd.ops.add(fd.ops.pad(parts[0], [0, d, 0, 0, 0, 0, 0, 0]), fd.ops.pad(parts[1], [d, 0, 0, 0, 0, 0, 0, 0]))
        fd.add_output(fd.ops.reshape(joined, new_shape=[b, t, kv * 2 * d]))
    rng = np.random.default_rng(12)
    inputs = [rng.integers(-8, 8, (b, kv, rep, t, d)).astype(ml_dtypes.bfloat16) for _ in range(2)]
    plan = fd.explain(inputs)
    assert len(kernels(plan)) == 1, str(plan)
    (out,) = fd.execute(inputs)
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(execute.reference(fd, inputs)[0], np.float32))


def test_a_join_with_a_small_innermost_dim_leaves_the_vectors_alone():
    # The join's elements are stored one a lane, so its innermost extent (2 x 3 after the permute) does not
    # narrow the reduction's loads: bf16 rows of 128 kept elements keep 8 a vector.
    b, kv, rep, t, d = 2, 3, 2, 16, 128
    with FusionDefinition() as fd:
        grads = [tensor(fd, [b, kv, rep, t, d], DataType.BFloat16) for _ in range(2)]
        parts = [fd.ops.cast(fd.ops.sum(fd.ops.cast(g, F32), dims=[2], keepdim=False, dtype=DataType.Null),
                             DataType.BFloat16) for g in grads]
        fd.add_output(fd.ops.permute(fd.ops.cat(parts, 1), dims=[0, 2, 3, 1]))
    rng = np.random.default_rng(13)
    inputs = [rng.integers(-8, 8, (b, kv, rep, t, d)).astype(ml_dtypes.bfloat16) for _ in range(2)]
    (segment,) = kernels(fd.explain(inputs))
    assert "vectorize 8" in segment.heuristics, segment.heuristics
    (out,) = fd.execute(inputs)
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(execute.reference(fd, inputs)[0], np.float32))
