"""Lightning Thunder on braze: thunder.jit with Thunder's own nvFuser executor, `import nvfuser` giving
braze (install_as_nvfuser), and no change to Thunder. Each model below runs against eager PyTorch
(values, and gradients where it trains), and each asserts that the trace holds nvFusion regions and that
braze executed them. Thunder's nvFuser executor runs only on CUDA tensors: without a GPU these skip, and
so they do where Thunder does not import (Thunder 0.2.6 needs a torch with Tensor.align_as: 2.11 has it,
2.15 does not)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU: Thunder's nvFuser executor runs only on CUDA tensors", allow_module_level=True)

import braze  # noqa: E402

braze.install_as_nvfuser()  # before Thunder looks for nvFuser, which it does once, at import
try:
    import thunder  # noqa: E402
    from thunder.executors.nvfuserex import nvfuserex  # noqa: E402
except Exception as error:  # noqa: BLE001 - any failure to import is a reason to skip, said as it is
    pytest.skip(f"Lightning Thunder does not import with torch {torch.__version__}: {type(error).__name__}: {error}",
                allow_module_level=True)

import os  # noqa: E402
import sys  # noqa: E402

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# nanoGPT's block, as the Thunder block benchmark times it.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "python"))
from thunder_block import Block  # noqa: E402

CUDA = torch.device("cuda")


def test_thunder_finds_braze_as_nvfuser():
    import nvfuser

    assert nvfuser.braze is braze
    assert nvfuserex is not None, "Thunder found no nvFuser executor: nvfuser.version() is below what it requires"


@pytest.fixture
def braze_executes(monkeypatch):
    """The definitions braze executed during the test (Thunder calls fd.execute on each nvFusion region)."""
    executed = []
    original = braze.FusionDefinition.execute

    def counting(self, *args, **kwargs):
        executed.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(braze.FusionDefinition, "execute", counting)
    yield executed
    import nvfuser

    nvfuser.FusionCache.reset()  # as Thunder's own test harness does after every test


def jit(fn):
    return thunder.jit(fn, executors=[nvfuserex])


def fusions_in(trace) -> list[str]:
    return [b.sym.name for b in trace.bound_symbols if b.sym.name.startswith("nvFusion")]


def expect_fused(jitted, executed, backward=False):
    forward = fusions_in(thunder.last_traces(jitted)[-1])
    assert forward, f"no nvFusion region in the forward trace:\n{thunder.last_traces(jitted)[-1]}"
    if backward:
        assert fusions_in(thunder.last_backward_traces(jitted)[-1]), "no nvFusion region in the backward trace"
    assert executed, "braze executed nothing"


def close(got, want, dtype):
    tol = {torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 1e-2}[dtype]
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)


# ---- nanoGPT's layer norm ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nanogpt_layer_norm(braze_executes, dtype):
    x = torch.randn(8, 256, 768, device=CUDA, dtype=dtype)
    w = torch.randn(768, device=CUDA, dtype=dtype)
    b = torch.randn(768, device=CUDA, dtype=dtype)

    def layer_norm(x, w, b):
        return F.layer_norm(x, (768,), w, b, 1e-5)

    jitted = jit(layer_norm)
    close(jitted(x, w, b), layer_norm(x, w, b), dtype)
    expect_fused(jitted, braze_executes)


# ---- litGPT's qkv split + RoPE ---------------------------------------------------------------------
def apply_rope(x, cos, sin):
    half = x.size(-1) // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * cos + rotated * sin).to(dtype=x.dtype)


def qkv_split_rope(qkv, cos, sin, n_head, n_query_groups, head_size, rope_n_elem):
    B, T, _ = qkv.shape
    q_per_kv = n_head // n_query_groups
    qkv = qkv.view(B, T, n_query_groups, q_per_kv + 2, head_size).permute(0, 2, 3, 1, 4)
    q, k, v = qkv.split((q_per_kv, 1, 1), dim=2)
    q = q.reshape(B, -1, T, head_size)
    k = k.reshape(B, -1, T, head_size)
    v = v.reshape(B, -1, T, head_size)
    q = torch.cat((apply_rope(q[..., :rope_n_elem], cos, sin), q[..., rope_n_elem:]), dim=-1)
    k = torch.cat((apply_rope(k[..., :rope_n_elem], cos, sin), k[..., rope_n_elem:]), dim=-1)
    return q, k, v


@pytest.mark.parametrize("name, n_head, n_query_groups, head_size", [("Llama-2-7b", 32, 32, 128),
                                                                     ("GQA (Llama-3-8B)", 32, 8, 128)])
def test_litgpt_qkv_split_rope(braze_executes, name, n_head, n_query_groups, head_size):
    B, T = 2, 512
    qkv = torch.randn(B, T, (n_head + 2 * n_query_groups) * head_size, device=CUDA, dtype=torch.bfloat16)
    cos = torch.randn(T, head_size, device=CUDA, dtype=torch.bfloat16)
    sin = torch.randn(T, head_size, device=CUDA, dtype=torch.bfloat16)

    def fn(qkv, cos, sin):
        return qkv_split_rope(qkv, cos, sin, n_head, n_query_groups, head_size, head_size)

    jitted = jit(fn)
    for got, want in zip(jitted(qkv, cos, sin), fn(qkv, cos, sin)):
        close(got, want, torch.bfloat16)
    expect_fused(jitted, braze_executes)


# ---- a GELU MLP, forward and backward ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gelu_mlp_forward_and_backward(braze_executes, dtype):
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(256, 1024), nn.GELU(approximate="tanh"), nn.Linear(1024, 256)).to(CUDA, dtype)
    x = torch.randn(4, 128, 256, device=CUDA, dtype=dtype, requires_grad=True)
    jitted = jit(mlp)
    y = jitted(x)
    y.sum().backward()
    got = [x.grad.clone()] + [p.grad.clone() for p in mlp.parameters()]
    x.grad = None
    mlp.zero_grad()
    want_y = mlp(x)
    want_y.sum().backward()
    want = [x.grad] + [p.grad for p in mlp.parameters()]
    close(y, want_y, dtype)
    for g, w in zip(got, want):
        close(g, w, dtype)
    expect_fused(jitted, braze_executes, backward=True)


# ---- an SGD step: in-place add_ on its inputs ------------------------------------------------------
def test_sgd_step_updates_parameters_in_place(braze_executes):
    params = [torch.randn(1024, 768, device=CUDA), torch.randn(768, device=CUDA)]
    grads = [torch.randn_like(p) for p in params]

    def sgd(params, grads, lr: float):
        for p, g in zip(params, grads):
            p.add_(g, alpha=-lr)

    want = [p.clone() for p in params]
    sgd(want, grads, 0.01)
    addresses = [p.data_ptr() for p in params]
    jit(sgd)(params, grads, 0.01)
    for p, w, address in zip(params, want, addresses):
        assert p.data_ptr() == address  # updated where it was
        torch.testing.assert_close(p, w)
    assert braze_executes, "braze executed nothing"


# ---- dropout: uniform random numbers from torch's CUDA generator -----------------------------------
def test_dropout_draws_from_torchs_generator(braze_executes):
    x = torch.ones(1024, 1024, device=CUDA)

    def drop(x):
        return F.dropout(x, p=0.5, training=True)

    jitted = jit(drop)
    torch.manual_seed(1)
    first = jitted(x)
    second = jitted(x)
    torch.manual_seed(1)
    again = jitted(x)
    assert set(torch.unique(first).tolist()) <= {0.0, 2.0}  # kept elements scaled by 1 / (1 - p)
    assert abs(float((first == 0).float().mean()) - 0.5) < 0.01
    assert not torch.equal(first, second)  # a new Philox offset per call
    assert torch.equal(first, again)  # torch.manual_seed repeats them
    expect_fused(jitted, braze_executes)


# ---- a nanoGPT transformer block, forward and backward ---------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transformer_block_forward_and_backward(braze_executes, dtype):
    torch.manual_seed(0)
    block = Block(n_embd=256, n_head=4).to(CUDA, dtype)
    x = torch.randn(4, 128, 256, device=CUDA, dtype=dtype, requires_grad=True)
    jitted = jit(block)
    y = jitted(x)
    (y.float() ** 2).mean().backward()
    got = [x.grad.clone()] + [p.grad.clone() for p in block.parameters()]
    x.grad = None
    block.zero_grad()
    want_y = block(x)
    (want_y.float() ** 2).mean().backward()
    want = [x.grad] + [p.grad for p in block.parameters()]
    close(y, want_y, dtype)
    for (name, _), g, w in zip([("x", None)] + list(block.named_parameters()), got, want):
        scale = max(float(w.abs().max()), 1e-6)  # gradients of different sizes: compare relative to each
        tol = 1e-3 if dtype == torch.float32 else 5e-2
        assert float((g.float() - w.float()).abs().max()) <= tol * scale + (1e-5 if dtype == torch.float32 else 1e-3), name
    expect_fused(jitted, braze_executes, backward=True)


# ---- thunder_models.py's layers of other models, forward and backward -------------------------------
@pytest.mark.parametrize("name", ["bert", "t5", "neox", "mixer", "swin", "vit", "distill", "gptj", "gemma2", "bloom",
                                  "clip", "mistral", "mamba", "dit", "falcon", "phi3", "qwen3",
                                  "olmo2", "mla"])
def test_other_model_layers_train_as_eager(braze_executes, name):
    """Post-norm BERT with a padding mask, T5, GPT-NeoX's partial rotary, MLP-Mixer, Swin's shifted windows, a ViT,
    a distillation loss, GPT-J's interleaved rotary, Gemma-2, BLOOM's ALiBi, CLIP's contrastive loss, Mistral
    with Qwen2's biases, a Mamba-2-like mixer, DiT's adaLN-Zero block, Falcon, Phi-3, Qwen3's and
    OLMo-2's QK-norms and DeepSeek-V2's latent attention (benchmarks/python/thunder_models.py), in float32 on the GPU: the output and every
    gradient as eager's from the same weights (tools/thunder_on_cpu.py runs them on the simulated device)."""
    from thunder_models import BUILDERS

    torch.manual_seed(0)
    model, inputs = BUILDERS[name](2, 64, 128, 4, torch.float32)
    model = model.to(CUDA)
    inputs = [t.to(CUDA) for t in inputs]
    inputs[0].requires_grad_(True)
    jitted = jit(model)

    def step(fn):
        out = fn(*inputs)
        (out if out.dim() == 0 else out.square().mean()).backward()
        grads = [inputs[0].grad.clone()] + [p.grad.clone() for p in model.parameters()]
        inputs[0].grad = None
        model.zero_grad()
        return out.detach(), grads

    got_y, got = step(jitted)
    want_y, want = step(model)
    close(got_y, want_y, torch.float32)
    for (param, _), g, w in zip([("x", None)] + list(model.named_parameters()), got, want):
        scale = max(float(w.abs().max()), 1e-6)
        assert float((g - w).abs().max()) <= 1e-3 * scale + 1e-5, param
    expect_fused(jitted, braze_executes, backward=True)
