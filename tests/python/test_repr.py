"""repr(fd) is a runnable script (as in nvFuser): executing it rebuilds a fusion that prints the same
fusion_ir and computes the same outputs."""

from __future__ import annotations

import re

import numpy as np
import pytest

from braze import DataType, FusionDefinition


def _layer_norm(fd):
    x = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.BFloat16, stride_order=[2, 1, 0])
    w = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.BFloat16)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    var, mean = fd.ops.var_mean(xf, dims=[2], correction=0, keepdim=False)
    shape = x.shape()
    rstd = fd.ops.rsqrt(fd.ops.add(fd.ops.broadcast_in_dim(var, [shape[0], shape[1], 1], [0, 1]), 1e-5))
    centered = fd.ops.sub(xf, fd.ops.broadcast_in_dim(mean, shape, [0, 1]))
    y = fd.ops.mul(fd.ops.mul(centered, rstd), fd.ops.broadcast_in_dim(w, shape, [2]))
    fd.add_output(fd.ops.cast(y, dtype=DataType.BFloat16))


def _views_and_data(fd):
    x = fd.define_tensor(shape=[-1, 6], contiguity=[True, False], dtype=DataType.Float, stride_order=[0, 1])
    n = fd.define_scalar(dtype=DataType.Int)
    v = fd.define_vector(2)
    s = fd.ops.slice(x, [0, 1], [n, 5], [1, 2], manual_normalization=False)
    p = fd.ops.pad(s, [1, 0], 2.0)
    c = fd.ops.cat([p, p], dim=-1)
    r = fd.ops.reshape(fd.ops.permute(c, [1, 0]), [-1])
    e = fd.ops.expand(fd.ops.broadcast(fd.ops.sum(r, dims=[0], keepdim=True), [True, False]), v)
    fd.add_output(e)
    b = fd.ops.broadcast(p, [True, False, False])
    fd.add_output(fd.ops.squeeze(fd.ops.segment_set(fd.ops.set(b)), [0], squeeze_expanded=False))


def _creation_indexing_quant(fd):
    t = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    idx = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Int64)
    i = fd.ops.iota(fd.ops.size(t, 1), 0, 1, dtype=DataType.Int64)
    f = fd.ops.full([fd.ops.size(t, 0), 1], 0.5, DataType.Float)
    g = fd.ops.index_select(t, idx, 0)
    q = fd.ops.quantize(t, 0.1, dtype=DataType.Int8, axis=None)
    fd.add_output(fd.ops.dequantize(q, 0.1, dtype=DataType.Float))
    fd.add_output(fd.ops.where(fd.ops.lt(i, 2), 1.0, 0.0))
    fd.add_output(fd.ops.add(g, f))
    fd.add_output(fd.ops.var(t, [1], 1, True))
    a, m, n = fd.ops.welford(t, [0])
    fd.add_output(n)
    fd.add_output(fd.ops.addcmul(t, t, t, 0.5), alias_input=t)


def _matmul_and_scalars(fd):
    a = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    b = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    s = fd.define_scalar(dtype=DataType.Double)
    fd.add_output(fd.ops.linear(a, b))
    fd.add_output(fd.ops.matmul(a, fd.ops.permute(b, [1, 0])))
    fd.add_output(fd.ops.mul(s, 3))
    fd.add_output(fd.ops.max(a, dims=[0], keepdim=False, dtype=DataType.Null))
    fd.add_output(fd.ops.clamp(a, -1.0, fd.ops.cast(s, DataType.Float)))


FUSIONS = [_layer_norm, _views_and_data, _creation_indexing_quant, _matmul_and_scalars]


def _build(define):
    with FusionDefinition() as fd:
        define(fd)
    return fd


def _rebuild(script: str):
    namespace = {}
    exec(compile(script, "<repr(fd)>", "exec"), namespace)
    rebuilt = namespace.get("fd")
    if rebuilt is None:  # a printer that emits only the function (nvFuser's form): call it ourselves
        function = next(v for k, v in namespace.items() if k.startswith("nvfuser_fusion"))
        with FusionDefinition() as rebuilt:
            function(rebuilt)
    return rebuilt


def _renamed(ir: str) -> str:
    """The IR with value names numbered by first appearance: equal for structurally equal fusions."""
    names = {}
    return re.sub(r"\b[TS]\d+\b", lambda m: names.setdefault(m.group(0), f"{m.group(0)[0]}#{len(names)}"), ir)


def _script(define):
    fd = _build(define)
    script = repr(fd)
    if "(printer pending)" in script:
        pytest.skip("Fusion::toPython is still the placeholder")
    assert str(fd) == script
    return fd, script


IDS = [f.__name__.strip("_") for f in FUSIONS]


@pytest.mark.parametrize("define", FUSIONS, ids=IDS)
def test_repr_rebuilds_the_same_fusion(define):
    fd, script = _script(define)
    assert _renamed(_rebuild(script).fusion_ir()) == _renamed(fd.fusion_ir())


# The printer lists exprs in evaluation order (depth-first from the outputs); where that differs from
# the order the values were created, the rebuilt fusion numbers them differently (T13 becomes T8).
@pytest.mark.parametrize(
    "define",
    FUSIONS,
    ids=IDS,
)
def test_repr_rebuilds_the_same_names(define):
    fd, script = _script(define)
    rebuilt = _rebuild(script)
    assert rebuilt.fusion_ir() == fd.fusion_ir()
    assert repr(rebuilt) == script


def test_rebuilt_fusion_computes_the_same():
    fd = _build(_matmul_and_scalars)
    if "(printer pending)" in repr(fd):
        pytest.skip("Fusion::toPython is still the placeholder")
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32), 0.5]
    for got, want in zip(_rebuild(repr(fd)).execute(inputs), fd.execute(inputs)):
        np.testing.assert_array_equal(got, want)
