"""braze against torch eager and torch.compile on the GPU, in one run, with the copy roofline.

Per case: `braze` is fd.execute on torch tensors, per call, host overhead included (the median of
CUDA-event-timed calls, each on an idle GPU); `kernel` is the device time of braze's kernels alone
(fd.execute captured in a CUDA graph: the same kernels through the same FusionCache, launched by
replaying the graph, so no host time counts); eager and torch.compile (in the default run) are timed
like `kernel`. Every device time is the median over calls whose inputs are not in the L2: a model
streams its weights and activations from HBM, not from an L2 that still holds them from the last call.
--flush says how (every system, and the copy roofline, timed the same way):
- write (the default): a write of twice the L2's size before each call, as triton.testing.do_bench does.
  It leaves the L2 full of dirty lines, which the timed call writes back to HBM as it evicts them: up to
  the L2's size of writes it did not make. A call that writes as much itself leaves as many behind, and
  comes out even; one that writes little (a GEMV streaming its weights) pays them all.
- clean: a read of twice the L2's size before each call; the L2 is left holding clean lines.
- rotate: no flush; enough input sets that a call's inputs were last touched more than twice the L2's
  size ago, run back to back. Each call inherits the dirty lines of the one before: the steady state of
  a loop of that fusion.
`floor` is the row's lower bound: its minimal bytes (every input read once, every output
written once) at the measured device-to-device copy bandwidth, or its operations at mma.sync's measured
peak, whichever is longer; `% floor` is floor / kernel. Each case is first checked against torch. Then
the host latency of a cached tiny fusion from Python against a bare cuLaunchKernel (ctypes) of an
equivalent one-line kernel, in the same run.

    python benchmarks/python/compare.py [--reps 100] [--only "layer_norm|w8 linear M=1 "] [--no-compile]
        [--flush write|clean|rotate] [--sweep [--tunings "a;b"]]

--sweep times, per case, the kernels of other heuristic tunings too (HeuristicTuning in
csrc/target/device_info.h: threads per block, chunks per thread, unroll, the matmul's tiles, stages and
pipeline; set through BRAZE_TUNING for a fresh cache of the fusion), each checked against torch first, and
prints them fastest first: the data for choosing the defaults on this GPU. --tunings gives the list to
time ("matmul_fragments_ahead=0;matmul_stages=3"; "" is the heuristic's own choice). The first line also
gives mma.sync's own peak rate on the GPU (mma_peak.py), the ceiling of the matmul rows.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import os
import time
import statistics
import sys

import cupy as cp
import ml_dtypes
import numpy as np
import torch

import braze
from braze import DataType, FusionDefinition
from braze import execute as bx

sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0] + "/tests/python")
from test_explain import define_rope  # noqa: E402  (the litGPT 0.5.0 qkv split + RoPE definition)
from test_matmul import define_qkv_attention_scores, define_weight_int8_linear  # noqa: E402  (seeds 000, 003)
from test_row_permutes import define_qk_norm_rope  # noqa: E402  (Qwen3's QK-norm, transpose and RoPE)
from test_group_norm_rows import group_norm, tensor  # noqa: E402  (a group norm as Thunder writes it)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mma_peak  # noqa: E402  (the mma.sync ceiling the matmul rows are read against)
import backward_cases  # noqa: E402  (a transformer block's backward fusions)

L2_BYTES = 50 << 20
BF16 = ml_dtypes.bfloat16


def define_layer_norm(fd, rows, hidden):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    xf = fd.ops.cast(x, DataType.Float)
    var, mean = fd.ops.var_mean(xf, dims=[1], correction=0, keepdim=False)
    mean_b = fd.ops.broadcast_in_dim(mean, [rows, hidden], [0])
    rstd_b = fd.ops.broadcast_in_dim(fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5))), [rows, hidden], [0])
    y = fd.ops.mul(fd.ops.sub(xf, mean_b), rstd_b)
    y = fd.ops.add(fd.ops.mul(y, fd.ops.cast(fd.ops.broadcast_in_dim(w, [rows, hidden], [1]), DataType.Float)),
                   fd.ops.cast(fd.ops.broadcast_in_dim(b, [rows, hidden], [1]), DataType.Float))
    fd.add_output(fd.ops.cast(y, DataType.BFloat16))


def define_rms_norm(fd, rows, hidden):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
    xf = fd.ops.cast(x, DataType.Float)
    ms = fd.ops.sum(fd.ops.mul(xf, xf), [1], keepdim=True)
    rstd = fd.ops.rsqrt(fd.ops.add(fd.ops.div(ms, fd.define_scalar(float(hidden))), fd.define_scalar(1e-6)))
    y = fd.ops.mul(fd.ops.mul(xf, fd.ops.expand(rstd, [rows, hidden])),
                   fd.ops.cast(fd.ops.broadcast_in_dim(w, [rows, hidden], [1]), DataType.Float))
    fd.add_output(fd.ops.cast(y, DataType.BFloat16))


def define_softmax(fd, rows, hidden):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
    xf = fd.ops.cast(x, DataType.Float)
    m = fd.ops.max(xf, [1], keepdim=True)
    e = fd.ops.exp(fd.ops.sub(xf, fd.ops.expand(m, [rows, hidden])))
    s = fd.ops.sum(e, [1], keepdim=True)
    fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.expand(s, [rows, hidden])), DataType.BFloat16))


def torch_layer_norm(x, w, b):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, 1e-5)


def torch_rms_norm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


def torch_softmax(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def torch_rope(qkv, cos, sin, n_head, n_groups, hs, n_elem):
    B, T, _ = qkv.shape
    q_per_kv = n_head // n_groups
    x = qkv.view(B, T, n_groups, q_per_kv + 2, hs).permute(0, 2, 3, 1, 4)
    q, k, v = x.split((q_per_kv, 1, 1), dim=2)
    if n_groups != n_head:
        k = k.expand(B, n_groups, q_per_kv, T, hs)
        v = v.expand(B, n_groups, q_per_kv, T, hs)
    q, k, v = (t.reshape(B, -1, T, hs) for t in (q, k, v))

    def rope(t):
        part = t[..., :n_elem]
        x1, x2 = part[..., : n_elem // 2], part[..., n_elem // 2:]
        # litgpt computes in the inputs' dtype; with float cos/sin (the correctness check) it rounds once.
        roped = (part * cos + torch.cat((-x2, x1), -1) * sin).to(t.dtype)
        return torch.cat((roped, t[..., n_elem:]), -1)

    return rope(q), rope(k), v


def torch_qk_norm_rope(x, w, cos, sin):
    """Qwen3's QK-norm as define_qk_norm_rope: each head of x [b, t, h, d] RMS-normed in float, times w, rounded
    to x's dtype, transposed to [b, h, t, d] and rotated in float with tables [t, d]."""
    xf = x.float()
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
    heads = normed.transpose(1, 2)
    half = heads.size(-1) // 2
    rotated = torch.cat((-heads[..., half:], heads[..., :half]), -1)
    return (heads.float() * cos.float() + rotated.float() * sin.float()).to(x.dtype)


def torch_group_norm_silu(x, w, b, groups=32):
    """A UNet's group norm and SiLU, in float, rounded to x's dtype."""
    return torch.nn.functional.silu(torch.nn.functional.group_norm(x.float(), groups, w.float(), b.float())).to(x.dtype)


def define_group_norm_silu(fd, sizes, groups=32):
    x, w, b = (tensor(fd, rank, DataType.BFloat16) for rank in (len(sizes), 1, 1))
    fd.add_output(group_norm(fd, x, w, b, sizes, groups, DataType.BFloat16, silu=True)[0])


def cases():
    def norm(name, define, ref, rows, hidden, with_weight, with_bias):
        def make_inputs(gen):
            xs = [torch.randn(rows, hidden, dtype=torch.bfloat16, device="cuda", generator=gen)]
            if with_weight:
                xs.append(torch.randn(hidden, dtype=torch.bfloat16, device="cuda", generator=gen))
            if with_bias:
                xs.append(torch.randn(hidden, dtype=torch.bfloat16, device="cuda", generator=gen))
            return xs
        return name, lambda fd: define(fd, rows, hidden), ref, make_inputs, None, 0

    yield norm("layer_norm 16x128x1600", define_layer_norm, torch_layer_norm, 2048, 1600, True, True)
    yield norm("layer_norm 16384x4096", define_layer_norm, torch_layer_norm, 16384, 4096, True, True)
    yield norm("rms_norm 16384x4096", define_rms_norm, torch_rms_norm, 16384, 4096, True, False)
    yield norm("softmax 16384x4096", define_softmax, torch_softmax, 16384, 4096, False, False)
    for name, cfg in [("rope llama-2-7b", dict(B=2, T=4096, n_head=32, n_groups=32, hs=128, n_elem=128)),
                      ("rope llama-3-70b", dict(B=1, T=8192, n_head=64, n_groups=8, hs=128, n_elem=128))]:
        def make_inputs(gen, cfg=cfg):
            width = (cfg["n_head"] + 2 * cfg["n_groups"]) * cfg["hs"]
            return [torch.randn(cfg["B"], cfg["T"], width, dtype=torch.bfloat16, device="cuda", generator=gen),
                    torch.randn(cfg["T"], cfg["n_elem"], dtype=torch.bfloat16, device="cuda", generator=gen),
                    torch.randn(cfg["T"], cfg["n_elem"], dtype=torch.bfloat16, device="cuda", generator=gen)]
        rope_args = {k: cfg[k] for k in ("n_head", "n_groups", "hs", "n_elem")}
        yield (name, lambda fd, cfg=cfg: define_rope(fd, **cfg),
               lambda qkv, cos, sin, a=rope_args: torch_rope(qkv, cos, sin, **a), make_inputs,
               lambda qkv, cos, sin, a=rope_args: torch_rope(qkv, cos.float(), sin.float(), **a), 0)
    # Qwen3-8B's query heads (32 of 128) over 4096 tokens: normed, transposed and rotated in one row kernel.
    qk = (1, 4096, 32, 128)

    def qk_inputs(gen):
        b, t, h, d = qk
        return [torch.randn(b, t, h, d, dtype=torch.bfloat16, device="cuda", generator=gen),
                torch.randn(d, dtype=torch.bfloat16, device="cuda", generator=gen),
                torch.randn(t, d, dtype=torch.bfloat16, device="cuda", generator=gen),
                torch.randn(t, d, dtype=torch.bfloat16, device="cuda", generator=gen)]
    yield ("qk_norm_rope qwen3-8b T4096", lambda fd: define_qk_norm_rope(fd, qk, DataType.BFloat16),
           torch_qk_norm_rope, qk_inputs, None, 0)
    # Stable Diffusion's first UNet resolution (320 channels in 32 groups, 64x64 latents, batch 2): the norm's
    # view back to [b, c, h, w], its affine and SiLU in one row kernel.
    gn = (2, 320, 64, 64)

    def gn_inputs(gen):
        return [torch.randn(*gn, dtype=torch.bfloat16, device="cuda", generator=gen),
                torch.randn(gn[1], dtype=torch.bfloat16, device="cuda", generator=gen),
                torch.randn(gn[1], dtype=torch.bfloat16, device="cuda", generator=gen)]
    yield ("group_norm_silu sd-unet 2x320x64x64", lambda fd: define_group_norm_silu(fd, gn), torch_group_norm_silu,
           gn_inputs, None, 0)
    yield from sort_cases()
    yield from backward_cases.cases()
    yield from matmul_cases()


def sort_cases():
    """topk at decode (a vocabulary's logits, sampling's top 50: radix selects) and a row-wise argsort (a
    block sort)."""
    for rows, vocab in [(1, 50257), (64, 128256)]:
        def define_topk(fd, vocab=vocab):
            x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
            values, _ = fd.ops.topk(x, 50, 1, True, True)
            fd.add_output(values)

        def make_logits(gen, rows=rows, vocab=vocab):
            return [torch.randn(rows, vocab, dtype=torch.bfloat16, device="cuda", generator=gen)]
        yield (f"topk 50 of {rows}x{vocab}", define_topk, lambda x: torch.topk(x, 50, 1).values, make_logits, None, 0)

    def define_argsort(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.argsort(x, dim=1, descending=False))

    yield ("argsort 4096x1024", define_argsort, lambda x: torch.sort(x, dim=1, stable=True).indices,
           lambda gen: [torch.randn(4096, 1024, device="cuda", generator=gen)], None, 0)


def define_matmul(fd, a_shape, b_shape, dtype):
    a = fd.define_tensor(shape=[-1] * len(a_shape), contiguity=[True] * len(a_shape), dtype=dtype)
    b = fd.define_tensor(shape=[-1] * len(b_shape), contiguity=[True] * len(b_shape), dtype=dtype)
    fd.add_output(fd.ops.matmul(a, b))


def torch_int8_bmm(a, b):
    # torch has no batched int8 matmul on CUDA: one _int_mm (cuBLASLt, s32 results) per batch.
    return torch.stack([torch._int_mm(a[i], b[i]) for i in range(a.shape[0])])


def define_int8_bmm_transposed_b(fd):
    """Seed 002 (XLA, `bij,bkj->bik` on s8 with an s8 result): B is given [batch, n, k], int32 accumulation,
    then the convert to s8 (wrapping)."""
    a = fd.define_tensor(shape=[-1] * 3, contiguity=[True] * 3, dtype=DataType.Int8)
    b = fd.define_tensor(shape=[-1] * 3, contiguity=[True] * 3, dtype=DataType.Int8)
    product = fd.ops.matmul(a, fd.ops.permute(b, [0, 2, 1]), DataType.Int32)
    fd.add_output(fd.ops.cast(product, DataType.Int8))


def torch_int8_bmm_transposed_b(a, b):
    # b[i].t() is column-major: the layout cuBLASLt's int8 GEMM takes without a transpose.
    return torch.stack([torch._int_mm(a[i], b[i].t()) for i in range(a.shape[0])]).to(torch.int8)


def torch_weight_int8_linear(x, w, s):
    return torch.nn.functional.linear(x, (w.float() * s.float()[:, None]).to(x.dtype))


def torch_qkv_attention_scores(x, w, b, heads, head_dim, exact=False):
    """Seed 000's ops in torch eager: the QKV linear, the head split, q and k quantized to e4m3fn by 0.05
    (clamped: torch's cast does not saturate), q k^T on their values (torch has no fp8 bmm). `exact`:
    quantize as braze does (in double, by the float32 0.05), for the correctness check, so that values at
    an fp8 rounding midpoint round alike."""
    batch, seq, _ = x.shape
    hidden = heads * head_dim
    y = torch.nn.functional.linear(x, w, b)
    parts = [y[..., i * hidden:(i + 1) * hidden].reshape(batch, seq, heads, head_dim) for i in range(3)]
    q, k, v = parts[0].permute(0, 2, 1, 3), parts[1].permute(0, 2, 3, 1), parts[2].permute(0, 2, 1, 3)

    def quantize(t):
        scaled = t.double() / float(np.float32(0.05)) if exact else t.float() / 0.05
        return scaled.clamp(-448, 448).to(torch.float8_e4m3fn)

    return torch.matmul(quantize(q).float(), quantize(k).float()), v


def matmul_cases():
    """The issue's matmul targets; the last field counts the multiply-adds' operations (2 M N K)."""
    def randint8(shape, gen):
        return torch.randint(-128, 128, shape, dtype=torch.int8, device="cuda", generator=gen)

    n = 4096
    yield ("bf16 gemm 4096^3", lambda fd: define_matmul(fd, [n, n], [n, n], DataType.BFloat16), torch.mm,
           lambda gen: [torch.randn(n, n, dtype=torch.bfloat16, device="cuda", generator=gen) for _ in range(2)],
           None, 2 * n**3)
    b, n = 16, 1024
    yield ("s8 bmm 16x1024^3 -> s32", lambda fd: define_matmul(fd, [b, n, n], [b, n, n], DataType.Int8),
           torch_int8_bmm, lambda gen: [randint8((b, n, n), gen) for _ in range(2)], None, 2 * b * n**3)
    yield ("s8 bmm B^T -> s8 (seed 002)", define_int8_bmm_transposed_b,
           torch_int8_bmm_transposed_b, lambda gen: [randint8((b, n, n), gen) for _ in range(2)], None, 2 * b * n**3)
    batch, seq, heads, head_dim = 64, 384, 12, 64
    hidden = heads * head_dim
    yield ("qkv+quantize+qk^T (seed 000)",
           lambda fd: define_qkv_attention_scores(fd, batch, seq, heads, head_dim, DataType.Float8_e4m3fn),
           lambda x, w, b: torch_qkv_attention_scores(x, w, b, heads, head_dim),
           lambda gen: [torch.randn(batch, seq, hidden, dtype=torch.bfloat16, device="cuda", generator=gen),
                        (torch.randn(3 * hidden, hidden, device="cuda", generator=gen) * 0.05).to(torch.bfloat16),
                        torch.randn(3 * hidden, dtype=torch.bfloat16, device="cuda", generator=gen)],
           lambda x, w, b: torch_qkv_attention_scores(x, w, b, heads, head_dim, exact=True),
           2 * batch * seq * 3 * hidden * hidden + 2 * batch * heads * seq * seq * head_dim)
    for m in (1, 16, 32, 64):
        k, n = 4096, 11008
        yield (f"w8 linear M={m} K={k} N={n}", define_weight_int8_linear, torch_weight_int8_linear,
               lambda gen, m=m, k=k, n=n: [torch.randn(m, k, dtype=torch.bfloat16, device="cuda", generator=gen),
                                           randint8((n, k), gen),
                                           (torch.rand(n, device="cuda", generator=gen) * 0.01).to(torch.bfloat16)],
               None, 2 * m * k * n)
    # A decoding step of batch 16 (its [16, 1, K] activations are 16 rows of one pass over the weights) and a
    # GQA key projection at 16 rows (N = 1024: 64 column tiles for the SMs, K split among blocks).
    k = 4096
    for batch_shape, n in (((16, 1), 11008), ((16,), 1024)):
        name = ("w8 decode linear [16, 1, 4096] N=11008" if len(batch_shape) == 2 else f"w8 linear M=16 K={k} N={n}")
        yield (name, lambda fd, rank=len(batch_shape) + 1: define_weight_int8_linear(fd, x_rank=rank),
               torch_weight_int8_linear,
               lambda gen, shape=batch_shape, n=n: [torch.randn(*shape, k, dtype=torch.bfloat16, device="cuda", generator=gen),
                                                   randint8((n, k), gen),
                                                   (torch.rand(n, device="cuda", generator=gen) * 0.01).to(torch.bfloat16)],
               None, 2 * 16 * k * n)


def host_copy(t):
    """A numpy array with the tensor's shape, dtype and strides, for braze to plan with."""
    a = t.detach().float().cpu().numpy() if t.dtype == torch.bfloat16 else t.cpu().numpy()
    return np.ascontiguousarray(a).astype(BF16) if t.dtype == torch.bfloat16 else a


def median_call_us(fn, input_sets, reps):
    """Median time of one call as the GPU sees it, host work included: events around each call."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(3):
        fn(input_sets[i % len(input_sets)])
    times = []
    for i in range(reps):
        start.record()
        fn(input_sets[i % len(input_sets)])
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


class L2Flush:
    """Empties the L2 of the next call's inputs (the kinds: the module's docstring, --flush); "rotate"
    flushes nothing, its input sets rotating through more than the L2."""

    KINDS = ("write", "clean", "rotate")
    kind = "write"  # main() sets it from --flush

    def __init__(self):
        self.buffer = torch.empty(2 * L2_BYTES, dtype=torch.uint8, device="cuda") if self.kind != "rotate" else None

    def __call__(self):
        if self.kind == "write":
            self.buffer.zero_()
        elif self.kind == "clean":
            self.buffer.max()  # reads every byte; writes one

    @classmethod
    def input_sets(cls, make_inputs, gen, sample, nbytes):
        """The input sets a row alternates: two, or under rotate enough that each call's were last read
        more than twice the L2's size of inputs ago (at most 64: a row of inputs under 1.6 MB then finds
        some of them still in the L2)."""
        count = 2 if cls.kind != "rotate" else min(64, max(2, 1 + -(-2 * L2_BYTES // max(nbytes, 1))))
        return [sample] + [make_inputs(gen) for _ in range(count - 1)]

    def hold_gpu(self, calls):
        """Under rotate, nothing keeps the GPU busy between calls while the host enqueues them: a spin of
        about 50 us a call ahead of them all, so that they run back to back and host time stays out."""
        if self.kind == "rotate":
            torch.cuda._sleep(int(calls * 50e-6 * 2e9))


def median_us(fn, input_sets, reps, flush=None):
    """Median device time of one call of fn(inputs), in microseconds, with the L2 flushed before each
    (L2Flush.kind): each input set's call is captured in a CUDA graph (so host launch overhead stays out),
    and each replay sits between two events after a flush that keeps the GPU busy while the host enqueues
    (under rotate, a spin ahead of all the calls)."""
    flush = flush or L2Flush()
    for i in range(3):
        fn(input_sets[i % len(input_sets)])
    torch.cuda.synchronize()
    graphs = []
    for inputs in input_sets:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn(inputs)
        graphs.append(graph)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    flush.hold_gpu(reps)
    for i, (start, end) in enumerate(events):
        flush()
        start.record()
        graphs[i % len(graphs)].replay()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) * 1e3 for start, end in events)


def device_preset() -> str:
    """The DeviceInfo preset of this GPU, so the timed kernels are those fd.execute plans here."""
    name = torch.cuda.get_device_name().upper()
    for preset in ("H200", "A100", "L4"):
        if preset in name:
            return preset.lower()
    return "h100"


def summaries(fd):
    """The heuristics of each kernel the last GPU execute ran, one line each (from the sources' heads)."""
    return [src.split("\n", 1)[0].split(": ", 1)[-1] for src in fd.last_cuda_code().split("// braze_")[1:]]


def tuned(fd, tuning):
    """fd with a fresh GPU cache planning for `tuning` (HeuristicTuning keys) through BRAZE_TUNING, which
    a cache reads when it plans."""
    os.environ["BRAZE_TUNING"] = tuning
    bx.forget_gpu_plans(fd)
    return fd


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--only", default="", help="the cases whose name holds one of these '|'-separated strings")
    parser.add_argument("--flush", choices=L2Flush.KINDS, default="write",
                        help="how each timed call finds its inputs out of the L2 (the module's docstring)")
    parser.add_argument("--compile", action="store_true", default=True,
                        help="time torch.compile too (the default; slow to compile)")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="leave torch.compile out")
    parser.add_argument("--sweep", action="store_true", help="also time other heuristic tunings of each case")
    parser.add_argument("--tunings", default="",
                        help="with --sweep: time these BRAZE_TUNING strings, separated by ';', instead of the sweep's space "
                             "(\"\" is the heuristic's own choice)")
    args = parser.parse_args()
    L2Flush.kind = args.flush
    gen = torch.Generator(device="cuda").manual_seed(0)
    # Copy roofline: 256 MiB copied device to device.
    src = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_us = median_us(lambda _: dst.copy_(src), [None], 20)
    copy_gbs = 2 * src.numel() / copy_us / 1e3
    try:
        peaks = mma_peak.mma_sync_peaks()
        peak_line = mma_peak.describe(peaks)
    except Exception as error:  # noqa: BLE001  (the table does not depend on it)
        peaks, peak_line = {}, f"mma.sync peak: not measured ({type(error).__name__}: {error})"
    print(f"device: {torch.cuda.get_device_name()}; L2 flush: {args.flush}; copy bandwidth {copy_gbs:.0f} GB/s; "
          f"{peak_line}")
    print(f"{'case':26} {'braze us':>9} {'kernel us':>9} {'eager us':>9} {'compile us':>10} {'floor us':>9} "
          f"{'% floor':>8} {'GB/s':>6} {'% copy':>7}  heuristics")
    failed = []
    for case in cases():
        if args.only and not any(part in case[0] for part in args.only.split("|")):
            continue
        try:
            bench_case(args, gen, copy_gbs, peaks, *case)
        except Exception as error:  # one case's failure is reported and the others still run
            failed.append(case[0])
            print(f"{case[0]:26} FAILED: {type(error).__name__}: {str(error).splitlines()[0][:300]}", flush=True)
    host_latency(args.reps * 10)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


def expect_close(name, got, want):
    """Elementwise within 2% for most cases. Quantized cases are compared by their relative error norm: a
    value at an fp8 rounding midpoint may round to either side in torch (which converts through float)
    and in braze (which rounds once from double), and one such element moves a whole row of q k^T."""
    if "quantize" in name:
        error = torch.linalg.vector_norm((got.double() - want.double()).flatten())
        scale = torch.linalg.vector_norm(want.double().flatten())
        assert error <= 1e-3 * scale, f"{name}: relative error {float(error / scale):.2e}"
        return
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)


def peer_us(fn, input_sets, reps):
    """A peer's median device time, or NaN (said why) where torch cannot run it on this GPU."""
    try:
        return median_us(fn, input_sets, reps)
    except Exception as error:
        print(f"    (peer failed: {type(error).__name__}: {str(error).splitlines()[0][:200]})", flush=True)
        return float("nan")


def floor_us(name, nbytes, ops, copy_gbs, peaks):
    """The row's lower bound: its minimal bytes at the measured copy bandwidth, or its operations at
    mma.sync's measured peak (int8 rows at the s8 one, the others at bf16's), whichever is longer. wgmma
    runs above mma.sync's peak on an H100, so a GEMM row may pass 100% of this floor."""
    memory = nbytes / copy_gbs / 1e3
    integer = any(tag in name for tag in ("int8", "w8", "s8"))
    peak = peaks.get("s8" if integer else "bf16") if ops else None
    return max(memory, ops / peak / 1e6) if peak else memory


def bench_case(args, gen, copy_gbs, peaks, name, define, ref, make_inputs, check, ops):
    with FusionDefinition() as fd:
        define(fd)
    sample = make_inputs(gen)
    bytes_in = sum(t.numel() * t.element_size() for t in sample)
    input_sets = L2Flush.input_sets(make_inputs, gen, sample, bytes_in)
    want = (check or ref)(*sample)
    want = list(want) if isinstance(want, tuple) else [want]
    tuned(fd, "")
    got = fd.execute(sample)
    for g, w in zip(got, want):
        expect_close(name, g, w)
    # Outputs that are views of an input cost no kernel and move no bytes.
    written = [w for g, w in zip(got, want)
               if not any(g.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() for t in sample)]
    bytes_out = sum(w.numel() * w.element_size() for w in written)
    kernel_us = median_us(lambda xs: fd.execute(xs), input_sets, args.reps)
    heuristics = summaries(fd)
    braze_us = median_call_us(lambda xs: fd.execute(xs), input_sets, args.reps)
    eager_us = peer_us(lambda xs: ref(*xs), input_sets, args.reps)
    compile_us = float("nan")
    if args.compile:
        compiled = torch.compile(ref)
        compile_us = peer_us(lambda xs: compiled(*xs), input_sets, args.reps)
    gbs = (bytes_in + bytes_out) / kernel_us / 1e3
    floor = floor_us(name, bytes_in + bytes_out, ops, copy_gbs, peaks)
    rate = f"{ops / kernel_us / 1e6:.0f} TOP/s (eager {ops / eager_us / 1e6:.0f}); " if ops else ""
    print(f"{name:26} {braze_us:9.1f} {kernel_us:9.1f} {eager_us:9.1f} {compile_us:10.1f} {floor:9.1f} "
          f"{100 * floor / kernel_us:7.0f}% {gbs:6.0f} {100 * gbs / copy_gbs:6.0f}%  {rate}{'; '.join(heuristics)}",
          flush=True)
    if name.startswith("w8 linear"):
        # torch's own weight-only int8 kernel, the seed's other peer.
        packed_us = peer_us(lambda xs: torch._weight_int8pack_mm(*xs), input_sets, args.reps)
        print(f"{'  torch._weight_int8pack_mm':26} {'':9} {'':9} {packed_us:9.1f}", flush=True)
    if args.sweep:
        space = MATMUL_SWEEP if "matmul" in " ".join(summaries(fd)) else SWEEP
        sweep(fd, sample, want, input_sets, bytes_in + bytes_out, copy_gbs, args.reps,
              [t.strip() for t in args.tunings.split(";")] if args.tunings else list(tunings(space)))
    tuned(fd, "")


# What --sweep varies: every combination, of which only those giving a kernel source not seen yet are
# timed (a pointwise kernel ignores chunks per thread, a reduction the unroll).
SWEEP = {"block_threads": [128, 256, 512], "max_chunks_per_thread": [1, 2, 4, 8], "max_unroll": [1, 2, 4, 8],
         "max_rows_per_thread": [1, 4, 8]}
# A matmul case's: stages, K slice bytes, block tile (0: the heuristic's), wgmma's slices by TMA or cp.async,
# warp-specialized or not, persistent or not, persistent in clusters of two blocks sharing B's boxes or not.
MATMUL_SWEEP = {"matmul_stages": [0, 4], "matmul_slice_bytes": [0, 128],
                "matmul_block_m,matmul_block_n": [(0, 0), (128, 256), (256, 128)], "matmul_loads_ahead": [1, 0],
                "matmul_tma": [-1, 0],
                "matmul_warp_specialized,matmul_persistent,matmul_cluster": [(0, 0, 1), (1, 0, 1), (1, 1, 1), (1, 1, 2)]}


def tunings(space):
    for values in itertools.product(*space.values()):
        items = []
        for keys, value in zip(space, values):
            for key, v in zip(keys.split(","), value if isinstance(value, tuple) else (value,)):
                items.append(f"{key}={v}")
        yield ",".join(items)


def sweep(fd, sample, want, input_sets, nbytes, copy_gbs, reps, candidates):
    seen, rows = set(), []
    host = [host_copy(t) for t in sample]  # once: copying a large input to the host takes a while
    for tuning in candidates:
        # Planning is cheap; compiling is not: only new sources go further.
        sources = bx.cuda_code_for(fd, host, target=f"{device_preset()}:{tuning}")
        if sources in seen:
            continue
        seen.add(sources)
        got = tuned(fd, tuning).execute(sample)
        for g, w in zip(got, want):
            torch.testing.assert_close(g.float(), w.float(), rtol=2e-2, atol=2e-2)
        us = median_us(lambda xs: fd.execute(xs), input_sets, reps)
        rows.append((us, tuning, "; ".join(summaries(fd))))
    for us, tuning, summary in sorted(rows):
        gbs = nbytes / us / 1e3
        print(f"    {us:9.1f} us {100 * gbs / copy_gbs:5.0f}%  {tuning}  | {summary}", flush=True)


def host_latency(calls):
    """Per-call host time of cached fusions on 1-element tensors, from Python, against a bare cuLaunchKernel
    through ctypes of a one-line kernel doing the same (compiled by CuPy, which serves only as the
    compiler of this floor): what any Python launcher pays. One row per call form nvFuser scripts and
    Thunder use, then the paths those rows do not take: an output that is a view of the input (handed to
    torch through DLPack), outputs from braze's own pool (stream=), and a plan of two kernels."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, x))
    with FusionDefinition() as viewed:
        v = viewed.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        viewed.add_output(viewed.ops.add(v, v))
        viewed.add_output(viewed.ops.reshape(v, [1, 1]))
    with FusionDefinition() as two:
        m = two.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        two.add_output(two.ops.sub(m, two.ops.broadcast_in_dim(two.ops.sum(m, [0]), [8, 32], [1])))
    x = torch.ones(1, device="cuda")
    matrix = torch.ones(8, 32, device="cuda")
    out = torch.empty(1, device="cuda")
    floor = cp.RawKernel(r'''extern "C" __global__ void twice(const float* x, float* y, long long n) {
      long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
      if (i < n) y[i] = x[i] + x[i];
    }''', "twice")
    floor.compile()
    cuda = ctypes.CDLL("libcuda.so.1")
    function = ctypes.c_void_p(floor.kernel.ptr)
    words = [ctypes.c_uint64(x.data_ptr()), ctypes.c_uint64(out.data_ptr()), ctypes.c_uint64(1)]
    params = (ctypes.c_void_p * len(words))(*[ctypes.cast(ctypes.pointer(w), ctypes.c_void_p) for w in words])
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    side = torch.cuda.current_stream().cuda_stream

    def bare():
        result = cuda.cuLaunchKernel(function, 1, 1, 1, 128, 1, 1, 0, stream, params, None)
        if result != 0:
            raise RuntimeError(f"cuLaunchKernel returned {result}")

    def timed(fn):
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - t0) / calls * 1e6)
        return statistics.median(samples)

    bare_us = timed(bare)
    print(f"host latency (Python, cached fusions of 1-element tensors): bare cuLaunchKernel {bare_us:.1f} us per call")
    cuda0 = torch.device("cuda:0")
    rows = [
        ("fd.execute([x]) (1 kernel)", lambda: fd.execute([x])),
        ("  device=0", lambda: fd.execute([x], device=0)),
        ("  device=\"cuda:0\"", lambda: fd.execute([x], device="cuda:0")),
        ("  device=torch.device(\"cuda:0\")", lambda: fd.execute([x], device=cuda0)),
        ("  device= and option keywords (device=, _enable_options=[], _disable_options=[])",
         lambda: fd.execute([x], device=cuda0, _enable_options=[], _disable_options=[])),
        ("  Thunder's form (its arguments' tuple, device=None, three option keywords)",
         lambda: fd.execute((x,), device=None, save_repro_inputs=False, _enable_options=None,
                            _disable_options=None)),
        ("  a second output, a view of the input", lambda: viewed.execute([x])),
        ("  stream= (outputs from braze's pool)", lambda: fd.execute([x], stream=side)),
        ("x - colsum(x) of [8, 32] (a reduction, then a pointwise kernel)", lambda: two.execute([matrix])),
    ]
    for name, fn in rows:
        us = timed(fn)
        print(f"  {name:68s} {us:6.1f} us, {us - bare_us:5.1f} over the bare launch")


if __name__ == "__main__":
    main()
