"""A nanoGPT transformer block trained with Lightning Thunder on braze (install_as_nvfuser, Thunder's own
nvFuser executor) against eager PyTorch: the time per forward + backward step (CUDA events, median of
--reps steps after warm-up, the same inputs for both), what Thunder fused (the nvFusion regions of the
forward and backward traces) and, with --profile, the per-kernel GPU time of one step of each
(torch.profiler). The block is nanoGPT's (C=768, 12 heads, batch 8 x 256 tokens by default); the model
itself is `Block`, which tests/python/test_thunder.py imports too.

    python benchmarks/python/thunder_block.py [--dtype bf16|fp32] [--reps 50] [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    """nanoGPT's transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)) with a tanh GELU."""

    def __init__(self, n_embd=768, n_head=12):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def step_times(fn, x, reps) -> list[float]:
    """Milliseconds per forward + backward step, each timed with CUDA events."""
    for _ in range(5):
        fn(x).float().square().mean().backward()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x).float().square().mean().backward()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def kernel_table(fn, x, rows=25) -> str:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(x).float().square().mean().backward()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("thunder_block: no CUDA GPU (torch sees none); nothing to time")
        return 0
    import braze

    braze.install_as_nvfuser()
    try:
        import thunder
        from thunder.executors.nvfuserex import nvfuserex
    except Exception as error:  # noqa: BLE001 - said as it is
        print(f"thunder_block: Thunder does not import with torch {torch.__version__}: {type(error).__name__}: {error}")
        return 0
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.manual_seed(0)
    block = Block().to("cuda", dtype)
    x = torch.randn(args.batch, args.tokens, 768, device="cuda", dtype=dtype, requires_grad=True)
    jitted = thunder.jit(block, executors=[nvfuserex])
    eager = step_times(block, x, args.reps)
    braze_times = step_times(jitted, x, args.reps)
    forward = [b.sym.name for b in thunder.last_traces(jitted)[-1].bound_symbols if b.sym.name.startswith("nvFusion")]
    backward = [b.sym.name for b in thunder.last_backward_traces(jitted)[-1].bound_symbols
                if b.sym.name.startswith("nvFusion")]
    e, b = statistics.median(eager), statistics.median(braze_times)
    print(f"nanoGPT block {args.batch}x{args.tokens}x768 {args.dtype}, forward + backward, median of {args.reps}:")
    print(f"  eager            {e * 1000:8.1f} us")
    print(f"  thunder + braze  {b * 1000:8.1f} us  ({e / b:.2f}x eager)")
    print(f"  nvFusion regions: {len(forward)} forward, {len(backward)} backward")
    if args.profile:
        print("== eager, one step\n" + kernel_table(block, x))
        print("== thunder + braze, one step\n" + kernel_table(jitted, x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
