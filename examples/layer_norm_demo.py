"""nanoGPT's layer_norm as nvFuser captured it (NVIDIA/Fuser PR #2815), run by braze.

The fusion definition below is the seed script verbatim; only the import differs. Where torch sees a
GPU, the inputs are CUDA bf16 tensors and the kernel runs there; elsewhere they are numpy / ml_dtypes
bf16 arrays and the kernel runs on the CPU simulator. Either way the result is compared with a float64
numpy layer norm (eps 1e-5, biased variance). Exits non-zero if it does not match.
"""

import sys

import ml_dtypes
import numpy as np

from braze import FusionDefinition, DataType

def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[2, 1, 0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0])
    T2 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0])
    T3 = fd.ops.cast(T0, dtype=DataType.Float)
    T4, T5 = fd.ops.var_mean(T3, dims=[2], correction=0, keepdim=False)
    S6 = fd.define_scalar(16, dtype=DataType.Int)
    S7 = fd.define_scalar(128, dtype=DataType.Int)
    S8 = fd.define_scalar(1, dtype=DataType.Int)
    V9 = fd.define_vector([S6, S7, S8], dtype=DataType.Int)
    T10 = fd.ops.broadcast_in_dim(T4, shape=V9, broadcast_dims=[0, 1])
    S11 = fd.define_scalar(16, dtype=DataType.Int)
    S12 = fd.define_scalar(128, dtype=DataType.Int)
    S13 = fd.define_scalar(1, dtype=DataType.Int)
    V14 = fd.define_vector([S11, S12, S13], dtype=DataType.Int)
    T15 = fd.ops.broadcast_in_dim(T5, shape=V14, broadcast_dims=[0, 1])
    S16 = fd.define_scalar(1.00000e-05, dtype=DataType.Double)
    T17 = fd.ops.add(T10, S16)
    T18 = fd.ops.rsqrt(T17)
    S19 = fd.define_scalar(16, dtype=DataType.Int)
    S20 = fd.define_scalar(128, dtype=DataType.Int)
    S21 = fd.define_scalar(1600, dtype=DataType.Int)
    V22 = fd.define_vector([S19, S20, S21], dtype=DataType.Int)
    T23 = fd.ops.broadcast_in_dim(T15, shape=V22, broadcast_dims=[0, 1, 2])
    T24 = fd.ops.sub(T3, T23)
    S25 = fd.define_scalar(16, dtype=DataType.Int)
    S26 = fd.define_scalar(128, dtype=DataType.Int)
    S27 = fd.define_scalar(1600, dtype=DataType.Int)
    V28 = fd.define_vector([S25, S26, S27], dtype=DataType.Int)
    T29 = fd.ops.broadcast_in_dim(T18, shape=V28, broadcast_dims=[0, 1, 2])
    T30 = fd.ops.mul(T24, T29)
    S31 = fd.define_scalar(16, dtype=DataType.Int)
    S32 = fd.define_scalar(128, dtype=DataType.Int)
    S33 = fd.define_scalar(1600, dtype=DataType.Int)
    V34 = fd.define_vector([S31, S32, S33], dtype=DataType.Int)
    T35 = fd.ops.broadcast_in_dim(T1, shape=V34, broadcast_dims=[2])
    T36 = fd.ops.cast(T35, dtype=DataType.Float)
    T37 = fd.ops.mul(T30, T36)
    S38 = fd.define_scalar(16, dtype=DataType.Int)
    S39 = fd.define_scalar(128, dtype=DataType.Int)
    S40 = fd.define_scalar(1600, dtype=DataType.Int)
    V41 = fd.define_vector([S38, S39, S40], dtype=DataType.Int)
    T42 = fd.ops.broadcast_in_dim(T2, shape=V41, broadcast_dims=[2])
    T43 = fd.ops.cast(T42, dtype=DataType.Float)
    T44 = fd.ops.add(T37, T43)
    T45 = fd.ops.cast(T44, dtype=DataType.BFloat16)
    fd.add_output(T45)

with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)

# The seed's torch.randn(..., dtype=torch.bfloat16).as_strided(...) inputs, as numpy bf16 arrays.
rng = np.random.default_rng(0)
inputs = [
    rng.standard_normal((16, 128, 1600)).astype(ml_dtypes.bfloat16),
    rng.standard_normal((1600,)).astype(ml_dtypes.bfloat16),
    rng.standard_normal((1600,)).astype(ml_dtypes.bfloat16),
]
plan = fd.explain(inputs)


def gpu_available():
    """torch with a CUDA device, and a CUDA driver braze can load: then the demo runs on the GPU."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if gpu_available():
    import torch

    # The same values, as the seed's CUDA bf16 tensors: fd.execute runs the kernel on the GPU.
    cuda_inputs = [torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16).cuda() for a in inputs]
    (cuda_out,) = fd.execute(cuda_inputs)
    out = cuda_out.float().cpu().numpy().astype(ml_dtypes.bfloat16)
    backend = f"GPU ({torch.cuda.get_device_name()}), FusionCache + NVRTC"
else:
    (out,) = fd.execute(inputs)
    backend = "CPU simulator (no GPU here): the generated kernel's IR, run thread by thread"


def layer_norm_float64(x, weight, bias, eps=1e-5):
    x, weight, bias = (a.astype(np.float64) for a in (x, weight, bias))
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)  # biased (correction 0), as the fusion computes it
    return (x - mean) / np.sqrt(var + eps) * weight + bias


expected = layer_norm_float64(*inputs)
got = out.astype(np.float64)
error = np.abs(got - expected)
# The output is rounded to bf16 (8 significant bits): allow one bf16 ulp relative (2^-7) plus the
# same absolute slack near zero, where float32 rounding inside the fusion dominates.
tolerance = 2.0**-7 + 2.0**-7 * np.abs(expected)
passed = out.dtype == ml_dtypes.bfloat16 and out.shape == expected.shape and bool(np.all(error <= tolerance))

print("braze layer_norm demo (nanoGPT layer_norm, seed NVIDIA/Fuser PR #2815)")
print(f"  backend:        {backend}")
kernels = ", ".join(s.scheduler for s in plan.segments if s.kind == "kernel")
print(f"  plan:           {plan.kernel_count} kernel ({kernels}), {plan.alias_count} alias segment(s)")
print(f"  input:          {inputs[0].shape} bfloat16, weight/bias {inputs[1].shape} bfloat16")
print(f"  output:         {out.shape} {out.dtype}")
print(f"  max abs error:  {error.max():.3e} (vs float64 numpy layer norm, eps 1e-5, biased variance)")
print(f"  worst margin:   {np.max(error - tolerance):.3e} (error minus tolerance atol=rtol=2^-7; must be <= 0)")
print(f"  result:         {'PASS' if passed else 'FAIL'}")
sys.exit(0 if passed else 1)
