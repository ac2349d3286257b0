"""Host time of the GPU binding's cached run, without a GPU: a FusionCache made with no_device="h100"
plans for an H100 and launches nothing, so what is timed is everything a cached fd.execute does in
the binding except the launch: reading the inputs (DLPack for numpy arrays; the attributes for a
stand-in of torch.Tensor), the signature, the plan lookup, binding the arguments and allocating the
output (through a Python allocator, as torch outputs are). A no-op Python call is the floor.

    PYTHONPATH=build/python python3 benchmarks/python/binding_overhead.py [--calls N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types

import numpy as np

from braze import DataType, FusionDefinition, _C


class StandInTensor:
    """What braze reads of a CUDA torch.Tensor, over a numpy array."""

    def __init__(self, array, dtype):
        self.array, self.dtype, self.is_cuda, self.shape = array, dtype, True, array.shape
        self._strides = tuple(s // array.itemsize for s in array.strides)
        self._ptr = array.ctypes.data

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return 0


def per_call_us(fn, calls, repeats=7):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(x, fd.ops.broadcast(w, [True, False])))
    cache = _C.FusionCache(fd._fusion, "auto", no_device="h100")
    out = np.empty((64, 256), np.float32)
    out_ptr = out.ctypes.data

    def allocate(sizes, strides, dtype, device):
        return out, out_ptr

    xs, ws = np.zeros((64, 256), np.float32), np.zeros(256, np.float32)
    torch = types.ModuleType("torch")
    torch.Tensor, torch.float32 = StandInTensor, object()
    sys.modules["torch"] = torch
    xt, wt = StandInTensor(xs, torch.float32), StandInTensor(ws, torch.float32)

    def nothing():
        return None

    # fd.execute on the stand-ins, its GPU cache replaced by the no-device one: the whole Python call.
    fd.__dict__["_gpu_caches"] = {"auto": cache}
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0)

    class Output:
        def data_ptr(self):
            return out_ptr

    torch.empty_strided = lambda sizes, strides, dtype, device: Output()
    StandInTensor.requires_grad = False

    rows = [
        ("a no-op Python call (the floor)", lambda: nothing()),
        ("cache.run, numpy inputs through DLPack, pool output", lambda: cache.run([xs, ws], 0, "dlpack")),
        ("cache.run, numpy inputs through DLPack, allocator output", lambda: cache.run([xs, ws], 0, "dlpack", allocate)),
        ("cache.run, torch.Tensor stand-ins by attribute, allocator output",
         lambda: cache.run([xt, wt], 0, "torch", allocate)),
        ("fd.execute, torch.Tensor stand-ins (stream, allocator: torch.empty_strided stand-in)",
         lambda: fd.execute([xt, wt])),
    ]
    print(f"{'what (median of 7 x ' + str(args.calls) + ' calls)':86s} {'us/call':>8s}")
    for name, fn in rows:
        fn()  # the miss: planned once
        print(f"{name:86s} {per_call_us(fn, args.calls):8.2f}")


if __name__ == "__main__":
    main()
