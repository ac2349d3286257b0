"""Lightning Thunder's nvFuser executor on braze without a GPU: tools/thunder_on_cpu.py trains nanoGPT's block
one step with thunder.jit on CPU tensors (the fusions Thunder writes run on the simulated device), in a
process of its own since it patches Thunder and braze's define_tensor. Its output and every gradient
against eager float32, and how Thunder's fusions plan: the two layer-norm backwards as one inner-outer
persistent kernel each, no fusion beyond two kernel segments; a Llama block's, every fusion one kernel
at most; nanoGPT's whole model with its cross entropy, and a mixture-of-experts MLP whose router is one
kernel; and thunder_models.py's layers of other models. Skips where Thunder does not import."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def run_block(dtype, batch, *more):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "thunder_on_cpu.py"), "--batch", str(batch),
                           "--seq", "16", "--embd", "64", "--heads", "4", "--dtype", dtype, *more],
                          capture_output=True, text=True, env=env, timeout=600)
    if done.returncode == 3:  # the tool's THUNDER_DOES_NOT_IMPORT
        pytest.skip(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# At batch 1 Thunder's layer-norm backward also reduces the batch dim of 1 with each row ([0, 2]).
@pytest.mark.parametrize("dtype, batch, tolerance", [("fp32", 2, 1e-5), ("bf16", 2, 2e-2), ("bf16", 1, 2e-2)])
def test_thunder_trains_nanogpt_block_on_braze_as_eager(dtype, batch, tolerance):
    out = run_block(dtype, batch)
    errors = {name: float(value) for name, value in re.findall(r"(\S+) rel err ([0-9.e+-]+)", out)}
    assert "output" in errors and "x.grad" in errors and "ln_1.weight.grad" in errors, out
    assert len(errors) >= 14, out  # the output, x.grad and the block's 12 parameter grads
    assert all(err <= tolerance for err in errors.values()), out
    plans = re.findall(r"fusion \d+: (\d+) kernel segment\(s\) ?(.*)", out)
    assert plans, out
    assert max(int(n) for n, _ in plans) <= 2, out
    assert sum(schedulers.split(", ") == ["inner_outer_persistent"] for _, schedulers in plans) == 2, out


@pytest.mark.parametrize("heads, groups", [(4, 1), (4, 2), (8, 1)])
def test_thunder_trains_a_llama_block_with_every_fusion_one_kernel(heads, groups):
    """RMSNorm, grouped-query attention with RoPE (4 query heads on 1 or 2 KV heads, or 8 on 1 as Llama-3-70B
    has them) and a SwiGLU MLP: the gradients as eager's, and every fusion Thunder writes one kernel at most,
    GQA's backward included (the keys' and values' gradients summed over their query heads where the QKV
    gradient is written, each element computing the part of the QKV gradient it falls in)."""
    out = run_block("bf16", 2, "--model", "llama", "--heads", str(heads), "--groups", str(groups),
                    "--intermediate", "176")
    errors = {name: float(value) for name, value in re.findall(r"(\S+) rel err ([0-9.e+-]+)", out)}
    assert len(errors) >= 9 and "attn.qkv.weight.grad" in errors, out  # the output, x.grad, 7 parameter grads
    assert all(err <= 2e-2 for err in errors.values()), out
    plans = re.findall(r"fusion \d+: (\d+) kernel segment\(s\)", out)
    assert plans and max(int(n) for n in plans) <= 1, out


def test_thunder_trains_nanogpts_whole_model_with_its_cross_entropy():
    """Token and position embeddings, a block, the final layer norm, the tied lm_head and the cross entropy
    (one target ignored): the loss and every gradient as eager's, every fusion one kernel (the cross entropy's
    mean over the rows finished by its rows' kernel, the positions the first fusion returns beside its
    embeddings and norm), and the three layer-norm backwards one inner-outer segment each, the first one's
    with the position embedding's grad (grad_in summed over the batch). At batch 1 that sum is a squeeze of
    grad_in."""
    for batch in (2, 1):
        out = run_block("bf16", batch, "--model", "gpt", "--vocab", "128")
        errors = {name: float(value) for name, value in re.findall(r"(\S+) rel err ([0-9.e+-]+)", out)}
        assert "wpe.weight.grad" in errors and "ln_f.bias.grad" in errors and len(errors) >= 18, out
        assert all(err <= 2e-2 for err in errors.values()), out
        plans = re.findall(r"fusion \d+: (\d+) kernel segment\(s\) ?(.*)", out)
        assert plans and max(int(n) for n, _ in plans) <= 1, out
        assert sum(schedulers.split(", ") == ["inner_outer_persistent"] for _, schedulers in plans) == 3, out


def test_thunder_trains_a_mixture_of_experts_mlp_with_its_router_in_one_kernel():
    """Mixtral's routing (softmax, the two best of eight experts, their weights renormalized) as Thunder
    writes it for training, with the probabilities, kept values and zeros it returns for the backward: one
    scan kernel, and every other fusion one kernel at most; the gradients as eager's."""
    out = run_block("bf16", 2, "--model", "moe", "--experts", "8", "--top", "2")
    errors = {name: float(value) for name, value in re.findall(r"(\S+) rel err ([0-9.e+-]+)", out)}
    assert "gate.weight.grad" in errors and len(errors) >= 5, out
    assert all(err <= 2e-2 for err in errors.values()), out
    plans = re.findall(r"fusion \d+: (\d+) kernel segment\(s\) ?(.*)", out)
    assert ("1", "scan") in plans, out
    # The router backward's zeros run beside its rows: every fusion one kernel at most.
    assert max(int(n) for n, _ in plans) <= 1, out


# The most kernel segments any fusion Thunder writes for the layer plans as. MLP-Mixer's token-mixing norm
# backward writes grad_in transposed (an inner-outer kernel, then a transpose kernel); a ViT's first norm
# backward slices the class token's row off its grad_in in the inner-outer kernel (row_slices.h). Mamba's backward sums the segment sums' gradient ([b, h, t, t]) over its
# rows and over its columns (an inner and an outer reduction of one tensor, no norm: two kernels), and sums
# dt's and the heads' gradients over the batch and tokens beside outputs of other rows. DiT's second norm
# backward sums the shift's and scale's gradients per image and concatenates them into the modulation
# linear's gradient: the inner-outer finish writes the cat (one segment).
MOST_SEGMENTS = {"bert": 1, "t5": 1, "neox": 1, "mixer": 2, "swin": 1, "vit": 1, "distill": 1, "gptj": 1,
                 "gemma2": 1, "bloom": 1, "clip": 1, "mistral": 1, "mamba": 2, "dit": 1,
                 "falcon": 1, "phi3": 1, "qwen3": 1, "olmo2": 1, "mla": 2, "unet": 3}


@pytest.mark.parametrize("model", sorted(MOST_SEGMENTS))
@pytest.mark.parametrize("dtype, tolerance", [("fp32", 1e-5), ("bf16", 3e-2)])
def test_thunder_trains_more_model_shapes_as_eager(model, dtype, tolerance):
    """benchmarks/python/thunder_models.py's layers (post-norm BERT with a padding mask, T5, GPT-NeoX's
    partial rotary and parallel residual, MLP-Mixer, Swin's shifted windows, a ViT, a distillation loss of
    three terms, GPT-J's interleaved rotary, Gemma-2's soft-capped scores and four norms, BLOOM's ALiBi, CLIP's
    contrastive loss, Mistral's sliding window with Qwen2's biased GQA, a Mamba-2-like mixer, DiT's adaLN-Zero,
    Falcon's multi-query attention beside its MLP, Phi-3's fused projections, Qwen3's and OLMo-2's QK-norms, DeepSeek-V2's latent attention,
    Stable Diffusion's UNet block with its group norms),
    trained one step: the output and every gradient as eager float32's, and how many kernel segments
    each fusion takes. (In bf16 Thunder's nvFuser path rounds at other points than eager: T5's MLP weight
    gradient is 2.0e-2 from float32 there, 1.2e-2 through Thunder's torch executor; each fusion's outputs
    are those of its definition evaluated by torch.)"""
    out = run_block(dtype, 2, "--model", model)
    errors = {name: float(value) for name, value in re.findall(r"(\S+) rel err ([0-9.e+-]+)", out)}
    assert "output" in errors and "x.grad" in errors and len(errors) >= 3, out
    assert all(err <= tolerance for err in errors.values()), out
    plans = re.findall(r"fusion \d+: (\d+) kernel segment\(s\)", out)
    assert plans and max(int(n) for n in plans) <= MOST_SEGMENTS[model], out
