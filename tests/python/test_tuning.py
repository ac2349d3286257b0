"""Heuristic tuning ("h100:key=value,..." targets): the kernels it makes follow it, and every variant the
GPU sweep (benchmarks/python/compare.py --sweep) times computes what the reference does, here on the
simulator, for a layer_norm, a softmax and litGPT's RoPE at odd sizes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from braze import DataType, FusionDefinition
from braze import execute as bx

from test_explain import define_rope
from test_shape_generic import sizeless_layer_norm

BF16 = ml_dtypes.bfloat16

# Each changes some kernel of the cases below (checked): rows per thread of 2D tiles only matter at sizes
# too large for the simulator, and are checked in heuristics_test.cpp.
VARIANTS = ["h100:max_chunks_per_thread=1", "h100:max_chunks_per_thread=8,block_threads=256",
            "h100:block_threads=32,max_unroll=1", "h100:persistent_values=8"]


def _softmax(fd):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    xf = fd.ops.cast(x, DataType.Float)
    e = fd.ops.exp(fd.ops.sub(xf, fd.ops.broadcast(fd.ops.max(xf, dims=[1]), [False, True])))
    fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.broadcast(fd.ops.sum(e, dims=[1]), [False, True])), DataType.BFloat16))


def _cases():
    rng = np.random.default_rng(5)
    with FusionDefinition() as ln:
        sizeless_layer_norm(ln)
    yield "layer_norm", ln, [rng.standard_normal((3, 5, 1000)).astype(BF16), rng.standard_normal(1000).astype(BF16)]
    with FusionDefinition() as sm:
        _softmax(sm)
    yield "softmax", sm, [rng.standard_normal((7, 1000)).astype(BF16)]
    with FusionDefinition() as rope:
        define_rope(rope, 1, 5, 4, 2, 32, 32)
    yield "rope", rope, [rng.standard_normal((1, 5, 8 * 32)).astype(BF16), rng.standard_normal((5, 32)).astype(BF16),
                         rng.standard_normal((5, 32)).astype(BF16)]


@pytest.mark.parametrize("target", VARIANTS)
def test_every_tuning_variant_matches_the_reference(target):
    changed = False
    for name, fd, inputs in _cases():
        sources = [[k["source"] for k in bx.kernels_for(fd, inputs, target=t)] for t in ("h100", target)]
        changed = changed or sources[0] != sources[1]
        got = fd.execute(inputs, target=target)
        want = bx.reference(fd, inputs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=2e-2, atol=2e-2,
                                       err_msg=f"{name} with {target}")
    assert changed, f"{target} makes the same kernels as the defaults: it tests nothing here"


def test_the_kernels_follow_the_tuning():
    _, ln, inputs = next(_cases())
    (base,) = bx.kernels_for(ln, inputs, target="h100")
    (tuned,) = bx.kernels_for(ln, inputs, target="h100:max_chunks_per_thread=1,block_threads=256")
    assert "1 chunks per thread" in tuned["summary"] and tuned["summary"] != base["summary"]
    assert tuned["block"][0] * tuned["block"][1] <= 256
    with pytest.raises(ValueError, match="unknown key 'chunks'"):
        bx.kernels_for(ln, inputs, target="h100:chunks=2")
