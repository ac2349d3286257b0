"""What a scan kernel (cumsum, topk, argsort, scatter) writes beside its op's outputs: a view of the scan's
operand that the fusion also returns (a permute, reshape, slice or broadcast of a value a persistent or
matmul kernel computes) is written by a sort's line walk or by another segment, never left unwritten."""

from __future__ import annotations

import numpy as np
import pytest

from braze import DataType, FusionDefinition
from braze import execute as bx


def _view(fd, q, kind):
    if kind == "permute":
        return fd.ops.permute(q, [1, 0])
    if kind == "identity_permute":
        return fd.ops.permute(q, [0, 1])
    if kind == "reshape":
        return fd.ops.reshape(q, [15])
    if kind == "slice":
        return fd.ops.slice(q, [0, 1], [2, 4])
    return fd.ops.broadcast_in_dim(q, [2, 3, 5], [1, 2])


def _scan(fd, q, kind):
    if kind == "cumsum":
        return [fd.ops.cumsum(q, 1)]
    if kind == "topk":
        return list(fd.ops.topk(q, fd.define_scalar(2, dtype=DataType.Int), 1))
    return [fd.ops.argsort(q, 1)]


@pytest.mark.parametrize("scan", ["cumsum", "topk", "argsort"])
@pytest.mark.parametrize("view", ["permute", "identity_permute", "reshape", "slice", "broadcast_in_dim"])
def test_a_view_returned_beside_a_scan_of_a_kernel_result(scan, view):
    rng = np.random.default_rng(7)
    x0 = (np.abs(rng.standard_normal((3, 5))) + 0.5).astype(np.float32)  # row sums away from 0
    x1 = rng.standard_normal((3, 5)).astype(np.float32)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        q = fd.ops.sub(t1, fd.ops.div(t0, fd.ops.sum(t0, dims=[1], keepdim=True)))
        returned = _view(fd, q, view)
        fd.add_output(returned)
        for out in _scan(fd, q, scan):
            fd.add_output(out)
    got = fd.execute([x0, x1])
    want = bx.reference(fd, [x0, x1])
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    kernels = [s for s in fd.explain([x0, x1]).segments if s.kind == "kernel"]
    # A cumsum kernel writes only what reads the cumsum; a sort's line walk writes the operand too, the
    # view then an alias of it (an identity permute it writes itself, each element where it is, and a
    # reshape at each element's linear position): one kernel.
    scan_kernel = next(s for s in kernels if s.scheduler == "scan")
    if scan == "cumsum":
        assert all(op in ("cumsum", "slice") for op in scan_kernel.ops), scan_kernel.ops
    else:
        written = q.name if view not in ("identity_permute", "reshape") else returned.name
        assert len(kernels) == 1 and written in scan_kernel.outputs, [(s.ops, s.outputs) for s in kernels]


def test_a_broadcast_of_a_matmul_result_returned_beside_its_cumsum():
    rng = np.random.default_rng(1)
    import ml_dtypes

    a = rng.standard_normal((33, 20)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((20, 26)).astype(ml_dtypes.bfloat16)
    with FusionDefinition() as fd:
        ta = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        tb = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        y = fd.ops.cast(fd.ops.matmul(ta, tb), DataType.Float)
        fd.add_output(fd.ops.broadcast_in_dim(y, [2, 33, 26], [1, 2]))
        fd.add_output(fd.ops.cumsum(y, 1))
    got = fd.execute([a, b])
    want = bx.reference(fd, [a, b])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def _kernels(fd, inputs):
    return [s for s in fd.explain(inputs).segments if s.kind == "kernel"]


def _split_and_matching(fd, inputs, rtol, atol):
    """More than one kernel, and every output as the reference's."""
    assert len(_kernels(fd, inputs)) > 1
    got, want = fd.execute(inputs), bx.reference(fd, inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=rtol, atol=atol)


def _matches_reference(fd, inputs):
    got = fd.execute(inputs)
    want = bx.reference(fd, inputs)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g, np.float64), np.asarray(w, np.float64))


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", ["BFloat16", "Half", "Float"])
def test_a_cumsum_between_casts_is_one_kernel(dtype, dim):
    """cumsum(x.float() * 0.5).to(x.dtype): the cast, the scale and the rounding back are computed as the
    walk reaches each element, where they were three kernels writing two float copies."""
    import ml_dtypes

    np_dtype = {"BFloat16": ml_dtypes.bfloat16, "Half": np.float16, "Float": np.float32}[dtype]
    x = np.random.default_rng(3).standard_normal((9, 37)).astype(np_dtype)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=getattr(DataType, dtype))
        c = fd.ops.cumsum(fd.ops.mul(fd.ops.cast(t, DataType.Float), 0.5), dim)
        fd.add_output(fd.ops.cast(c, getattr(DataType, dtype)))
    kernels = _kernels(fd, [x])
    assert [k.scheduler for k in kernels] == ["scan"], [k.ops for k in kernels]
    _matches_reference(fd, [x])


def test_position_ids_from_an_attention_mask_are_one_kernel():
    """Position ids as Hugging Face models compute them from a left-padded mask: cumsum(mask) - 1, and 1
    where the mask is 0. The cumsum's result and the mask are read at the same element."""
    mask = (np.random.default_rng(4).random((5, 77)) < 0.8).astype(np.int64)
    mask[:, 40:] = 1
    with FusionDefinition() as fd:
        m = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int64)
        positions = fd.ops.sub(fd.ops.cumsum(m, 1), 1)
        fd.add_output(fd.ops.where(fd.ops.eq(m, 0), 1, positions))
    assert [k.scheduler for k in _kernels(fd, [mask])] == ["scan"]
    _matches_reference(fd, [mask])


@pytest.mark.parametrize("line", [50, 5000])
def test_topk_after_a_temperature_is_one_kernel(line):
    """A sampler's topk of logits / temperature (a line walk, or a block sort of a vocabulary's line): the
    division is computed where the sort reads its keys."""
    logits = np.random.default_rng(5).standard_normal((3, line)).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        values, indices = fd.ops.topk(fd.ops.div(t, 0.8), fd.define_scalar(7, dtype=DataType.Int), 1, True, True)
        fd.add_output(values)
        fd.add_output(indices)
        fd.add_output(fd.ops.argsort(fd.ops.neg(t), dim=1, descending=False))
    assert [k.scheduler for k in _kernels(fd, [logits])] == ["scan", "scan"]
    got, want = fd.execute([logits]), bx.reference(fd, [logits])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)  # x / 0.8 as a product with its reciprocal
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("after", ["permute", "slice", "broadcast", "beside"])
def test_ops_a_cumsum_walk_cannot_compute_go_to_other_kernels(after):
    """What the walk cannot compute at the element it has just summed stays out of its kernel, and the
    results still match: the cumsum read through a permute, a slice or a broadcast, and a value written
    beside it that does not read it."""
    x = np.random.default_rng(6).standard_normal((6, 6)).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        c = fd.ops.cumsum(fd.ops.abs(t), 1)
        if after == "permute":
            fd.add_output(fd.ops.add(fd.ops.permute(c, [1, 0]), t))
        elif after == "slice":
            fd.add_output(fd.ops.mul(fd.ops.slice(c, [0, 1], [6, 6]), 2.0))
        elif after == "broadcast":
            fd.add_output(fd.ops.neg(fd.ops.broadcast_in_dim(c, [2, 6, 6], [1, 2])))
        else:
            fd.add_output(c)
            fd.add_output(fd.ops.exp(t))
    _split_and_matching(fd, [x], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("line,kernels", [(30, ["scan"]), (257, ["scan", "pointwise"])])
def test_an_op_of_a_topk_result_is_in_its_kernel_where_a_thread_walks_the_line(line, kernels):
    """Where each line is walked by its own thread (at most 256 elements), the ops of the kept results are
    computed by that thread once the line is sorted; a longer line is a block sort, and the op another
    kernel."""
    x = np.random.default_rng(8).standard_normal((4, line)).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        values, _ = fd.ops.topk(t, fd.define_scalar(3, dtype=DataType.Int), 1, True, True)
        fd.add_output(fd.ops.mul(values, 2.0))
    assert [k.scheduler for k in _kernels(fd, [x])] == kernels
    _matches_reference(fd, [x])


def _softmax(fd, x, dim):
    xf = fd.ops.cast(x, DataType.Float)
    e = fd.ops.exp(fd.ops.sub(xf, fd.ops.max(xf, dims=[dim], keepdim=True)))
    return fd.ops.div(e, fd.ops.sum(e, dims=[dim], keepdim=True))


@pytest.mark.parametrize("experts,k", [(8, 2), (64, 6), (256, 8)])
def test_a_routers_softmax_and_topk_are_one_kernel(experts, k):
    """A mixture-of-experts router: softmax over the experts, then the k best. Each thread walks its
    token's line for the max, then for the sum, then sorts; the probabilities are never written."""
    import ml_dtypes

    logits = np.random.default_rng(9).standard_normal((37, experts)).astype(ml_dtypes.bfloat16)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        values, indices = fd.ops.topk(_softmax(fd, t, 1), fd.define_scalar(k, dtype=DataType.Int), 1, True, True)
        fd.add_output(values)
        fd.add_output(indices)
    kernels = _kernels(fd, [logits])
    assert [s.scheduler for s in kernels] == ["scan"], [s.ops for s in kernels]
    got, want = fd.execute([logits]), bx.reference(fd, [logits])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)  # x / sum as a product with 1 / sum
    np.testing.assert_array_equal(got[1], want[1])


def test_a_cumsum_of_a_softmax_along_dim_0_is_one_kernel():
    """The running probability mass of a nucleus sampler, here along dim 0 of a transposed input: the
    line's max and sum are walked first, the cumsum then reads them."""
    x = np.random.default_rng(10).standard_normal((40, 6)).astype(np.float32).T.copy().T  # column-major
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, stride_order=[0, 1])
        fd.add_output(fd.ops.cumsum(_softmax(fd, t, 0), 0))
    assert [s.scheduler for s in _kernels(fd, [x])] == ["scan"]
    got, want = fd.execute([x]), bx.reference(fd, [x])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)


def test_an_argsort_of_a_log_softmax_is_one_kernel():
    x = np.random.default_rng(11).integers(-3, 4, (9, 33)).astype(np.float32)  # ties: index order decides
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        z = fd.ops.sub(t, fd.ops.max(t, dims=[1], keepdim=True))
        lse = fd.ops.log(fd.ops.sum(fd.ops.exp(z), dims=[1], keepdim=True))
        fd.add_output(fd.ops.argsort(fd.ops.sub(z, lse), dim=1, descending=True))
    assert [s.scheduler for s in _kernels(fd, [x])] == ["scan"]
    _matches_reference(fd, [x])


@pytest.mark.parametrize("case", ["other_dim", "long_line", "other_row", "var_mean", "softmax_written_long_line"])
def test_reductions_a_line_walk_cannot_compute_go_to_other_kernels(case):
    """A reduction over another dim, a line too long for one thread to walk, a row sum read at another row
    (broadcast along the rows of a square matrix), var_mean, and a softmax the fusion returns too over a
    line too long: the reduction runs in a kernel of its own, and the results still match."""
    n = 257 if "long_line" in case else 12  # 257: one past kMaxReducedLine
    x = np.random.default_rng(12).standard_normal((12, n)).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        if case == "other_dim":
            keys = fd.ops.sub(t, fd.ops.sum(t, dims=[0], keepdim=True))
        elif case == "other_row":
            keys = fd.ops.sub(t, fd.ops.broadcast_in_dim(fd.ops.sum(t, dims=[1]), [12, 12], [1]))
        elif case == "var_mean":
            var, mean = fd.ops.var_mean(t, dims=[1], correction=0, keepdim=True)
            keys = fd.ops.div(fd.ops.sub(t, mean), fd.ops.add(var, 1.0))
        else:
            keys = _softmax(fd, t, 1)
        if case == "softmax_written_long_line":
            fd.add_output(keys)
        values, indices = fd.ops.topk(keys, fd.define_scalar(3, dtype=DataType.Int), 1, True, True)
        fd.add_output(values)
        fd.add_output(indices)
    _split_and_matching(fd, [x], rtol=1e-5, atol=1e-6)


def _router(fd, logits, k, dim, outputs):
    """softmax over the experts, the k best, their weights renormalized (Mixtral's and Qwen-MoE's router)."""
    values, indices = fd.ops.topk(_softmax(fd, logits, dim), fd.define_scalar(k, dtype=DataType.Int), dim, True, True)
    weights = fd.ops.div(values, fd.ops.sum(values, dims=[dim], keepdim=True))
    fd.add_output(fd.ops.cast(weights, DataType.BFloat16))
    if "indices" in outputs:
        fd.add_output(indices)
    if "int32_indices" in outputs:
        fd.add_output(fd.ops.cast(indices, DataType.Int32))
    if "values" in outputs:
        fd.add_output(values)
    if "kept_mass" in outputs:  # the probability the k experts hold, returned per token
        fd.add_output(fd.ops.sum(values, dims=[dim], keepdim=dim == 0))


@pytest.mark.parametrize("outputs", [["indices"], ["int32_indices"], ["indices", "values"], ["int32_indices", "kept_mass"]])
@pytest.mark.parametrize("experts,k,dim", [(8, 2, 1), (64, 8, 1), (256, 1, 1), (16, 4, 0)])
def test_a_routers_softmax_topk_and_renormalization_are_one_kernel(experts, k, dim, outputs):
    """The whole router in the topk's thread: the line's max and sum, the sort, then the kept weights' sum
    over the k slots and the weights divided by it, the kept indices read back from the indices output
    (or a workspace where only their int32 cast is returned), and that sum written once per token where
    the fusion returns it."""
    import ml_dtypes

    shape = (37, experts) if dim == 1 else (experts, 37)
    logits = np.random.default_rng(13).standard_normal(shape).astype(ml_dtypes.bfloat16)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        _router(fd, t, k, dim, outputs)
    kernels = _kernels(fd, [logits])
    assert [s.scheduler for s in kernels] == ["scan"], [s.ops for s in kernels]
    got, want = fd.execute([logits]), bx.reference(fd, [logits])
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", ["permuted", "argsort", "line_sum_read_after", "long_line"])
def test_ops_of_sort_results_a_line_walk_cannot_compute_go_to_other_kernels(case):
    """Ops of a sort's results its thread cannot compute over the kept slots stay in other kernels, and the
    results still match: the values read through a permute, an op of an argsort's indices, the line's sum
    from before the sort read by the kept weights, and a line past 256 elements."""
    n = 257 if case == "long_line" else 9
    x = np.random.default_rng(14).standard_normal((9, n)).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        total = fd.ops.sum(fd.ops.exp(t), dims=[1], keepdim=True)
        p = fd.ops.div(fd.ops.exp(t), total)
        if case == "argsort":
            fd.add_output(fd.ops.add(fd.ops.argsort(p, dim=1, descending=True), 1))
        else:
            values, _ = fd.ops.topk(p, fd.define_scalar(3, dtype=DataType.Int), 1, True, True)
            if case == "permuted":
                fd.add_output(fd.ops.mul(fd.ops.permute(values, [1, 0]), 2.0))
            elif case == "line_sum_read_after":
                fd.add_output(fd.ops.mul(values, total))
            else:
                fd.add_output(fd.ops.div(values, fd.ops.sum(values, dims=[1], keepdim=True)))
    _split_and_matching(fd, [x], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["size_one_dim_before_cumsum", "size_one_dim_after_topk", "other_rows_pick"])
def test_reductions_that_are_not_per_line_go_to_other_kernels(case):
    """What is not one value per walked line is not taken for one: a sum over a size-1 dim beside the line
    (batch 1's x - x.sum(0)) is a value per element, and a take_along_axis of a broadcast row sum picks
    other rows' sums. Both are computed in other kernels, and the results match."""
    rng = np.random.default_rng(15)
    x = rng.standard_normal((1, 8) if case.startswith("size_one") else (5, 7)).astype(np.float32)
    inputs = [x]
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        if case == "size_one_dim_before_cumsum":
            fd.add_output(fd.ops.cumsum(fd.ops.sub(t, fd.ops.sum(t, dims=[0], keepdim=True)), 1))
        elif case == "size_one_dim_after_topk":
            values, _ = fd.ops.topk(t, fd.define_scalar(3, dtype=DataType.Int), 1, True, True)
            fd.add_output(fd.ops.sum(values, dims=[0]))
        else:
            inputs.append(np.array([[3], [0], [4], [1], [2]], dtype=np.int64))
            ix = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int64)
            picked = fd.ops.take_along_axis(fd.ops.broadcast_in_dim(fd.ops.sum(t, dims=[1]), [5, 5], [1]), ix, 1)
            fd.add_output(fd.ops.cumsum(fd.ops.sub(t, fd.ops.expand(picked, [5, 7])), 1))
    assert len(_kernels(fd, inputs)) > 1
    got, want = fd.execute(inputs), bx.reference(fd, inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_a_sum_over_kept_elements_and_a_size_one_dim_is_written_once_per_line():
    """topk along dim 2 of [4, 1, 8], its values summed over dims 1 and 2: one value per line, written by
    the line's thread at the line's place in the [4] result."""
    x = np.random.default_rng(16).standard_normal((4, 1, 8)).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float)
        values, _ = fd.ops.topk(t, fd.define_scalar(3, dtype=DataType.Int), 2, True, True)
        fd.add_output(fd.ops.sum(values, dims=[1, 2]))
    assert [s.scheduler for s in _kernels(fd, [x])] == ["scan"]
    got, want = fd.execute([x]), bx.reference(fd, [x])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


@pytest.mark.parametrize("extent", [1000, 2050, 4099, 6000])
def test_few_long_integer_cumsum_lines_are_block_scans(extent):
    """Position ids of a few long sequences: a block per line, each thread a chunk (the last ones short or
    empty where the chunks do not divide the line), the chunks' sums added up in order, exact. A float
    cumsum of such lines keeps one thread per line, summing in the reference's order (in chunks, x + 1e20
    - 1e20 would keep x past a chunk's end)."""
    rng = np.random.default_rng(extent)
    mask = (rng.random((3, extent)) < 0.9).astype(np.int64)
    x = np.zeros((extent, 2), dtype=np.float32)
    x[0], x[64], x[65] = 1.0, 1e20, -1e20
    with FusionDefinition() as fd:
        m = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int64)
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.where(fd.ops.eq(m, 0), 1, fd.ops.sub(fd.ops.cumsum(m, 1), 1)))
        fd.add_output(fd.ops.cumsum(t, 0))
    kernels = _kernels(fd, [mask, x])
    assert [k.scheduler for k in kernels] == ["scan", "scan"]
    assert ["a block of" in k.heuristics for k in kernels] == [True, False], [k.heuristics for k in kernels]
    _matches_reference(fd, [mask, x])


def _thunder_router(fd, logits, k, experts_dim=1):
    """Mixtral's router as Thunder hands it to nvFuser for training: the softmax probabilities, the k best
    and their indices, the kept weights' sum broadcast over the k slots and the renormalized bf16 weights
    are all returned (the backward reads them), beside zeros of the logits' shape (the scatter's base)."""
    probs = _softmax(fd, logits, experts_dim)
    values, indices = fd.ops.topk(probs, fd.define_scalar(k, dtype=DataType.Int), experts_dim, True, True)
    kept = fd.ops.sum(values, dims=[experts_dim], keepdim=True)
    kept_per_slot = fd.ops.expand(kept, values.shape())
    weights = fd.ops.cast(fd.ops.mul(values, fd.ops.reciprocal(kept_per_slot)), DataType.BFloat16)
    zeros = fd.ops.full(logits.shape(), fd.define_scalar(0, dtype=DataType.Int64), DataType.BFloat16)
    for out in (probs, values, indices, kept_per_slot, weights, zeros):
        fd.add_output(out)


@pytest.mark.parametrize("tokens,experts,k,experts_dim", [(37, 8, 2, 1), (5, 64, 6, 1), (3, 256, 8, 1), (1, 8, 8, 1),
                                                          (9, 16, 4, 0)])
def test_a_routers_returned_probabilities_weights_and_zeros_are_one_kernel(tokens, experts, k, experts_dim):
    """The router as Thunder writes it for training is one scan kernel: each thread walks its token's line
    for the max and the sum, once more to store the probabilities and the zeros, sorts, then walks the kept
    slots for their sum and once more to store the sum at each slot and the weights."""
    import ml_dtypes

    shape = (tokens, experts) if experts_dim == 1 else (experts, tokens)
    logits = np.random.default_rng(tokens * experts + k).standard_normal(shape).astype(ml_dtypes.bfloat16)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        _thunder_router(fd, t, k, experts_dim)
    kernels = _kernels(fd, [logits])
    assert [s.scheduler for s in kernels] == ["scan"], [s.ops for s in kernels]
    got, want = fd.execute([logits]), bx.reference(fd, [logits])
    assert len(got) == 6
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(got[5], np.float32), 0)


def test_an_argsort_beside_the_probabilities_it_sorts_is_one_kernel():
    """A sampler's sorted order of a softmax, the softmax returned too: written by the walk before the sort."""
    x = np.random.default_rng(21).integers(-3, 4, (7, 19)).astype(np.float32)  # ties: index order decides
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        probs = _softmax(fd, t, 1)
        fd.add_output(probs)
        fd.add_output(fd.ops.argsort(probs, dim=1, descending=True))
    assert [s.scheduler for s in _kernels(fd, [x])] == ["scan"]
    got, want = fd.execute([x]), bx.reference(fd, [x])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)  # x / sum as a product with 1 / sum
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("case", ["other_shape", "cumsum", "block_sort"])
def test_values_before_a_sort_that_a_line_walk_cannot_write_go_to_other_kernels(case):
    """A value before the topk of another shape than its operand (the line's sum), one before a cumsum, and
    one beside a topk of lines too long for a thread (a block sort): written by other kernels, results
    matching the reference."""
    n = 300 if case == "block_sort" else 10
    x = np.random.default_rng(22).standard_normal((6, n)).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        e = fd.ops.exp(t)
        total = fd.ops.sum(e, dims=[1], keepdim=True)
        p = fd.ops.div(e, total)
        if case == "cumsum":
            fd.add_output(p)
            fd.add_output(fd.ops.cumsum(p, 1))
        else:
            fd.add_output(total if case == "other_shape" else p)
            values, indices = fd.ops.topk(p, fd.define_scalar(3, dtype=DataType.Int), 1, True, True)
            fd.add_output(values)
            fd.add_output(indices)
    _split_and_matching(fd, [x], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("zeros_shape", ["same", "other", "two_other"])
def test_a_constant_output_joins_a_kernel_that_writes_its_shape(zeros_shape):
    """zeros the fusion returns beside a pointwise result: written by that kernel, in its walk where the
    shapes agree, in blocks of their own where they do not (one part for two of them): one launch."""
    x = np.random.default_rng(23).standard_normal((5, 11)).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(t, 3.0))
        shape = t.shape() if zeros_shape == "same" else [t.size(0), t.size(1), 2]
        for _ in range(2 if zeros_shape == "two_other" else 1):
            fd.add_output(fd.ops.full(shape, fd.define_scalar(0.0, dtype=DataType.Double), DataType.Float))
    assert len(_kernels(fd, [x])) == 1
    got = fd.execute([x])
    np.testing.assert_allclose(got[0], x * 3.0, rtol=1e-6)
    for zeros in got[1:]:
        np.testing.assert_array_equal(zeros, np.zeros((5, 11) if zeros_shape == "same" else (5, 11, 2), np.float32))


@pytest.mark.parametrize("scan", ["topk", "argsort"])
@pytest.mark.parametrize("shape", [(4, 6), (7, 3), (1, 5)])
def test_reshapes_of_a_line_normed_value_are_written_by_the_sort_kernel(scan, shape):
    """A value normed along dim 0 (each line a column), sorted along it, and returned reshaped three ways: the
    line walk stores each reshape at the linear position of the element it is at, in one kernel."""
    rows, cols = shape
    rng = np.random.default_rng(rows * cols)
    x = (np.abs(rng.standard_normal(shape)) + 0.5).astype(np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        q = fd.ops.div(t, fd.ops.sum(t, dims=[0], keepdim=True))
        fd.add_output(fd.ops.reshape(q, [rows * cols]))
        fd.add_output(fd.ops.reshape(q, [cols, rows]))
        fd.add_output(fd.ops.reshape(fd.ops.reshape(q, [rows * cols]), [1, cols * rows, 1]))
        if scan == "topk":
            for out in fd.ops.topk(q, fd.define_scalar(1, dtype=DataType.Int), 0):
                fd.add_output(out)
        else:
            fd.add_output(fd.ops.argsort(q, 0))
    got, want = fd.execute([x]), bx.reference(fd, [x])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    kernels = [s for s in fd.explain([x]).segments if s.kind == "kernel"]
    assert [k.scheduler for k in kernels] == ["scan"], fd.explain([x])
