"""Persistent rows staged in shared memory by cp.async (BRAZE_TUNING=persistent_staged=1) on a real GPU:
layer_norm, softmax and the layer-norm backward (inner-outer) at row counts that make every block walk
several row groups, against the reference evaluator on the same data. Skipped without a CUDA GPU of
sm_80 or later; there, staged_rows_test.cpp and test_fuzz.py run the same kernels on the simulator."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from braze import DataType, FusionDefinition
from braze import execute as bx

from test_backward_fusions import define_norm_backward

torch = pytest.importorskip("torch")


def require_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: the staged kernels are tested on the simulator (staged_rows_test.cpp, test_fuzz.py)")
    if torch.cuda.get_device_capability()[0] < 8:
        pytest.skip("cp.async needs sm_80 or later")


def host(t):
    t = t.detach().cpu()
    return t.float().numpy().astype(ml_dtypes.bfloat16) if t.dtype == torch.bfloat16 else t.numpy()


def compare(fd, inputs, outputs, tolerance):
    want = bx.reference(fd, [host(x) for x in inputs])
    assert len(outputs) == len(want)
    for got, w in zip(outputs, want):
        w = np.asarray(w, dtype=np.float64)
        np.testing.assert_allclose(host(got).astype(np.float64), w, rtol=tolerance,
                                   atol=tolerance * max(np.abs(w).max(initial=0.0), 1.0))


def layer_norm(fd):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    xf = fd.ops.cast(x, DataType.Float)
    var, mean = fd.ops.var_mean(xf, dims=[1], correction=0, keepdim=True)
    fd.add_output(fd.ops.cast(fd.ops.mul(fd.ops.sub(xf, mean), fd.ops.rsqrt(fd.ops.add(var, 1e-5))), DataType.BFloat16))


def softmax(fd):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, [1], keepdim=True)))
    fd.add_output(fd.ops.div(e, fd.ops.sum(e, [1], keepdim=True)))


@pytest.mark.parametrize("rows,hidden", [(4999, 1024), (9000, 4096), (3001, 96)])
def test_staged_layer_norm_matches_the_reference(monkeypatch, rows, hidden):
    require_gpu()
    monkeypatch.setenv("BRAZE_TUNING", "persistent_staged=1")
    with FusionDefinition() as fd:
        layer_norm(fd)
    bx.forget_gpu_plans(fd)  # plans read BRAZE_TUNING: none shared with an earlier definition of the same fusion
    x = torch.randn(rows, hidden, device="cuda", generator=torch.Generator(device="cuda").manual_seed(rows)).bfloat16()
    out = fd.execute([x])
    assert "staged in shared memory" in fd.last_cuda_code().split("\n", 1)[0]
    compare(fd, [x], out, 2e-2)


def test_staged_softmax_matches_the_reference(monkeypatch):
    require_gpu()
    monkeypatch.setenv("BRAZE_TUNING", "persistent_staged=1")
    with FusionDefinition() as fd:
        softmax(fd)
    bx.forget_gpu_plans(fd)
    x = torch.randn(7001, 2048, device="cuda", generator=torch.Generator(device="cuda").manual_seed(1))
    out = fd.execute([x])
    assert "staged in shared memory" in fd.last_cuda_code().split("\n", 1)[0]
    compare(fd, [x], out, 1e-5)


@pytest.mark.parametrize("rows,hidden", [(4097, 768), (6000, 4096)])
def test_staged_layer_norm_backward_matches_the_reference(monkeypatch, rows, hidden):
    require_gpu()
    monkeypatch.setenv("BRAZE_TUNING", "persistent_staged=1")
    with FusionDefinition() as fd:
        define_norm_backward(fd, DataType.BFloat16)
    bx.forget_gpu_plans(fd)
    gen = torch.Generator(device="cuda").manual_seed(rows)
    go = torch.randn(rows, hidden, device="cuda", generator=gen).bfloat16()
    x = torch.randn(rows, hidden, device="cuda", generator=gen).bfloat16()
    mean = x.float().mean(1, keepdim=True)
    rstd = torch.rsqrt(x.float().var(1, unbiased=False, keepdim=True) + 1e-5)
    w = torch.randn(hidden, device="cuda", generator=gen).bfloat16()
    inputs = [go, x, mean, rstd, w]
    out = fd.execute(inputs)
    assert any("staged in shared memory" in line for line in fd.last_cuda_code().split("\n") if line.startswith("//"))
    compare(fd, inputs, out, 2e-2)
