"""A matmul's outputs reached through index maps (permute, reshape, slice, squeeze, size-1 broadcasts):
the epilogue stores each result element where the maps put it, so the ops after them (a cast, an
activation, a product) are in the matmul's kernel, and the simulated device equals the reference. An
output of the result's shape computed without it (a dropout's mask) is computed and stored at the
result's index. Maps that would write an element to several places, values another kernel reads, and
outputs of other shapes computed without the result are left out, saying why."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import braze
from braze import DataType, FusionDefinition

BF16 = ml_dtypes.bfloat16


def operands(fd, batch=False):
    """Two bf16 matrices, or two of one batch (a leading dim of size 1)."""
    shape, contiguity = ([1, -1, -1], [None, True, True]) if batch else ([-1, -1], [True, True])
    return [fd.define_tensor(shape=shape, contiguity=contiguity, dtype=DataType.BFloat16) for _ in range(2)]


def permute_then_cast(fd):
    x, w = operands(fd)
    fd.add_output(fd.ops.cast(fd.ops.permute(fd.ops.matmul(x, w), [1, 0]), DataType.Float))


def slice_then_square(fd):
    x, w = operands(fd)
    z = fd.ops.slice(fd.ops.matmul(x, w), [3, 5], [60, 21])
    fd.add_output(fd.ops.mul(z, z))


def heads_and_the_result(fd):
    # BERT's head split of a linear's output (reshape to heads, permute), an activation after it, and the
    # result itself: two outputs of one kernel, one through the maps.
    x, w = operands(fd)
    y = fd.ops.matmul(x, w)
    heads = fd.ops.permute(fd.ops.reshape(y, [66, 2, 23]), [1, 0, 2])
    fd.add_output(fd.ops.relu(heads))
    fd.add_output(y)


def batched_squeeze_and_broadcast(fd):
    x, w = operands(fd, batch=True)
    y = fd.ops.matmul(x, w)  # [1, M, N]
    z = fd.ops.broadcast_in_dim(fd.ops.squeeze(y, [0]), shape=[37, 1, 29], broadcast_dims=[0, 2])
    fd.add_output(fd.ops.neg(z))


CASES = [
    (permute_then_cast, [(66, 32), (32, 46)]),
    (slice_then_square, [(66, 32), (32, 46)]),
    (heads_and_the_result, [(66, 32), (32, 46)]),
    (batched_squeeze_and_broadcast, [(1, 37, 40), (1, 40, 29)]),
]


@pytest.mark.parametrize("define,shapes", CASES, ids=[c[0].__name__ for c in CASES])
def test_index_mapped_outputs_are_written_by_the_matmul_epilogue(define, shapes):
    with FusionDefinition() as fd:
        define(fd)
    rng = np.random.default_rng(31)
    inputs = [(rng.standard_normal(s) * 0.5).astype(BF16) for s in shapes]
    plan = fd.explain(inputs)
    kernels = [s for s in plan.segments if s.kind == "kernel"]
    assert len(kernels) == 1 and kernels[0].scheduler == "matmul", str(plan)
    got = fd.execute(inputs)
    for g, want in zip(got, braze.execute.reference(fd, inputs)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(want))


def expand_to_three(fd):
    x, w = operands(fd, batch=True)
    fd.add_output(fd.ops.neg(fd.ops.expand(fd.ops.matmul(x, w), [3, 37, 29])))


def broadcast_to_three(fd):
    x, w = operands(fd)
    y = fd.ops.matmul(x, w)
    fd.add_output(fd.ops.neg(fd.ops.broadcast_in_dim(y, shape=[3, 37, 29], broadcast_dims=[1, 2])))


@pytest.mark.parametrize("define", [expand_to_three, broadcast_to_three])
def test_maps_that_repeat_elements_are_refused_with_the_reason(define):
    # Each result element would go to three places: the matmul kernel does not take the map.
    with FusionDefinition() as fd:
        define(fd)
    batch = define is expand_to_three
    inputs = [np.ones((1, 37, 40) if batch else (37, 40), BF16), np.ones((1, 40, 29) if batch else (40, 29), BF16)]
    plan = fd.explain(inputs)
    assert len([s for s in plan.segments if s.kind == "kernel"]) == 2, str(plan)
    assert "repeats the result's elements" in str(plan)
    got = fd.execute(inputs)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(braze.execute.reference(fd, inputs)[0]))


WARP_SPECIALIZED = "h100:matmul_wgmma=1,matmul_warp_specialized=1"
# (int8 weights dequantized per output channel, or bf16 ones; m, n, k; target; the schedule's words)
DROPOUT_CASES = [
    (True, 1, 46, 64, "h100", "matmul gemv:"),
    (True, 37, 46, 64, "a100", "gemv on tensor cores"),
    (True, 128, 46, 64, "h100", "2-stage cp.async pipeline"),
    (False, 80, 64, 2048, "h100", "K split among"),
    (False, 128, 192, 64, WARP_SPECIALIZED, "warp-specialized TMA pipeline"),
    (False, 256, 256, 64, WARP_SPECIALIZED + ",matmul_persistent=1,matmul_persistent_blocks=2", "persistent: 2 blocks"),
    (False, 512, 256, 64, WARP_SPECIALIZED + ",matmul_persistent=1,matmul_persistent_blocks=4,matmul_cluster=2",
     "persistent: 2 clusters of 2 blocks"),
]


@pytest.mark.parametrize("int8_weights, m, n, k, target, schedule", DROPOUT_CASES,
                         ids=[c[5].split(":")[0].replace(" ", "_") for c in DROPOUT_CASES])
def test_a_dropouts_mask_is_stored_by_the_matmul_epilogue(int8_weights, m, n, k, target, schedule):
    # A linear's dropout keeps its mask for the backward: the mask has the result's shape but is computed
    # without it, so the epilogue draws the numbers at the result's index and stores both there, in every
    # schedule: the GEMVs, the tiled mma.sync kernel (split-K too) and the warp-specialized wgmma one (persistent,
    # in clusters too).
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int8 if int8_weights else DataType.BFloat16)
        if int8_weights:
            s = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
            w = fd.ops.cast(fd.ops.mul(fd.ops.cast(w, DataType.Float), fd.ops.broadcast_in_dim(s, w.shape(), [0])),
                            DataType.BFloat16)
        y = fd.ops.linear(x, w)
        keep = fd.ops.lt(fd.ops.rand_like(y, rng_seed=5, rng_offset=3), 0.75)
        fd.add_output(fd.ops.cast(fd.ops.where(keep, fd.ops.mul(y, 4 / 3), 0.0), DataType.BFloat16))
        fd.add_output(keep)
    rng = np.random.default_rng(m * n)
    inputs = [(rng.standard_normal((m, k)) * 0.5).astype(BF16)]
    if int8_weights:
        inputs += [rng.integers(-128, 128, (n, k)).astype(np.int8), (rng.random(n) * 0.01).astype(BF16)]
    else:
        inputs.append((rng.standard_normal((n, k)) * 0.05).astype(BF16))
    plan = fd.explain(inputs, target=target)
    (kernel,) = [s for s in plan.segments if s.kind == "kernel"]
    assert kernel.scheduler == "matmul" and schedule in kernel.heuristics, str(plan)
    dropped, mask = fd.execute(inputs, target=target)
    want = braze.execute.reference(fd, inputs)
    np.testing.assert_array_equal(mask, want[1])
    assert 0.6 < mask.mean() < 0.9
    np.testing.assert_allclose(dropped.astype(np.float64), np.asarray(want[0]).astype(np.float64), rtol=1e-2, atol=1e-2)


def test_an_operands_prologue_value_of_another_shape_is_left_out():
    # The cast of an operand is computed as the operand is loaded; as an output of another shape than the
    # result's it has no place in the epilogue, so another kernel writes it.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        xb = fd.ops.cast(x, DataType.BFloat16)
        fd.add_output(fd.ops.matmul(xb, w))
        fd.add_output(xb)
    inputs = [np.ones((37, 40), np.float32), np.ones((40, 29), BF16)]
    plan = fd.explain(inputs)
    assert "is neither computed from the matmul's result nor of its shape" in str(plan), str(plan)
    got = fd.execute(inputs)
    for g, want in zip(got, braze.execute.reference(fd, inputs)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(want))
