"""Reductions that share no tensor but reduce the same dims of the same sizes plan as one kernel (the
segmenter's horizontal merge): a GQA backward's k and v grads, each summed over the repeated heads of
[batch, kv heads, repeats, seq, head dim] and concatenated into the kv linear's grad by the same
kernel; two norms of one shape side by side. Outer reductions over as many rows of tensors of other widths
(an MLP backward's bias grads) are one kernel too, each part in its own blocks, and so are outer reductions
over rows of their own (a ViT's bias grads over its tokens and its class token). An inner reduction beside
an outer one stays apart. Values against the reference evaluator on the test device."""

import ml_dtypes
import numpy as np
import pytest

import device_switch
import helpers
from braze import DataType, FusionDefinition

F32 = DataType.Float
NP = {DataType.BFloat16: np.dtype(ml_dtypes.bfloat16), DataType.Half: np.dtype(np.float16), F32: np.dtype(np.float32)}


def kernels(plan):
    return [s for s in plan.segments if s.kind == "kernel"]


def define_gqa_kv_grads(fd, b, kv, rep, t, d):
    """The k grad (after a RoPE backward: x * cos + rotate(x) * sin) and the v grad, each [b, kv, rep, t, d],
    summed over the repeats, then concatenated along the last dim (pads and an add, as Thunder writes a
    cat) into the kv linear's grad [b, t, kv, 2 d]."""
    shape = [b, kv, rep, t, d]

    def tensor(sizes):  # size-1 dims are broadcasts (contiguity None), as Thunder defines them
        return fd.define_tensor(shape=sizes, contiguity=[None if n == 1 else True for n in sizes], dtype=F32)

    gk, gv, cos, sin = tensor(shape), tensor(shape), tensor([t, d]), tensor([t, d])
    half = d // 2
    cos_b = fd.ops.broadcast_in_dim(cos, shape=shape, broadcast_dims=[3, 4])
    sin_b = fd.ops.broadcast_in_dim(sin, shape=shape, broadcast_dims=[3, 4])
    x_sin = fd.ops.mul(gk, sin_b)
    first = fd.ops.slice(x_sin, start_indices=[0, 0, 0, 0, 0], end_indices=[b, kv, rep, t, half])
    second = fd.ops.slice(x_sin, start_indices=[0, 0, 0, 0, half], end_indices=shape)
    rotated = fd.ops.add(fd.ops.pad(fd.ops.neg(second), [0, half, 0, 0, 0, 0, 0, 0, 0, 0]),
                         fd.ops.pad(first, [half, 0, 0, 0, 0, 0, 0, 0, 0, 0]))
    k_grad = fd.ops.sum(fd.ops.add(fd.ops.mul(gk, cos_b), rotated), dims=[2], keepdim=False, dtype=DataType.Null)
    v_grad = fd.ops.sum(gv, dims=[2], keepdim=False, dtype=DataType.Null)
    k_t = fd.ops.permute(k_grad, dims=[0, 2, 1, 3])  # [b, t, kv, d]
    v_t = fd.ops.permute(v_grad, dims=[0, 2, 1, 3])
    kv_grad = fd.ops.add(fd.ops.pad(k_t, [0, d, 0, 0, 0, 0, 0, 0]), fd.ops.pad(v_t, [d, 0, 0, 0, 0, 0, 0, 0]))
    fd.add_output(fd.ops.reshape(kv_grad, new_shape=[b, t, kv * 2 * d]))


@pytest.mark.parametrize("b,kv,rep,t,d", [(2, 2, 3, 13, 8), (1, 1, 4, 7, 4), (2, 3, 1, 5, 6), (1, 2, 2, 1, 2)])
def test_gqa_kv_grads_sum_their_repeats_in_one_kernel(b, kv, rep, t, d):
    with FusionDefinition() as fd:
        define_gqa_kv_grads(fd, b, kv, rep, t, d)
    rng = np.random.default_rng(b * 100 + t)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ([b, kv, rep, t, d],) * 2 + ([t, d],) * 2]
    plan = fd.explain(inputs)
    reductions = [s for s in kernels(plan) if s.ops.count("sum") > 0]
    if rep > 1:
        assert len(reductions) == 1 and reductions[0].ops.count("sum") == 2, str(plan)
        # The join into the kv grad is that kernel's too (test_row_cats.py).
        assert len(kernels(plan)) == 1, str(plan)
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)


def test_two_norms_of_one_shape_side_by_side_are_one_kernel():
    with FusionDefinition() as fd:
        for _ in range(2):
            x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
            mean = fd.ops.broadcast_in_dim(fd.ops.sum(x, dims=[1], keepdim=False), shape=x.shape(), broadcast_dims=[0])
            fd.add_output(fd.ops.sub(x, mean))
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((37, 48)).astype(np.float32) for _ in range(2)]
    plan = fd.explain(inputs)
    assert len(kernels(plan)) == 1, str(plan)
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)


def define_activation_backward_beside_bias_grad(fd, dtype, rows, widths, gelu=True):
    """Nanogpt's MLP backward as Thunder hands one fusion of it: grad and x [*rows, widths[0]] in, grad * gelu'(x)
    (or silu') and its sum over the rows (the bias grad of the linear before the activation) out; beside it,
    the bias grads of other linears: a sum over the same rows of a grad [*rows, width] per further width,
    which reads nothing the activation's part computes."""
    def tensor(width):  # size-1 dims are broadcasts (contiguity None), as Thunder defines them
        shape = [*rows, width]
        return fd.define_tensor(shape=shape, contiguity=[None if n == 1 else True for n in shape], dtype=dtype)

    g_, x_ = tensor(widths[0]), tensor(widths[0])
    others = [tensor(w) for w in widths[1:]]
    g, x = fd.ops.cast(g_, F32), fd.ops.cast(x_, F32)
    gi = fd.ops.mul(g, helpers.activation_derivative(fd, x, gelu))
    row_dims = list(range(len(rows)))
    fd.add_output(fd.ops.cast(gi, dtype))
    fd.add_output(fd.ops.cast(fd.ops.sum(gi, row_dims), dtype))
    for other in others:
        fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.cast(other, F32), row_dims), dtype))


RTOL = {DataType.BFloat16: 1e-2, DataType.Half: 2e-3, F32: 1e-5}


def activation_inputs(rng, dtype, rows, widths):
    return [rng.standard_normal((*rows, widths[0])).astype(NP[dtype]) for _ in range(2)] + [
        rng.standard_normal((*rows, w)).astype(NP[dtype]) for w in widths[1:]]


@pytest.mark.parametrize("dtype", [DataType.BFloat16, DataType.Half, F32])
@pytest.mark.parametrize("rows,widths", [((2, 8), (256, 64)), ((4, 128), (384, 96)), ((3, 5), (28, 7)),
                                         ((1, 2048), (96, 24)), ((1, 1, 9), (12, 40)), ((37,), (72, 8, 1000))])
def test_activation_backward_beside_other_bias_grads_is_one_kernel(dtype, rows, widths):
    with FusionDefinition() as fd:
        define_activation_backward_beside_bias_grad(fd, dtype, rows, widths)
    rng = np.random.default_rng(sum(rows) + sum(widths))
    inputs = activation_inputs(rng, dtype, rows, widths)
    plan = fd.explain(inputs)
    assert len(kernels(plan)) == 1, str(plan)
    assert "more over the same rows" in kernels(plan)[0].heuristics, str(plan)
    helpers.execute_near_reference(fd, inputs, rtol=RTOL[dtype])


def test_side_by_side_parts_run_any_row_count_after_another():
    """One definition, rows of any count one after the other (a training loop's last, shorter batch): each
    signature plans its own parts, splits and blocks, and matches the reference."""
    with FusionDefinition() as fd:
        define_activation_backward_beside_bias_grad(fd, F32, [-1, -1], (-1, -1), gelu=False)
    rng = np.random.default_rng(7)
    for rows, widths in [((2, 300), (64, 16)), ((1, 7), (64, 16)), ((2, 300), (40, 24)), ((5, 2), (8, 64))]:
        inputs = activation_inputs(rng, F32, rows, widths)
        assert len(kernels(fd.explain(inputs))) == 1, str(fd.explain(inputs))
        helpers.execute_near_reference(fd, inputs, rtol=1e-5)


def test_side_by_side_parts_read_strided_and_shared_inputs():
    """A part reading a transposed view, and two parts reading one input (each its own sum of it)."""
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32, stride_order=[0, 1])
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        fd.add_output(fd.ops.sum(fd.ops.mul(a, a), dims=[0], keepdim=False))
        fd.add_output(fd.ops.sum(fd.ops.exp(b), dims=[0], keepdim=False))
        fd.add_output(fd.ops.max(fd.ops.reshape(b, new_shape=[b.size(0), -1, 1]), dims=[0], keepdim=False))
    rng = np.random.default_rng(8)
    inputs = [np.asfortranarray(rng.standard_normal((301, 33)).astype(np.float32)),
              rng.standard_normal((301, 20)).astype(np.float32)]
    plan = fd.explain(inputs)
    assert len(kernels(plan)) == 1, str(plan)
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)


def test_an_inner_reduction_beside_outer_ones_stays_apart():
    """Outer sums over other row counts are parts of one kernel (each with its own rows); an inner sum beside
    them is no part of it."""
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        c = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        fd.add_output(fd.ops.sum(a, dims=[0], keepdim=False))
        fd.add_output(fd.ops.sum(b, dims=[0], keepdim=False))
        fd.add_output(fd.ops.sum(c, dims=[1], keepdim=False))
    rng = np.random.default_rng(9)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ((37, 48), (41, 16), (64, 37))]
    plan = fd.explain(inputs)
    assert len(kernels(plan)) == 2, str(plan)
    assert "1 more over rows of their own" in kernels(plan)[0].heuristics, str(plan)
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)


def define_outer_reductions_of_their_own_rows(fd, dtype, transposed):
    """A ViT's bias grads: a sum over its tokens' rows [rows_a, c] and one over the class token's [rows_b, c2]
    (each cast to float and back, as Thunder writes them), and a max over a third tensor's rows [rows_b, c2]
    (its values all negative where the test feeds them: an empty split must add nothing to it)."""
    a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype,
                         stride_order=[0, 1] if transposed else [1, 0])
    b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
    m = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
    for x in (a, b):
        fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.cast(x, dtype=F32), dims=[0], keepdim=False), dtype=dtype))
    fd.add_output(fd.ops.max(m, dims=[0], keepdim=False))


@pytest.mark.parametrize("dtype", [F32, DataType.BFloat16])
@pytest.mark.parametrize("rows_a,c,rows_b,c2", [(128, 128, 2, 128), (6000, 24, 3, 24), (20000, 8, 2, 40),
                                                 (1, 8, 4099, 33), (37, 48, 41, 16), (513, 7, 1, 1)])
@pytest.mark.parametrize("layout", ["dense", "misaligned", "transposed"])
def test_outer_reductions_over_rows_of_their_own_are_parts_of_one_kernel(dtype, rows_a, c, rows_b, c2, layout):
    """One kernel, each part its rows' own split (a part of fewer rows than the splits leaves its last ones
    empty), right against the reference at sizes with 1, odd widths, and misaligned or transposed inputs."""
    with FusionDefinition() as fd:
        define_outer_reductions_of_their_own_rows(fd, dtype, layout == "transposed")
    rng = np.random.default_rng(rows_a + rows_b)
    a = rng.standard_normal((rows_a, c)).astype(NP[dtype])
    if layout == "transposed":
        a = np.asfortranarray(a)
    elif layout == "misaligned":
        buffer = np.empty(a.size + 1, a.dtype)[1:]
        buffer[:] = a.ravel()
        a = buffer.reshape(a.shape)
    inputs = [a, rng.standard_normal((rows_b, c2)).astype(NP[dtype]),
              (rng.standard_normal((rows_b, c2)) - 8.0).astype(np.float32)]
    plan = fd.explain(inputs)
    # A sum over one row reduces nothing: it plans as an inner reduction of one element per result.
    assert len(kernels(plan)) == (1 if min(rows_a, rows_b) > 1 else 2), str(plan)
    if rows_a == 20000 and layout == "dense":
        assert "split over" in kernels(plan)[0].heuristics, str(plan)  # 2 rows among more splits than rows
    helpers.execute_near_reference(fd, inputs, rtol=1e-5 if dtype == F32 else 2e-2)


def test_outer_reductions_over_rows_of_their_own_reuse_their_kernel_at_another_batch():
    """The parts' row counts are launch arguments: other batch sizes with the same heuristics (no split here,
    16 threads in y) reuse the kernel."""
    with FusionDefinition() as fd:
        define_outer_reductions_of_their_own_rows(fd, F32, False)
    rng = np.random.default_rng(10)
    for i, (rows_a, rows_b) in enumerate([(64, 2), (100, 5), (250, 3), (17, 4)]):
        inputs = [rng.standard_normal((rows_a, 64)).astype(np.float32),
                  rng.standard_normal((rows_b, 32)).astype(np.float32),
                  (rng.standard_normal((rows_b, 32)) - 8.0).astype(np.float32)]
        plan = fd.explain(inputs)
        assert len(kernels(plan)) == 1, str(plan)
        cache = str(plan).split("cache: ")[1]
        assert cache.startswith("new kernel" if i == 0 else "new launch parameters"), (rows_a, cache)
        helpers.execute_near_reference(fd, inputs, rtol=1e-5)


def test_only_groups_with_reductions_take_others_beside_them():
    """Pointwise groups of one row count join one another as independent parts, each with its own vectors (7
    columns: one lane; 4096: four), not a sum over as many rows; they join a transpose after them as parts
    beside its tiles, and an update of an input stays written in place, beside a sum over as many rows."""
    with FusionDefinition() as fd:
        a, b, c, x, g, w = (fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32) for _ in range(6))
        fd.add_output(fd.ops.exp(a))                                # [64, 7]
        fd.add_output(fd.ops.relu(b))                               # [64, 4096]
        fd.add_output(fd.ops.sum(c, dims=[1], keepdim=False))       # [10, 64]: an inner sum of 64 per result
        fd.add_output(fd.ops.mul(fd.ops.permute(x, [1, 0]), 2.0))   # [96, 64] read transposed
        fd.add_output(fd.ops.sum(g, dims=[0], keepdim=False))       # [96, 24]: a sum over 96 rows
        fd.add_output(fd.ops.mul(w, 0.9), alias_input=w)            # [96, 40], updated in place
    rng = np.random.default_rng(10)
    shapes = [(64, 7), (64, 4096), (10, 64), (64, 96), (96, 24), (96, 40)]
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    plan = fd.explain(inputs)
    schedulers = sorted(k.scheduler for k in kernels(plan))
    assert schedulers == ["pointwise", "reduction", "reduction", "transpose"], str(plan)
    assert "shared 4096 B; then pointwise: vectorize 1, unroll 1, block 256; then pointwise: vectorize 4" in str(plan), \
        str(plan)
    expected = [np.exp(inputs[0]), np.maximum(inputs[1], 0), inputs[2].sum(1), inputs[3].T * 2, inputs[4].sum(0)]
    updated = inputs[5] * np.float32(0.9)
    outputs = device_switch.execute(fd, inputs)
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(inputs[5], updated, rtol=1e-6)


def test_a_broadcast_pointwise_part_beside_a_narrow_sum_walks_in_blocks_of_the_tuned_size():
    """grad_in of a bias add (x + bias broadcast over the rows, which alone tiles rows in 2D) beside a sum of
    a [rows, 4] grad: one kernel, one-dimensional chunks for the pointwise part, at least 128 threads a
    block although the sum's own block would be 4 wide."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        bias = fd.define_tensor(shape=[-1], contiguity=[True], dtype=F32)
        g = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        fd.add_output(fd.ops.add(x, fd.ops.broadcast_in_dim(bias, shape=x.shape(), broadcast_dims=[1])))
        fd.add_output(fd.ops.sum(g, dims=[0], keepdim=False))
    rng = np.random.default_rng(11)
    inputs = [rng.standard_normal((300, 512)).astype(np.float32), rng.standard_normal(512).astype(np.float32),
              rng.standard_normal((300, 4)).astype(np.float32)]
    plan = fd.explain(inputs)
    (kernel,) = kernels(plan)
    assert "then pointwise: vectorize 4, unroll 1" in kernel.heuristics, str(plan)
    block_x, block_y = (int(n) for n in kernel.heuristics.split("block ")[1].split(" ")[0].split("x"))
    assert block_x * block_y >= 128, kernel.heuristics
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)


def test_an_update_in_place_reading_a_summed_input_keeps_its_own_kernel():
    """w * x broadcast, written into w, beside the sum of x over its rows (a sibling: both read x): the
    update stays a pointwise kernel that writes w in place, not a part of the sum's kernel and a copy."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        w = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=F32)
        fd.add_output(fd.ops.sum(x, dims=[0], keepdim=False))
        xb = fd.ops.broadcast_in_dim(x, shape=w.shape(), broadcast_dims=[1, 2])
        fd.add_output(fd.ops.mul(w, xb), alias_input=w)
    rng = np.random.default_rng(12)
    inputs = [rng.standard_normal((96, 24)).astype(np.float32), rng.standard_normal((4, 96, 24)).astype(np.float32)]
    plan = fd.explain(inputs)
    assert sorted(k.scheduler for k in kernels(plan)) == ["pointwise", "reduction"], str(plan)
    expected = inputs[1] * inputs[0]
    (total,) = device_switch.execute(fd, inputs)
    np.testing.assert_allclose(total, inputs[0].sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(inputs[1], expected, rtol=1e-6)


def test_an_unrelated_pointwise_group_of_the_rows_shape_joins_a_softmaxs_walk():
    """A softmax over rows of 64 beside exp of another [64, 64] tensor: no reduction of the exp's rows joins
    the softmax's, but the rows' kernel takes the exp elementwise in its walk of the same shape: one kernel."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        m = fd.ops.broadcast_in_dim(fd.ops.max(x, dims=[1], keepdim=False), shape=x.shape(), broadcast_dims=[0])
        e = fd.ops.exp(fd.ops.sub(x, m))
        s = fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[1], keepdim=False), shape=x.shape(), broadcast_dims=[0])
        fd.add_output(fd.ops.div(e, s))
        fd.add_output(fd.ops.exp(a))
    rng = np.random.default_rng(13)
    inputs = [rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2)]
    plan = fd.explain(inputs)
    assert [k.scheduler for k in kernels(plan)] == ["inner_persistent"], str(plan)
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)


@pytest.mark.parametrize("dtype", [DataType.BFloat16, F32])
@pytest.mark.parametrize("batch, side, window, channels", [(2, 4, 2, 64), (1, 6, 3, 24), (3, 2, 2, 8)])
def test_windows_copied_back_beside_a_bias_grad_are_one_kernel(dtype, batch, side, window, channels):
    """Swin's backward puts the windows' gradient back in place ([b * windows, w * w, c] reshaped and permuted
    to [b, side, side, c]: a copy, no view) beside the projection's bias grad (a sum over the rows of the
    same windows): the copy runs in blocks of its own in the reduction's kernel, where it took a kernel of its
    own."""
    n = side // window
    with FusionDefinition() as fd:
        grad = fd.define_tensor(shape=[batch * n * n, window * window, channels], contiguity=[True] * 3, dtype=dtype)
        windows = fd.define_tensor(shape=[batch * n * n, window * window, channels], contiguity=[True] * 3,
                                   dtype=dtype)
        bias = fd.ops.sum(fd.ops.cast(grad, F32), dims=[0, 1], keepdim=False)
        fd.add_output(fd.ops.cast(bias, dtype))
        cut = fd.ops.reshape(windows, new_shape=[batch, n, n, window, window, channels])
        fd.add_output(fd.ops.reshape(fd.ops.permute(cut, dims=[0, 1, 3, 2, 4, 5]),
                                     new_shape=[batch, side, side, channels]))
    rng = np.random.default_rng(batch * side + channels)
    inputs = [rng.standard_normal((batch * n * n, window * window, channels)).astype(NP[dtype]) for _ in range(2)]
    plan = fd.explain(inputs)
    if window > 1 and n > 1:
        assert len(kernels(plan)) == 1, str(plan)
        assert "then pointwise" in kernels(plan)[0].heuristics, str(plan)
    got = helpers.execute_near_reference(fd, inputs, rtol=1e-2 if dtype == DataType.BFloat16 else 1e-5)
    want = inputs[1].reshape(batch, n, n, window, window, channels).transpose(0, 1, 3, 2, 4, 5)
    np.testing.assert_array_equal(np.asarray(got[1]), want.reshape(batch, side, side, channels))
