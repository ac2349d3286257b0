"""Independent work in one launch (scheduler/independent_parts.h): Thunder hands a region's unrelated ops to
one fusion (GPT-J's RoPE backward adds two gradients of one shape and negates a half of another; CLIP scales
one embedding beside normalizing the other). A pointwise group that shares no tensor with the kernels around
it joins the earliest (before or after it) pointwise, transpose, inner persistent, inner-outer persistent or reduction kernel that
takes it, in blocks of its own, each part keeping the vectors it has alone (a transpose's tiles keep theirs). An update of an input in
place joins nothing. Values against the reference evaluator on the test device, at odd sizes, size 1, broadcast,
strided and misaligned inputs. Beside an inner persistent kernel's rows, a part joins where it is made from
scalars alone or reads a tensor the rows read (another slice of their input)."""

import ml_dtypes
import numpy as np
import pytest

import helpers
from braze import DataType, FusionDefinition
from test_thunder_backward_definitions import define_thunder_layer_norm_backward, thunder_inputs

F32, BF16 = DataType.Float, DataType.BFloat16
NP = {BF16: np.dtype(ml_dtypes.bfloat16), F32: np.dtype(np.float32)}


def tensor(fd, rank, dtype=F32, contiguous=True):
    return fd.define_tensor(shape=[-1] * rank, contiguity=[contiguous] * rank, dtype=dtype)


def define_unrelated_pointwise(fd, dtype, contiguous):
    """GPT-J's RoPE backward: a sum of two gradients [b, t, h, rotary] and a negated half [b, t, h, rotary / 2]
    of another tensor (strided where not contiguous); the sum also in bf16 where dtype asks."""
    a, b, c = tensor(fd, 4, dtype), tensor(fd, 4, dtype), tensor(fd, 4, contiguous=contiguous)
    fd.add_output(fd.ops.add(a, b))
    fd.add_output(fd.ops.neg(c))


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("sizes, half", [((2, 16, 4, 8), 4), ((3, 5, 7, 16), 3), ((1, 1, 1, 8), 1), ((1, 9, 2, 24), 5)])
@pytest.mark.parametrize("layout", ["dense", "misaligned", "strided"])
def test_pointwise_ops_of_unrelated_shapes_are_one_kernel_each_part_with_its_vectors(dtype, sizes, half, layout):
    with FusionDefinition() as fd:
        define_unrelated_pointwise(fd, dtype, layout != "strided")
    rng = np.random.default_rng(sum(sizes) + half)
    arrays = [rng.standard_normal(sizes).astype(NP[dtype]) for _ in range(2)]
    arrays.append(rng.standard_normal((*sizes[:-1], half)).astype(np.float32))
    if layout != "dense":
        arrays[2] = (helpers.misaligned if layout == "misaligned" else helpers.strided)(arrays[2])
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert [k.scheduler for k in kernels] == ["pointwise"], plan
    # Each part keeps the vectors it has alone: the sum's (16 bytes where its last dim allows), the negated
    # half's own (one lane at odd widths or misaligned).
    alone = []
    for ops, ins in ((lambda fd: fd.add_output(fd.ops.add(tensor(fd, 4, dtype), tensor(fd, 4, dtype))), arrays[:2]),
                     (lambda fd: fd.add_output(fd.ops.neg(tensor(fd, 4, contiguous=layout != "strided"))), arrays[2:])):
        with FusionDefinition() as lone:
            ops(lone)
        alone.append(int(helpers.kernels_of(lone, ins)[1].split("pointwise: vectorize ")[1].split(",")[0]))
    assert f"pointwise: vectorize {alone[0]}, " in plan and f"then pointwise: vectorize {alone[1]}, " in plan, plan
    assert alone[1] == (1 if layout != "dense" or half % 2 else 4 if half % 4 == 0 else 2), plan
    helpers.execute_near_reference(fd, arrays, rtol=1e-2 if dtype == BF16 else 1e-6)


def test_a_copy_through_meta_ops_joins_an_unrelated_pointwise_kernel():
    """GPT-J's backward returns the attention grad's heads moved back ([b, h, t, d] -> [b, t, h * d]: a copy)
    beside a cat of gradients written as pads and an add: one kernel of two parts."""
    with FusionDefinition() as fd:
        heads, a, b, rest = tensor(fd, 4), tensor(fd, 4), tensor(fd, 4), tensor(fd, 4)
        moved = fd.ops.reshape(fd.ops.permute(heads, [0, 2, 1, 3]), new_shape=[2, 5, 12])
        fd.add_output(moved)
        fd.add_output(fd.ops.add(fd.ops.pad(fd.ops.add(a, b), [0, 4, 0, 0, 0, 0, 0, 0]),
                                 fd.ops.pad(rest, [2, 0, 0, 0, 0, 0, 0, 0])))
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(2, 3, 5, 4), (2, 5, 3, 2), (2, 5, 3, 2), (2, 5, 3, 4)]]
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert [k.scheduler for k in kernels] == ["pointwise"], plan
    helpers.execute_near_reference(fd, arrays, rtol=1e-6)


@pytest.mark.parametrize("rows, columns", [(32, 64), (7, 33), (1, 5)])
def test_an_unrelated_scaling_joins_a_norm_of_its_shape_and_one_of_another_stays_apart(rows, columns):
    """CLIP's forward: one embedding L2-normalized, the other scaled by exp of a learned 0-dim temperature. Of
    the rows' shape, the scaling is computed in the rows' walk (one kernel). Of another shape, it reads a
    tensor no row holds: a kernel of its own, the rows' kernel keeping its blocks and registers."""
    for other in ((rows, columns), (rows + 1, columns * 2)):
        with FusionDefinition() as fd:
            x, y = tensor(fd, 2), tensor(fd, 2)
            scale = fd.define_tensor(shape=[], contiguity=[], dtype=F32, is_cpu=True)
            norm = fd.ops.sqrt(fd.ops.sum(fd.ops.mul(x, x), dims=[1], keepdim=True))
            fd.add_output(fd.ops.div(x, fd.ops.expand(norm, [rows, columns])))
            fd.add_output(fd.ops.mul(y, fd.ops.exp(scale)))
        rng = np.random.default_rng(rows)
        arrays = [rng.standard_normal((rows, columns)).astype(np.float32) + 0.5,
                  rng.standard_normal(other).astype(np.float32), np.array(0.3, np.float32)]
        kernels, plan = helpers.kernels_of(fd, arrays)
        want = ["inner_persistent"] if other == (rows, columns) else ["inner_persistent", "pointwise"]
        assert sorted(k.scheduler for k in kernels) == want, plan
        helpers.execute_near_reference(fd, arrays, rtol=1e-5)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("sizes", [(2, 64, 32, 8), (1, 7, 5, 3), (3, 1, 4, 2)])
@pytest.mark.parametrize("layout", ["dense", "misaligned"])
def test_a_norm_of_a_slice_and_a_rotation_of_another_slice_are_one_kernel(dtype, sizes, layout):
    """DeepSeek-V2's key projection [b, t, latent + rope]: the latent RMS-normed, the rope part rotated with
    tables [t, rope] and expanded over h heads. The two parts share no value but read one input: one inner
    persistent kernel with the rotation in blocks of its own, as the reference."""
    b, t, latent, rope = sizes
    heads = 3
    with FusionDefinition() as fd:
        x, w = tensor(fd, 3, dtype), tensor(fd, 1, dtype)
        cos, sin = tensor(fd, 2, dtype), tensor(fd, 2, dtype)
        lat = fd.ops.cast(fd.ops.slice(x, [0, 0, 0], [b, t, latent], [1, 1, 1]), F32)
        inv = fd.ops.rsqrt(fd.ops.add(fd.ops.div(fd.ops.sum(fd.ops.mul(lat, lat), dims=[2], keepdim=True), latent), 1e-6))
        weight = fd.ops.cast(fd.ops.broadcast_in_dim(w, shape=[b, t, latent], broadcast_dims=[2]), F32)
        fd.add_output(fd.ops.cast(fd.ops.mul(fd.ops.mul(lat, inv), weight), dtype))
        pe = fd.ops.cast(fd.ops.slice(x, [0, 0, latent], [b, t, latent + rope], [1, 1, 1]), F32)
        half = rope // 2
        high = fd.ops.slice(pe, [0, 0, half], [b, t, rope], [1, 1, 1])
        low = fd.ops.slice(pe, [0, 0, 0], [b, t, half], [1, 1, 1])
        rotated = fd.ops.cat([fd.ops.neg(high), low], 2)
        table = dict(shape=[b, t, rope], broadcast_dims=[1, 2])
        roped = fd.ops.add(fd.ops.mul(pe, fd.ops.cast(fd.ops.broadcast_in_dim(cos, **table), F32)),
                           fd.ops.mul(rotated, fd.ops.cast(fd.ops.broadcast_in_dim(sin, **table), F32)))
        fd.add_output(fd.ops.broadcast_in_dim(fd.ops.cast(roped, dtype), shape=[b, heads, t, rope],
                                              broadcast_dims=[0, 2, 3]))
    rng = np.random.default_rng(sum(sizes))
    arrays = [rng.standard_normal(shape).astype(NP[dtype]) for shape in ((b, t, latent + rope), (latent,), (t, rope),
                                                                         (t, rope))]
    if layout == "misaligned":
        arrays[0] = helpers.misaligned(arrays[0])
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert [k.scheduler for k in kernels] == ["inner_persistent"], plan
    helpers.execute_near_reference(fd, arrays, rtol=1e-2 if dtype == BF16 else 1e-5)


def test_a_pointwise_op_joins_a_bias_grad_of_other_rows_in_blocks_of_its_own():
    """A bias grad (a sum over 40 rows of [40, 24]) beside the negation of an unrelated [3, 7, 5] tensor: one
    outer reduction kernel with a pointwise part."""
    with FusionDefinition() as fd:
        g, z = tensor(fd, 2), tensor(fd, 3)
        fd.add_output(fd.ops.sum(g, dims=[0], keepdim=False))
        fd.add_output(fd.ops.neg(z))
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal((40, 24)).astype(np.float32), rng.standard_normal((3, 7, 5)).astype(np.float32)]
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert [k.scheduler for k in kernels] == ["reduction"] and "then pointwise" in plan, plan
    helpers.execute_near_reference(fd, arrays, rtol=1e-5)


def define_norm_backward_beside_a_conditioning_grad(fd, batch, seq, hidden, width, contiguous, in_place):
    """DiT's first norm backward as Thunder hands it: the layer-norm backward of nanoGPT's block (an inner-outer
    kernel with a bias grad beside it) and, sharing nothing with it, a conditioning grad [batch, 1, hidden] cast
    to float, squeezed and cast back (strided where not contiguous); or, where in_place, that grad scaled in
    place."""
    define_thunder_layer_norm_backward(fd, batch, seq, hidden, width)
    c = fd.define_tensor(shape=[-1, 1, -1], contiguity=[contiguous, None, contiguous], dtype=BF16)
    if in_place:
        fd.add_output(fd.ops.cast(fd.ops.mul(fd.ops.cast(c, dtype=F32), 0.5), dtype=BF16), alias_input=c)
        return
    squeezed = fd.ops.squeeze(fd.ops.cast(c, dtype=F32), dims=[1])
    fd.add_output(fd.ops.cast(fd.ops.add(squeezed, fd.define_scalar(0.0, dtype=DataType.Double)), dtype=BF16))


@pytest.mark.parametrize("batch,seq,hidden,width,cond", [(2, 37, 200, 300, (2, 1, 200)), (3, 5, 33, 17, (3, 1, 33)),
                                                          (1, 7, 64, 8, (5, 1, 1)), (2, 64, 128, 512, (2, 1, 768))])
@pytest.mark.parametrize("layout", ["dense", "misaligned", "strided"])
def test_a_norm_backwards_inner_outer_kernel_runs_an_unrelated_op_after_its_rows(batch, seq, hidden, width, cond,
                                                                                 layout):
    """One kernel segment: the inner-outer rows, then the conditioning grad's cast in blocks of its own (with
    the vectors it has alone), then the finish; right at odd sizes and with misaligned or strided inputs."""
    with FusionDefinition() as fd:
        define_norm_backward_beside_a_conditioning_grad(fd, batch, seq, hidden, width, layout != "strided", False)
    rng = np.random.default_rng(batch * seq + hidden)
    c = rng.standard_normal(cond).astype(NP[BF16])
    laid = {"dense": lambda a: a, "misaligned": helpers.misaligned, "strided": helpers.strided}[layout]
    arrays = thunder_inputs(rng, batch, seq, hidden, width) + [laid(c)]
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert [k.scheduler for k in kernels] == ["inner_outer_persistent"] and "then pointwise" in plan, plan
    helpers.execute_near_reference(fd, arrays, rtol=2e-2)


def test_an_inner_outer_kernel_with_a_part_beside_plans_again_at_another_batch_and_an_update_in_place_stays_apart():
    """Another batch size of the norm backward with a part beside it is right (the rows and the part planned
    again); a conditioning grad scaled in place keeps a kernel of its own."""
    with FusionDefinition() as fd:
        x, g, c = tensor(fd, 2), tensor(fd, 2), fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, True])
        rows = fd.ops.sum(fd.ops.mul(x, g), dims=[1], keepdim=True)
        fd.add_output(fd.ops.sub(g, fd.ops.broadcast_in_dim(rows, shape=x.shape(), broadcast_dims=[0, 1])))
        fd.add_output(fd.ops.sum(fd.ops.mul(g, x), dims=[0], keepdim=False))
        fd.add_output(fd.ops.cast(fd.ops.squeeze(c, dims=[1]), dtype=BF16))
    rng = np.random.default_rng(13)
    for batch in (64, 300, 1, 64):
        arrays = [rng.standard_normal((batch, 96)).astype(np.float32) for _ in range(2)]
        arrays.append(rng.standard_normal((batch % 7 + 1, 1, 40)).astype(np.float32))
        kernels, plan = helpers.kernels_of(fd, arrays)
        assert [k.scheduler for k in kernels] == ["inner_outer_persistent"] and "then pointwise" in plan, plan
        helpers.execute_near_reference(fd, arrays, rtol=1e-5)
    with FusionDefinition() as fd:
        define_norm_backward_beside_a_conditioning_grad(fd, 2, 16, 64, 96, True, True)
    arrays = thunder_inputs(rng, 2, 16, 64, 96) + [rng.standard_normal((2, 1, 64)).astype(NP[BF16])]
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert sorted(k.scheduler for k in kernels) == ["inner_outer_persistent", "pointwise"], plan
    helpers.execute_near_reference(fd, arrays, rtol=2e-2)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_an_unrelated_pointwise_op_runs_beside_a_transposes_tiles_and_an_in_place_update_joins_nothing(dtype):
    """GPT-J's attention: the keys transposed for the scores beside the queries scaled (a [b, h, t, d] tensor
    of its own). One transpose kernel whose tiles keep their vectors, the scaling a pointwise part after
    them with its own; an update of an input in place is written by a kernel of its own."""
    with FusionDefinition() as fd:
        x, a, w = tensor(fd, 2, dtype), tensor(fd, 4, dtype), tensor(fd, 2)
        fd.add_output(fd.ops.mul(fd.ops.permute(x, [1, 0]), 2.0))
        fd.add_output(fd.ops.mul(a, 0.5))
        fd.add_output(fd.ops.mul(w, 0.5), alias_input=w)
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((64, 96)).astype(NP[dtype]), rng.standard_normal((2, 3, 5, 16)).astype(NP[dtype]),
              rng.standard_normal((9, 40)).astype(np.float32)]
    updated = arrays[2] * np.float32(0.5)
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert sorted(k.scheduler for k in kernels) == ["pointwise", "transpose"], plan
    assert "shared 4096 B; then pointwise: vectorize 4, unroll 1, block 256" in plan, plan
    expected = [arrays[0].T.astype(np.float32) * 2, arrays[1].astype(np.float32) * 0.5]
    got = helpers.device_switch.execute(fd, arrays)
    for out, want in zip(got[:2], expected):
        np.testing.assert_allclose(np.asarray(out, np.float32), want, rtol=1e-2 if dtype == BF16 else 1e-6)
    np.testing.assert_allclose(arrays[2], updated, rtol=1e-6)


@pytest.mark.parametrize("sizes", [(2, 4, 16, 16), (1, 3, 7, 5), (2, 1, 9, 1)])
def test_gptj_attention_forward_is_one_kernel_at_odd_sizes(sizes):
    """The fusion Thunder writes for GPT-J's attention input: the keys' rotary half (interleaved pairs, a cat
    and a reshape) joined with the pass-through half and transposed for the scores, beside the queries
    scaled: one transpose kernel, the scaling beside its tiles, as the reference."""
    b, h, t, d = sizes
    with FusionDefinition() as fd:
        keys, queries = tensor(fd, 4), tensor(fd, 4)
        moved = fd.ops.permute(fd.ops.permute(keys, [0, 2, 1, 3]), [0, 1, 3, 2])
        fd.add_output(fd.ops.mul(moved, 0.5))
        fd.add_output(fd.ops.mul(queries, 0.5))
    rng = np.random.default_rng(sum(sizes))
    arrays = [rng.standard_normal((b, t, h, d)).astype(np.float32), rng.standard_normal((b, h, t, d)).astype(np.float32)]
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert len(kernels) == 1, plan
    helpers.execute_near_reference(fd, arrays, rtol=1e-6)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("sizes", [(2, 4, 2, 64, 32), (1, 3, 1, 7, 5), (2, 6, 3, 9, 1)])
def test_a_pointwise_op_before_a_transpose_joins_it(dtype, sizes):
    """Thunder's attention input for grouped-query attention (Qwen3): the queries scaled and the key heads
    repeated for the query heads, and then the keys scaled and transposed for the scores. The pointwise group
    comes first in the definition; it joins the later transpose kernel all the same: one kernel, as the
    reference."""
    b, h, kv, t, d = sizes
    rep = h // kv
    with FusionDefinition() as fd:
        q, k = tensor(fd, 4, dtype), tensor(fd, 4, dtype)
        fd.add_output(fd.ops.cast(fd.ops.mul(fd.ops.cast(q, F32), 0.42), dtype))
        repeated = fd.ops.broadcast_in_dim(k, shape=[b, kv, rep, t, d], broadcast_dims=[0, 1, 3, 4])
        keys = fd.ops.permute(fd.ops.reshape(repeated, new_shape=[b, h, t, d]), [0, 1, 3, 2])
        fd.add_output(fd.ops.cast(fd.ops.mul(fd.ops.cast(keys, F32), 0.42), dtype))
    rng = np.random.default_rng(sum(sizes))
    arrays = [rng.standard_normal((b, h, t, d)).astype(NP[dtype]), rng.standard_normal((b, kv, t, d)).astype(NP[dtype])]
    for layout in (lambda a: a, helpers.misaligned):
        laid = [layout(a) for a in arrays]
        kernels, plan = helpers.kernels_of(fd, laid)
        assert len(kernels) == 1, plan
        helpers.execute_near_reference(fd, laid, rtol=1e-2 if dtype == BF16 else 1e-6)


def test_another_batch_reuses_the_compiled_kernel_of_parts():
    """Where each part's blocks end is a launch argument: a new batch size of two unrelated ops (and of a bias
    grad beside an unrelated op) runs the compiled kernel with new launch arguments, as a kernel of one part
    does, and stays right."""
    with FusionDefinition() as fd:
        a, b = tensor(fd, 2), tensor(fd, 2)
        fd.add_output(fd.ops.exp(a))
        fd.add_output(fd.ops.neg(b))
    with FusionDefinition() as bias:
        g, z = tensor(fd=bias, rank=2), tensor(fd=bias, rank=2)
        bias.add_output(bias.ops.sum(g, dims=[0], keepdim=False))
        bias.add_output(bias.ops.neg(z))
    rng = np.random.default_rng(12)
    for definition, widths, batches in ((fd, (64, 32), (8, 16, 1000, 333)), (bias, (24, 40), (32, 64, 256, 100))):
        for i, batch in enumerate(batches):
            arrays = [rng.standard_normal((batch, w)).astype(np.float32) for w in widths]
            cache = str(definition.explain(arrays)).split("cache: ")[1]
            assert cache.startswith("new kernel" if i == 0 else "new launch parameters"), (batch, cache)
            helpers.execute_near_reference(definition, arrays, rtol=1e-5)
