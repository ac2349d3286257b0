"""Row kernels whose outputs hold the rows in another order, and whose values after a row statistic move along
the row (scheduler/reduction/domain_alignment.h): Qwen3's QK-norm, each query or key head RMS-normed over its
head size in the projection's [b, t, h, d] layout, then transposed to [b, h, t, d] and rotated (RoPE's
rotate-half reads the normed row at its other half). One inner persistent kernel stores each row where the
permute puts it, where two kernels wrote the normed heads and read them back. Moves that would read another
row's statistic (along the tokens, or the reduced dim moved off the row) stay refused. Values against the
reference evaluator on the test device, at odd sizes, size-1 dims, bf16 and fp32, misaligned and strided
inputs."""

import ml_dtypes
import numpy as np
import pytest

import helpers
from braze import DataType, FusionDefinition

F32, BF16 = DataType.Float, DataType.BFloat16
NP = {BF16: np.dtype(ml_dtypes.bfloat16), F32: np.dtype(np.float32)}


def tensor(fd, rank, dtype, contiguous=True):
    return fd.define_tensor(shape=[-1] * rank, contiguity=[contiguous] * rank, dtype=dtype)


def rms_norm_heads(fd, x, w, sizes, dtype):
    """x [b, t, h, d] RMS-normed over d, times w [d], cast back to dtype; and 1 / rms [b, t, h, 1]."""
    xf = fd.ops.cast(x, F32)
    mean_square = fd.ops.div(fd.ops.sum(fd.ops.mul(xf, xf), dims=[3], keepdim=True), float(sizes[3]))
    inv = fd.ops.rsqrt(fd.ops.add(mean_square, 1e-6))
    weight = fd.ops.cast(fd.ops.broadcast_in_dim(w, shape=list(sizes), broadcast_dims=[3]), F32)
    return fd.ops.cast(fd.ops.mul(fd.ops.mul(xf, inv), weight), dtype), inv


def rope(fd, heads, cos, sin, sizes, dtype):
    """Llama's rotate-half RoPE of heads [b, h, t, d] with tables [t, d], as Thunder writes it."""
    b, h, t, d = sizes
    half = d // 2
    high = fd.ops.slice(heads, [0, 0, 0, half], [b, h, t, d], [1, 1, 1, 1])
    low = fd.ops.slice(heads, [0, 0, 0, 0], [b, h, t, half], [1, 1, 1, 1])
    rotated = fd.ops.cat([fd.ops.cast(fd.ops.neg(fd.ops.cast(high, F32)), dtype), low], 3)
    table = dict(shape=[b, h, t, d], broadcast_dims=[2, 3])
    c = fd.ops.cast(fd.ops.broadcast_in_dim(cos, **table), F32)
    s = fd.ops.cast(fd.ops.broadcast_in_dim(sin, **table), F32)
    return fd.ops.cast(fd.ops.add(fd.ops.mul(fd.ops.cast(heads, F32), c), fd.ops.mul(fd.ops.cast(rotated, F32), s)),
                       dtype)


def define_qk_norm_rope(fd, sizes, dtype, with_inv=False, contiguous=True):
    """Inputs x [b, t, h, d], w [d], cos and sin [t, d]; outputs the rotated heads [b, h, t, d] (and 1 / rms as
    [b, h, t] when with_inv)."""
    b, t, h, d = sizes
    x, w = tensor(fd, 4, dtype, contiguous), tensor(fd, 1, dtype)
    cos, sin = tensor(fd, 2, dtype), tensor(fd, 2, dtype)
    normed, inv = rms_norm_heads(fd, x, w, sizes, dtype)
    heads = fd.ops.permute(normed, [0, 2, 1, 3])
    fd.add_output(rope(fd, heads, cos, sin, (b, h, t, d), dtype))
    if with_inv:
        fd.add_output(fd.ops.permute(fd.ops.reshape(inv, new_shape=[b, t, h]), [0, 2, 1]))


def qk_inputs(sizes, dtype, seed):
    b, t, h, d = sizes
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(NP[dtype]) for shape in ((b, t, h, d), (d,), (t, d), (t, d))]


def assert_one_row_kernel(fd, arrays):
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert [k.scheduler for k in kernels] == ["inner_persistent"], plan


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("sizes", [(2, 64, 4, 32), (1, 7, 3, 10), (2, 5, 1, 16), (1, 1, 2, 8), (3, 9, 5, 6)])
@pytest.mark.parametrize("layout", ["dense", "misaligned", "strided"])
def test_qk_norm_and_rope_are_one_row_kernel_storing_heads_first(dtype, sizes, layout):
    """Qwen3's query heads: normed, transposed and rotated in one inner persistent kernel, as the reference,
    with the rows' 1 / rms stored heads first beside them."""
    with FusionDefinition() as fd:
        define_qk_norm_rope(fd, sizes, dtype, with_inv=True, contiguous=layout != "strided")
    arrays = qk_inputs(sizes, dtype, sum(sizes))
    arrays[0] = {"dense": lambda a: a, "misaligned": helpers.misaligned, "strided": helpers.strided}[layout](arrays[0])
    assert_one_row_kernel(fd, arrays)
    helpers.execute_near_reference(fd, arrays, rtol=1e-2 if dtype == BF16 else 1e-5)


def define_olmo2_qk_norm_rope(fd, sizes, dtype, contiguous=True):
    """OLMo-2's query norm: x [b, t, h * d] RMS-normed over all its heads at once with w [h * d], viewed as heads
    [b, t, h, d], transposed to [b, h, t, d] and rotated with tables [t, d]."""
    b, t, h, d = sizes
    x, w = tensor(fd, 3, dtype, contiguous), tensor(fd, 1, dtype)
    cos, sin = tensor(fd, 2, dtype), tensor(fd, 2, dtype)
    xf = fd.ops.cast(x, F32)
    mean_square = fd.ops.div(fd.ops.sum(fd.ops.mul(xf, xf), dims=[2], keepdim=True), float(h * d))
    inv = fd.ops.rsqrt(fd.ops.add(mean_square, 1e-6))
    weight = fd.ops.cast(fd.ops.broadcast_in_dim(w, shape=[b, t, h * d], broadcast_dims=[2]), F32)
    normed = fd.ops.cast(fd.ops.mul(fd.ops.mul(xf, inv), weight), dtype)
    heads = fd.ops.permute(fd.ops.reshape(normed, new_shape=[b, t, h, d]), [0, 2, 1, 3])
    fd.add_output(rope(fd, heads, cos, sin, (b, h, t, d), dtype))


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("sizes", [(2, 64, 4, 32), (1, 7, 3, 6), (2, 5, 2, 9), (1, 1, 4, 8)])
@pytest.mark.parametrize("layout", ["dense", "misaligned", "strided"])
def test_olmo2_qk_norm_over_all_heads_then_split_is_one_row_kernel(dtype, sizes, layout):
    """The norm's rows are whole projections; the output spreads each row over its heads (heads of 6 or 9: the
    row's vectors are no wider than a head, down to one lane)."""
    b, t, h, d = sizes
    with FusionDefinition() as fd:
        define_olmo2_qk_norm_rope(fd, sizes, dtype, contiguous=layout != "strided")
    rng = np.random.default_rng(sum(sizes))
    arrays = [rng.standard_normal(shape).astype(NP[dtype]) for shape in ((b, t, h * d), (h * d,), (t, d), (t, d))]
    arrays[0] = {"dense": lambda a: a, "misaligned": helpers.misaligned, "strided": helpers.strided}[layout](arrays[0])
    assert_one_row_kernel(fd, arrays)
    helpers.execute_near_reference(fd, arrays, rtol=1e-2 if dtype == BF16 else 1e-5)


@pytest.mark.parametrize("sizes", [(2, 6, 3, 16), (1, 5, 2, 9)])
def test_a_softmax_written_with_its_row_dims_permuted_is_one_kernel(sizes):
    """A softmax over [b, t, h, s] written as [h, b, t, s] and as [t, h, b, s] (each row whole, stored where the
    permute puts it), and its row maxima as [h, t, b]."""
    b, t, h, s = sizes
    with FusionDefinition() as fd:
        x = tensor(fd, 4, F32)
        peak = fd.ops.max(x, dims=[3], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.broadcast_in_dim(peak, shape=[b, t, h, s], broadcast_dims=[0, 1, 2, 3])))
        total = fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[3], keepdim=True), shape=[b, t, h, s],
                                        broadcast_dims=[0, 1, 2, 3])
        y = fd.ops.div(e, total)
        fd.add_output(fd.ops.permute(y, [2, 0, 1, 3]))
        fd.add_output(fd.ops.permute(y, [1, 2, 0, 3]))
        fd.add_output(fd.ops.permute(fd.ops.reshape(peak, new_shape=[b, t, h]), [2, 1, 0]))
    arrays = [np.random.default_rng(sum(sizes)).standard_normal(sizes).astype(np.float32)]
    assert_one_row_kernel(fd, arrays)
    helpers.execute_near_reference(fd, arrays, rtol=1e-5)


def define_norm_then(fd, sizes, move):
    """x [b, t, d] RMS-normed over d, then `move` of the normed value as the output."""
    x = tensor(fd, 3, F32)
    xf = fd.ops.mul(x, 1.0)
    inv = fd.ops.rsqrt(fd.ops.add(fd.ops.div(fd.ops.sum(fd.ops.mul(xf, xf), dims=[2], keepdim=True),
                                             float(sizes[2])), 1e-6))
    normed = fd.ops.mul(xf, fd.ops.broadcast_in_dim(inv, shape=list(sizes), broadcast_dims=[0, 1, 2]))
    fd.add_output(move(fd, normed))


MOVES_ACROSS_ROWS = {
    # The tokens rolled by one: each output row is another row's normed values.
    "roll_tokens": lambda fd, y, sizes: fd.ops.cat(
        [fd.ops.slice(y, [0, 1, 0], list(sizes), [1, 1, 1]), fd.ops.slice(y, [0, 0, 0], [sizes[0], 1, sizes[2]],
                                                                          [1, 1, 1])], 1),
    # The reduced dim moved off the row: a transpose of the normed rows.
    "transpose_rows": lambda fd, y, sizes: fd.ops.permute(y, [0, 2, 1]),
    # The next row's normed values added to each row's.
    "add_next_row": lambda fd, y, sizes: fd.ops.add(
        fd.ops.pad(fd.ops.slice(y, [0, 1, 0], list(sizes), [1, 1, 1]), [0, 0, 0, 1]), y),
}


@pytest.mark.parametrize("move", sorted(MOVES_ACROSS_ROWS))
@pytest.mark.parametrize("sizes", [(2, 5, 8), (1, 3, 7)])
def test_moves_across_rows_are_no_row_kernel_and_stay_right(move, sizes):
    """An output element that reads another row's normed values needs that row's statistic: the row kernel
    does not write it (another kernel or a view makes the move), and the values are the reference's."""
    with FusionDefinition() as fd:
        define_norm_then(fd, sizes, lambda fd_, y: MOVES_ACROSS_ROWS[move](fd_, y, sizes))
    arrays = [np.random.default_rng(len(move)).standard_normal(sizes).astype(np.float32)]
    plan = helpers.device_switch.explain(fd, arrays)
    assert plan.segments[-1].scheduler != "inner_persistent", str(plan)
    helpers.execute_near_reference(fd, arrays, rtol=1e-5)


def test_a_reduction_of_a_permuted_row_value_is_refused_and_stays_right():
    """A second reduction reads its input at the domain's index: a permuted value (another row's elements
    there) is not reduced in the row kernel."""
    b, t, d = 3, 4, 4
    with FusionDefinition() as fd:
        x = tensor(fd, 3, F32)
        inv = fd.ops.rsqrt(fd.ops.add(fd.ops.sum(fd.ops.mul(x, x), dims=[2], keepdim=True), 1e-6))
        normed = fd.ops.mul(x, fd.ops.broadcast_in_dim(inv, shape=[b, t, d], broadcast_dims=[0, 1, 2]))
        fd.add_output(fd.ops.sum(fd.ops.permute(normed, [0, 2, 1]), dims=[2]))
    arrays = [np.random.default_rng(3).standard_normal((b, t, d)).astype(np.float32)]
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert len(kernels) >= 2, plan
    helpers.execute_near_reference(fd, arrays, rtol=1e-5)


def random_moves(fd, y, sizes, rng):
    """A few random moves of y [b, t, h, d] that keep each element with its row: permutes of the row dims, a
    rotate-half or a shift along the row, a reshape merging two row dims. Returns the moved value."""
    sizes = list(sizes)
    for _ in range(int(rng.integers(1, 4))):
        move = rng.choice(["permute", "rotate", "shift", "merge"])
        rank, d = len(sizes), sizes[-1]
        if move == "permute":
            order = [int(i) for i in rng.permutation(rank - 1)] + [rank - 1]
            y, sizes = fd.ops.permute(y, order), [sizes[i] for i in order]
        elif move == "rotate" and d > 1:
            half = d // 2
            ends = sizes[:-1]
            high = fd.ops.slice(y, [0] * (rank - 1) + [half], ends + [d], [1] * rank)
            low = fd.ops.slice(y, [0] * rank, ends + [half], [1] * rank)
            y = fd.ops.cat([fd.ops.neg(high), low], rank - 1)
        elif move == "shift" and d > 1:
            y = fd.ops.pad(fd.ops.slice(y, [0] * (rank - 1) + [1], sizes, [1] * rank), [0, 1])
        elif move == "merge" and rank > 2:
            sizes = [sizes[0] * sizes[1]] + sizes[2:]
            y = fd.ops.reshape(y, new_shape=sizes)
    return y


@pytest.mark.parametrize("seed", range(24))
def test_random_moves_after_a_row_statistic_match_the_reference(seed):
    """Random chains of moves within the rows after a norm or a softmax over d, as outputs beside the rows'
    statistic permuted: the values are the reference's whatever the plan."""
    rng = np.random.default_rng(seed)
    sizes = tuple(int(rng.integers(1, 6)) for _ in range(3)) + (int(rng.integers(1, 13)),)
    b, t, h, d = sizes
    softmax = bool(seed % 2)
    with FusionDefinition() as fd:
        x = tensor(fd, 4, F32)
        full = dict(shape=list(sizes), broadcast_dims=[0, 1, 2, 3])
        if softmax:
            e = fd.ops.exp(fd.ops.sub(x, fd.ops.broadcast_in_dim(fd.ops.max(x, dims=[3], keepdim=True), **full)))
            statistic = fd.ops.sum(e, dims=[3], keepdim=True)
            y = fd.ops.div(e, fd.ops.broadcast_in_dim(statistic, **full))
        else:
            statistic = fd.ops.rsqrt(fd.ops.add(fd.ops.sum(fd.ops.mul(x, x), dims=[3], keepdim=True), 1e-6))
            y = fd.ops.mul(x, fd.ops.broadcast_in_dim(statistic, **full))
        fd.add_output(random_moves(fd, y, sizes, rng))
        order = [int(i) for i in rng.permutation(3)]
        fd.add_output(fd.ops.permute(fd.ops.reshape(statistic, new_shape=[b, t, h]), order))
    arrays = [rng.standard_normal(sizes).astype(np.float32)]
    helpers.execute_near_reference(fd, arrays, rtol=1e-5)
