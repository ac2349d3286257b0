"""Outputs made from scalars alone (an iota, a full, uniform noise with a given seed) beside a norm or softmax
whose rows do not hold them: the inner persistent kernel writes them in blocks of its own after the rows'
(a pointwise part of the same launch), and computes again, where its rows read them, the values it needs.
Thunder's MoE router backward returns zeros of [tokens, experts] beside its [tokens, k] softmax backward;
GPT's first fusion returns the positions its position embedding gathers."""

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


def router_backward(dtype, experts, fill=0.0):
    """The renormalized top-k weights' backward ([tokens, k]: grad * w - w * sum(grad * w)) and the zeros of
    the experts' gradient [tokens, experts], as Thunder's router backward returns them."""
    with FusionDefinition() as fd:
        grad = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        tokens, k = grad.size(0), grad.size(1)
        gw = fd.ops.mul(fd.ops.cast(grad, F32), fd.ops.cast(w, F32))
        dot = fd.ops.broadcast_in_dim(fd.ops.sum(gw, dims=[1], keepdim=False), shape=[tokens, k], broadcast_dims=[0])
        out = fd.ops.sub(gw, fd.ops.mul(fd.ops.cast(w, F32), dot))
        fd.add_output(fd.ops.cast(out, dtype))
        fd.add_output(fd.ops.full([tokens, experts], fd.define_scalar(fill, dtype=DataType.Double), dtype))
    return fd


@pytest.mark.parametrize("dtype", [BF16, F16, F32])
@pytest.mark.parametrize("tokens, k, experts", [(37, 2, 8), (1, 1, 1), (300, 6, 64), (5, 3, 1)])
def test_router_backward_zeros_are_written_by_the_rows_kernel(dtype, tokens, k, experts):
    rng = np.random.default_rng(tokens * 100 + k * 10 + experts)
    inputs = [rng.standard_normal((tokens, k)).astype(NP[dtype]) for _ in range(2)]
    fd = router_backward(dtype, experts)
    kernels, plan = kernels_of(fd, inputs)
    assert len(kernels) == 1, plan
    if k > 1 and experts > 1:  # (one expert: the zeros are a per-row output, which the rows write)
        assert kernels[0].scheduler == "inner_persistent" and "then pointwise" in kernels[0].heuristics, plan
    got = execute_near_reference(fd, inputs, TOL[dtype])
    assert got[1].shape == (tokens, experts) and not np.asarray(got[1], np.float64).any()


def softmax_reading_columns(dtype, with_seed=False):
    """softmax(x + c) over rows, where c ([cols]) is made from scalars alone and returned too: an iota / cols,
    or uniform noise with a given seed (each element the same wherever it is computed)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        rows, cols = x.size(0), x.size(1)
        if with_seed:
            c = fd.ops.uniform(0.0, 1.0, [cols], rng_seed=fd.define_scalar(1234, dtype=I64),
                               rng_offset=fd.define_scalar(8, dtype=I64), dtype=F32)
        else:
            c = fd.ops.div(fd.ops.cast(fd.ops.iota(cols, 0, 1, dtype=I64), F32), fd.ops.cast(cols, F32))
        shifted = fd.ops.add(fd.ops.cast(x, F32), fd.ops.broadcast_in_dim(c, shape=[rows, cols], broadcast_dims=[1]))
        m = fd.ops.broadcast_in_dim(fd.ops.max(shifted, dims=[1], keepdim=False), shape=[rows, cols], broadcast_dims=[0])
        e = fd.ops.exp(fd.ops.sub(shifted, m))
        s = fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[1], keepdim=False), shape=[rows, cols], broadcast_dims=[0])
        fd.add_output(fd.ops.cast(fd.ops.div(e, s), dtype))
        fd.add_output(c)
    return fd


@pytest.mark.parametrize("with_seed", [False, True])
@pytest.mark.parametrize("dtype", [BF16, F32])
@pytest.mark.parametrize("rows, cols", [(13, 300), (1, 1), (2, 1), (600, 40), (3, 2049)])
def test_columns_made_from_scalars_are_computed_again_by_the_rows_and_written_beside(dtype, rows, cols, with_seed):
    x = np.random.default_rng(rows + cols).standard_normal((rows, cols)).astype(NP[dtype])
    fd = softmax_reading_columns(dtype, with_seed)
    kernels, plan = kernels_of(fd, [x])
    assert len(kernels) == 1 and kernels[0].scheduler == "inner_persistent", plan
    # (One row: the columns are a row, which the rows' blocks write.)
    assert ("then pointwise" in kernels[0].heuristics) == (rows > 1), plan
    got = execute_near_reference(fd, [x], TOL[dtype])
    # The rows read the same values the part beside them writes: softmax(x + c) from the written c.
    shifted = x.astype(np.float64) + np.asarray(got[1], np.float64)[None]
    expected = np.exp(shifted - shifted.max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(got[0], np.float64), expected / expected.sum(1, keepdims=True),
                               rtol=TOL[dtype], atol=TOL[dtype])


def test_one_definition_at_other_sizes_lowers_each_its_own_parts():
    """The part beside the rows has sizes of its own: a new row count is planned at its own sizes (no kernel
    relaunched for other rows with the part's old blocks), and stays right."""
    fd = router_backward(F32, 5)
    rng = np.random.default_rng(3)
    for tokens in (40, 7, 40, 1000, 3):
        inputs = [rng.standard_normal((tokens, 4)).astype(np.float32) for _ in range(2)]
        got = execute_near_reference(fd, inputs, TOL[F32])
        assert got[1].shape == (tokens, 5)


def test_no_rows_with_an_output_made_from_scalars():
    """Zero rows: nothing to reduce, and the constant output is [0, experts]; and zero experts beside rows."""
    fd = router_backward(F32, 4, fill=1.5)
    empty = [np.zeros((0, 3), np.float32)] * 2
    got = device_switch.execute(fd, empty)
    assert got[0].shape == (0, 3) and got[1].shape == (0, 4)
    fd = router_backward(F32, 0)
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((9, 3)).astype(np.float32) for _ in range(2)]
    got = execute_near_reference(fd, inputs, TOL[F32])
    assert got[1].shape == (9, 0)


def test_a_permuted_iota_beside_the_rows_is_still_right():
    """An output made from scalars that a transpose kernel would take (an iota broadcast and permuted) is no
    pointwise part: whatever the plan, the values are the reference's."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        rows, cols = x.size(0), x.size(1)
        pos = fd.ops.cast(fd.ops.iota(cols, 0, 1, dtype=I64), F32)
        grid = fd.ops.permute(fd.ops.broadcast_in_dim(pos, shape=[rows, cols], broadcast_dims=[1]), dims=[1, 0])
        total = fd.ops.sum(fd.ops.mul(x, fd.ops.broadcast_in_dim(pos, shape=[rows, cols], broadcast_dims=[1])),
                           dims=[1], keepdim=True)
        fd.add_output(fd.ops.sub(x, fd.ops.broadcast_in_dim(total, shape=[rows, cols], broadcast_dims=[0, 1])))
        fd.add_output(grid)
    x = np.random.default_rng(5).standard_normal((33, 70)).astype(np.float32)
    got = execute_near_reference(fd, [x], TOL[F32])
    np.testing.assert_array_equal(got[1], np.broadcast_to(np.arange(70, dtype=np.float32)[:, None], (70, 33)))


def test_a_constant_updating_an_input_in_place_is_no_part_beside_the_rows():
    """A full written into an input's memory (alias_input=) is refused as a part: its own kernel, still right."""
    with FusionDefinition() as fd:
        grad = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        state = fd.define_tensor(shape=[-1], contiguity=[True], dtype=F32)
        rows, cols = grad.size(0), grad.size(1)
        dot = fd.ops.broadcast_in_dim(fd.ops.sum(grad, dims=[1], keepdim=False), shape=[rows, cols], broadcast_dims=[0])
        fd.add_output(fd.ops.sub(fd.ops.mul(grad, grad), dot))
        fd.add_output(fd.ops.full([state.size(0)], fd.define_scalar(0.0, dtype=DataType.Double), F32), alias_input=state)
    rng = np.random.default_rng(6)
    grad, state = rng.standard_normal((11, 20)).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    want = braze_execute.reference(fd, [grad, state.copy()])
    got = device_switch.execute(fd, [grad, state])
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-5, atol=1e-5)
    assert not state.any(), "the input updated in place holds the zeros"


@pytest.mark.parametrize("length", [248, 200, 136, 5])
def test_a_constant_length_iota_beside_rows_of_any_count(length):
    """An iota of a fixed length beside a softmax over symbolic rows: at some row counts the iota is a per-row
    output (its length equals the rows), at others a part beside them. Executed at row counts on both sides
    of its length (kernels planned at one row count and reused at another must not write a part's elements
    short), every output is the reference's."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        rows, cols = x.size(0), x.size(1)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.broadcast_in_dim(fd.ops.max(x, dims=[1]), shape=[rows, cols],
                                                             broadcast_dims=[0])))
        s = fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[1]), shape=[rows, cols], broadcast_dims=[0])
        fd.add_output(fd.ops.div(e, s))
        fd.add_output(fd.ops.iota(length, 0, 1, dtype=I64))
    rng = np.random.default_rng(length)
    for rows in (200, 248, 136, 5, 249, 1000, 200):
        x = rng.standard_normal((rows, 64)).astype(np.float32)
        got = execute_near_reference(fd, [x], TOL[F32])
        np.testing.assert_array_equal(got[1], np.arange(length))


@pytest.mark.parametrize("is_cpu", [True, False])
@pytest.mark.parametrize("rows, cols", [(64, 100), (1, 7), (300, 33)])
def test_a_loss_term_of_a_0_dim_tensor_is_written_beside_the_rows(is_cpu, rows, cols):
    """Thunder's backward of a sum of losses returns one term's gradient (0.5 * the loss's gradient, a 0-dim
    tensor: a CPU scalar or a device tensor) beside a softmax backward over rows: a 0-dim tensor reads as a
    scalar, so the rows' kernel writes it in blocks of its own, where it took a one-element kernel."""
    with FusionDefinition() as fd:
        grad = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        loss_grad = fd.define_tensor(shape=[], contiguity=[], dtype=F32, is_cpu=is_cpu)
        n, c = grad.size(0), grad.size(1)
        gy = fd.ops.mul(grad, y)
        dot = fd.ops.broadcast_in_dim(fd.ops.sum(gy, dims=[1], keepdim=False), shape=[n, c], broadcast_dims=[0])
        fd.add_output(fd.ops.sub(gy, fd.ops.mul(y, dot)))
        fd.add_output(fd.ops.mul(fd.define_scalar(0.5, dtype=DataType.Double), loss_grad))
    rng = np.random.default_rng(rows + cols)
    inputs = [rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(2)] + [np.asarray(1.5, np.float32)]
    kernels, plan = kernels_of(fd, inputs)
    assert len(kernels) == 1 and kernels[0].scheduler == "inner_persistent", plan
    got = execute_near_reference(fd, inputs, TOL[F32])
    assert float(np.asarray(got[1])) == 0.75
