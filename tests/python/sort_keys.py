"""Keys that make sorts hard, for the topk and argsort tests: ties everywhere, NaNs of both signs, both
zeros, infinities and denormals; and the float dtypes those tests run over."""

from __future__ import annotations

import torch

from braze import DataType

FLOAT_DTYPES = [(DataType.Float, torch.float32), (DataType.Half, torch.float16), (DataType.BFloat16, torch.bfloat16)]


def awkward(shape, torch_dtype, seed):
    """Few distinct values (ties everywhere) with random ones, NaNs of both signs, both zeros,
    infinities and denormals of the dtype among them."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 4, shape, generator=g).to(torch.float64)
    flat = x.view(-1)
    flat[5::13] = torch.randn(flat.numel(), generator=g, dtype=torch.float64)[5::13]
    flat[::7] = float("nan")
    flat[3::29] = -float("nan")
    flat[1::17] = -0.0
    flat[2::19] = float("inf")
    flat[4::23] = -float("inf")
    flat[6::31] = torch.finfo(torch_dtype).tiny / 4
    return x.to(torch_dtype)
