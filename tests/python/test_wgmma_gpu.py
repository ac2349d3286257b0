"""Warpgroup mmas (wgmma, sm_90a) on a real sm_90 GPU: matmuls at odd sizes, with A or B given
transposed, bf16 and f16, batched, planned with wgmma wherever it applies (BRAZE_TUNING=matmul_wgmma=1),
against torch in float64. Skipped without such a GPU: there, test_fuzz.py and wgmma_test.cpp run the
same schedule on the simulator."""

from __future__ import annotations

import pytest

from braze import DataType, FusionDefinition

torch = pytest.importorskip("torch")

CASES = [  # (batch, m, k, n, A transposed, B transposed, dtype)
    (None, 97, 200, 72, False, False, "bfloat16"),
    (None, 20, 40, 136, False, True, "float16"),
    (None, 136, 257, 304, True, False, "bfloat16"),
    (3, 70, 104, 64, False, False, "bfloat16"),
    (None, 1000, 1032, 1000, False, True, "bfloat16"),
    (None, 2048, 768, 2304, False, False, "float16"),
]


@pytest.mark.parametrize("batch,m,k,n,a_t,b_t,dtype", CASES)
def test_wgmma_matmuls_match_torch(monkeypatch, batch, m, k, n, a_t, b_t, dtype):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: the wgmma schedule is tested on the simulator (test_fuzz.py, wgmma_test.cpp)")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(f"wgmma needs sm_90; this GPU is sm_{''.join(map(str, torch.cuda.get_device_capability()))}")
    monkeypatch.setenv("BRAZE_TUNING", "matmul_wgmma=1")
    tdtype = getattr(torch, dtype)
    bdtype = DataType.BFloat16 if dtype == "bfloat16" else DataType.Half
    gen = torch.Generator(device="cuda").manual_seed(m * 7 + n)
    lead = [batch] if batch else []
    a = torch.randn(*lead, *((k, m) if a_t else (m, k)), device="cuda", generator=gen).to(tdtype)
    b = torch.randn(*((n, k) if b_t else (k, n)), device="cuda", generator=gen).to(tdtype)
    with FusionDefinition() as fd:
        ta = fd.define_tensor(shape=[-1] * a.dim(), contiguity=[True] * a.dim(), dtype=bdtype)
        tb = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=bdtype)
        swap = list(range(a.dim()))
        swap[-1], swap[-2] = swap[-2], swap[-1]
        fd.add_output(fd.ops.matmul(fd.ops.permute(ta, swap) if a_t else ta, fd.ops.permute(tb, [1, 0]) if b_t else tb))
    (got,) = fd.execute([a, b])
    assert "wgmma.m64n" in fd.last_cuda_code(), fd.last_cuda_code().split("\n", 1)[0]
    want = (a.transpose(-1, -2) if a_t else a).double() @ (b.t() if b_t else b).double()
    torch.testing.assert_close(got.double(), want.to(tdtype).double(), rtol=2e-2, atol=2e-2 * k**0.5)
