"""Reductions over a few elements a result (at most 16) computed where they are read, in the kernel of the
ops around them: GQA's backward, which sums each KV head's gradient over its query heads and concatenates
the sums with the query gradient, plans as one kernel up to 16 query heads a KV head; sums, products,
maxima, minima, any and all over such dims match numpy wherever the dims lie. Past 16 elements, where a
result is broadcast back or reduced again, or where an output element would load more than 32 elements
for its reductions, a reduction kernel again."""

import ml_dtypes
import numpy as np
import pytest

import device_switch
import helpers
from braze import DataType, FusionDefinition

F32 = DataType.Float
NP = {DataType.BFloat16: np.dtype(ml_dtypes.bfloat16), DataType.Half: np.dtype(np.float16), F32: np.dtype(np.float32)}


def kernel_schedulers(fd, inputs):
    return [s.scheduler for s in device_switch.explain(fd, inputs).segments if s.kind == "kernel"]


def define_gqa_backward(fd, dtype, b, g, q, t, h):
    """The gradients of the query heads (b, g * q, t, h) and of the keys and values as each query head
    read them (expanded from g KV heads): the keys' and values' summed over their q query heads, the
    query's scaled, concatenated per KV head as the fused QKV projection lays them out, [b, t, g * (q + 2) * h]."""
    dq, dk, dv = (fd.define_tensor(shape=[-1] * 4, contiguity=[True] * 4, dtype=dtype) for _ in range(3))
    query = fd.ops.reshape(fd.ops.cast(fd.ops.mul(fd.ops.cast(dq, F32), 0.125), dtype), [b, g, q, t, h])
    summed = []
    for grad in (dk, dv):
        total = fd.ops.sum(fd.ops.cast(fd.ops.reshape(grad, [b, g, q, t, h]), F32), [2])
        summed.append(fd.ops.broadcast_in_dim(fd.ops.cast(total, dtype), [b, g, 1, t, h], [0, 1, 3, 4]))
    qkv = fd.ops.cat([query, *summed], 2)
    fd.add_output(fd.ops.reshape(fd.ops.permute(qkv, [0, 3, 1, 2, 4]), [b, t, g * (q + 2) * h]))


def gqa_backward_expected(inputs, b, g, q, t, h, dtype):
    dq, dk, dv = (np.asarray(x, dtype=np.float64).reshape(b, g, q, t, h) for x in inputs)
    rounded = [(dq * 0.125).astype(NP[dtype]).astype(np.float64)]
    rounded += [x.sum(2, keepdims=True).astype(np.float32).astype(NP[dtype]).astype(np.float64) for x in (dk, dv)]
    return np.concatenate(rounded, 2).transpose(0, 3, 1, 2, 4).reshape(b, t, g * (q + 2) * h)


@pytest.mark.parametrize(
    "b,g,q,t,h,dtype",
    [
        (2, 2, 4, 16, 16, DataType.BFloat16),  # Llama-3-8B's four query heads a KV head
        (1, 3, 8, 5, 24, F32),  # Llama-3-70B's eight; odd sequence length
        (2, 1, 16, 3, 8, DataType.Half),  # sixteen: 2 x 16 loads an element, the most computed per element
        (1, 2, 1, 7, 8, DataType.BFloat16),  # one query head a KV head (MHA): the sum of one is a squeeze
    ],
)
def test_gqa_backward_is_one_kernel(b, g, q, t, h, dtype):
    with FusionDefinition() as fd:
        define_gqa_backward(fd, dtype, b, g, q, t, h)
    rng = np.random.default_rng(b * 1000 + g * 100 + q)
    inputs = [rng.standard_normal((b, g * q, t, h)).astype(NP[dtype]) for _ in range(3)]
    assert len(kernel_schedulers(fd, inputs)) == 1, str(device_switch.explain(fd, inputs))
    (got,) = device_switch.execute(fd, inputs)
    assert got.dtype == NP[dtype] and got.shape == (b, t, g * (q + 2) * h)
    # Each value is rounded once to the output dtype, as the reference rounds it; sums of float32 terms in
    # another order differ by a unit of the output's last place at most.
    tol = {DataType.BFloat16: 1e-2, DataType.Half: 2e-3, F32: 1e-6}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), gqa_backward_expected(inputs, b, g, q, t, h, dtype),
                               rtol=tol, atol=tol)


def test_seventeen_query_heads_keep_a_reduction_kernel():
    # Past 16 elements a result: the reduction kernel's.
    b, g, q, t, h, dtype = 1, 1, 17, 4, 8, DataType.BFloat16
    with FusionDefinition() as fd:
        define_gqa_backward(fd, dtype, b, g, q, t, h)
    rng = np.random.default_rng(17)
    inputs = [rng.standard_normal((b, g * q, t, h)).astype(NP[dtype]) for _ in range(3)]
    assert "of more than 16 elements a result" in str(device_switch.explain(fd, inputs))
    schedulers = kernel_schedulers(fd, inputs)
    assert len(schedulers) == 2 and "reduction" in schedulers, schedulers
    (got,) = device_switch.execute(fd, inputs)
    np.testing.assert_allclose(got.astype(np.float64), gqa_backward_expected(inputs, b, g, q, t, h, dtype),
                               rtol=1e-2, atol=1e-2)


NUMPY_REDUCTION = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "any": np.any, "all": np.all}


def reduce_op(fd, name, x, dims, keepdim):
    if name in ("any", "all"):
        return getattr(fd.ops, name)(x, dims, keepdim)
    return getattr(fd.ops, name)(x, dims, keepdim=keepdim)


@pytest.mark.parametrize(
    "name,shape,dims,keepdim,dtype",
    [
        ("sum", (3, 5, 7), [1], False, np.float32),  # a middle dim
        ("sum", (6, 4), [0], True, ml_dtypes.bfloat16),  # the outer dim, kept
        ("sum", (5, 3), [1], False, np.float16),  # the innermost dim: no vector loads along it
        ("sum", (2, 3, 2, 9), [0, 2], False, np.float32),  # two dims, 4 elements a result
        ("sum", (4, 3, 5), [1], True, np.int32),  # integers accumulate in Int64
        ("sum", (16, 3), [0], False, np.int8),
        ("prod", (3, 6), [1], True, np.float32),
        ("max", (4, 7, 3), [0], False, np.float32),  # NaN below propagates, as torch's max
        ("min", (3, 4), [1], True, ml_dtypes.bfloat16),
        ("max", (5, 2), [1], False, np.int32),
        ("any", (3, 5), [0], False, np.bool_),
        ("all", (2, 8), [0], True, np.bool_),
        ("sum", (3, 0, 4), [1], False, np.float32),  # nothing summed: zeros
    ],
)
def test_a_small_reduction_beside_its_operand_matches_numpy(name, shape, dims, keepdim, dtype):
    """cat(reduction, another input) along a dim the reduction keeps: no reduction scheduler takes the
    result beside a tensor it did not reduce, so the pointwise kernel computes the reduction per element."""
    rng = np.random.default_rng(len(shape) * 10 + len(dims))
    kept_shape = tuple(1 if d in dims else s for d, s in enumerate(shape))

    def sample(sizes):
        if np.dtype(dtype) == np.bool_:
            return rng.random(sizes) < 0.6
        if np.issubdtype(np.dtype(dtype), np.integer):
            return rng.integers(-3, 4, sizes).astype(dtype)
        return (rng.standard_normal(sizes) * (0.5 if name == "prod" else 1.0)).astype(dtype)

    x, other = sample(shape), sample(kept_shape)
    if name == "max" and helpers.is_floating(dtype):
        x[1, 2, 0] = np.nan
    rest = [d for d in range(len(shape)) if d not in dims]
    along = rest[-1]
    with FusionDefinition() as fd:
        xt, ot = helpers.define_like(fd, x), helpers.define_like(fd, other)
        reduced = reduce_op(fd, name, xt, dims, True)
        fd.add_output(fd.ops.cat([fd.ops.cast(reduced, ot.dtype), ot], along))
        if not keepdim:
            fd.add_output(reduce_op(fd, name, xt, dims, False))
    assert kernel_schedulers(fd, [x, other]) == ["pointwise"], str(device_switch.explain(fd, [x, other]))
    outputs = device_switch.execute(fd, [x, other])
    ref = helpers.as_reference(x)
    kept = NUMPY_REDUCTION[name](ref, axis=tuple(dims), keepdims=True)
    expected = [np.concatenate([kept, helpers.as_reference(other)], axis=along)]
    if not keepdim:
        expected.append(NUMPY_REDUCTION[name](ref, axis=tuple(dims)))
    for got, want in zip(outputs, expected, strict=True):
        got = np.asarray(got)
        helpers.assert_matches(got, want, got.dtype, f"{name} over {dims} of {shape}")


def test_the_reduced_extent_is_checked_at_each_signature():
    """One definition, the reduced dim's extent r given by its input: the cat computes the sum at each of its
    elements, r loads each, so per element up to 16 (the extents 4, 16 and 5, another shape class), a
    reduction kernel past it (32 and 17)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=F32)
        fd.add_output(fd.ops.cat([fd.ops.sum(x, [1], keepdim=True), x], 1))
    for extent, per_element in ((4, True), (32, False), (16, True), (5, True), (17, False), (4, True)):
        x = np.random.default_rng(extent).standard_normal((3, extent, 6)).astype(np.float32)
        schedulers = kernel_schedulers(fd, [x])
        assert (schedulers == ["pointwise"]) == per_element, (extent, schedulers)
        (got,) = device_switch.execute(fd, [x])
        want = np.concatenate([x.astype(np.float64).sum(1, keepdims=True), x], 1)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"extent {extent}")


def test_a_result_broadcast_back_keeps_a_reduction_kernel():
    """softmax over a small outer dim: its max and sum are read at every element of their group, which
    would each compute them again (reading the group r times over); a reduction kernel computes each
    once, and explain says why the pointwise kernel did not."""
    x = np.random.default_rng(5).standard_normal((8, 3, 33)).astype(np.float32)
    with FusionDefinition() as fd:
        xt = helpers.define_like(fd, x)
        shifted = fd.ops.exp(fd.ops.sub(xt, fd.ops.max(xt, [0], keepdim=True)))
        fd.add_output(fd.ops.cat([fd.ops.div(shifted, fd.ops.sum(shifted, [0], keepdim=True)), xt], 1))
    plan = str(device_switch.explain(fd, [x]))
    assert len(kernel_schedulers(fd, [x])) > 1 and "reads a reduction's result at several elements" in plan, plan
    (got,) = device_switch.execute(fd, [x])
    e = np.exp(x.astype(np.float64) - x.max(0, keepdims=True))
    np.testing.assert_allclose(got, np.concatenate([e / e.sum(0, keepdims=True), x], 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(4, 64, 48), (3, 33, 70), (16, 8, 40)])
def test_a_small_reduction_read_transposed_is_one_transpose_kernel(shape):
    """sum over a few leading rows, transposed and added to another input: one transpose kernel, whose
    values equal numpy's."""
    rng = np.random.default_rng(shape[0])
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal((shape[2], shape[1])).astype(np.float32)
    with FusionDefinition() as fd:
        xt, yt = helpers.define_like(fd, x), helpers.define_like(fd, y)
        fd.add_output(fd.ops.add(fd.ops.permute(fd.ops.sum(xt, [0]), [1, 0]), yt))
    assert kernel_schedulers(fd, [x, y]) == ["transpose"], str(device_switch.explain(fd, [x, y]))
    (got,) = device_switch.execute(fd, [x, y])
    np.testing.assert_allclose(got, x.astype(np.float64).sum(0).T + y, rtol=1e-5, atol=1e-5)


def test_a_reduction_of_a_reduction_is_not_computed_per_element_sums_in_a_cat_are_where_they_fall():
    """A sum of a sum computed per element would multiply its loads (16 x 16 a result): explain says why the
    pointwise kernel did not take it. Three 12-row sums beside a large tensor in a cat along the rows: each
    row computes the cat input it falls in (12 loads in 3 of 503 rows), so one pointwise kernel. The values
    are numpy's."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 16, 8)).astype(np.float32)
    with FusionDefinition() as fd:
        xt = helpers.define_like(fd, x)
        twice = fd.ops.sum(fd.ops.sum(xt, [0], keepdim=True), [1], keepdim=True)
        fd.add_output(fd.ops.cat([twice, fd.ops.slice(xt, [0, 0, 0], [1, 1, 8])], 2))
    plan = str(device_switch.explain(fd, [x]))
    assert "reduces a reduction's result" in plan, plan
    (got,) = device_switch.execute(fd, [x])
    np.testing.assert_allclose(got, np.concatenate([x.astype(np.float64).sum((0, 1), keepdims=True), x[:1, :1]], 2),
                               rtol=1e-5, atol=1e-5)

    small = [rng.standard_normal((12, 40)).astype(np.float32) for _ in range(3)]
    big = rng.standard_normal((500, 40)).astype(np.float32)
    with FusionDefinition() as fd:
        handles = [helpers.define_like(fd, a) for a in (*small, big)]
        fd.add_output(fd.ops.cat([*(fd.ops.sum(t, [0], keepdim=True) for t in handles[:3]), handles[3]], 0))
    plan = str(device_switch.explain(fd, [*small, big]))
    assert kernel_schedulers(fd, [*small, big]) == ["pointwise"], plan
    (got,) = device_switch.execute(fd, [*small, big])
    want = np.concatenate([*(a.astype(np.float64).sum(0, keepdims=True) for a in small), big], 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_result_read_twice_at_the_same_element_is_computed_once():
    """sum(y) * sum(y) beside z: the lowering computes the sum once an element, 16 loads, within the bound."""
    rng = np.random.default_rng(4)
    y, z = rng.standard_normal((16, 40)).astype(np.float32), rng.standard_normal((20, 40)).astype(np.float32)
    with FusionDefinition() as fd:
        yt, zt = helpers.define_like(fd, y), helpers.define_like(fd, z)
        s = fd.ops.sum(yt, [0], keepdim=True)
        fd.add_output(fd.ops.cat([fd.ops.mul(s, s), zt], 0))
    assert kernel_schedulers(fd, [y, z]) == ["pointwise"], str(device_switch.explain(fd, [y, z]))
    (got,) = device_switch.execute(fd, [y, z])
    total = y.astype(np.float64).sum(0, keepdims=True)
    np.testing.assert_allclose(got, np.concatenate([total * total, z], 0), rtol=1e-5, atol=1e-4)
