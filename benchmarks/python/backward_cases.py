"""compare.py's backward-pass rows: the fusions Thunder hands braze for a transformer block's backward
(layer-norm backward with the bias grad of the next linear, RMS-norm backward, GELU backward with the
bias grad of its linear, GQA attention's QKV grad) and for a diffusion U-Net's group norm, each with
torch eager's own kernels for it as the reference: aten's native_layer_norm_backward, gelu_backward and
native_group_norm_backward, and for RMS norm and GQA (no fused backward in eager) the ops autograd runs. Rows are (name, define, ref,
make_inputs, check, ops), as compare.cases() yields them."""

from __future__ import annotations

import os
import sys

import torch

from braze import DataType

sys.path.insert(0, os.path.join(__file__.rsplit("/benchmarks/", 1)[0], "tests", "python"))
from test_backward_fusions import define_activation_backward, define_norm_backward  # noqa: E402
from test_small_reductions import define_gqa_backward  # noqa: E402
from test_thunder_group_norm_backward import define_thunder_group_norm_backward  # noqa: E402


def torch_layer_norm_backward(go, x, mean, rstd, w, fc=None):
    bias = torch.zeros_like(w)
    grads = torch.ops.aten.native_layer_norm_backward(go, x, [x.shape[-1]], mean, rstd, w, bias, [True, True, True])
    return (*grads, fc.sum(0)) if fc is not None else tuple(grads)


def torch_rms_norm_backward(go, x, rstd, w):
    gf, xf = go.float(), x.float()
    x_hat = xf * rstd
    g = gf * w.float()
    grad_in = rstd * (g - x_hat * (g * x_hat).mean(-1, keepdim=True))
    return grad_in.to(x.dtype), (gf * x_hat).sum(0).to(x.dtype)


def torch_gelu_backward(grad, x):
    grad_in = torch.ops.aten.gelu_backward(grad, x)
    return grad_in, grad_in.sum(0)


def torch_group_norm_backward(weight, mean, grad_out, x, rstd):
    """The fused definition's outputs (bias grad, weight grad, grad_in) from aten's group-norm backward."""
    n, c, groups = x.shape[0], x.shape[1], mean.shape[1]
    grad_in, grad_weight, grad_bias = torch.ops.aten.native_group_norm_backward(
        grad_out, x, mean, rstd.reshape(n, groups), weight, n, c, x[0, 0].numel(), groups, [True, True, True])
    return grad_bias, grad_weight, grad_in


def torch_gqa_backward(dq, dk, dv, b, g, q, t, h):
    """GQA's backward as autograd runs it in eager: the expanded key and value grads summed over each KV
    head's query heads, then the three copied into the fused QKV projection's layout."""
    query = (dq.float() * 0.125).to(dq.dtype).reshape(b, g, q, t, h)
    keys, values = (x.reshape(b, g, q, t, h).float().sum(2, keepdim=True).to(dq.dtype) for x in (dk, dv))
    return torch.cat([query, keys, values], 2).permute(0, 3, 1, 2, 4).reshape(b, t, g * (q + 2) * h)


def gelu_backward_in_float(grad, x):
    """What the fused definition computes: its bias grad sums the float grad_in, where eager's sums the
    bf16-rounded one (2048 roundings apart: up to 0.17 on a sum near zero, past compare.py's tolerance)."""
    grad_in = torch.ops.aten.gelu_backward(grad.float(), x.float())
    return grad_in.to(grad.dtype), grad_in.sum(0).to(grad.dtype)


def cases():
    bf16 = torch.bfloat16

    def norm_inputs(rows, hidden, rms, linear_width):
        def make_inputs(gen):
            def randn(*shape):
                return torch.randn(*shape, dtype=torch.float32, device="cuda", generator=gen)
            xs = [randn(rows, hidden).to(bf16), randn(rows, hidden).to(bf16)]
            if not rms:
                xs.append(randn(rows, 1))
            xs.append(1 + randn(rows, 1).abs())
            xs.append(randn(hidden).to(bf16))
            if linear_width:
                xs.append(randn(rows, linear_width).to(bf16))
            return xs
        return make_inputs

    for rows, hidden, width in [(2048, 768, 3072), (16384, 4096, 0)]:
        name = f"ln backward {rows}x{hidden}" + (f"+{width}" if width else "")
        yield (name, lambda fd, w=width: define_norm_backward(fd, DataType.BFloat16, linear_bias_grad=w > 0),
               torch_layer_norm_backward, norm_inputs(rows, hidden, False, width), None, 0)
    yield ("rms backward 16384x4096",
           lambda fd: define_norm_backward(fd, DataType.BFloat16, rms=True, bias=False),
           torch_rms_norm_backward, norm_inputs(16384, 4096, True, 0), None, 0)

    def activation_inputs(gen):
        return [torch.randn(2048, 3072, dtype=bf16, device="cuda", generator=gen) for _ in range(2)]

    yield ("gelu backward 2048x3072", lambda fd: define_activation_backward(fd, DataType.BFloat16, True),
           torch_gelu_backward, activation_inputs, gelu_backward_in_float, 0)

    # Stable Diffusion's U-Net group norm (32 groups) at 64x64 latents' first stage, float32 as Thunder
    # hands it: grad_in per group and the weight and bias grads over [0, 2, 3].
    n, c, groups, h, w = 8, 320, 32, 64, 64

    def group_norm_inputs(gen):
        def randn(*shape):
            return torch.randn(*shape, dtype=torch.float32, device="cuda", generator=gen)
        return [randn(c), randn(n, groups), randn(n, c, h, w), randn(n, c, h, w),
                0.5 + torch.rand(n, groups, 1, 1, 1, device="cuda", generator=gen)]

    yield (f"gn backward {n}x{c}x{h}x{w}/{groups}",
           lambda fd: define_thunder_group_norm_backward(fd, n, c, groups, h, w),
           torch_group_norm_backward, group_norm_inputs, None, 0)

    # Llama-3-8B's attention backward at 4096 tokens: 32 query heads on 8 KV heads of 128.
    b, g, q, t, h = 1, 8, 4, 4096, 128

    def gqa_inputs(gen):
        return [torch.randn(b, g * q, t, h, dtype=bf16, device="cuda", generator=gen) for _ in range(3)]

    yield ("gqa backward llama-3-8b T4096", lambda fd: define_gqa_backward(fd, DataType.BFloat16, b, g, q, t, h),
           lambda dq, dk, dv: torch_gqa_backward(dq, dk, dv, b, g, q, t, h), gqa_inputs, None, 0)
