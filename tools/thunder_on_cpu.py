"""Lightning Thunder's nvFuser executor on braze without a GPU: nanoGPT's block, a Llama block with
--model llama, nanoGPT's whole model with its cross entropy (--model gpt) or a mixture-of-experts MLP
(--model moe) (benchmarks/python/thunder_block.py), or a layer of benchmarks/python/thunder_models.py
(--model bert|t5|neox|mixer|swin|vit|distill|...: its BUILDERS), trained one step with thunder.jit on CPU tensors, its
nvFusion regions executed by braze's simulated device. Prints how each fusion Thunder wrote plans (kernels and schedulers), and the
output's and gradients' errors against eager PyTorch in float32 from the same weights; with --save DIR,
writes each definition (its repr) and its first inputs (torch.save) there, to be replayed and explained.

Thunder runs its nvFuser executor only on CUDA tensors; here it is told that CPU tensors are CUDA ones
(its module's DeviceType.CUDA is CPU), and braze is told that Thunder's is_cpu tensors of rank > 0 are
device tensors. Thunder 0.2.6 was written against torch 2.11: under a newer torch, the few torch names
it registers that are gone (named-tensor methods) get stand-ins and the autograd.Function.apply
lookaside is registered on a stand-in, which nanoGPT's block does not reach.

    pip install lightning-thunder==0.2.6   (or the wheels shared/GPU.md lists)
    PYTHONPATH=build/python python3 tools/thunder_on_cpu.py [--batch 8 --seq 256 --embd 768 --heads 12]
        [--model llama [--groups 3 --intermediate 2048] | --model gpt [--vocab 512] | --model moe [--experts 8 --top 2]
         | --model bert | t5 | neox | mixer | swin | vit | distill]
"""

from __future__ import annotations

import argparse
import copy
import inspect
import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "python"))
from thunder_models import BUILDERS  # noqa: E402 - the benchmarks' folder is not a package


THUNDER_DOES_NOT_IMPORT = 3  # the exit status then, which tests read as a reason to skip


def import_thunder_on_cpu():
    """Thunder with braze as its nvFuser, its executor taking CPU tensors; returns (thunder, nvfuserex)."""
    for name in ("align_as", "align_to", "refine_names", "rename", "has_names"):
        if not hasattr(torch.Tensor, name):
            def stand_in(self, *args, **kwargs):
                return self
            stand_in.__name__ = stand_in.__qualname__ = name  # Thunder checks the name it registers
            setattr(torch.Tensor, name, stand_in)
    function = torch.autograd.function.Function
    apply = inspect.getattr_static(function, "apply")
    if not hasattr(function.apply, "__func__"):
        function.apply = classmethod(lambda cls, *args, **kwargs: apply.__get__(None, cls)(*args, **kwargs))
    import braze

    braze.install_as_nvfuser()
    cuda_available = torch.cuda.is_available
    torch.cuda.is_available = lambda: True  # Thunder reads nvFuser's version only where CUDA is
    try:
        import thunder
        from thunder.core.devices import DeviceType
        from thunder.executors import nvfuserex_impl
        from thunder.executors.nvfuserex import nvfuserex
    finally:
        torch.cuda.is_available = cuda_available
        function.apply = apply
    from looseversion import LooseVersion

    import nvfuser

    nvfuserex_impl.nvfuser_version = lambda: LooseVersion(nvfuser.version())
    nvfuserex_impl.DeviceType = types.SimpleNamespace(CUDA=DeviceType.CPU, CPU=DeviceType.CPU)
    define_tensor = braze.FusionDefinition.define_tensor

    def define_device_tensor(self, *args, **kwargs):
        shape = kwargs.get("shape", args[0] if args else None)
        if kwargs.get("is_cpu") and shape:
            kwargs["is_cpu"] = False  # Thunder's CPU tensors stand for CUDA ones here
        return define_tensor(self, *args, **kwargs)

    braze.FusionDefinition.define_tensor = define_device_tensor
    assert nvfuserex is not None, "Thunder found no nvFuser executor"
    return thunder, nvfuserex


def kept_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` with its expanded dims (stride 0) still expanded, as a definition may require them."""
    t = t.detach()
    if not any(stride == 0 and size > 1 for stride, size in zip(t.stride(), t.shape)):
        return t.clone()
    one = tuple(slice(0, 1) if stride == 0 else slice(None) for stride in t.stride())
    return t[one].clone().expand(t.shape)


def record_executes(braze):
    """Each distinct definition braze executes, with a copy of its first inputs."""
    executed = []
    execute = braze.FusionDefinition.execute

    def recording(self, *args, **kwargs):
        if not any(fd is self for fd, _ in executed):
            inputs = args[0] if args else kwargs["inputs"]
            executed.append((self, [kept_copy(t) if isinstance(t, torch.Tensor) else t for t in inputs]))
        return execute(self, *args, **kwargs)

    braze.FusionDefinition.execute = recording
    return executed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--embd", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--model", choices=["nanogpt", "llama", "gpt", "moe", *BUILDERS], default="nanogpt",
                        help="nanoGPT's block, a Llama block (RMSNorm, grouped-query attention with RoPE, SwiGLU), "
                             "nanoGPT's whole model with its embeddings and cross entropy (--vocab), a "
                             "mixture-of-experts MLP (--experts, --top), or one of thunder_models.py's layers")
    parser.add_argument("--vocab", type=int, default=512, help="gpt: the vocabulary")
    parser.add_argument("--experts", type=int, default=8, help="moe: the experts")
    parser.add_argument("--top", type=int, default=2, help="moe: the experts each token goes to")
    parser.add_argument("--groups", type=int, default=0, help="llama: KV heads (default: a quarter of the heads)")
    parser.add_argument("--intermediate", type=int, default=0, help="llama: the MLP's width (default: 2.75 x embd)")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--save", default="", help="a folder for each definition and its inputs")
    args = parser.parse_args()

    try:
        thunder, nvfuserex = import_thunder_on_cpu()
    except Exception as error:  # noqa: BLE001 - any failure to import is reported as it is
        print(f"thunder_on_cpu: Lightning Thunder does not import: {type(error).__name__}: {error}", file=sys.stderr)
        return THUNDER_DOES_NOT_IMPORT
    import braze

    executed = record_executes(braze)
    from thunder_block import GPT, Block, LlamaBlock, MoEBlock

    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(0)
    if args.model in BUILDERS:
        model, inputs = BUILDERS[args.model](args.batch, args.seq, args.embd, args.heads, dtype)
    elif args.model == "gpt":
        # Token ids in, the loss out: the output compared is the loss, and x.grad the embedding's.
        model = GPT(args.vocab, args.seq, args.embd, args.heads).to(dtype)
        targets = torch.randint(0, args.vocab, (args.batch, args.seq))
        targets[0, 0] = -1  # one ignored target
        inputs = (torch.randint(0, args.vocab, (args.batch, args.seq)), targets)
    else:
        if args.model == "llama":
            model = LlamaBlock(args.embd, args.heads, args.groups or max(args.heads // 4, 1),
                               args.intermediate or args.embd * 11 // 4).to(dtype)
        elif args.model == "moe":
            model = MoEBlock(args.embd, args.experts, args.top, args.intermediate or args.embd * 3 // 2).to(dtype)
        else:
            model = Block(args.embd, args.heads).to(dtype)
        inputs = (torch.randn(args.batch, args.seq, args.embd, dtype=dtype),)
    eager = copy.deepcopy(model).float()
    if inputs[0].is_floating_point():
        inputs[0].requires_grad_(True)
    eager_inputs = [t.detach().float().requires_grad_(t.requires_grad) if t.is_floating_point() else t
                    for t in inputs]
    y, y_eager = thunder.jit(model, executors=[nvfuserex])(*inputs), eager(*eager_inputs)
    for out in (y, y_eager):  # a loss as it is, else the output's mean square
        (out.float() if out.dim() == 0 else out.float().square().mean()).backward()
    if args.model == "gpt":
        x, x_eager = model.wte.weight, eager.wte.weight
    else:
        x, x_eager = inputs[0], eager_inputs[0]

    def relative(got, want):
        got, want = got.detach().float(), want.detach().float()
        return float((got - want).norm() / want.norm().clamp_min(1e-30))

    print(f"{args.model} {args.batch}x{args.seq}x{args.embd} {args.dtype} on the simulated device, "
          f"against eager float32:")
    print(f"  output rel err {relative(y, y_eager):.2e}, x.grad rel err {relative(x.grad, x_eager.grad):.2e}")
    for (name, p), (_, q) in zip(model.named_parameters(), eager.named_parameters()):
        if p.grad is None and q.grad is None:
            continue
        print(f"  {name}.grad rel err {relative(p.grad, q.grad):.2e}")
    print(f"{len(executed)} fusion definitions executed:")
    for i, (fd, inputs) in enumerate(executed):
        plan = fd.explain(inputs)
        kernels = [s.scheduler for s in plan.segments if s.kind == "kernel"]
        print(f"  fusion {i}: {len(kernels)} kernel segment(s) {', '.join(map(str, kernels))}")
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            with open(os.path.join(args.save, f"fusion_{i}.py"), "w") as f:
                f.write(repr(fd))
            torch.save(inputs, os.path.join(args.save, f"inputs_{i}.pt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
