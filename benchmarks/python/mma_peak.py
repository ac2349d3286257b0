"""The ceiling of braze's GEMMs on the GPU at hand: the rate of mma.sync itself (bf16 m16n8k16 with f32
accumulators, s8 m16n8k32 with s32), each warp of 8-warp blocks issuing independent mmas on register
operands, 4 blocks per SM. (Not e4m3: ptxas for sm_90 turns this kernel's e4m3 loop into a few f16
HMMAs, so its rate would not be that of the GEMMs.) On Hopper, cuBLAS's wgmma kernels go past it:
the matmul rows of compare.py are best read against both.

    python benchmarks/python/mma_peak.py
"""

import cupy as cp

_SOURCE = r"""
#define PEAK(NAME, SHAPE, TYPES, ACC, CONSTRAINT)                                                           \
extern "C" __global__ void NAME(float* out, int iters) {                                                 \
  unsigned a[4], b[2];                                                                                    \
  for (int i = 0; i < 4; ++i) a[i] = threadIdx.x * 2654435761u + i;                                      \
  for (int i = 0; i < 2; ++i) b[i] = threadIdx.x * 40503u + i;                                           \
  ACC acc[16][4] = {};                                                                                    \
  for (int it = 0; it < iters; ++it) {                                                                    \
    _Pragma("unroll") for (int j = 0; j < 16; ++j) {                                                     \
      asm volatile("mma.sync.aligned." SHAPE ".row.col." TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
                   : "+" CONSTRAINT(acc[j][0]), "+" CONSTRAINT(acc[j][1]), "+" CONSTRAINT(acc[j][2]),            \
                     "+" CONSTRAINT(acc[j][3])                                                                   \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                          \
    }                                                                                                     \
  }                                                                                                       \
  ACC s = 0;                                                                                              \
  for (int j = 0; j < 16; ++j) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];                        \
  if (s == (ACC)123) out[0] = (float)s;                                                                   \
}
PEAK(peak_bf16, "m16n8k16", "f32.bf16.bf16.f32", float, "f")
PEAK(peak_s8, "m16n8k32", "s32.s8.s8.s32", int, "r")
"""

# (kernel, name, multiply-add operations of one mma, the sm it needs)
_KINDS = [("peak_bf16", "bf16", 2 * 16 * 8 * 16, 80), ("peak_s8", "s8", 2 * 16 * 8 * 32, 80)]


def mma_sync_peaks(warps=8, blocks_per_sm=4, iters=1024):
    """{name: tera-operations per second} of mma.sync on the current device."""
    device = cp.cuda.Device()
    sm = int(device.compute_capability)
    sms = device.attributes["MultiProcessorCount"]
    module = cp.RawModule(code=_SOURCE, options=("-std=c++17",))
    out = cp.zeros(1, dtype=cp.float32)
    peaks = {}
    for kernel, name, ops, needed in _KINDS:
        if sm < needed:
            continue
        fn = module.get_function(kernel)
        blocks = sms * blocks_per_sm
        fn((blocks,), (warps * 32,), (out, cp.int32(16)))  # warm-up
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn((blocks,), (warps * 32,), (out, cp.int32(iters)))
        end.record()
        end.synchronize()
        ms = cp.cuda.get_elapsed_time(start, end)
        peaks[name] = blocks * warps * iters * 16 * ops / ms / 1e9
    return peaks


def describe(peaks):
    return "mma.sync peak: " + ", ".join(f"{name} {rate:.0f} TOP/s" for name, rate in peaks.items())


def measured_line():
    """describe(mma_sync_peaks()), or why there is no figure: the benchmark table must not depend on it."""
    try:
        return describe(mma_sync_peaks())
    except Exception as error:  # noqa: BLE001  (a compile or launch failure is reported, not raised)
        return f"mma.sync peak: not measured ({type(error).__name__}: {error})"


if __name__ == "__main__":
    print(measured_line())
