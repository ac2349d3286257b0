"""Host time of the GPU binding's cached run, without a GPU: a FusionCache made with no_device="h100"
plans for an H100 and launches nothing, so what is timed is everything a cached fd.execute does in
the binding except the launch: reading the inputs (DLPack for numpy arrays; the attributes for a
stand-in of torch.Tensor), the signature, the plan lookup, binding the arguments and allocating the
output (cache.run: through a Python allocator; fd.execute: torch.empty_strided, called from C++). A
no-op Python call is the floor. fd.execute is timed in every call form nvFuser scripts and Thunder use:
positional, device= as an index, a string and a torch.device, option keywords (device=, _enable_options=[],
_disable_options=[]), and Thunder's own: Thunder 0.2.6's FusionDefinitionWrapper passes its arguments' tuple
with device=None (or an index), save_repro_inputs=False, _enable_options=None and _disable_options=None.
Where torch is installed, fd.execute is timed on torch's own tensors too: CPU tensors standing in for
CUDA ones (a cache made with torch_cpu_stand_ins), read through torch's stable C ABI (torch 2.14 on) and
through their Python attributes, outputs from at::empty_strided on the CPU; an update in place among
them (whose runner bumps the input's autograd version). The last rows time a new
signature of the layer-norm backward whose kernels are compiled: a new row count of [rows, 768], a new
sequence length of [8, seq, 768], and a new batch size
of [batch, 1024, 768] (65 to 127 after 64: a power of two the cache knows).

    PYTHONPATH=build/python python3 benchmarks/python/binding_overhead.py [--calls N]

Timings on a shared machine move by up to 2x between runs. Instructions do not: --repeat ROW runs one row
(floor; plain, device_index, device_string, device_object, options or thunder: fd.execute on the stand-ins in
that call form) --calls times and nothing else, for `valgrind --tool=callgrind`; tools/instructions_per_call.sh
runs it at two call counts and prints the instructions per call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types

import ml_dtypes
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


class StandInDevice:
    """torch.device("cuda", 0): hashable, printed as "cuda:0"."""

    def __str__(self):
        return "cuda:0"

    def __hash__(self):
        return hash("cuda:0")

    def __eq__(self, other):
        return isinstance(other, StandInDevice)


def layer_norm_backward(fd, row_dims=1):
    """The layer-norm backward as Thunder hands it to nvFuser (bf16 in and out, float math): grad_out,
    x, mean, rstd and weight in; grad_in (a reduction over the hidden dim per row), grad_weight and
    grad_bias (reductions over the rows) out. `row_dims` leading dims hold the rows: [rows, hidden], or
    a model's [batch, seq, hidden], which Thunder keeps."""
    bf16, f32 = DataType.BFloat16, DataType.Float
    rank = row_dims + 1
    grad_out = fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=bf16)
    x = fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=bf16)
    mean = fd.define_tensor(shape=[-1] * row_dims + [1], contiguity=[True] * row_dims + [None], dtype=f32)
    rstd = fd.define_tensor(shape=[-1] * row_dims + [1], contiguity=[True] * row_dims + [None], dtype=f32)
    weight = fd.define_tensor(shape=[-1], contiguity=[True], dtype=bf16)
    go, xf = fd.ops.cast(grad_out, f32), fd.ops.cast(x, f32)
    x_hat = fd.ops.mul(fd.ops.sub(xf, mean), rstd)
    g = fd.ops.mul(go, fd.ops.broadcast(fd.ops.cast(weight, f32), [True] * row_dims + [False]))
    c = fd.ops.size(x, row_dims)
    a = fd.ops.div(fd.ops.sum(g, dims=[row_dims], keepdim=True), c)
    b = fd.ops.div(fd.ops.sum(fd.ops.mul(g, x_hat), dims=[row_dims], keepdim=True), c)
    grad_in = fd.ops.mul(rstd, fd.ops.sub(fd.ops.sub(g, a), fd.ops.mul(x_hat, b)))
    rows = list(range(row_dims))
    fd.add_output(fd.ops.cast(grad_in, bf16))
    fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.mul(go, x_hat), dims=rows), bf16))
    fd.add_output(fd.ops.cast(fd.ops.sum(go, dims=rows), bf16))


def new_signature_us(calls, torch, allocate, rows_at):
    """Median time of an execute whose input signature is new (its row dims `rows_at(i)` at call i, each
    call another) while its kernels are compiled (at `rows_at(0)`): planning, lowering, emitting and
    laying out the plan (no-op device). The inputs are torch.Tensor stand-ins (bf16, which DLPack from
    numpy cannot carry)."""
    with FusionDefinition() as fd:
        layer_norm_backward(fd, len(rows_at(0)))
    cache = _C.FusionCache(fd._fusion, "auto", no_device="h100")
    hidden = 768
    weight = StandInTensor(np.zeros(hidden, ml_dtypes.bfloat16), torch.bfloat16)

    def inputs(rows):
        bf16 = [StandInTensor(np.zeros((*rows, hidden), ml_dtypes.bfloat16), torch.bfloat16) for _ in range(2)]
        stats = [StandInTensor(np.zeros((*rows, 1), np.float32), torch.float32) for _ in range(2)]
        return bf16 + stats + [weight]

    cache.run(inputs(rows_at(0)), 0, "torch", allocate)  # the kernels of this fusion: compiled (here, recorded) once
    times = []
    for i in range(calls):
        args = inputs(rows_at(1 + i))
        start = time.perf_counter()
        cache.run(args, 0, "torch", allocate)
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times), len(cache)


def per_call_us(fns, calls, repeats=21, setups=None):
    """The median time per call of each function, timed in turns (one batch of `calls` of each, then the
    next round), so that the machine's slow spells fall on every row alike. `setups[i]()` runs before each
    batch of fns[i], untimed."""
    times = [[] for _ in fns]
    for _ in range(repeats):
        for i, (fn, row) in enumerate(zip(fns, times)):
            if setups is not None:
                setups[i]()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            row.append((time.perf_counter() - start) / calls * 1e6)
    return [statistics.median(row) for row in times]


def real_torch_rows(calls):
    """fd.execute on torch CPU tensors standing in for CUDA ones, in the plain and Thunder's call forms,
    with the C ABI on (where this torch has it) and off: of x * w (two inputs), of x *= w (an update in
    place), of a dropout (on the CPU its seed is one draw of torch.randint) and of the sum of five [64, 256]
    tensors; [] without torch."""
    try:
        import torch
    except ImportError:
        return []
    names, fns, setups = [], [], []
    for inputs, what in ((2, "2 torch CPU tensors"), ("update", "x *= w in place, 2 CPU tensors"),
                         ("dropout", "dropout of x (its seed drawn), 1 CPU tensor"), (5, "5 torch CPU tensors")):
        with FusionDefinition() as fd:
            if inputs == "dropout":  # as Thunder writes it: uniform without a seed, drawn by each execute
                x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
                keep = fd.ops.lt(fd.ops.uniform(0.0, 1.0, x.shape(), dtype=DataType.Float), 0.9)
                fd.add_output(fd.ops.where(keep, fd.ops.mul(x, 1 / 0.9), 0.0))
                args = [torch.zeros(64, 256)]
            elif inputs in (2, "update"):
                x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
                w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
                product = fd.ops.mul(x, fd.ops.broadcast(w, [True, False]))
                if inputs == "update":  # its runner bumps x's autograd version after each run
                    fd.add_output(product, alias_input=x)
                else:
                    fd.add_output(product)
                args = [torch.zeros(64, 256), torch.zeros(256)]
            else:
                xs = [fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
                      for _ in range(inputs)]
                total = xs[0]
                for x in xs[1:]:
                    total = fd.ops.add(total, x)
                fd.add_output(total)
                args = [torch.zeros(64, 256) for _ in range(inputs)]
        fd.__dict__["_gpu_caches"] = {"auto": _C.FusionCache(fd._fusion, "auto", no_device="h100",
                                                             torch_cpu_stand_ins=True)}
        for abi in (True, False) if _C._torch_has_c_abi() else (False,):
            how = "torch's C ABI" if abi else "Python attributes"
            def thunders(fd=fd, args=tuple(args)):
                return fd.execute(args, device=None, save_repro_inputs=False, _enable_options=None,
                                  _disable_options=None)

            for form, fn in [("", lambda fd=fd, args=args: fd.execute(args)), (", Thunder's form", thunders)]:
                names.append(f"fd.execute, {what} standing in, read by {how}{form}")
                fns.append(fn)
                setups.append(lambda abi=abi: _C._torch_c_abi(abi))
    was = _C._torch_c_abi()
    try:
        for fn, setup in zip(fns, setups):
            setup()
            fn()  # the miss: planned once
        return list(zip(names, per_call_us(fns, calls, setups=setups)))
    finally:
        _C._torch_c_abi(was)


# The rows --repeat runs: their positions in main's list.
REPEATABLE = {"floor": 0, "plain": 4, "device_index": 5, "device_string": 6, "device_object": 7, "options": 8,
              "thunder": 9}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000, help="calls per batch (21 batches of each row, in turns)")
    parser.add_argument("--new-signatures", type=int, default=50, help="calls of the new-signature row")
    parser.add_argument("--repeat", choices=sorted(REPEATABLE), help="run only this row, --calls times, untimed")
    args = parser.parse_args()
    # Before torch is replaced by the stand-in module below.
    torch_rows = real_torch_rows(args.calls) if args.repeat is None else []

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
    torch.Tensor, torch.float32, torch.bfloat16 = StandInTensor, object(), object()
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
    cuda0 = StandInDevice()

    rows = [
        ("a no-op Python call (the floor)", lambda: nothing()),
        ("cache.run, numpy inputs through DLPack, pool output", lambda: cache.run([xs, ws], 0, "dlpack")),
        ("cache.run, numpy inputs through DLPack, allocator output", lambda: cache.run([xs, ws], 0, "dlpack", allocate)),
        ("cache.run, torch.Tensor stand-ins by attribute, allocator output",
         lambda: cache.run([xt, wt], 0, "torch", allocate)),
        ("fd.execute, torch.Tensor stand-ins (stream, allocator: torch.empty_strided stand-in)",
         lambda: fd.execute([xt, wt])),
        ("  the same, device=0", lambda: fd.execute([xt, wt], device=0)),
        ("  the same, device=\"cuda:0\"", lambda: fd.execute([xt, wt], device="cuda:0")),
        ("  the same, device=torch.device(\"cuda:0\") (a stand-in)", lambda: fd.execute([xt, wt], device=cuda0)),
        ("  the same, device= and option keywords (device=, _enable_options=[], _disable_options=[])",
         lambda: fd.execute([xt, wt], device=cuda0, _enable_options=[], _disable_options=[])),
        ("  the same, Thunder's form (its arguments' tuple, device=None and three option keywords)",
         lambda: fd.execute((xt, wt), device=None, save_repro_inputs=False, _enable_options=None,
                            _disable_options=None)),
    ]
    for _, fn in rows:
        fn()  # the miss: planned once
    if args.repeat is not None:
        fn = rows[REPEATABLE[args.repeat]][1]
        for _ in range(args.calls):
            fn()
        return
    print(f"{'what (median of 21 batches of ' + str(args.calls) + ' calls, rows in turns)':100s} {'us/call':>8s}")
    for (name, _), us in zip(rows, per_call_us([fn for _, fn in rows], args.calls)):
        print(f"{name:100s} {us:8.2f}")
    for name, us in torch_rows:
        print(f"{name:100s} {us:8.2f}")
    new_signatures = [  # what changes, its row dims at call i, how many calls
        ("row count, [rows, 768]", lambda i: (2048 + i,), args.new_signatures),
        ("sequence length, [8, seq, 768]", lambda i: (8, 256 + i), args.new_signatures),
        # 65 to 127 after 64: batches of a power of two the cache knows (a batch counts by its power).
        ("batch size, [batch, 1024, 768]", lambda i: (64 + i, 1024), min(args.new_signatures, 63)),
    ]
    for what, rows_at, calls in new_signatures:
        median, plans = new_signature_us(calls, torch, allocate, rows_at)
        print(f"{'layer-norm backward, a new ' + what + ', its kernels compiled':100s} {median:8.1f}"
              f"   (median of {calls}; {plans} plans)")


if __name__ == "__main__":
    main()
