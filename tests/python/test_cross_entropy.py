"""Cross entropy in one kernel: the row's log-sum-exp and the target's logit, picked with take_along_axis
(of the logits, or of the log-softmax as a model writes it), are computed by the inner persistent kernel
that keeps the row, which reads the picked logit again at the target's column once the row's statistics
are known. Before, the log-softmax ([rows, vocab] floats) was written whole for a second kernel to pick one
element a row. The targets are read once a row: an int64 target does not narrow the row's vectors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import braze
from braze import DataType, FusionDefinition

BF16 = ml_dtypes.bfloat16


def log_softmax_pick(fd, target_dtype=DataType.Int64):
    """-log_softmax(x)[row, target[row]]: [rows, vocab] bf16 logits, [rows, 1] targets."""
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    t = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=target_dtype)
    xf = fd.ops.cast(x, DataType.Float)
    z = fd.ops.sub(xf, fd.ops.max(xf, dims=[1], keepdim=True))
    lse = fd.ops.log(fd.ops.sum(fd.ops.exp(z), dims=[1], keepdim=True))
    fd.add_output(fd.ops.neg(fd.ops.take_along_axis(fd.ops.sub(z, lse), t, 1)))


def thunders_cross_entropy(fd):
    """Lightning Thunder's nvFuser cross entropy: the logit picked with a Float index (where(target !=
    ignore, target, 0.0)), each row's loss, and the mean over the rows not ignored (a second reduction)."""
    a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
    keep = fd.ops.ne(t, fd.define_scalar(-1, dtype=DataType.Int))
    zero = fd.define_scalar(0, dtype=DataType.Float)
    index = fd.ops.where(keep, t, zero)
    assert index.dtype == DataType.Float
    picked = fd.ops.reshape(fd.ops.take_along_axis(a, fd.ops.broadcast_in_dim(index, [a.size(0), 1], [0]), 1),
                            [a.size(0)])
    rows_max = fd.ops.max(a, [1])
    shifted = fd.ops.sub(a, fd.ops.broadcast_in_dim(rows_max, [a.size(0), a.size(1)], [0]))
    log_sum = fd.ops.log(fd.ops.sum(fd.ops.exp(shifted), [1]))
    losses = fd.ops.where(keep, fd.ops.neg(fd.ops.sub(fd.ops.sub(picked, rows_max), log_sum)), zero)
    fd.add_output(fd.ops.div(fd.ops.sum(losses, [0]), fd.ops.sum(fd.ops.cast(keep, DataType.Float), [0])))


def kernels(plan):
    return [s for s in plan.segments if s.kind == "kernel"]


@pytest.mark.parametrize("target", ["h100", "mi300x", "h100:persistent_staged=1"])
@pytest.mark.parametrize("rows, vocab", [(64, 1000), (3, 4096), (1, 8), (7, 520)])
@pytest.mark.parametrize("target_dtype", [DataType.Int64, DataType.Int32])
def test_the_log_softmax_and_its_picked_target_are_one_kernel(rows, vocab, target_dtype, target):
    with FusionDefinition() as fd:
        log_softmax_pick(fd, target_dtype)
    rng = np.random.default_rng(rows * vocab)
    targets = rng.integers(0, vocab, (rows, 1)).astype(np.int64 if target_dtype == DataType.Int64 else np.int32)
    inputs = [(rng.standard_normal((rows, vocab)) * 3).astype(BF16), targets]
    plan = fd.explain(inputs, target=target)
    (kernel,) = kernels(plan)
    assert kernel.scheduler == "inner_persistent" and "take_along_axis" in kernel.ops, str(plan)
    if vocab % 8 == 0 and target == "h100":
        # bf16 logits in 16-byte vectors, whatever the targets' dtype.
        assert "vectorize 8" in kernel.heuristics, kernel.heuristics
    (got,) = fd.execute(inputs, target=target)
    (want,) = braze.execute.reference(fd, inputs)
    assert got.shape == (rows, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_thunders_cross_entropy_keeps_the_row_vectorized():
    with FusionDefinition() as fd:
        thunders_cross_entropy(fd)
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((37, 1000)).astype(np.float32)
    target = rng.integers(0, 1000, (37,))
    target[[3, 20]] = -1
    plan = fd.explain([logits, target])
    row_kernel = kernels(plan)[0]
    assert row_kernel.scheduler == "inner_persistent" and "take_along_axis" in row_kernel.ops, str(plan)
    assert "vectorize 4" in row_kernel.heuristics, row_kernel.heuristics  # the [37] targets do not narrow it
    (loss,) = fd.execute([logits, target])
    keep = target != -1
    z = logits.astype(np.float64)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    want = (lse - z[np.arange(37), np.where(keep, target, 0)])[keep].mean()
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)


def test_a_target_out_of_range_is_named_by_the_fused_kernel():
    with FusionDefinition() as fd:
        log_softmax_pick(fd)
    rng = np.random.default_rng(0)
    targets = rng.integers(0, 40, (6, 1))
    targets[3, 0] = 40
    with pytest.raises(braze.BrazeIndexError, match=r"take_along_axis .* index 40 is out of bounds"):
        fd.execute([rng.standard_normal((6, 40)).astype(BF16), targets])


def test_a_pick_along_the_rows_is_not_taken_into_the_row_kernel():
    # The target's row, not its column, comes from the index: the row kernel would need another row's
    # statistics, so the pick stays in a kernel of its own.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        i = fd.define_tensor(shape=[1, -1], contiguity=[None, True], dtype=DataType.Int64)
        z = fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True))
        fd.add_output(fd.ops.take_along_axis(z, i, 0))
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((9, 12)).astype(np.float32), rng.integers(0, 9, (1, 12))]
    assert len(kernels(fd.explain(inputs))) == 2
    (got,) = fd.execute(inputs)
    np.testing.assert_allclose(got, braze.execute.reference(fd, inputs)[0], rtol=1e-6)


@pytest.mark.parametrize("dtype, np_dtype, width", [(DataType.Double, np.float64, 2), (DataType.Float, np.float32, 4),
                                                    (DataType.BFloat16, BF16, 8)])
@pytest.mark.parametrize("persistent", [False, True])
def test_the_rows_own_tensor_still_sets_its_vectors(dtype, np_dtype, width, persistent):
    # A reduction's operand yields a per-row value but is read along the row: its dtype keeps the vectors
    # within 16 bytes (a plain sum takes all 16; a softmax-like row beside its per-row sum, kept in
    # registers, may take fewer).
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        total = fd.ops.sum(x, dims=[1], keepdim=True)
        fd.add_output(total)
        if persistent:
            fd.add_output(fd.ops.div(x, total))
    x = np.ones((512, 1024), np_dtype)
    (kernel,) = kernels(fd.explain([x]))
    vectorize = int(kernel.heuristics.split("vectorize ")[1].split(",")[0])
    assert vectorize == width if not persistent else 1 < vectorize <= width, kernel.heuristics
