"""Outputs made from scalars alone that other ops read: nanoGPT's positions (torch.arange(T)), which Thunder
returns for the backward and also reads as the position embedding's gather index. The gathers, the add and
the first layer norm are one persistent kernel that computes the positions where it reads them; the same
kernel writes them in blocks of its own after the rows', and no [B, T, C] tensor passes between kernels.
Where the readers' kernel writes such an output at its own shape, it writes it with its own elements."""

import ml_dtypes
import numpy as np
import pytest

import device_switch
import helpers
from braze import DataType, FusionDefinition

F32, BF16, I64 = DataType.Float, DataType.BFloat16, DataType.Int64
NP = {BF16: np.dtype(ml_dtypes.bfloat16), F32: np.dtype(np.float32)}


def embeddings_and_layer_norm(dtype, tokens, unsqueezed=False):
    """Thunder's fusion for nanoGPT's wte(idx) + wpe(arange(T)) and ln_1, its shapes symbolic but T's; with
    `unsqueezed`, older nanoGPT's arange(T).unsqueeze(0), returned and read as [1, T]."""
    with FusionDefinition() as fd:
        idx = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=I64)
        wte = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        wpe = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        weight = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        bias = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
        batch, width = idx.size(0), wte.size(1)
        tok = fd.ops.reshape(fd.ops.index_select(wte, fd.ops.reshape(idx, [-1]), dim=0), [batch, tokens, width])
        pos = fd.ops.iota(fd.define_scalar(tokens, dtype=I64), fd.define_scalar(0, dtype=I64),
                          fd.define_scalar(1, dtype=I64), dtype=I64)
        if unsqueezed:
            pos = fd.ops.broadcast_in_dim(pos, shape=[1, tokens], broadcast_dims=[1])
            picked = fd.ops.reshape(fd.ops.index_select(wpe, fd.ops.reshape(pos, [tokens]), dim=0), [1, tokens, width])
            pos_emb = fd.ops.broadcast_in_dim(picked, shape=[batch, tokens, width], broadcast_dims=[0, 1, 2])
        else:
            pos_emb = fd.ops.broadcast_in_dim(fd.ops.index_select(wpe, pos, dim=0), shape=[batch, tokens, width],
                                              broadcast_dims=[1, 2])
        x = fd.ops.add(fd.ops.cast(tok, F32), fd.ops.cast(pos_emb, F32))
        var, mean = fd.ops.var_mean(x, dims=[2], correction=0, keepdim=False)
        rstd = fd.ops.rsqrt(fd.ops.add(fd.ops.broadcast_in_dim(var, shape=[batch, tokens, 1], broadcast_dims=[0, 1]),
                                       fd.define_scalar(1e-5, dtype=DataType.Double)))
        centered = fd.ops.sub(x, fd.ops.broadcast_in_dim(mean, shape=[batch, tokens, width], broadcast_dims=[0, 1]))
        normed = fd.ops.mul(centered, fd.ops.broadcast_in_dim(rstd, shape=[batch, tokens, width], broadcast_dims=[0, 1, 2]))
        scaled = fd.ops.mul(normed, fd.ops.cast(fd.ops.broadcast_in_dim(weight, shape=[batch, tokens, width],
                                                                           broadcast_dims=[2]), F32))
        out = fd.ops.add(scaled, fd.ops.cast(fd.ops.broadcast_in_dim(bias, shape=[batch, tokens, width],
                                                                       broadcast_dims=[2]), F32))
        for t in (pos, fd.ops.cast(x, dtype), mean, rstd, fd.ops.cast(out, dtype)):
            fd.add_output(t)
    return fd, pos.name


def reference(idx, wte, wpe, weight, bias):
    tokens = idx.shape[1]
    x = wte.astype(np.float64)[idx] + wpe.astype(np.float64)[np.arange(tokens)][None]
    mean = x.mean(-1)
    rstd = 1 / np.sqrt(x.var(-1) + 1e-5)
    out = (x - mean[..., None]) * rstd[..., None] * weight.astype(np.float64) + bias.astype(np.float64)
    return [np.arange(tokens), x, mean, rstd[..., None], out]


@pytest.mark.parametrize("unsqueezed", [False, True])
@pytest.mark.parametrize("dtype", [BF16, F32])
@pytest.mark.parametrize("batch, tokens, width, vocab", [(2, 16, 64, 50), (3, 7, 33, 11), (1, 1, 1, 1), (4, 5, 768, 9)])
def test_gathers_and_layer_norm_are_one_kernel_beside_the_positions(dtype, batch, tokens, width, vocab, unsqueezed):
    rng = np.random.default_rng(batch * 1000 + tokens * 10 + width)
    idx = rng.integers(0, vocab, (batch, tokens)).astype(np.int64)
    wte, wpe = (rng.standard_normal(shape).astype(NP[dtype]) for shape in ((vocab, width), (tokens + 3, width)))
    weight, bias = (rng.standard_normal(width).astype(NP[dtype]) for _ in range(2))
    fd, positions = embeddings_and_layer_norm(dtype, tokens, unsqueezed)
    inputs = [idx, wte, wpe, weight, bias]
    plan = device_switch.explain(fd, inputs)
    kernels = [s for s in plan.segments if s.kind == "kernel"]
    # Both gathers, the norm and the positions in one kernel: the positions in blocks of their own after the
    # rows' (a pointwise part), unless every dim is 1 (then a plain reduction's rows write them).
    assert len(kernels) == 1, str(plan)
    norm = kernels[0]
    assert norm.ops.count("index_select") == 2 and "var_mean" in norm.ops and "iota" in norm.ops, str(plan)
    assert positions in norm.outputs and positions not in norm.inputs, str(plan)
    if (batch, tokens, width) != (1, 1, 1):
        assert norm.scheduler == "inner_persistent" and "then pointwise" in norm.heuristics, str(plan)
    got = device_switch.execute(fd, inputs)
    want = reference(*inputs)
    np.testing.assert_array_equal(np.reshape(got[0], -1), want[0])
    for g, w, out_dtype in zip(got[1:], want[1:], (NP[dtype], np.float32, np.float32, NP[dtype])):
        rtol, atol = helpers.TOLERANCE[np.dtype(out_dtype)]
        if out_dtype == np.float32:
            rtol, atol = 1e-5, 1e-5
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=max(rtol, 1e-5), atol=max(atol, 1e-5))


def test_positions_read_by_ops_of_their_own_shape_stay_in_one_kernel():
    """arange(n) as an output and as an operand of x * arange(n): the readers' kernel writes both."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        n = x.size(1)
        pos = fd.ops.iota(n, fd.define_scalar(0, dtype=I64), fd.define_scalar(1, dtype=I64), dtype=I64)
        scaled = fd.ops.mul(x, fd.ops.cast(fd.ops.broadcast_in_dim(pos, shape=[x.size(0), n], broadcast_dims=[1]), F32))
        fd.add_output(pos)
        fd.add_output(scaled)
    x = np.random.default_rng(1).standard_normal((5, 13)).astype(np.float32)
    plan = device_switch.explain(fd, [x])
    assert [s.scheduler for s in plan.segments if s.kind == "kernel"] == ["pointwise"], str(plan)
    got = device_switch.execute(fd, [x])
    np.testing.assert_array_equal(got[0], np.arange(13))
    np.testing.assert_allclose(got[1], x * np.arange(13, dtype=np.float32), rtol=1e-6)


def test_a_constant_output_of_the_rows_shape_is_written_by_the_norm_kernel():
    """A constant output with an element per row, which a row norm also reads: the persistent kernel writes
    it with its per-row results, one kernel."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        ones = fd.ops.full(shape=[x.size(0)], fill_value=fd.define_scalar(2.0, dtype=DataType.Double), dtype=F32)
        row_scale = fd.ops.broadcast_in_dim(ones, shape=[x.size(0), x.size(1)], broadcast_dims=[0])
        y = fd.ops.mul(x, row_scale)
        total = fd.ops.sum(y, dims=[1], keepdim=False)
        normed = fd.ops.div(y, fd.ops.broadcast_in_dim(total, shape=[x.size(0), x.size(1)], broadcast_dims=[0]))
        fd.add_output(ones)
        fd.add_output(normed)
    x = np.random.default_rng(2).uniform(1, 2, (6, 37)).astype(np.float32)
    plan = device_switch.explain(fd, [x])
    schedulers = [s.scheduler for s in plan.segments if s.kind == "kernel"]
    assert schedulers == ["inner_persistent"], str(plan)
    got = device_switch.execute(fd, [x])
    np.testing.assert_array_equal(got[0], np.full(6, 2.0, np.float32))
    np.testing.assert_allclose(got[1], x / x.sum(1, keepdims=True), rtol=1e-5)
