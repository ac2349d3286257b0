"""Backward passes as Thunder defines them (layer-norm and RMS-norm backward with the weight and bias
grads, GELU/SiLU backward with the bias grad of their linear, softmax backward): how many kernels each
plans as, and their values against numpy in float64, on the test device."""

import ml_dtypes
import numpy as np
import pytest

import device_switch
import helpers
from braze import DataType, FusionDefinition

F32 = DataType.Float
NP = {DataType.BFloat16: np.dtype(ml_dtypes.bfloat16), DataType.Half: np.dtype(np.float16), F32: np.dtype(np.float32)}


def define_norm_backward(fd, dtype, rms=False, weight=True, bias=True, linear_bias_grad=False):
    """grad_out, x, (mean), rstd, (weight), (grad of the next linear's output) in; grad_in, (grad_weight),
    (grad_bias), (that linear's bias grad) out: a layer-norm (or RMS-norm) backward as Thunder defines it."""
    go_ = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
    x_ = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
    mean = None if rms else fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=F32)
    rstd = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=F32)
    w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype) if weight else None
    fc = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype) if linear_bias_grad else None
    go = fd.ops.cast(go_, F32)
    xf = fd.ops.cast(x_, F32)
    xh = fd.ops.mul(xf if rms else fd.ops.sub(xf, mean), rstd)
    g = go if w is None else fd.ops.mul(go, fd.ops.broadcast(fd.ops.cast(w, F32), [True, False]))
    c = fd.ops.size(x_, 1)
    b = fd.ops.div(fd.ops.sum(fd.ops.mul(g, xh), [1], keepdim=True), c)
    centered = g if rms else fd.ops.sub(g, fd.ops.div(fd.ops.sum(g, [1], keepdim=True), c))
    fd.add_output(fd.ops.cast(fd.ops.mul(rstd, fd.ops.sub(centered, fd.ops.mul(xh, b))), dtype))
    if weight:
        fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.mul(go, xh), [0]), dtype))
    if bias:
        fd.add_output(fd.ops.cast(fd.ops.sum(go, [0]), dtype))
    if fc is not None:
        fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.cast(fc, F32), [0]), dtype))


def define_activation_backward(fd, dtype, gelu):
    """grad, x in; grad * act'(x) (GELU with erf, or SiLU) and its sum over the rows (the bias grad of the
    linear before the activation) out."""
    g_ = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
    x_ = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
    g, x = fd.ops.cast(g_, F32), fd.ops.cast(x_, F32)
    gi = fd.ops.mul(g, helpers.activation_derivative(fd, x, gelu))
    fd.add_output(fd.ops.cast(gi, dtype))
    fd.add_output(fd.ops.cast(fd.ops.sum(gi, [0]), dtype))


def norm_backward(dtype, rms, weight, bias):
    with FusionDefinition() as fd:
        define_norm_backward(fd, dtype, rms, weight, bias)
    return fd


def norm_backward_expected(inputs, rms, weight, bias):
    f = [np.asarray(a, dtype=np.float64) for a in inputs]
    go, x = f[0], f[1]
    mean, rstd = (0.0, f[2]) if rms else (f[2], f[3])
    w = f[-1] if weight else 1.0
    xh = (x - mean) * rstd
    g = go * w
    n = x.shape[1]
    centered = g if rms else g - g.sum(1, keepdims=True) / n
    out = [rstd * (centered - xh * (g * xh).sum(1, keepdims=True) / n)]
    if weight:
        out.append((go * xh).sum(0))
    if bias:
        out.append(go.sum(0))
    return out


def kernels(fd, inputs) -> int:
    return int(str(fd.explain(inputs)).split(" kernel(s)")[0].rsplit(" ", 1)[1])


def assert_close(got, expected, dtype):
    """Within a few units in the last place of the output dtype, relative to the largest value."""
    tol = {DataType.BFloat16: 2e-2, DataType.Half: 3e-3, F32: 1e-5}[dtype]
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * max(np.abs(expected).max(initial=0.0), 1.0))


@pytest.mark.parametrize(
    "rows,hidden,dtype,rms,weight,bias",
    [
        (257, 768, DataType.BFloat16, False, True, True),  # Thunder's nanoGPT width, odd rows
        (64, 200, DataType.Half, False, True, True),
        (33, 1000, F32, False, True, False),
        (20, 160, DataType.BFloat16, True, True, False),  # RMS norm
        (7, 96, F32, True, True, False),
    ],
)
def test_norm_backward_is_one_inner_outer_pass_and_a_finish(rows, hidden, dtype, rms, weight, bias):
    fd = norm_backward(dtype, rms, weight, bias)
    rng = np.random.default_rng(rows + hidden)
    inputs = [rng.standard_normal((rows, hidden)).astype(NP[dtype]), rng.standard_normal((rows, hidden)).astype(NP[dtype])]
    if not rms:
        inputs.append(rng.standard_normal((rows, 1)).astype(np.float32))
    inputs.append((0.5 + rng.random((rows, 1))).astype(np.float32))
    if weight:
        inputs.append(rng.standard_normal(hidden).astype(NP[dtype]))
    plan = fd.explain(inputs)
    assert [s.scheduler for s in plan.segments] == ["inner_outer_persistent"], str(plan)
    assert kernels(fd, inputs) == 2, str(plan)
    outputs = device_switch.execute(fd, inputs)
    for got, expected in zip(outputs, norm_backward_expected(inputs, rms, weight, bias), strict=True):
        assert got.dtype == NP[dtype]
        assert_close(got, expected, dtype)


@pytest.mark.parametrize("extra_rows_same", [True, False])
def test_linear_bias_grad_over_the_same_rows_joins_the_norm_backward(extra_rows_same):
    """Thunder's layer-norm backward also sums the grad of the next linear's output over the rows (its
    bias grad, 3072 wide for nanoGPT's 768): a tensor the norm never reads, walked by the same kernel,
    over the norm's rows or over rows of its own (a ViT's head on the class token beside the final norm)."""
    dtype = DataType.BFloat16
    with FusionDefinition() as fd:
        define_norm_backward(fd, dtype, linear_bias_grad=True)
    rows, hidden, width = 130, 96, 35  # an odd width: the bias grad's own vectors, not the rows'
    rng = np.random.default_rng(9)
    bf16 = NP[dtype]
    inputs = [rng.standard_normal((rows, hidden)).astype(bf16), rng.standard_normal((rows, hidden)).astype(bf16),
              rng.standard_normal((rows, 1)).astype(np.float32), (0.5 + rng.random((rows, 1))).astype(np.float32),
              rng.standard_normal(hidden).astype(bf16),
              rng.standard_normal((rows if extra_rows_same else rows + 3, width)).astype(bf16)]
    plan = fd.explain(inputs)
    assert kernels(fd, inputs) == 2, str(plan)
    assert [s.vectorize for s in plan.segments if s.scheduler == "inner_outer_persistent"] == [8], str(plan)
    assert ("35 more columns over 133 rows of their own" in str(plan)) == (not extra_rows_same), str(plan)
    expected = norm_backward_expected(inputs[:5], False, True, True)
    expected.append(np.asarray(inputs[5], dtype=np.float64).sum(0))
    outputs = device_switch.execute(fd, inputs)
    for got, want in zip(outputs, expected, strict=True):
        assert_close(got, want, dtype)


@pytest.mark.parametrize("fc_rows", [(130, 2, 130, 7, 520, 130), (64, 64, 3, 64, 1, 200)])
def test_a_bias_grad_over_rows_of_its_own_is_right_at_every_row_count(fc_rows):
    """One definition run at norm row counts of one shape class while the extra reduction's rows change on
    their own (its rows are a constant of the code): every run sums all of the extra's rows and no more, and
    the extra's rows above 4 per norm row take a kernel of their own."""
    dtype = DataType.BFloat16
    with FusionDefinition() as fd:
        define_norm_backward(fd, dtype, linear_bias_grad=True)
    rng = np.random.default_rng(11)
    bf16 = NP[dtype]
    for rows, extra in zip((200, 130, 129, 255, 40, 130), fc_rows):
        inputs = [rng.standard_normal((rows, 64)).astype(bf16), rng.standard_normal((rows, 64)).astype(bf16),
                  rng.standard_normal((rows, 1)).astype(np.float32), (0.5 + rng.random((rows, 1))).astype(np.float32),
                  rng.standard_normal(64).astype(bf16), rng.standard_normal((extra, 24)).astype(bf16)]
        assert kernels(fd, inputs) == (2 if extra <= 4 * rows else 3), str(fd.explain(inputs))
        expected = norm_backward_expected(inputs[:5], False, True, True)
        expected.append(np.asarray(inputs[5], dtype=np.float64).sum(0))
        for got, want in zip(device_switch.execute(fd, inputs), expected, strict=True):
            assert_close(got, want, dtype)


def test_norm_backward_reruns_at_new_row_counts_with_the_same_kernels():
    fd = norm_backward(DataType.BFloat16, False, True, True)
    rng = np.random.default_rng(3)
    for rows in (64, 65, 1000):
        inputs = [rng.standard_normal((rows, 256)).astype(NP[DataType.BFloat16]) for _ in range(2)]
        inputs += [rng.standard_normal((rows, 1)).astype(np.float32), (0.5 + rng.random((rows, 1))).astype(np.float32)]
        inputs.append(rng.standard_normal(256).astype(NP[DataType.BFloat16]))
        if rows != 64:
            plan = device_switch.explain(fd, inputs)
            assert plan.cache == "new launch parameters", plan.cache_why
        outputs = device_switch.execute(fd, inputs)
        for got, expected in zip(outputs, norm_backward_expected(inputs, False, True, True), strict=True):
            assert_close(got, expected, DataType.BFloat16)


@pytest.mark.parametrize("rows,width", [(100, 1), (1, 40), (1, 1)])
def test_a_one_column_bias_grad_and_a_single_row_take_the_inner_outer_kernel(rows, width):
    """A sum over the leading dims is a column sum whatever their sizes: a linear with one output (its
    bias grad sums [rows, 1]) joins the norm backward's walk, and a single row's weight and bias grads (sums
    over a dim of size 1) make the norm backward an inner-outer one still."""
    dtype = DataType.Float
    with FusionDefinition() as fd:
        define_norm_backward(fd, dtype, linear_bias_grad=True)
    hidden = 257
    rng = np.random.default_rng(rows + width)
    inputs = [rng.standard_normal((rows, hidden)).astype(np.float32), rng.standard_normal((rows, hidden)).astype(np.float32),
              rng.standard_normal((rows, 1)).astype(np.float32), (0.5 + rng.random((rows, 1))).astype(np.float32),
              rng.standard_normal(hidden).astype(np.float32), rng.standard_normal((rows, width)).astype(np.float32)]
    plan = fd.explain(inputs)
    assert plan.segments[0].scheduler == "inner_outer_persistent", str(plan)
    # A single row's linear bias grad is no column sum of the norm's rows (a copy of the row): a kernel of
    # its own, beside the pass and its finish.
    assert kernels(fd, inputs) == (2 if rows > 1 else 3), str(plan)
    expected = norm_backward_expected(inputs[:5], False, True, True)
    expected.append(np.asarray(inputs[5], dtype=np.float64).sum(0))
    for got, want in zip(device_switch.execute(fd, inputs), expected, strict=True):
        assert_close(got, want, dtype)


def test_column_results_of_different_widths_combined_are_right():
    """A weight grad (257 columns) plus a one-output linear's bias grad (1 column, broadcast): the finish
    computes a value per column of one width, so that sum is not the inner-outer kernel's; every output is
    the reference's."""
    with FusionDefinition() as fd:
        go = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        rstd = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=F32)
        fc = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        xh = fd.ops.mul(x, rstd)
        b = fd.ops.sum(fd.ops.mul(go, xh), [1], keepdim=True)
        fd.add_output(fd.ops.mul(rstd, fd.ops.sub(go, fd.ops.mul(xh, b))))
        wgrad = fd.ops.sum(fd.ops.mul(go, xh), [0])
        fcgrad = fd.ops.sum(fc, [0])
        fd.add_output(fd.ops.add(wgrad, fcgrad))
    rng = np.random.default_rng(6)
    for rows, hidden, width in [(100, 257, 1), (100, 1, 33)]:
        inputs = [rng.standard_normal((rows, hidden)).astype(np.float32),
                  rng.standard_normal((rows, hidden)).astype(np.float32),
                  (0.5 + rng.random((rows, 1))).astype(np.float32), rng.standard_normal((rows, width)).astype(np.float32)]
        go64, x64, r64, fc64 = (np.asarray(a, dtype=np.float64) for a in inputs)
        xh64 = x64 * r64
        b64 = (go64 * xh64).sum(1, keepdims=True)
        expected = [r64 * (go64 - xh64 * b64), (go64 * xh64).sum(0) + fc64.sum(0)]
        for got, want in zip(device_switch.execute(fd, inputs), expected, strict=True):
            assert_close(got, want, F32)


def test_a_one_column_bias_grad_beside_row_statistics_of_its_shape_joins_the_norm_backward():
    """The row statistics ([rows, 1], here scaled before use) have the shape of a one-output linear's grad:
    values computed from them belong to the rows' walk, not to the bias grad's."""
    with FusionDefinition() as fd:
        go = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=F32)
        rstd = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=F32)
        fc = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=F32)
        scaled = fd.ops.mul(rstd, 2.0)
        xh = fd.ops.mul(x, scaled)
        b = fd.ops.sum(fd.ops.mul(go, xh), [1], keepdim=True)
        fd.add_output(fd.ops.mul(scaled, fd.ops.sub(go, fd.ops.mul(xh, b))))
        fd.add_output(fd.ops.sum(fd.ops.mul(go, xh), [0]))
        fd.add_output(fd.ops.sum(fc, [0]))
    rng = np.random.default_rng(5)
    rows, hidden = 100, 257
    inputs = [rng.standard_normal((rows, hidden)).astype(np.float32), rng.standard_normal((rows, hidden)).astype(np.float32),
              (0.5 + rng.random((rows, 1))).astype(np.float32), rng.standard_normal((rows, 1)).astype(np.float32)]
    plan = fd.explain(inputs)
    assert [s.scheduler for s in plan.segments] == ["inner_outer_persistent"] and kernels(fd, inputs) == 2, str(plan)
    go64, x64, r64, fc64 = (np.asarray(a, dtype=np.float64) for a in inputs)
    xh64 = x64 * 2 * r64
    b64 = (go64 * xh64).sum(1, keepdims=True)
    expected = [2 * r64 * (go64 - xh64 * b64), (go64 * xh64).sum(0), fc64.sum(0)]
    for got, want in zip(device_switch.execute(fd, inputs), expected, strict=True):
        assert_close(got, want, F32)


@pytest.mark.parametrize("gelu", [True, False])
def test_activation_backward_with_bias_grad_is_one_kernel(gelu):
    dtype = DataType.BFloat16
    with FusionDefinition() as fd:
        define_activation_backward(fd, dtype, gelu)
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((130, 72)).astype(NP[dtype]) for _ in range(2)]
    assert kernels(fd, inputs) == 1, str(fd.explain(inputs))
    g, x = (np.asarray(a, dtype=np.float64) for a in inputs)
    if gelu:
        from math import erf, pi, sqrt

        d = 0.5 * (1 + np.vectorize(erf)(x / sqrt(2))) + x * np.exp(-x * x / 2) / sqrt(2 * pi)
    else:
        s = 1 / (1 + np.exp(-x))
        d = s * (1 + x * (1 - s))
    outputs = device_switch.execute(fd, inputs)
    assert_close(outputs[0], g * d, dtype)
    assert_close(outputs[1], (g * d).sum(0), dtype)


def test_softmax_backward_is_one_kernel():
    dtype = DataType.Half
    with FusionDefinition() as fd:
        g_ = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        y_ = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        g, y = fd.ops.cast(g_, F32), fd.ops.cast(y_, F32)
        dot = fd.ops.sum(fd.ops.mul(g, y), [1], keepdim=True)
        fd.add_output(fd.ops.cast(fd.ops.mul(y, fd.ops.sub(g, dot)), dtype))
    rng = np.random.default_rng(6)
    logits = rng.standard_normal((37, 300))
    y = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    inputs = [rng.standard_normal((37, 300)).astype(np.float16), y.astype(np.float16)]
    assert kernels(fd, inputs) == 1, str(fd.explain(inputs))
    g, yy = (np.asarray(a, dtype=np.float64) for a in inputs)
    (out,) = device_switch.execute(fd, inputs)
    assert_close(out, yy * (g - (g * yy).sum(1, keepdims=True)), dtype)


def test_layer_norm_forward_with_statistics_reads_bf16_rows_16_bytes_at_a_time():
    """Thunder's layer-norm forward also returns the [rows, 1] float mean and rstd its backward reads:
    written once per row, they do not narrow the bf16 rows' vectors (8 elements, 16 bytes)."""
    with FusionDefinition() as fd:
        x_ = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        x = fd.ops.cast(x_, F32)
        var, mean = fd.ops.var_mean(x, [1], correction=0, keepdim=True)
        rstd = fd.ops.rsqrt(fd.ops.add(var, 1e-5))
        y = fd.ops.add(fd.ops.mul(fd.ops.mul(fd.ops.sub(x, mean), rstd), fd.ops.cast(w, F32)), fd.ops.cast(b, F32))
        fd.add_output(fd.ops.cast(y, DataType.BFloat16))
        fd.add_output(mean)
        fd.add_output(rstd)
    rng = np.random.default_rng(11)
    bf16 = NP[DataType.BFloat16]
    inputs = [rng.standard_normal((67, 768)).astype(bf16), rng.standard_normal(768).astype(bf16),
              rng.standard_normal(768).astype(bf16)]
    plan = fd.explain(inputs)
    assert [(s.scheduler, s.vectorize) for s in plan.segments] == [("inner_persistent", 8)], str(plan)
    y, mean, rstd = device_switch.execute(fd, inputs)
    xf, wf, bf = (np.asarray(a, dtype=np.float64) for a in inputs)
    m = xf.mean(1, keepdims=True)
    r = 1 / np.sqrt(((xf - m) ** 2).mean(1, keepdims=True) + 1e-5)
    assert_close(mean, m, F32)
    assert_close(rstd, r, F32)
    assert_close(y, (xf - m) * r * wf + bf, DataType.BFloat16)


def test_norm_backward_of_3d_strided_inputs_with_a_linear_bias_grad():
    """nanoGPT's [batch, tokens, channels] form: grad_out with gaps between its rows, x with its dims
    reversed in memory, the weight and bias grads summed over dims (0, 1), and the next linear's bias grad
    over the same rows: still one inner-outer segment, exact against numpy."""
    B, T, C, W = 3, 37, 96, 160
    bf16 = NP[DataType.BFloat16]
    with FusionDefinition() as fd:
        go_ = fd.define_tensor(shape=[-1, -1, -1], contiguity=[False, False, True], dtype=DataType.BFloat16)
        x_ = fd.define_tensor(shape=[-1, -1, -1], contiguity=[False, False, False], stride_order=[0, 1, 2],
                              dtype=DataType.BFloat16)
        mean = fd.define_tensor(shape=[-1, -1, 1], contiguity=[True, True, None], dtype=F32)
        rstd = fd.define_tensor(shape=[-1, -1, 1], contiguity=[True, True, None], dtype=F32)
        w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        fc = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.BFloat16)
        go = fd.ops.cast(go_, F32)
        xh = fd.ops.mul(fd.ops.sub(fd.ops.cast(x_, F32), mean), rstd)
        g = fd.ops.mul(go, fd.ops.broadcast(fd.ops.cast(w, F32), [True, True, False]))
        c = fd.ops.size(x_, 2)
        a = fd.ops.div(fd.ops.sum(g, [2], keepdim=True), c)
        b = fd.ops.div(fd.ops.sum(fd.ops.mul(g, xh), [2], keepdim=True), c)
        fd.add_output(fd.ops.cast(fd.ops.mul(rstd, fd.ops.sub(fd.ops.sub(g, a), fd.ops.mul(xh, b))), DataType.BFloat16))
        fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.mul(go, xh), [0, 1]), DataType.BFloat16))
        fd.add_output(fd.ops.cast(fd.ops.sum(go, [0, 1]), DataType.BFloat16))
        fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.cast(fc, F32), [0, 1]), DataType.BFloat16))
    rng = np.random.default_rng(12)
    gaps = rng.standard_normal((B, T, C + 8)).astype(bf16)[:, :, :C]
    reversed_dims = np.ascontiguousarray(rng.standard_normal((C, T, B)).astype(bf16)).transpose(2, 1, 0)
    inputs = [gaps, reversed_dims, rng.standard_normal((B, T, 1)).astype(np.float32),
              (0.5 + rng.random((B, T, 1))).astype(np.float32), rng.standard_normal(C).astype(bf16),
              rng.standard_normal((B, T, W)).astype(bf16)]
    plan = fd.explain(inputs)
    assert [s.scheduler for s in plan.segments] == ["inner_outer_persistent"], str(plan)
    assert kernels(fd, inputs) == 2, str(plan)
    go, x, m, r, wf, fcf = (np.asarray(v, dtype=np.float64) for v in inputs)
    xh = (x - m) * r
    g = go * wf
    grad_in = r * (g - g.sum(2, keepdims=True) / C - xh * (g * xh).sum(2, keepdims=True) / C)
    expected = [grad_in, (go * xh).sum((0, 1)), go.sum((0, 1)), fcf.sum((0, 1))]
    for got, want in zip(device_switch.execute(fd, inputs), expected, strict=True):
        assert_close(got, want, DataType.BFloat16)


@pytest.mark.parametrize("view", ["reshape", "permute"])
def test_a_linear_bias_grad_read_through_a_view_stays_beside_the_norm_backward(view):
    """The next linear's grad summed over the rows after a view of it (reshaped [batch * tokens, width] as
    Thunder hands it, or permuted): the inner-outer kernel sums the view, which an alias segment makes, so
    the plan has a kernel for every segment (one no scheduler took would have no GPU kernel)."""
    B, T, C, W = 2, 20, 32, 48
    with FusionDefinition() as fd:
        go = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=F32)
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=F32)
        fc = fd.define_tensor(shape=[-1, -1, -1] if view == "reshape" else [-1, -1], contiguity=True, dtype=F32)
        s = fd.ops.sum(fd.ops.mul(go, x), [2], keepdim=True)
        fd.add_output(fd.ops.mul(go, fd.ops.sub(x, s)))
        fd.add_output(fd.ops.sum(fd.ops.mul(go, x), [0, 1]))
        viewed = fd.ops.reshape(fc, [B * T, W]) if view == "reshape" else fd.ops.permute(fc, [1, 0])
        fd.add_output(fd.ops.sum(viewed, [0]))
    rng = np.random.default_rng(21)
    go_, x_ = (rng.standard_normal((B, T, C)).astype(np.float32) for _ in range(2))
    fc_ = rng.standard_normal((B, T, W) if view == "reshape" else (W, B * T)).astype(np.float32)
    inputs = [go_, x_, fc_]
    plan = fd.explain(inputs)
    assert [(s.kind, s.scheduler) for s in plan.segments] == [("alias", "alias"), ("kernel", "inner_outer_persistent")], str(plan)
    expected = [go_ * (x_ - (go_ * x_).sum(2, keepdims=True)), (go_ * x_).sum((0, 1)),
                fc_.reshape(B * T, W).sum(0) if view == "reshape" else fc_.sum(1)]
    for got, want in zip(device_switch.execute(fd, inputs), expected, strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-4, atol=1e-4)
