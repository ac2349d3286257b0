"""Per-kernel GPU times of compare.py's cases, braze's and torch eager's side by side: torch.profiler sees
braze's cuLaunchKernel launches through CUPTI. For a fusion of several kernels (seed 000's two GEMMs), the
time of each; for torch, which of its kernels the time goes to.

    python benchmarks/python/kernel_times.py "seed 000" "w8 linear M=1"   # case names (substrings)

NOPROF=1 runs the cases twice without the profiler (for Nsight Compute: ncu -k regex:braze_s python ...).
"""

import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (the cases)

from braze import FusionDefinition  # noqa: E402


def main():
    names = sys.argv[1:]
    gen = torch.Generator(device="cuda").manual_seed(0)
    for case in compare.cases():
        name, define, ref, make_inputs = case[0], case[1], case[2], case[3]
        if names and not any(n in name for n in names):
            continue
        with FusionDefinition() as fd:
            define(fd)
        xs = make_inputs(gen)
        fd.execute(xs)
        fd.execute(xs)
        torch.cuda.synchronize()
        if os.environ.get("NOPROF"):
            continue
        calls = 5
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fd.execute(xs)
                ref(*xs)
            torch.cuda.synchronize()
        print(f"== {name}: each kernel's total over {calls} calls of braze and of torch eager")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))


if __name__ == "__main__":
    main()
