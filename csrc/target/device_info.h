// What the heuristics know about a GPU: counts and sizes that bound occupancy, shared memory and the
// bandwidth a kernel can reach. Heuristics take a DeviceInfo as data (a preset in tests, the driver's
// answer at run time) and never query the device themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace braze {

// The heuristics' choices that only timings on the GPU can settle, with the values measured best on an
// H100 (a sweep of the bf16 16384x4096 norms and softmax with benchmarks/python/compare.py). A DeviceInfo carries them because
// the best values are a GPU's; `benchmarks/python/compare.py --sweep` times others, and BRAZE_TUNING
// overrides them for the GPU the driver reports (device/cuda/query_device.h), for experiments.
struct HeuristicTuning {
  int64_t block_threads = 128;        // threads per block of pointwise and reduction kernels (a power of two)
  int64_t max_chunks_per_thread = 4;  // inner reductions: vector chunks a thread walks per row, at most
  int64_t max_unroll = 4;             // 1D pointwise: vector chunks per thread, at most (a power of two)
  int64_t max_rows_per_thread = 8;    // 2D pointwise tiles: rows per thread, at most (a power of two)
  int64_t persistent_values = 96;     // persistent rows: values a thread keeps in registers, at most
  // Inner persistent rows staged in shared memory by cp.async (sm_80 on), the next row group's copy in
  // flight while the passes read the current one (ReductionParams::staged): 1 where the rows fit, 0
  // never. Off until measured on a GPU.
  int64_t persistent_staged = 0;
  // Staged matmuls (0: the heuristic's choice): shared-memory stages, bytes of K per slice, the block
  // tile's rows and columns, and its warps along each (2 x 4 where only the tile is set; the tile is then
  // used wherever it fits the problem).
  int64_t matmul_stages = 0;
  int64_t matmul_slice_bytes = 0;
  int64_t matmul_block_m = 0, matmul_block_n = 0;
  int64_t matmul_warps_m = 0, matmul_warps_n = 0;
  // 1: an operand staged through registers loads its next slice before the mmas of the current one
  // (MatmulParams::loads_ahead); 0: when its stage is refilled.
  int64_t matmul_loads_ahead = 1;
  // Fragment registers (MatmulParams::fragments_ahead): 1, two sets, the next k step's loading during
  // this one's mmas; 0, one set; -1, the heuristic's choice.
  int64_t matmul_fragments_ahead = -1;
  // With fragments ahead: the parts a slice's refill copies are issued in, one after each k step's mmas
  // (0: one per k step before the last; 1: all at once).
  int64_t matmul_copy_parts = 0;
  // Warpgroup mmas (wgmma, sm_90): 1 where the problem allows them, 0 never, -1 the heuristic's choice.
  int64_t matmul_wgmma = -1;
  // wgmma's K slices loaded by TMA (a tensor map per operand, a thread issuing each stage's boxes) instead
  // of cp.async: 1 where both operands allow it, 0 never, -1 the heuristic's choice.
  int64_t matmul_tma = -1;
  // With TMA: a warp-specialized block (a copy warpgroup issuing every stage's boxes, the compute
  // warpgroups waiting on full and releasing empty stages through mbarriers, no block barrier in the main
  // loop): 1 on, 0 off. Off until measured on a GPU.
  int64_t matmul_warp_specialized = 0;
  // Warp-specialized: 1, a persistent grid (at most a block per SM, each walking the output tiles
  // blockIdx.x, + grid, ...), its producer loading the next tile's slices while the compute warpgroups
  // store this one's outputs; 0, a block per tile. Off until measured on a GPU.
  int64_t matmul_persistent = 0;
  // Persistent: at most this many blocks (0: one per SM), for leaving SMs to other work, or for walking
  // many tiles per block in a small test. In clusters: at most this many rounded down to whole clusters (one
  // cluster at least).
  int64_t matmul_persistent_blocks = 0;
  // Persistent: clusters of this many blocks along M sharing B's tiles by TMA multicast (1 or 2; 2 where the
  // tiles allow it). 1 until measured on a GPU.
  int64_t matmul_cluster = 1;
  // The GEMV schedule (warps streaming B's columns along K, no tensor cores): -1 the heuristic's choice
  // (A of at most 16 rows), 1 wherever B is read along K and A has at most 64 rows (a sum per row and
  // column in each lane's registers), 0 never.
  int64_t matmul_gemv = -1;
  // The GEMV on tensor cores (each warp a tile of 16 of B's columns against every row of A, by mma.sync
  // with A and B swapped; MatmulParams::gemv_mma): -1 the heuristic's choice (2 to 64 rows where the
  // GPU has mma.sync and neither matmul_gemv nor matmul_wgmma is 1), 1 for 1 to 64 rows, 0 never.
  int64_t matmul_gemv_mma = -1;
  // The scalar GEMV's output columns per warp (each lane's activation loads serve that many weight
  // columns) and the K chunks per column each lane has in flight: 0, the heuristic's choice.
  int64_t matmul_gemv_cols = 0;
  int64_t matmul_gemv_unroll = 0;
  // 1: index values read from tensors (index_select, gather, take_along_axis) are checked in kernels and
  // an out-of-range one raises an IndexError (kernel/index_errors.h); 0: trusted, as CUDA's unchecked
  // indexing, for speed (an out-of-range index then reads outside the tensor).
  int64_t index_checks = 1;

  bool operator==(const HeuristicTuning&) const = default;
  // "block_threads=256, max_unroll=2": the fields that differ from the defaults ("defaults" if none).
  std::string toString() const;
  // `base` with the fields named in "key=value,key=value" set; a Value error names an unknown key or
  // a value out of range.
  static HeuristicTuning parse(std::string_view text, HeuristicTuning base);
  static HeuristicTuning parse(std::string_view text) { return parse(text, HeuristicTuning()); }
};

enum class GpuVendor { Nvidia, Amd };

// The defaults are an H100 SXM's, so a default-constructed DeviceInfo is a sensible target. An AMD GPU
// is described in the same fields: a CU is an SM, a wavefront a warp, LDS shared memory.
struct DeviceInfo {
  std::string name = "NVIDIA H100 80GB HBM3";
  GpuVendor vendor = GpuVendor::Nvidia;
  int major = 9, minor = 0;  // compute capability (NVIDIA)
  std::string gfx_arch;      // the ISA an AMD GPU's code is compiled for ("gfx942"); empty for NVIDIA
  int sm_count = 132;        // SMs, or CUs
  int warp_size = 32;        // lanes of a warp, or of a wavefront (64 on CDNA)
  int max_threads_per_block = 1024;
  int max_threads_per_sm = 2048;
  int regs_per_sm = 65536;
  int max_regs_per_thread = 255;
  int64_t smem_per_sm = 228 * 1024;           // bytes
  int64_t smem_per_block_optin = 227 * 1024;  // the most one block may use after opting in
  int64_t l2_bytes = 50 * 1024 * 1024;
  double memory_bandwidth_gbs = 3352;  // peak HBM GB/s (from clock and bus width when read from the driver)
  HeuristicTuning tuning;

  // "sm_90": the arch NVRTC compiles for. A kernel using an arch-specific feature (wgmma) is compiled
  // for the arch-specific target instead ("sm_90a", kernel::compileArch), whose cubin runs on that arch
  // only. For an AMD GPU, its gfx ISA ("gfx942").
  std::string arch() const;
  // One line for explain and dumps: "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, ...)".
  std::string toString() const;
  bool operator==(const DeviceInfo&) const = default;

  // Published numbers for the GPUs braze is tuned and tested on.
  static DeviceInfo h100Sxm();
  static DeviceInfo h200();
  static DeviceInfo a100();  // SXM4 80GB
  static DeviceInfo l4();
  static DeviceInfo mi300x();
  static DeviceInfo mi250x();  // one GCD (the device a process sees)
  static DeviceInfo mi210();
  // "h100", "h200", "a100", "l4", "mi300x", "mi250x", "mi210" (case-insensitive); nullopt for any other.
  static std::optional<DeviceInfo> preset(std::string_view name);
};

}  // namespace braze
