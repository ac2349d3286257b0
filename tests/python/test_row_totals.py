"""Totals over the rows in the rows' kernel: a cross entropy's mean (the rows' losses summed, and the rows
not ignored counted, one divided by the other), as Thunder writes it, and other plain reductions over every
row of a per-row value (a z-loss, a weighted loss, the largest row maximum). The inner persistent kernel
adds up each block's rows and its last block to finish combines the blocks' partials and writes the totals
and what is computed from them: one kernel where the totals took a second one that read the per-row values
back."""

import ml_dtypes
import numpy as np
import pytest

import device_switch
from helpers import execute_near_reference, kernels_of
from braze import DataType, FusionDefinition
from braze import execute as braze_execute

F32, BF16, F16, I64 = DataType.Float, DataType.BFloat16, DataType.Half, DataType.Int64
NP = {BF16: np.dtype(ml_dtypes.bfloat16), F16: np.dtype(np.float16), F32: np.dtype(np.float32)}
TOL = {BF16: 2e-2, F16: 2e-3, F32: 1e-5}


def cross_entropy(dtype, ignore_index=-1):
    """Thunder's cross entropy forward with ignore_index and mean reduction: the loss, the rows' max and log
    of their sums (saved for the backward), and the count of rows not ignored."""
    with FusionDefinition() as fd:
        logits = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        target = fd.define_tensor(shape=[-1], contiguity=[True], dtype=I64)
        rows, vocab = logits.size(0), logits.size(1)
        x = fd.ops.cast(logits, F32)
        kept = fd.ops.ne(target, fd.define_scalar(ignore_index, dtype=I64))
        safe = fd.ops.where(kept, target, fd.define_scalar(0.0, dtype=F32))
        index = fd.ops.cast(fd.ops.broadcast_in_dim(safe, shape=[rows, 1], broadcast_dims=[0]), I64)
        picked = fd.ops.reshape(fd.ops.take_along_axis(x, index, dim=1), new_shape=[rows])
        m = fd.ops.max(x, dims=[1], keepdim=False)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.broadcast_in_dim(m, shape=[rows, vocab], broadcast_dims=[0])))
        log_sum = fd.ops.log(fd.ops.sum(e, dims=[1], keepdim=False))
        loss = fd.ops.where(kept, fd.ops.neg(fd.ops.sub(fd.ops.sub(picked, m), log_sum)),
                            fd.define_scalar(0.0, dtype=F32))
        count = fd.ops.cast(fd.ops.sum(kept, dims=[0], keepdim=False), F32)
        fd.add_output(fd.ops.div(fd.ops.sum(loss, dims=[0], keepdim=False), count))
        fd.add_output(m)
        fd.add_output(log_sum)
        fd.add_output(count)
    return fd


def cross_entropy_inputs(rng, rows, vocab, dtype, ignored=0.2):
    logits = (rng.standard_normal((rows, vocab)) * 3).astype(NP[dtype])
    target = rng.integers(0, vocab, rows).astype(np.int64)
    target[rng.random(rows) < ignored] = -1
    return [logits, target]


@pytest.mark.parametrize("dtype", [BF16, F16, F32])
@pytest.mark.parametrize("rows, vocab", [(32, 512), (1, 7), (300, 1000), (13, 4099), (3, 50304)])
def test_cross_entropy_mean_is_one_kernel(dtype, rows, vocab):
    rng = np.random.default_rng(rows * 7 + vocab)
    inputs = cross_entropy_inputs(rng, rows, vocab, dtype)
    fd = cross_entropy(dtype)
    kernels, plan = kernels_of(fd, inputs)
    assert len(kernels) == 1, plan
    assert kernels[0].scheduler == "inner_persistent", plan
    assert "2 totals over the rows, combined by the last block" in kernels[0].heuristics, plan
    # The totals add float losses in another order than the reference: an ulp or so per row.
    execute_near_reference(fd, inputs, 1e-5)


def test_cross_entropy_with_every_row_ignored_is_nan_as_torch_gives():
    rng = np.random.default_rng(3)
    inputs = cross_entropy_inputs(rng, 40, 64, BF16, ignored=1.0)
    got = execute_near_reference(cross_entropy(BF16), inputs, 1e-5)
    assert np.isnan(np.asarray(got[0], np.float64)) and float(np.asarray(got[3])) == 0


def test_cross_entropy_of_no_rows():
    inputs = [np.zeros((0, 50), NP[BF16]), np.zeros((0,), np.int64)]
    got = execute_near_reference(cross_entropy(BF16), inputs, 1e-5)
    assert np.isnan(np.asarray(got[0], np.float64))


def softmax_and_z_loss(fd):
    """Sizes kept as size-1 dims, not read as scalars: the definition names no row count."""
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
    m = fd.ops.max(x, dims=[1], keepdim=True)
    e = fd.ops.exp(fd.ops.sub(x, m))
    s = fd.ops.sum(e, dims=[1], keepdim=True)
    fd.add_output(fd.ops.div(e, s))
    lse = fd.ops.add(m, fd.ops.log(s))
    fd.add_output(fd.ops.sum(fd.ops.mul(lse, lse), dims=[0, 1], keepdim=False))


def test_one_kernel_serves_the_row_counts_of_a_shape_class():
    """The blocks are a launch argument and the partials' workspace is sized at launch: the kernel lowered for
    the class's canonical row count (255) runs at the others, and each launch sets the count of arrived blocks
    back to 0 for the next (255 runs twice)."""
    with FusionDefinition() as fd:
        softmax_and_z_loss(fd)
    rng = np.random.default_rng(5)
    for extent in (129, 201, 255, 131, 255):
        inputs = [rng.standard_normal((extent, 72)).astype(np.float32)]
        got = fd.execute(inputs)
        for g, w in zip(got, braze_execute.reference(fd, inputs), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        plan = str(fd.explain(inputs))
        assert (f"kernels: lowered for 255 leading rows (the shape class's canonical row count), launched for {extent}" in plan) == (extent != 255), plan
        assert "1 total over the rows, combined by the last block" in plan, plan


def rows_then(total_of, dtype=F32):
    """A softmax over rows beside a total of a per-row value that total_of(fd, x, m, s) returns."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=F32)
        rows, cols = x.size(0), x.size(1)
        xf = fd.ops.cast(x, F32)
        m = fd.ops.max(xf, dims=[1], keepdim=False)
        e = fd.ops.exp(fd.ops.sub(xf, fd.ops.broadcast_in_dim(m, shape=[rows, cols], broadcast_dims=[0])))
        s = fd.ops.sum(e, dims=[1], keepdim=False)
        fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.broadcast_in_dim(s, shape=[rows, cols], broadcast_dims=[0])), dtype))
        for out in total_of(fd, w, m, s):
            fd.add_output(out)
    return fd


def z_loss(fd, w, m, s):
    lse = fd.ops.add(m, fd.ops.log(s))
    return [fd.ops.mul(fd.ops.sum(fd.ops.mul(lse, lse), dims=[0], keepdim=False), fd.define_scalar(1e-4, dtype=F32))]


def weighted(fd, w, m, s):
    return [fd.ops.div(fd.ops.sum(fd.ops.mul(w, fd.ops.log(s)), dims=[0], keepdim=False),
                       fd.ops.sum(w, dims=[0], keepdim=False))]


def extremes(fd, w, m, s):
    return [fd.ops.max(m, dims=[0], keepdim=False), fd.ops.min(s, dims=[0], keepdim=False),
            fd.ops.sum(fd.ops.cast(m, DataType.Double), dims=[0], keepdim=False)]


def kept_dims(fd, w, m, s):
    """A total kept as [1] and broadcast to [1, 1]: meta ops of one element after it."""
    t = fd.ops.sum(fd.ops.broadcast_in_dim(m, shape=[m.size(0), 1], broadcast_dims=[0]), dims=[0, 1], keepdim=True)
    return [fd.ops.neg(t), s]


def one_kernel_with_totals(fd, inputs, totals="", when=True):
    """The plan is one kernel whose last block finishes `totals` ("2 totals", or any count) over the rows,
    where `when`; and the outputs are the reference's."""
    kernels, plan = kernels_of(fd, inputs)
    if when:
        assert len(kernels) == 1, plan
        assert f"{totals} over the rows, combined by the last block".strip() in kernels[0].heuristics, plan
    execute_near_reference(fd, inputs, 1e-5)


@pytest.mark.parametrize("total_of", [z_loss, weighted, extremes, kept_dims])
@pytest.mark.parametrize("rows, cols", [(1, 1), (1, 3), (7, 33), (257, 96), (1000, 8)])
def test_totals_of_per_row_values(total_of, rows, cols):
    rng = np.random.default_rng(rows + cols)
    inputs = [rng.standard_normal((rows, cols)).astype(np.float32), rng.random(rows).astype(np.float32) + 0.5]
    # One row of one element: the rows' reductions and the totals have operands of one element alike, and
    # no domain tells them apart (two kernels).
    one_kernel_with_totals(rows_then(total_of), inputs, when=rows * cols > 1)


def loss_broadcast_back(fd, w, m, s):
    """The mean of the rows' maxima subtracted from every row's: the total is read by the rows again."""
    mean = fd.ops.div(fd.ops.sum(m, dims=[0], keepdim=False), fd.ops.cast(m.size(0), F32))
    return [fd.ops.sub(m, fd.ops.broadcast_in_dim(mean, shape=[m.size(0)], broadcast_dims=[]))]


def total_of_total(fd, w, m, s):
    """A total read by another total: not a per-row value."""
    t = fd.ops.sum(m, dims=[0], keepdim=False)
    return [fd.ops.sum(fd.ops.mul(w, fd.ops.broadcast_in_dim(t, shape=[m.size(0)], broadcast_dims=[])), dims=[0],
                       keepdim=False)]


@pytest.mark.parametrize("total_of", [loss_broadcast_back, total_of_total])
@pytest.mark.parametrize("rows, cols", [(1, 5), (9, 40)])
def test_totals_read_back_by_the_rows_take_another_kernel(total_of, rows, cols):
    rng = np.random.default_rng(rows * cols)
    inputs = [rng.standard_normal((rows, cols)).astype(np.float32), rng.random(rows).astype(np.float32)]
    fd = rows_then(total_of)
    kernels, plan = kernels_of(fd, inputs)
    assert len(kernels) >= 2, plan
    execute_near_reference(fd, inputs, 1e-5)


def loss_of_terms(rows_scaled_by_temperature):
    """Thunder's distillation loss: a z-loss total over the rows plus terms of one element computed elsewhere
    (the cross entropy on the host as a CPU scalar, a KL divergence as a 0-dim device tensor, scaled by a
    0-dim temperature that may also scale the rows)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        ce = fd.define_tensor(shape=[], contiguity=[], dtype=F32, is_cpu=True)
        kl = fd.define_tensor(shape=[], contiguity=[], dtype=F32)
        temperature = fd.define_tensor(shape=[], contiguity=[], dtype=F32)
        rows, cols = x.size(0), x.size(1)
        if rows_scaled_by_temperature:
            x = fd.ops.mul(x, temperature)
        m = fd.ops.max(x, dims=[1], keepdim=False)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.broadcast_in_dim(m, shape=[rows, cols], broadcast_dims=[0])))
        s = fd.ops.sum(e, dims=[1], keepdim=False)
        fd.add_output(fd.ops.div(e, fd.ops.broadcast_in_dim(s, shape=[rows, cols], broadcast_dims=[0])))
        lse = fd.ops.add(m, fd.ops.log(s))
        z = fd.ops.mul(fd.ops.sum(fd.ops.mul(lse, lse), dims=[0], keepdim=False), fd.define_scalar(1e-4, dtype=F32))
        others = fd.ops.add(ce, fd.ops.mul(fd.ops.mul(kl, temperature), fd.define_scalar(0.5, dtype=F32)))
        fd.add_output(fd.ops.add(others, z))
        fd.add_output(others)
    return fd


@pytest.mark.parametrize("rows_scaled_by_temperature", [False, True])
@pytest.mark.parametrize("rows, cols", [(1, 3), (64, 100), (1000, 8)])
def test_totals_plus_terms_of_one_element_are_one_kernel(rows_scaled_by_temperature, rows, cols):
    """The last block reads 0-dim tensors, host or device, as it reads scalars: one kernel, where the sum of
    the loss's terms was a kernel of its own."""
    rng = np.random.default_rng(rows * cols)
    inputs = [rng.standard_normal((rows, cols)).astype(np.float32)] + [
        np.asarray(v, np.float32) for v in rng.random(3) + 0.5]
    one_kernel_with_totals(loss_of_terms(rows_scaled_by_temperature), inputs, "1 total", when=rows * cols > 1)


@pytest.mark.parametrize("rows, vocab", [(64, 100), (7, 4099), (1, 5)])
def test_a_teachers_softmax_of_other_rows_joins_the_cross_entropy_with_totals(rows, vocab):
    """A distillation loss as Thunder writes its forward: the student's cross entropy (rows and totals over
    them) and the teacher's softmax, rows of another input of the same shape that share no tensor with the
    student's: one kernel walks both."""
    with FusionDefinition() as fd:
        logits = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        target = fd.define_tensor(shape=[-1], contiguity=[True], dtype=I64)
        teacher = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        n, v = logits.size(0), logits.size(1)
        kept = fd.ops.ne(target, fd.define_scalar(-100, dtype=I64))
        index = fd.ops.broadcast_in_dim(fd.ops.where(kept, target, fd.define_scalar(0, dtype=I64)), shape=[n, 1],
                                        broadcast_dims=[0])
        picked = fd.ops.reshape(fd.ops.take_along_axis(logits, index, dim=1), new_shape=[n])
        m = fd.ops.max(logits, dims=[1], keepdim=False)
        e = fd.ops.exp(fd.ops.sub(logits, fd.ops.broadcast_in_dim(m, shape=[n, v], broadcast_dims=[0])))
        lse = fd.ops.add(m, fd.ops.log(fd.ops.sum(e, dims=[1], keepdim=False)))
        loss = fd.ops.where(kept, fd.ops.sub(lse, picked), fd.define_scalar(0.0, dtype=F32))
        count = fd.ops.cast(fd.ops.sum(kept, dims=[0], keepdim=False), F32)
        fd.add_output(fd.ops.div(fd.ops.sum(loss, dims=[0], keepdim=False), count))
        tm = fd.ops.max(teacher, dims=[1], keepdim=False)
        te = fd.ops.exp(fd.ops.sub(teacher, fd.ops.broadcast_in_dim(tm, shape=[n, v], broadcast_dims=[0])))
        ts = fd.ops.broadcast_in_dim(fd.ops.sum(te, dims=[1], keepdim=False), shape=[n, v], broadcast_dims=[0])
        fd.add_output(fd.ops.div(te, ts))
    rng = np.random.default_rng(rows + vocab)
    inputs = cross_entropy_inputs(rng, rows, vocab, F32) + [rng.standard_normal((rows, vocab)).astype(np.float32)]
    inputs[1][inputs[1] == -1] = -100
    one_kernel_with_totals(fd, inputs, "2 totals", when=rows > 1)


@pytest.mark.parametrize("target", ["h100:persistent_staged=1", "mi300x", "a100:block_threads=64,max_unroll=2"])
@pytest.mark.parametrize("rows, cols", [(4000, 96), (77, 1000), (2, 128256)])
@pytest.mark.parametrize("loss", ["cross_entropy", "z_loss"])
def test_totals_on_other_devices_and_kernel_forms(target, rows, cols, loss):
    """Rows staged in shared memory (blocks walking row groups add every group's rows to their partials:
    the z-loss's softmax stages, the cross entropy's pick reads the logits elsewhere and does not), rows too
    long to keep (streamed), other warp sizes and blocks."""
    rng = np.random.default_rng(rows + cols)
    if loss == "cross_entropy":
        inputs, fd, totals = cross_entropy_inputs(rng, rows, cols, BF16), cross_entropy(BF16), 2
    else:
        inputs, totals = [rng.standard_normal((rows, cols)).astype(np.float32)], 1
        with FusionDefinition() as fd:
            softmax_and_z_loss(fd)
    plan = fd.explain(inputs, target=target)
    (kernel,) = [s for s in plan.segments if s.kind == "kernel"]
    assert f"{totals} total{'s' if totals > 1 else ''} over the rows, combined by the last block" in kernel.heuristics, str(plan)
    if target.endswith("staged=1") and loss == "z_loss" and cols <= 1000:
        assert "staged" in kernel.heuristics, str(plan)
    got = fd.execute(inputs, target=target)
    for g, w in zip(got, braze_execute.reference(fd, inputs), strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-5, atol=1e-5)


def plain_rows_then_total(kind, dtype):
    """Plain reductions of the rows (no result broadcast back over a row: the reduction scheduler's) and a
    total over them: a cosine embedding loss's mean, the mean of per-token squared errors, the largest row
    sum."""
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=dtype)
        b = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=dtype)
        af, bf = fd.ops.cast(a, F32), fd.ops.cast(b, F32)
        rows = fd.ops.mul(fd.ops.cast(a.size(0), F32), fd.ops.cast(a.size(1), F32))
        if kind == "cosine":
            dot = fd.ops.sum(fd.ops.mul(af, bf), dims=[2])
            norms = fd.ops.mul(fd.ops.sqrt(fd.ops.sum(fd.ops.mul(af, af), dims=[2])),
                               fd.ops.sqrt(fd.ops.sum(fd.ops.mul(bf, bf), dims=[2])))
            fd.add_output(fd.ops.div(fd.ops.sum(fd.ops.sub(1.0, fd.ops.div(dot, norms)), dims=[0, 1]), rows))
        elif kind == "mse":
            d = fd.ops.sub(af, bf)
            per_token = fd.ops.div(fd.ops.sum(fd.ops.mul(d, d), dims=[2]), fd.ops.cast(a.size(2), F32))
            fd.add_output(per_token)
            fd.add_output(fd.ops.div(fd.ops.sum(per_token, dims=[0, 1]), rows))
        else:
            fd.add_output(fd.ops.max(fd.ops.sum(fd.ops.add(af, bf), dims=[2]), dims=[0, 1]))
    return fd


@pytest.mark.parametrize("kind", ["cosine", "mse", "largest_row_sum"])
@pytest.mark.parametrize("dtype", [BF16, F32])
@pytest.mark.parametrize("shape", [(2, 37, 300), (1, 1, 5), (3, 1000, 16), (4, 64, 4096)])
def test_plain_row_reductions_and_their_total_are_one_kernel(kind, dtype, shape):
    rng = np.random.default_rng(sum(shape))
    inputs = [rng.standard_normal(shape).astype(NP[dtype]) for _ in range(2)]
    fd = plain_rows_then_total(kind, dtype)
    kernels, plan = kernels_of(fd, inputs)
    assert len(kernels) == 1, plan
    assert kernels[0].scheduler == "reduction" and "1 total over the rows" in kernels[0].heuristics, plan
    execute_near_reference(fd, inputs, 1e-5)
