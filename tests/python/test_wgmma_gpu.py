"""Warpgroup mmas (wgmma, sm_90a) on a real sm_90 GPU: matmuls at odd sizes, with A or B given
transposed, bf16, f16 and int8 (B given [n, k], copied as stored, or row-major, through registers),
batched, planned with wgmma wherever it applies (BRAZE_TUNING=matmul_wgmma=1), against torch in float64
(int8: exactly). Skipped without such a GPU: there, test_fuzz.py and wgmma_test.cpp run the
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
    (2, 300, 256, 520, False, True, "int8"),
    (4, 130, 336, 200, False, False, "int8"),
]


@pytest.mark.parametrize("batch,m,k,n,a_t,b_t,dtype", CASES)
def test_wgmma_matmuls_match_torch(monkeypatch, batch, m, k, n, a_t, b_t, dtype):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: the wgmma schedule is tested on the simulator (test_fuzz.py, wgmma_test.cpp)")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(f"wgmma needs sm_90; this GPU is sm_{''.join(map(str, torch.cuda.get_device_capability()))}")
    monkeypatch.setenv("BRAZE_TUNING", "matmul_wgmma=1")
    tdtype = getattr(torch, dtype)
    bdtype = {"bfloat16": DataType.BFloat16, "float16": DataType.Half, "int8": DataType.Int8}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(m * 7 + n)
    lead = [batch] if batch else []
    b_lead = lead if dtype == "int8" else []

    def random(*shape):
        if dtype == "int8":
            return torch.randint(-128, 128, shape, dtype=torch.int8, device="cuda", generator=gen)
        return torch.randn(*shape, device="cuda", generator=gen).to(tdtype)

    a = random(*lead, *((k, m) if a_t else (m, k)))
    b = random(*b_lead, *((n, k) if b_t else (k, n)))
    with FusionDefinition() as fd:
        ta = fd.define_tensor(shape=[-1] * a.dim(), contiguity=[True] * a.dim(), dtype=bdtype)
        tb = fd.define_tensor(shape=[-1] * b.dim(), contiguity=[True] * b.dim(), dtype=bdtype)

        def swap(t, rank):
            order = list(range(rank))
            order[-1], order[-2] = order[-2], order[-1]
            return fd.ops.permute(t, order)

        fd.add_output(fd.ops.matmul(swap(ta, a.dim()) if a_t else ta, swap(tb, b.dim()) if b_t else tb))
    (got,) = fd.execute([a, b])
    assert "wgmma.m64n" in fd.last_cuda_code(), fd.last_cuda_code().split("\n", 1)[0]
    want = (a.transpose(-1, -2) if a_t else a).double() @ (b.transpose(-1, -2) if b_t else b).double()
    if dtype == "int8":  # s32 accumulators: exact (these sums stay far inside int32)
        assert torch.equal(got, want.to(torch.int32))
    else:
        torch.testing.assert_close(got.double(), want.to(tdtype).double(), rtol=2e-2, atol=2e-2 * k**0.5)
