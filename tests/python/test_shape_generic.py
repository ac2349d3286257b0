"""Kernels shared across batch sizes and sequence lengths: a fusion defined without sizes generates the
same CUDA source for every row count (the count is a launch argument, listed in kernels_for's
`arguments`), and the simulator's results stay those of the reference at each size."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from braze import DataType, FusionDefinition
from braze import execute as bx

BF16 = ml_dtypes.bfloat16


def sizeless_layer_norm(fd, dtype=DataType.BFloat16):
    """A layer_norm with no sizes in its definition: one fusion for every batch and sequence length."""
    x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=dtype)
    w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    var, mean = fd.ops.var_mean(xf, dims=[2], correction=0, keepdim=True)
    y = fd.ops.mul(fd.ops.sub(xf, mean), fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5))))
    y = fd.ops.mul(y, fd.ops.cast(fd.ops.broadcast(w, [True, True, False]), DataType.Float))
    fd.add_output(fd.ops.cast(y, dtype))


def test_one_source_for_every_row_count_from_two_up():
    with FusionDefinition() as fd:
        sizeless_layer_norm(fd)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(1600).astype(BF16)
    sources = set()
    for batch, seq in [(1, 2), (2, 3), (4, 128), (3, 1000), (8, 4096)]:
        x = np.zeros((batch, seq, 1600), BF16)
        (kernel,) = bx.kernels_for(fd, [x, w])
        assert [(name, value) for name, value, _ in kernel["arguments"]] == [("rows", batch * seq)]
        assert f"rows {batch * seq}" in kernel["summary"]
        sources.add(kernel["source"])
    assert len(sources) == 1


def test_simulated_results_match_the_reference_at_each_row_count():
    with FusionDefinition() as fd:
        sizeless_layer_norm(fd)
    rng = np.random.default_rng(1)
    w = rng.standard_normal(24).astype(BF16)
    for batch, seq in [(1, 1), (2, 3), (1, 17)]:
        x = rng.standard_normal((batch, seq, 24)).astype(BF16)
        (got,) = fd.execute([x, w])
        (want,) = bx.reference(fd, [x, w])
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-2, atol=2e-2)
