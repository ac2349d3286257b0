"""More model shapes for Lightning Thunder on braze, beside thunder_block.py's GPT and Llama blocks: each one
a pattern of real models that the segmenter and schedulers meet in their fusions. tools/thunder_on_cpu.py
trains them one step on braze's simulated device (`--model bert|t5|...|mamba`, one per builder below).

- `BertLayer`: post-norm (the residual normed after it is added), an erf GELU, attention written out
  (scores, an additive padding mask, softmax) as BERT and RoBERTa write it.
- `T5Layer`: an RMS norm without its mean and without biases, a learned relative bias on the scores, a
  ReLU MLP.
- `NeoXLayer`: GPT-NeoX / Pythia: attention and MLP in parallel from one residual, RoPE on a quarter of
  each head (the rest passed through: a cat of a rotated and a plain slice), QKV laid out per head.
- `MixerLayer`: MLP-Mixer: an MLP across the tokens through a transpose, then one across the channels.
- `SwinLayer`: Swin's shifted windows: a roll, the windows cut out by reshape and permute, attention in
  each, and back.
- `VisionTransformer`: a ViT: patches through a linear, a class token concatenated before them, learned
  positions added, a block (thunder_block.py's), a final norm, and a head on the class token alone.
- `DistillationLoss`: a classifier head's cross entropy, a KL divergence to a teacher's softmax and a
  z-loss, summed: a loss of several terms.
- `GPTJLayer`: one norm feeding attention and the MLP in parallel, RoPE on a quarter of each head with its
  pairs interleaved (even and odd lanes: strided slices, stacked back), a tanh GELU.
- `Gemma2Layer`: a norm before and after attention and the MLP (RMS, scaled by 1 + weight), the scores
  soft-capped (cap * tanh(scores / cap)) and causally masked as written out, a GeGLU MLP.
- `BloomLayer`: ALiBi, a bias of -slope x distance per head on the scores instead of positions.
- `ContrastiveLoss`: CLIP's loss: two projections L2-normalized, their similarities scaled by a learned
  temperature, a cross entropy over the rows and one over the columns.
- `MistralLayer`: Mistral and Qwen2: grouped-query attention with biased projections and a sliding-window
  mask.
- `MambaMixer`: a Mamba-2-like state-space mixer in its quadratic form: a cumsum of log decays, the
  segment sums' exp masked causally.
- `DiTBlock`: a diffusion transformer's block with adaLN-Zero: norms without weights, modulated per image
  by a shift, a scale and a gate from a conditioning vector.
- `FalconLayer`: attention and the MLP in parallel from one norm, multi-query attention from one fused
  projection.
- `Phi3Layer`: grouped-query attention from one fused projection, a SwiGLU MLP whose gate and up are the
  halves of one projection.
- `Qwen3Layer`: Qwen3's (and Gemma-3's) QK-norm: each query and key head RMS-normed over its head size in
  the projection's [batch, tokens, heads, head size] layout, then transposed to heads first and rotated.
- `Olmo2Layer`: OLMo-2's QK-norm over the whole projection (all heads of a token together), then split
  into heads, transposed and rotated; norms after attention and the MLP instead of before.
- `MLALayer`: DeepSeek-V2's multi-head latent attention: queries and keys and values through normed
  low-rank latents, each head's key joined from a part of its own and a rotated part that all heads share.
- `UNetBlock`: Stable Diffusion's ResNet block (group norms, SiLU, convolutions, a time embedding per channel)
  and spatial attention over the pixels of a group-normed [B, C, H, W], transposed to [B, H*W, C] and back.

Each `build_<name>(batch, seq, embd, heads, dtype)` returns the model and its inputs, the first of which
is the differentiated activation.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _attention_heads(qkv, batch, tokens, heads):
    """q, k and v as [batch, heads, tokens, head size] from a projection laid out q | k | v."""
    q, k, v = qkv.split(qkv.size(-1) // 3, dim=-1)
    return (t.view(batch, tokens, heads, -1).transpose(1, 2) for t in (q, k, v))


class BertLayer(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.fc_1, self.fc_2 = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)
        # Weights and biases away from 1 and 0: the output's mean square then depends on the input (a norm
        # of weight 1 last would make it the same for every input, and the input's gradient noise).
        for ln in (self.ln_1, self.ln_2):
            nn.init.normal_(ln.weight, 1.0, 0.3)
            nn.init.normal_(ln.bias, 0.0, 0.3)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = _attention_heads(self.qkv(x), B, T, self.n_head)
        scores = q @ k.transpose(-1, -2) / math.sqrt(C // self.n_head) + mask[:, None, None, :]
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = self.ln_1(x + self.proj(y))
        return self.ln_2(x + self.fc_2(F.gelu(self.fc_1(x))))


def build_bert(batch, seq, embd, heads, dtype):
    mask = torch.zeros(batch, seq, dtype=dtype)
    mask[-1, seq * 2 // 3:] = -10000.0  # the last sequence padded
    return BertLayer(embd, heads).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype), mask)


class T5Norm(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n_embd))

    def forward(self, x):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + 1e-6)).to(self.weight.dtype)


class T5Layer(nn.Module):
    def __init__(self, n_embd, n_head, max_tokens):
        super().__init__()
        self.n_head = n_head
        self.norm_1, self.norm_2 = T5Norm(n_embd), T5Norm(n_embd)
        self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd, bias=False), nn.Linear(n_embd, n_embd, bias=False)
        self.relative_bias = nn.Parameter(torch.randn(n_head, max_tokens, max_tokens) * 0.1)
        self.wi, self.wo = nn.Linear(n_embd, 4 * n_embd, bias=False), nn.Linear(4 * n_embd, n_embd, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = _attention_heads(self.qkv(self.norm_1(x)), B, T, self.n_head)
        scores = q @ k.transpose(-1, -2) + self.relative_bias[:, :T, :T]
        y = (scores.float().softmax(-1).to(q.dtype) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.wo(F.relu(self.wi(self.norm_2(x))))


def build_t5(batch, seq, embd, heads, dtype):
    return T5Layer(embd, heads, seq).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class NeoXLayer(nn.Module):
    def __init__(self, n_embd, n_head, max_tokens, rotary_fraction=0.25):
        super().__init__()
        self.n_head, self.head_size = n_head, n_embd // n_head
        self.rotary = max(2, int(self.head_size * rotary_fraction) // 2 * 2)
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.fc_1, self.fc_2 = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)
        inverse = 1.0 / (10000 ** (torch.arange(0, self.rotary, 2).float() / self.rotary))
        angles = torch.outer(torch.arange(max_tokens).float(), inverse).repeat(1, 2)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def rope(self, x):
        rotated, passed = x[..., :self.rotary], x[..., self.rotary:]
        half = self.rotary // 2
        turned = torch.cat((-rotated[..., half:], rotated[..., :half]), dim=-1)
        T = x.size(-2)
        rotated = (rotated * self.cos[:T] + turned * self.sin[:T]).to(x.dtype)
        return torch.cat((rotated, passed), dim=-1)

    def forward(self, x):
        B, T, C = x.shape
        qkv = self.qkv(self.ln_1(x)).view(B, T, self.n_head, 3 * self.head_size).transpose(1, 2)
        q, k, v = qkv.split(self.head_size, dim=-1)
        y = F.scaled_dot_product_attention(self.rope(q), self.rope(k), v, is_causal=True)
        attention = self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + attention + self.fc_2(F.gelu(self.fc_1(self.ln_2(x))))


def build_neox(batch, seq, embd, heads, dtype):
    return NeoXLayer(embd, heads, seq).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class MixerLayer(nn.Module):
    def __init__(self, n_embd, tokens):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.token_1, self.token_2 = nn.Linear(tokens, 2 * tokens), nn.Linear(2 * tokens, tokens)
        self.channel_1, self.channel_2 = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        mixed = self.token_2(F.gelu(self.token_1(self.ln_1(x).transpose(1, 2))))
        x = x + mixed.transpose(1, 2)
        return x + self.channel_2(F.gelu(self.channel_1(self.ln_2(x))))


def build_mixer(batch, seq, embd, heads, dtype):
    return MixerLayer(embd, seq).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class SwinLayer(nn.Module):
    def __init__(self, n_embd, n_head, window):
        super().__init__()
        self.n_head, self.window = n_head, window
        self.ln = nn.LayerNorm(n_embd)
        self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)

    def forward(self, x):  # [batch, side, side, channels]
        B, S, _, C = x.shape
        W, shift = self.window, self.window // 2
        h = torch.roll(self.ln(x), shifts=(-shift, -shift), dims=(1, 2))
        h = h.view(B, S // W, W, S // W, W, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, W * W, C)
        q, k, v = _attention_heads(self.qkv(h), h.size(0), W * W, self.n_head)
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(-1, W * W, C)
        y = self.proj(y).view(B, S // W, S // W, W, W, C).permute(0, 1, 3, 2, 4, 5).reshape(B, S, S, C)
        return x + torch.roll(y, shifts=(shift, shift), dims=(1, 2))


def build_swin(batch, seq, embd, heads, dtype):
    side = max(2, math.isqrt(seq) // 2 * 2)  # the tokens as a square grid of 2x2 windows
    return SwinLayer(embd, heads, 2).to(dtype), (torch.randn(batch, side, side, embd, dtype=dtype),)


class VisionTransformer(nn.Module):
    def __init__(self, patch_size, patches, n_embd, n_head, classes=10):
        super().__init__()
        from thunder_block import Block

        self.patch = nn.Linear(patch_size, n_embd)
        self.cls = nn.Parameter(torch.randn(1, 1, n_embd) * 0.02)
        self.positions = nn.Parameter(torch.randn(1, patches + 1, n_embd) * 0.02)
        self.block, self.ln, self.head = Block(n_embd, n_head), nn.LayerNorm(n_embd), nn.Linear(n_embd, classes)

    def forward(self, x):  # [batch, patches, patch size]
        t = torch.cat([self.cls.expand(x.size(0), -1, -1), self.patch(x)], dim=1) + self.positions
        return self.head(self.ln(self.block(t))[:, 0])


def build_vit(batch, seq, embd, heads, dtype):
    patch_size = 48  # 4x4 pixels of 3 channels
    return VisionTransformer(patch_size, seq, embd, heads).to(dtype), (torch.randn(batch, seq, patch_size, dtype=dtype),)


class DistillationLoss(nn.Module):
    """No label smoothing: Thunder 0.2.6's nvFuser cross entropy drops it when training (its loss and gradient
    come out as without it, whatever runs the fusions), so the cross entropy here has none."""

    def __init__(self, n_embd, classes):
        super().__init__()
        self.head = nn.Linear(n_embd, classes)

    def forward(self, x, targets, teacher):
        logits = self.head(x).float()
        ce = F.cross_entropy(logits, targets)
        kl = F.kl_div(F.log_softmax(logits, -1), F.softmax(teacher.float(), -1), reduction="batchmean")
        z = torch.logsumexp(logits, -1).pow(2).mean()
        return ce + 0.5 * kl + 1e-4 * z


def build_distill(batch, seq, embd, heads, dtype, classes=100):
    rows = batch * seq
    targets = torch.randint(0, classes, (rows,))
    targets[0] = -100  # one ignored
    inputs = (torch.randn(rows, embd, dtype=dtype), targets, torch.randn(rows, classes, dtype=dtype))
    return DistillationLoss(embd, classes).to(dtype), inputs


class GPTJLayer(nn.Module):
    """GPT-J: one layer norm feeding attention and the MLP in parallel, RoPE on the first quarter of each head
    with its pairs interleaved (rotate every two: even and odd lanes, stacked back and flattened)."""

    def __init__(self, n_embd, n_head, max_tokens, rotary_fraction=0.25):
        super().__init__()
        self.n_head, self.head_size = n_head, n_embd // n_head
        self.rotary = max(2, int(self.head_size * rotary_fraction) // 2 * 2)
        self.ln = nn.LayerNorm(n_embd)
        self.q, self.k, self.v = (nn.Linear(n_embd, n_embd, bias=False) for _ in range(3))
        self.proj = nn.Linear(n_embd, n_embd, bias=False)
        self.fc_1, self.fc_2 = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)
        inverse = 1.0 / (10000 ** (torch.arange(0, self.rotary, 2).float() / self.rotary))
        angles = torch.outer(torch.arange(max_tokens).float(), inverse).repeat_interleave(2, dim=-1)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def rope(self, x):  # [batch, tokens, heads, head size]
        rotated, passed = x[..., :self.rotary], x[..., self.rotary:]
        turned = torch.stack((-rotated[..., 1::2], rotated[..., ::2]), dim=-1).flatten(-2)
        T = x.size(1)
        cos, sin = self.cos[:T, None, :], self.sin[:T, None, :]
        return torch.cat(((rotated * cos + turned * sin).to(x.dtype), passed), dim=-1)

    def forward(self, x):
        B, T, C = x.shape
        h = self.ln(x)
        q, k, v = (proj(h).view(B, T, self.n_head, self.head_size) for proj in (self.q, self.k, self.v))
        q, k = self.rope(q).transpose(1, 2), self.rope(k).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v.transpose(1, 2), is_causal=True)
        attention = self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + attention + self.fc_2(F.gelu(self.fc_1(h), approximate="tanh"))


def build_gptj(batch, seq, embd, heads, dtype):
    return GPTJLayer(embd, heads, seq).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class GemmaNorm(nn.Module):
    """Gemma's RMS norm: computed in float, scaled by 1 + weight."""

    def __init__(self, n_embd):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_embd) * 0.3)

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return (h * (1.0 + self.weight.float())).to(x.dtype)


class Gemma2Layer(nn.Module):
    """Gemma-2: a norm before and after each of attention and the MLP, the scores soft-capped
    (cap * tanh(scores / cap)) and causally masked as written out, a GeGLU MLP with the tanh GELU."""

    def __init__(self, n_embd, n_head, softcap=50.0):
        super().__init__()
        self.n_head, self.softcap = n_head, softcap
        self.norms = nn.ModuleList(GemmaNorm(n_embd) for _ in range(4))
        self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd, bias=False), nn.Linear(n_embd, n_embd, bias=False)
        self.gate, self.up = nn.Linear(n_embd, 2 * n_embd, bias=False), nn.Linear(n_embd, 2 * n_embd, bias=False)
        self.down = nn.Linear(2 * n_embd, n_embd, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = _attention_heads(self.qkv(self.norms[0](x)), B, T, self.n_head)
        scores = q @ k.transpose(-1, -2) * (C // self.n_head) ** -0.5
        scores = torch.tanh(scores / self.softcap) * self.softcap
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        y = (scores.float().softmax(-1).to(v.dtype) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.norms[1](self.proj(y))
        h = self.norms[2](x)
        return x + self.norms[3](self.down(F.gelu(self.gate(h), approximate="tanh") * self.up(h)))


def build_gemma2(batch, seq, embd, heads, dtype):
    return Gemma2Layer(embd, heads).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class BloomLayer(nn.Module):
    """BLOOM: ALiBi (a bias of -slope x distance per head on the scores instead of positions), pre-norm, a
    tanh GELU; its attention written out with a causal mask added."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.fc_1, self.fc_2 = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)
        self.register_buffer("slopes", 2.0 ** (-8.0 * torch.arange(1, n_head + 1) / n_head))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = _attention_heads(self.qkv(self.ln_1(x)), B, T, self.n_head)
        positions = torch.arange(T, device=x.device)
        distance = (positions[None, :] - positions[:, None]).clamp(max=0).to(x.dtype)
        bias = self.slopes.to(x.dtype)[:, None, None] * distance
        bias = bias.masked_fill(positions[None, :] > positions[:, None], float("-inf"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(C // self.n_head) + bias
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc_2(F.gelu(self.fc_1(self.ln_2(x)), approximate="tanh"))


def build_bloom(batch, seq, embd, heads, dtype):
    return BloomLayer(embd, heads).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class ContrastiveLoss(nn.Module):
    """CLIP's loss: image and text embeddings projected and L2-normalized, their similarities scaled by a
    learned temperature, a cross entropy over the rows and one over the columns, averaged."""

    def __init__(self, n_embd):
        super().__init__()
        self.image, self.text = nn.Linear(n_embd, n_embd, bias=False), nn.Linear(n_embd, n_embd, bias=False)
        self.log_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, images, texts):
        a = F.normalize(self.image(images), dim=-1)
        b = F.normalize(self.text(texts), dim=-1)
        logits = (self.log_scale.exp() * a @ b.t()).float()
        labels = torch.arange(logits.size(0), device=logits.device)
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def build_clip(batch, seq, embd, heads, dtype):
    rows = batch * seq
    return ContrastiveLoss(embd).to(dtype), (torch.randn(rows, embd, dtype=dtype), torch.randn(rows, embd, dtype=dtype))


class _HalfRotary(nn.Module):
    """RoPE on whole heads, the halves rotated (Llama's layout): cos and sin tables for `max_tokens` positions
    as buffers, and `rope` of [..., tokens, head size] tensors."""
    def rotary_tables(self, head_size, max_tokens):
        inverse = 1.0 / (10000 ** (torch.arange(0, head_size, 2).float() / head_size))
        angles = torch.outer(torch.arange(max_tokens).float(), inverse).repeat(1, 2)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def rope(self, t):
        T, half = t.size(-2), t.size(-1) // 2
        return t * self.cos[:T] + torch.cat((-t[..., half:], t[..., :half]), -1) * self.sin[:T]


class SwiGLU(nn.Module):
    """The gated MLP of Llama-style layers: down(silu(gate(h)) * up(h)), three times wider inside, no biases."""
    def __init__(self, n_embd):
        super().__init__()
        self.gate, self.up = nn.Linear(n_embd, 3 * n_embd, bias=False), nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.down = nn.Linear(3 * n_embd, n_embd, bias=False)

    def forward(self, h):
        return self.down(F.silu(self.gate(h)) * self.up(h))


class MistralLayer(_HalfRotary):
    """Mistral and Qwen2: RMS norms, grouped-query attention with biased q, k and v (Qwen2's), RoPE, a
    sliding-window causal mask given to the attention as an additive mask, a SwiGLU MLP."""
    def __init__(self, n_embd, n_head, kv_heads, window, max_tokens):
        super().__init__()
        self.n_head, self.kv, self.window = n_head, kv_heads, window
        self.hs = n_embd // n_head
        self.norm1, self.norm2 = nn.RMSNorm(n_embd), nn.RMSNorm(n_embd)
        self.q = nn.Linear(n_embd, n_embd)
        self.k, self.v = nn.Linear(n_embd, kv_heads * self.hs), nn.Linear(n_embd, kv_heads * self.hs)
        self.o = nn.Linear(n_embd, n_embd, bias=False)
        self.mlp = SwiGLU(n_embd)
        self.rotary_tables(self.hs, max_tokens)

    def forward(self, x):
        B, T, C = x.shape
        h = self.norm1(x)
        q = self.q(h).view(B, T, self.n_head, self.hs).transpose(1, 2)
        k = self.k(h).view(B, T, self.kv, self.hs).transpose(1, 2)
        v = self.v(h).view(B, T, self.kv, self.hs).transpose(1, 2)
        q, k = self.rope(q), self.rope(k)
        rep = self.n_head // self.kv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        i = torch.arange(T, device=x.device)
        allowed = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < self.window)
        mask = torch.zeros(T, T, dtype=x.dtype, device=x.device).masked_fill(~allowed, float("-inf"))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, C))
        h = self.norm2(x)
        return x + self.mlp(h)

def build_mistral(batch, seq, embd, heads, dtype):
    layer = MistralLayer(embd, heads, max(heads // 2, 1), max(seq // 3, 2), seq)
    return layer.to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class MambaMixer(nn.Module):
    """A Mamba-2-like selective state-space mixer as its quadratic form is written in plain torch: a per-head
    decay from a softplus of dt, the cumulative sum of log decays (a cumsum), the segment sums' exp masked
    causally, the output as matmuls; gated by SiLU, RMS-normed."""
    def __init__(self, n_embd, n_head, state=16):
        super().__init__()
        self.n_head, self.state = n_head, state
        self.in_proj = nn.Linear(n_embd, 2 * n_embd + 2 * state + n_head, bias=False)
        self.A_log = nn.Parameter(torch.randn(n_head) * 0.5)
        self.dt_bias = nn.Parameter(torch.randn(n_head) * 0.1)
        self.norm = nn.RMSNorm(n_embd)
        self.out_proj = nn.Linear(n_embd, n_embd, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        H, N = self.n_head, self.state
        z, xs, Bm, Cm, dt = self.in_proj(x).split([C, C, N, N, H], dim=-1)
        dt = F.softplus(dt + self.dt_bias)                        # [B, T, H]
        A = -torch.exp(self.A_log.float())                         # [H]
        logdecay = (dt * A).transpose(1, 2)                        # [B, H, T]
        cum = torch.cumsum(logdecay, dim=-1)
        seg = cum[..., :, None] - cum[..., None, :]                # [B, H, T, T]
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        L = torch.exp(seg.masked_fill(~causal, float("-inf"))).to(x.dtype)  # the decays summed in float
        scores = (Cm @ Bm.transpose(1, 2))[:, None] * L            # [B, H, T, T]
        xh = xs.view(B, T, H, C // H).transpose(1, 2) * dt.transpose(1, 2)[..., None]
        y = (scores @ xh).transpose(1, 2).reshape(B, T, C)
        return x + self.out_proj(self.norm(y * F.silu(z)))

def build_mamba(batch, seq, embd, heads, dtype):
    return MambaMixer(embd, heads).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class DiTBlock(nn.Module):
    """DiT's block with adaLN-Zero: a conditioning vector per image (SiLU, a linear) gives a shift, a scale and
    a gate for attention and for the MLP; the norms have no weights of their own."""
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(n_embd, elementwise_affine=False, eps=1e-6)
        self.ln_2 = nn.LayerNorm(n_embd, elementwise_affine=False, eps=1e-6)
        self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.fc_1, self.fc_2 = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)
        self.ada = nn.Linear(n_embd, 6 * n_embd)

    def forward(self, x, c):
        B, T, C = x.shape
        shift1, scale1, gate1, shift2, scale2, gate2 = self.ada(F.silu(c)).chunk(6, dim=-1)
        h = self.ln_1(x) * (1 + scale1[:, None]) + shift1[:, None]
        q, k, v = (t.view(B, T, self.n_head, -1).transpose(1, 2) for t in self.qkv(h).split(C, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = x + gate1[:, None] * self.proj(y)
        h = self.ln_2(x) * (1 + scale2[:, None]) + shift2[:, None]
        return x + gate2[:, None] * self.fc_2(F.gelu(self.fc_1(h), approximate="tanh"))

def build_dit(batch, seq, embd, heads, dtype):
    inputs = (torch.randn(batch, seq, embd, dtype=dtype), torch.randn(batch, embd, dtype=dtype))
    return DiTBlock(embd, heads).to(dtype), inputs


class FalconLayer(_HalfRotary):
    """Falcon: one layer norm feeding attention and the MLP in parallel, multi-query attention (one key and
    value head for all query heads) from one fused projection laid out q heads | k | v, RoPE, a GELU MLP,
    no biases."""
    def __init__(self, n_embd, n_head, max_tokens):
        super().__init__()
        self.n_head, self.hs = n_head, n_embd // n_head
        self.ln = nn.LayerNorm(n_embd)
        self.qkv = nn.Linear(n_embd, n_embd + 2 * self.hs, bias=False)
        self.proj = nn.Linear(n_embd, n_embd, bias=False)
        self.fc, self.out = nn.Linear(n_embd, 4 * n_embd, bias=False), nn.Linear(4 * n_embd, n_embd, bias=False)
        self.rotary_tables(self.hs, max_tokens)

    def forward(self, x):
        B, T, C = x.shape
        h = self.ln(x)
        q, k, v = self.qkv(h).split([C, self.hs, self.hs], dim=-1)
        q = self.rope(q.view(B, T, self.n_head, self.hs).transpose(1, 2))
        k = self.rope(k.view(B, T, 1, self.hs).transpose(1, 2)).expand(B, self.n_head, T, self.hs)
        v = v.view(B, T, 1, self.hs).transpose(1, 2).expand(B, self.n_head, T, self.hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        return x + self.proj(y) + self.out(F.gelu(self.fc(h)))

def build_falcon(batch, seq, embd, heads, dtype):
    return FalconLayer(embd, heads, seq).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class Phi3Layer(_HalfRotary):
    """Phi-3: RMS norms, grouped-query attention from one fused projection (q | k | v), RoPE, and a SwiGLU MLP
    whose gate and up come from one projection split in two halves."""
    def __init__(self, n_embd, n_head, kv_heads, max_tokens):
        super().__init__()
        self.n_head, self.kv, self.hs = n_head, kv_heads, n_embd // n_head
        self.norm1, self.norm2 = nn.RMSNorm(n_embd), nn.RMSNorm(n_embd)
        self.qkv = nn.Linear(n_embd, n_embd + 2 * kv_heads * self.hs, bias=False)
        self.o = nn.Linear(n_embd, n_embd, bias=False)
        self.gate_up = nn.Linear(n_embd, 2 * 3 * n_embd, bias=False)
        self.down = nn.Linear(3 * n_embd, n_embd, bias=False)
        self.rotary_tables(self.hs, max_tokens)

    def forward(self, x):
        B, T, C = x.shape
        kv = self.kv * self.hs
        q, k, v = self.qkv(self.norm1(x)).split([C, kv, kv], dim=-1)
        q = self.rope(q.view(B, T, self.n_head, self.hs).transpose(1, 2))
        k = self.rope(k.view(B, T, self.kv, self.hs).transpose(1, 2))
        v = v.view(B, T, self.kv, self.hs).transpose(1, 2)
        rep = self.n_head // self.kv
        y = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                           is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, C))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)

def build_phi3(batch, seq, embd, heads, dtype):
    kv_heads = heads // 2 if heads % 2 == 0 else 1  # a divisor of the query heads
    return Phi3Layer(embd, heads, kv_heads, seq).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class Qwen3Layer(_HalfRotary):
    """Qwen3: RMS norms, grouped-query attention without biases whose query and key heads are RMS-normed over
    the head size before the transpose to [batch, heads, tokens, head size] and RoPE, a SwiGLU MLP."""
    def __init__(self, n_embd, n_head, kv_heads, max_tokens):
        super().__init__()
        self.n_head, self.kv, self.hs = n_head, kv_heads, n_embd // n_head
        self.norm1, self.norm2 = nn.RMSNorm(n_embd, eps=1e-6), nn.RMSNorm(n_embd, eps=1e-6)
        self.q_norm, self.k_norm = nn.RMSNorm(self.hs, eps=1e-6), nn.RMSNorm(self.hs, eps=1e-6)
        self.q = nn.Linear(n_embd, n_embd, bias=False)
        self.k = nn.Linear(n_embd, kv_heads * self.hs, bias=False)
        self.v = nn.Linear(n_embd, kv_heads * self.hs, bias=False)
        self.o = nn.Linear(n_embd, n_embd, bias=False)
        self.mlp = SwiGLU(n_embd)
        self.rotary_tables(self.hs, max_tokens)

    def forward(self, x):
        B, T, C = x.shape
        h = self.norm1(x)
        q = self.rope(self.q_norm(self.q(h).view(B, T, self.n_head, self.hs)).transpose(1, 2))
        k = self.rope(self.k_norm(self.k(h).view(B, T, self.kv, self.hs)).transpose(1, 2))
        v = self.v(h).view(B, T, self.kv, self.hs).transpose(1, 2)
        rep = self.n_head // self.kv
        y = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                           is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, C))
        h = self.norm2(x)
        return x + self.mlp(h)

def build_qwen3(batch, seq, embd, heads, dtype):
    kv_heads = heads // 2 if heads % 2 == 0 else 1
    return Qwen3Layer(embd, heads, kv_heads, seq).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class Olmo2Layer(_HalfRotary):
    """OLMo-2: the query and key projections RMS-normed over all their heads at once, then viewed as heads,
    transposed and rotated; each residual branch normed after it (norm(attention(x)) + x), a SwiGLU MLP."""
    def __init__(self, n_embd, n_head, max_tokens):
        super().__init__()
        self.n_head, self.hs = n_head, n_embd // n_head
        self.q_norm, self.k_norm = nn.RMSNorm(n_embd, eps=1e-6), nn.RMSNorm(n_embd, eps=1e-6)
        self.attn_norm, self.mlp_norm = nn.RMSNorm(n_embd, eps=1e-6), nn.RMSNorm(n_embd, eps=1e-6)
        self.q, self.k, self.v, self.o = (nn.Linear(n_embd, n_embd, bias=False) for _ in range(4))
        self.mlp = SwiGLU(n_embd)
        self.rotary_tables(self.hs, max_tokens)

    def forward(self, x):
        B, T, C = x.shape
        q = self.rope(self.q_norm(self.q(x)).view(B, T, self.n_head, self.hs).transpose(1, 2))
        k = self.rope(self.k_norm(self.k(x)).view(B, T, self.n_head, self.hs).transpose(1, 2))
        v = self.v(x).view(B, T, self.n_head, self.hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.attn_norm(self.o(y))
        return x + self.mlp_norm(self.mlp(x))

def build_olmo2(batch, seq, embd, heads, dtype):
    return Olmo2Layer(embd, heads, seq).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class MLALayer(_HalfRotary):
    """DeepSeek-V2's multi-head latent attention: the queries from a normed low-rank latent, split per head into a
    part without position and a rotated part; the keys and values from a normed latent of their own, beside one
    rotated key part (sliced off the same projection) that every head shares."""
    def __init__(self, n_embd, n_head, max_tokens):
        super().__init__()
        self.n_head, self.nope, self.pe = n_head, n_embd // n_head, max(n_embd // n_head // 2, 2)
        self.q_lora, self.kv_lora = n_embd // 2, n_embd // 4
        self.norm = nn.RMSNorm(n_embd)
        self.q_a, self.q_a_norm = nn.Linear(n_embd, self.q_lora, bias=False), nn.RMSNorm(self.q_lora)
        self.q_b = nn.Linear(self.q_lora, n_head * (self.nope + self.pe), bias=False)
        self.kv_a, self.kv_a_norm = nn.Linear(n_embd, self.kv_lora + self.pe, bias=False), nn.RMSNorm(self.kv_lora)
        self.kv_b = nn.Linear(self.kv_lora, n_head * 2 * self.nope, bias=False)
        self.o = nn.Linear(n_head * self.nope, n_embd, bias=False)
        self.rotary_tables(self.pe, max_tokens)

    def forward(self, x):
        B, T, C = x.shape
        H = self.n_head
        h = self.norm(x)
        q = self.q_b(self.q_a_norm(self.q_a(h))).view(B, T, H, self.nope + self.pe).transpose(1, 2)
        q_nope, q_pe = q.split([self.nope, self.pe], dim=-1)
        latent, k_pe = self.kv_a(h).split([self.kv_lora, self.pe], dim=-1)
        k_pe = self.rope(k_pe.view(B, T, 1, self.pe).transpose(1, 2)).expand(B, H, T, self.pe)
        kv = self.kv_b(self.kv_a_norm(latent)).view(B, T, H, 2 * self.nope).transpose(1, 2)
        k_nope, v = kv.split([self.nope, self.nope], dim=-1)
        q, k = torch.cat([q_nope, self.rope(q_pe)], dim=-1), torch.cat([k_nope, k_pe], dim=-1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.o(y.transpose(1, 2).reshape(B, T, H * self.nope))

def build_mla(batch, seq, embd, heads, dtype):
    return MLALayer(embd, heads, seq).to(dtype), (torch.randn(batch, seq, embd, dtype=dtype),)


class UNetBlock(nn.Module):
    """Stable Diffusion's UNet at one resolution: a ResNet block (group norms and SiLU before 3x3 convolutions,
    the time embedding's projection added per channel, a residual), then a spatial self-attention block whose
    group norm's output becomes tokens by the pixels: [B, C, H, W] viewed as [B, C, H*W], transposed to
    [B, H*W, C], and the attention's output transposed back."""
    def __init__(self, channels, n_head, groups):
        super().__init__()
        self.n_head = n_head
        self.norm1, self.norm2 = nn.GroupNorm(groups, channels), nn.GroupNorm(groups, channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.time = nn.Linear(channels, channels)
        self.attn_norm = nn.GroupNorm(groups, channels, eps=1e-6)
        self.qkv, self.proj = nn.Linear(channels, 3 * channels), nn.Linear(channels, channels)

    def forward(self, x, t):  # [batch, channels, side, side], [batch, channels]
        h = self.conv1(F.silu(self.norm1(x))) + self.time(F.silu(t))[:, :, None, None]
        x = x + self.conv2(F.silu(self.norm2(h)))
        B, C, H, W = x.shape
        a = self.attn_norm(x).view(B, C, H * W).transpose(1, 2)
        q, k, v = _attention_heads(self.qkv(a), B, H * W, self.n_head)
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, H * W, C)
        return x + self.proj(y).transpose(1, 2).view(B, C, H, W)

def build_unet(batch, seq, embd, heads, dtype):
    """`seq` pixels (a square of them, rounded down), `embd` channels in groups of 4 (at most 32 groups)."""
    side = max(int(math.isqrt(seq)), 1)
    inputs = (torch.randn(batch, embd, side, side, dtype=dtype), torch.randn(batch, embd, dtype=dtype))
    return UNetBlock(embd, heads, max(min(32, embd // 4), 1)).to(dtype), inputs


BUILDERS = {"bert": build_bert, "t5": build_t5, "neox": build_neox, "mixer": build_mixer, "swin": build_swin,
            "vit": build_vit, "distill": build_distill, "gptj": build_gptj, "gemma2": build_gemma2,
            "bloom": build_bloom, "clip": build_clip, "mistral": build_mistral, "mamba": build_mamba,
            "dit": build_dit, "falcon": build_falcon, "phi3": build_phi3, "qwen3": build_qwen3,
            "olmo2": build_olmo2, "mla": build_mla, "unet": build_unet}
