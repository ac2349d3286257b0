"""A transformer block trained with Lightning Thunder on braze (install_as_nvfuser, Thunder's own nvFuser
executor) against eager PyTorch: the time per forward + backward step (CUDA events, median of --reps
steps after warm-up, the same inputs for both), what Thunder fused (the nvFusion regions of the forward
and backward traces) and, with --profile, the per-kernel GPU time of one step of each (torch.profiler).
The block is nanoGPT's (`Block`: C=768, 12 heads, batch 8 x 256 tokens by default); with --model
llama a Llama block as litGPT writes it (`LlamaBlock`: C=2048, 16 query heads on 4 KV heads, RoPE,
SwiGLU); with --model gpt nanoGPT's whole model with one block and its cross entropy (`GPT`: token ids
in, the loss out); with --model moe a mixture-of-experts MLP (`MoEBlock`). tests/python/test_thunder.py
and tools/thunder_on_cpu.py import them.

    python benchmarks/python/thunder_block.py [--model nanogpt|llama|gpt|moe] [--dtype bf16|fp32] [--reps 50] [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

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


class RMSNorm(nn.Module):
    def __init__(self, n_embd, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n_embd))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()).to(x.dtype)


def rotate(x, cos, sin):
    """litGPT's RoPE: the two halves of each head rotated."""
    half = x.size(-1) // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


class GroupedQueryAttention(nn.Module):
    """litGPT's attention: one QKV projection laid out per KV head (its query heads, then its key and
    value), RoPE on queries and keys, each KV head expanded to its query heads."""

    def __init__(self, n_embd, n_head, n_query_groups, max_tokens=4096):
        super().__init__()
        self.n_head, self.groups, self.head = n_head, n_query_groups, n_embd // n_head
        self.qkv = nn.Linear(n_embd, (n_head + 2 * n_query_groups) * self.head, bias=False)
        self.proj = nn.Linear(n_embd, n_embd, bias=False)
        theta = 1.0 / (10000.0 ** (torch.arange(0, self.head, 2).float() / self.head))
        angles = torch.outer(torch.arange(max_tokens).float(), theta).repeat(1, 2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        per_group = self.n_head // self.groups
        qkv = self.qkv(x).view(B, T, self.groups, per_group + 2, self.head).permute(0, 2, 3, 1, 4)
        q, k, v = qkv.split((per_group, 1, 1), dim=2)
        k, v = (t.expand(B, self.groups, per_group, T, self.head) for t in (k, v))
        q, k, v = (t.reshape(B, self.n_head, T, self.head) for t in (q, k, v))
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        y = F.scaled_dot_product_attention(rotate(q, cos, sin), rotate(k, cos, sin), v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class LlamaBlock(nn.Module):
    """A Llama block as litGPT writes it: RMSNorm, grouped-query attention with RoPE, a SwiGLU MLP."""

    def __init__(self, n_embd=2048, n_head=16, n_query_groups=4, intermediate=5632):
        super().__init__()
        self.norm_1, self.norm_2 = RMSNorm(n_embd), RMSNorm(n_embd)
        self.attn = GroupedQueryAttention(n_embd, n_head, n_query_groups)
        self.fc_1 = nn.Linear(n_embd, intermediate, bias=False)
        self.fc_2 = nn.Linear(n_embd, intermediate, bias=False)
        self.proj = nn.Linear(intermediate, n_embd, bias=False)

    def forward(self, x):
        x = x + self.attn(self.norm_1(x))
        h = self.norm_2(x)
        return x + self.proj(F.silu(self.fc_1(h)) * self.fc_2(h))


class GPT(nn.Module):
    """nanoGPT's whole model: token and position embeddings, `layers` blocks, a final layer norm and the
    tied lm_head, returning the cross entropy against `targets` (-1 ignored)."""

    def __init__(self, vocab=50304, max_tokens=1024, n_embd=768, n_head=12, layers=1):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(max_tokens, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(layers))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for table in (self.wte, self.wpe):  # nanoGPT's initialization: logits of a sensible size
            nn.init.normal_(table.weight, std=0.02)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1), ignore_index=-1)


class MoEBlock(nn.Module):
    """A mixture-of-experts MLP as Mixtral routes it (softmax over the experts, the k best, their weights
    renormalized), its experts run densely: every token through every expert, weighted by the router's
    scattered weights (zero for the experts it did not pick), so that Thunder traces it whole."""

    def __init__(self, n_embd=64, experts=8, k=2, intermediate=96):
        super().__init__()
        self.gate = nn.Linear(n_embd, experts, bias=False)
        self.k = k
        self.w1 = nn.Parameter(torch.randn(experts, n_embd, intermediate) * n_embd ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, intermediate, n_embd) * intermediate ** -0.5)

    def forward(self, x):
        B, T, C = x.shape
        flat = x.view(-1, C)
        probs = F.softmax(self.gate(flat).float(), dim=-1)
        weights, picked = torch.topk(probs, self.k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        routed = torch.zeros_like(probs, dtype=x.dtype).scatter(1, picked, weights)
        hidden = F.silu(torch.einsum("nc,eci->nei", flat, self.w1))
        out = torch.einsum("nei,eic->nec", hidden, self.w2)
        return x + (out * routed[..., None]).sum(1).view(B, T, C)


def loss_of(fn, inputs, returns_loss):
    """The step's loss: what the model returns (GPT's cross entropy), else its output's mean square."""
    out = fn(*inputs)
    return out if returns_loss else out.float().square().mean()


def step_times(fn, inputs, returns_loss, reps) -> list[float]:
    """Milliseconds per forward + backward step, each timed with CUDA events."""
    for _ in range(5):
        loss_of(fn, inputs, returns_loss).backward()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss_of(fn, inputs, returns_loss).backward()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def execute_host_time(fn, inputs, returns_loss, reps) -> tuple[int, float]:
    """braze's executes per step and the median host time spent inside them per step, in microseconds:
    what of the step's host time is braze's (the rest is Thunder's and torch's)."""
    import braze

    execute = braze.FusionDefinition.execute
    spent = [0.0, 0]

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return execute(self, *args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start
            spent[1] += 1

    braze.FusionDefinition.execute = timed
    try:
        per_step = []
        for _ in range(reps):
            spent[:] = [0.0, 0]
            loss_of(fn, inputs, returns_loss).backward()
            if inputs[0].is_cuda:
                torch.cuda.synchronize()
            per_step.append((spent[1], spent[0] * 1e6))
    finally:
        braze.FusionDefinition.execute = execute
    return per_step[-1][0], statistics.median(us for _, us in per_step)


def kernel_table(fn, inputs, returns_loss, rows=25) -> str:
    """torch.profiler's kernel table of one step, then the GPU time of all kernels and of braze's."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        loss_of(fn, inputs, returns_loss).backward()
        torch.cuda.synchronize()
    events = prof.key_averages()

    def device_us(event):
        return getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0.0)

    total = sum(device_us(e) for e in events)
    ours = sum(device_us(e) for e in events if e.key.startswith("braze_"))
    count = sum(e.count for e in events if e.key.startswith("braze_"))
    return (events.table(sort_by="cuda_time_total", row_limit=rows) +
            f"\nGPU time of the step: {total:.1f} us; braze's {count} kernels: {ours:.1f} us\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["nanogpt", "llama", "gpt", "moe"], default="nanogpt",
                        help="nanoGPT's block (C=768, 12 heads), a Llama block (C=2048, 16 heads, 4 KV heads), "
                             "nanoGPT's whole model with one block and its cross entropy (vocabulary 50304), or a "
                             "mixture-of-experts MLP (C=768, 8 experts, the best 2, 1536 wide)")
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
    made = {"nanogpt": lambda: Block(), "llama": lambda: LlamaBlock(), "gpt": lambda: GPT(max_tokens=args.tokens),
            "moe": lambda: MoEBlock(768, 8, 2, 1536)}
    block = made[args.model]().to("cuda", dtype)
    width = 2048 if args.model == "llama" else 768
    returns_loss = args.model == "gpt"
    if returns_loss:
        vocab = block.wte.weight.size(0)
        inputs = [torch.randint(0, vocab, (args.batch, args.tokens), device="cuda") for _ in range(2)]
    else:
        inputs = [torch.randn(args.batch, args.tokens, width, device="cuda", dtype=dtype, requires_grad=True)]
    jitted = thunder.jit(block, executors=[nvfuserex])
    eager = step_times(block, inputs, returns_loss, args.reps)
    braze_times = step_times(jitted, inputs, returns_loss, args.reps)
    forward = [b.sym.name for b in thunder.last_traces(jitted)[-1].bound_symbols if b.sym.name.startswith("nvFusion")]
    backward = [b.sym.name for b in thunder.last_backward_traces(jitted)[-1].bound_symbols
                if b.sym.name.startswith("nvFusion")]
    e, b = statistics.median(eager), statistics.median(braze_times)
    print(f"{args.model} block {args.batch}x{args.tokens}x{width} {args.dtype}, forward + backward, median of {args.reps}:")
    print(f"  eager            {e * 1000:8.1f} us")
    print(f"  thunder + braze  {b * 1000:8.1f} us  ({e / b:.2f}x eager)")
    print(f"  nvFusion regions: {len(forward)} forward, {len(backward)} backward")
    calls, host_us = execute_host_time(jitted, inputs, returns_loss, args.reps)
    print(f"  braze's executes: {calls} per step, {host_us:.1f} us of host time in them per step (median)")
    if args.profile:
        print("== eager, one step\n" + kernel_table(block, inputs, returns_loss))
        print("== thunder + braze, one step\n" + kernel_table(jitted, inputs, returns_loss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
