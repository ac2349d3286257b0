#include "scheduler/matmul/heuristics.h"

#include "kernel/wgmma.h"
#include "scheduler/heuristics.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace braze {

std::string MatmulParams::toString() const {
  const std::string rows = batch_rows ? ", batch dims read as rows" : "";
  if (gemv && gemv_mma) {
    return fmt::format("matmul gemv on tensor cores: mma.{} with A and B swapped, {} of B's columns per block against {} "
                       "rows of A, {} warps splitting K{}, {}-element loads along K, {} in flight{}",
                       kernel::toString(shape), tiles_m * 16, tiles_n * 8, gemv_warps,
                       split_k > 1 ? fmt::format(", K split among {} blocks", split_k) : "", gemv_vector, gemv_unroll, rows);
  }
  if (gemv) {
    return fmt::format("matmul gemv: {} warps of {} columns each over K, {}-element loads along K, {} in flight{}{}",
                       gemv_warps, gemv_cols, gemv_vector, gemv_unroll,
                       gemv_split > 1 ? fmt::format(", K split among {} blocks", gemv_split) : "", rows);
  }
  auto order = [](kernel::TileOrder o, bool async) {
    return fmt::format("{}{}", o == kernel::TileOrder::KMajor ? "k-major" : "mn-major", async ? "" : " through registers");
  };
  if (wgmma) {
    std::string extra = raster_group > 1 ? fmt::format(", blocks in groups of {} rows", raster_group) : "";
    if (persistent && cluster_m > 1) {
      extra += fmt::format(", persistent: {} clusters of {} blocks along M walking the output tiles, B's boxes multicast",
                           grid / cluster_m, cluster_m);
    } else if (persistent) {
      extra += fmt::format(", persistent: {} blocks walking the output tiles", grid);
    }
    return fmt::format("matmul: wgmma.m64n{}k{}, {} warpgroups{} ({}x{} outputs per block), {}-stage {} pipeline of "
                       "{}-element K slices, 128-byte swizzled shared tiles (A {}, B {}){}",
                       blockCols(), shape == kernel::MmaShape::M16N8K16 ? 16 : 32, warps_m / 4,
                       !warp_specialized         ? ""
                       : consumer_registers == 0 ? " and a producer warpgroup"
                                                 : fmt::format(" of {} registers per thread and a producer warpgroup of {}",
                                                               consumer_registers, producer_registers),
                       blockRows(), blockCols(),
                       stages, warp_specialized ? "warp-specialized TMA" : tma ? "TMA" : "cp.async", block_k,
                       order(a_order, a_async), order(b_order, b_async), extra);
  }
  const std::string staging =
      stages == 0 ? "fragments loaded from global memory"
                  : fmt::format("{}-stage cp.async pipeline of {}-element K slices, ldmatrix from rotated shared tiles "
                                "(A {}, B {})",
                                stages, block_k, order(a_order, a_async), order(b_order, b_async));
  std::string raster = fragmentsAhead() ? ", fragments double-buffered" : "";
  if (raster_group > 1) raster += fmt::format(", blocks in groups of {} rows", raster_group);
  if (split_k > 1) raster += fmt::format(", K split among {} blocks per tile", split_k);
  return fmt::format("matmul: mma.{}, {}x{} warps of {}x{} tiles ({}x{} outputs per block), {}{}", kernel::toString(shape),
                     warps_m, warps_n, tiles_m, tiles_n, blockRows(), blockCols(), staging, raster);
}

std::string mmaUnavailable(const DeviceInfo& device, DataType operand) {
  if (device.vendor != GpuVendor::Nvidia) {
    return fmt::format("{} is not an NVIDIA GPU: mma.sync has no HIP spelling (MFMA is not emitted)", device.name);
  }
  const int sm = device.major * 10 + device.minor;
  const int needed = kernel::mmaMinimumSm(operand);
  if (sm < needed) return fmt::format("mma.sync of {} needs sm_{} or newer; {} is sm_{}", toString(operand), needed, device.name, sm);
  return "";
}

std::string wgmmaUnavailable(const DeviceInfo& device, const MatmulProblem& problem) {
  if (device.vendor != GpuVendor::Nvidia || device.major != 9 || device.minor != 0) {
    return fmt::format("wgmma needs sm_90; {} is not", device.name);
  }
  if (!kernel::wgmmaTakes(problem.operand)) {
    return fmt::format("wgmma takes bf16, f16, s8, u8, e4m3fn or e5m2 operands, not {}", toString(problem.operand));
  }
  return "";
}

namespace {

// A few rows: the problem is reading B once. Tensor cores would compute 16-row tiles of which most rows
// are padding, and their operand loads are not 16 bytes wide; a warp per output column instead streams
// the column's K elements with vector loads and sums them.
MatmulParams gemvHeuristics(const DeviceInfo& device, const MatmulProblem& problem) {
  MatmulParams p;
  p.gemv = true;
  p.gemv_warps = 4;
  p.gemv_vector = std::max<int64_t>(1, 16 / std::max<int64_t>(problem.b_element_bytes, 1));
  // Four chunks of each column in flight per lane (64 bytes of int8 weights): enough loads outstanding
  // to cover DRAM latency at a few warps per SM, few enough registers for 16 rows.
  p.gemv_unroll = device.tuning.matmul_gemv_unroll > 0 ? device.tuning.matmul_gemv_unroll : 4;
  // Two columns per warp where the rows leave registers for them (a sum per row and column per lane),
  // unless that leaves fewer than two blocks per SM; or as tuned.
  p.gemv_cols = problem.m <= 8 ? 2 : 1;
  auto blocksN = [&] { return ceilDiv(std::max<int64_t>(problem.n, 1), p.gemv_warps * p.gemv_cols); };
  if (p.gemv_cols > 1 && problem.batch * blocksN() < 2 * static_cast<int64_t>(device.sm_count)) p.gemv_cols = 1;
  if (device.tuning.matmul_gemv_cols > 0) p.gemv_cols = device.tuning.matmul_gemv_cols;
  p.blocks_n = blocksN();
  p.grid = problem.batch * problem.m * problem.n == 0 ? 0 : problem.batch * p.blocks_n;
  // Fewer blocks than SMs: K split among blocks, each keeping at least two unrolled steps of 32 lanes'
  // chunks, so that every SM streams weights.
  const int64_t chunks = problem.k / p.gemv_vector, per_step = 32 * p.gemv_unroll;
  if (p.grid > 0 && p.grid < device.sm_count && chunks >= 4 * per_step) {
    const int64_t wanted = std::min<int64_t>({ceilDiv(2 * device.sm_count, p.grid), chunks / (2 * per_step), 16});
    if (wanted >= 2) {
      // Every split non-empty: a split takes a whole number of 32-chunk steps.
      const int64_t steps = ceilDiv(ceilDiv(chunks, wanted), int64_t{32});
      p.gemv_split = ceilDiv(chunks, steps * 32);
      p.grid *= p.gemv_split;
    }
  }
  return p;
}

// The GEMV on tensor cores (a few rows): per group of 4 x gemv_vector K elements a lane loads 16 bytes of
// each of its two weight columns of a tile and its row of A; the mmas compute 16 columns x 8 rows each, so
// where a warp of the scalar GEMV spends an FMA per row and weight (and a conversion of A's value), this
// one spends a few instructions per weight (its dequantize and packing) whatever the rows.
MatmulParams gemvMmaHeuristics(const DeviceInfo& device, const MatmulProblem& problem) {
  MatmulParams p;
  p.gemv = p.gemv_mma = true;
  p.shape = kernel::mmaShapeFor(problem.operand);
  // A lane holds runs of k / 8 consecutive K elements of each fragment row (2 for k16, 4 for k32), two runs
  // per mma: a chunk is whole mmas' runs, and at least 16 bytes of the weights' largest input.
  const int64_t runs = 2 * kernel::mmaDims(p.shape).k / 8;
  p.gemv_vector = std::max<int64_t>(16 / std::max<int64_t>(problem.b_element_bytes, 1), runs);
  p.tiles_n = ceilDiv(std::max<int64_t>(problem.m, 1), int64_t{8});
  // Each block reads every row of A per K group: more than 32 rows, 32 columns a block halve those reads,
  // while the blocks still fill the GPU twice.
  const int64_t sms = device.sm_count;
  auto blocksN = [&] { return ceilDiv(std::max<int64_t>(problem.n, 1), 16 * p.tiles_m); };
  p.tiles_m = problem.m > 32 ? 2 : 1;
  if (p.tiles_m > 1 && problem.batch * blocksN() < 2 * sms) p.tiles_m = 1;
  p.blocks_n = blocksN();
  p.grid = problem.batch * problem.m * problem.n == 0 ? 0 : problem.batch * p.blocks_n;
  // Warps split K within a block (their sums meet in shared memory): four, eight where the blocks are few
  // for the SMs (more loads in flight per SM), each warp at least two groups of K.
  const int64_t groups = ceilDiv(std::max<int64_t>(problem.k, 1), 4 * p.gemv_vector);
  p.gemv_warps = problem.batch * p.blocks_n < 2 * sms ? 8 : 4;
  p.gemv_warps = std::clamp<int64_t>(groups / 2, 1, p.gemv_warps);
  // Fewer blocks than SMs (few columns: a GQA key projection's 1024): K split among blocks too, each warp
  // of each split keeping at least two groups, so that every SM streams weights; the last block of a
  // tile adds the splits' sums in split order (split_k, as the mma schedule's).
  const int64_t tiles = problem.batch * p.blocks_n;
  if (p.grid > 0 && tiles < sms) {
    const int64_t wanted = std::min<int64_t>({ceilDiv(2 * sms, tiles), groups / (2 * p.gemv_warps), 16});
    if (wanted >= 2) {
      p.split_k = ceilDiv(groups, ceilDiv(groups, wanted));  // every split non-empty
      p.grid *= p.split_k;
    }
  }
  // Groups loaded together: four while the chunks of A's rows they hold stay few (a lane keeps
  // tiles_n chunks of A and 2 tiles_m of the weights per group in flight), two else.
  p.gemv_unroll = p.tiles_n * p.tiles_m <= 2 ? 4 : 2;
  // No more than a warp's whole groups (the last, partial one goes alone).
  const int64_t per_warp = ceilDiv(ceilDiv(problem.k / (4 * p.gemv_vector), p.split_k), p.gemv_warps);
  p.gemv_unroll = std::max<int64_t>(1, std::min(p.gemv_unroll, per_warp));
  return p;
}

// wgmma tiles of rows x cols (rows a multiple of 64, at most 256; cols a multiple of 64, at most 256):
// 128-byte K slices, one swizzle pattern wide for a k-major tile, and as many stages as the block's
// shared memory holds, at most four, at least three (a slice's wgmmas in flight, the next slice's, and one
// arriving). An operand cp.async cannot copy is computed in registers and stored k-major; an 8-bit one
// copied as stored is k-major too (wgmma reads 8-bit operands only so). Both copied as stored, with
// tensor maps, and not tuned off: the slices come by TMA (one 8-byte mbarrier per stage besides).
bool setWgmmaTiles(const DeviceInfo& device, const MatmulProblem& problem, int64_t rows, int64_t cols, MatmulParams& p) {
  const int64_t element = sizeOf(problem.operand);
  const int64_t block_k = 128 / element, stage_bytes = block_k * element * (rows + cols);
  // No more stages than K's slices keep busy (the copies run stages - 2 slices ahead).
  const int64_t slices = ceilDiv(std::max<int64_t>(problem.k, 1), block_k);
  const int64_t fit = (device.smem_per_block_optin - 64) / stage_bytes;
  const int64_t stages = std::min<int64_t>({4, fit, std::max<int64_t>(3, slices + 2)});
  if (stages < 3 || rows % 64 != 0 || rows > 256 || cols % 64 != 0 || cols > 256) return false;
  p.wgmma = true;
  p.shape = element == 2 ? kernel::MmaShape::M16N8K16 : kernel::MmaShape::M16N8K32;
  p.warps_m = rows / 16;
  p.warps_n = 1;
  p.tiles_m = 1;
  p.tiles_n = cols / 8;
  p.block_k = block_k;
  p.stages = stages;
  p.a_async = problem.a_tile.has_value();
  p.b_async = problem.b_tile.has_value();
  p.a_order = problem.a_tile.value_or(kernel::TileOrder::KMajor);
  p.b_order = problem.b_tile.value_or(kernel::TileOrder::KMajor);
  p.tma = p.a_async && p.b_async && problem.tma_maps && device.tuning.matmul_tma != 0;
  p.warp_specialized = p.tma && device.tuning.matmul_warp_specialized == 1;
  if (p.warp_specialized) {
    // Launched, a thread may have the register file's share of the block's threads (a multiple of 8, as
    // registers are allocated); the producer then keeps 40 (CUTLASS's figure for a TMA producer) and the
    // compute warpgroups share the rest, where that gives them more.
    const int64_t consumers = p.warps_m / 4;
    const int64_t most = device.max_regs_per_thread / 8 * 8;
    const int64_t launched = std::min<int64_t>(most, device.regs_per_sm / p.threads() / 8 * 8);
    const int64_t producer = 40;
    const int64_t consumer = std::min<int64_t>(most, (device.regs_per_sm - producer * 128) / (consumers * 128) / 8 * 8);
    if (consumer > launched) {
      p.producer_registers = producer;
      p.consumer_registers = consumer;
    }
  }
  p.fragments_ahead = false;
  p.blocks_m = ceilDiv(std::max<int64_t>(problem.m, 1), p.blockRows());
  p.blocks_n = ceilDiv(std::max<int64_t>(problem.n, 1), p.blockCols());
  p.grid = problem.batch * problem.m * problem.n == 0 ? 0 : problem.batch * p.blocks_m * p.blocks_n;
  return true;
}

// The wgmma tile's columns: 256, 192 or 128, the fewest column blocks and then the least padding (N = 384
// takes two blocks of 192 rather than 256 + 128).
int64_t wgmmaColumns(const MatmulProblem& problem) {
  int64_t best = 256;
  for (int64_t cols : {192, 128}) {
    if (ceilDiv(std::max<int64_t>(problem.n, 1), cols) <= ceilDiv(std::max<int64_t>(problem.n, 1), best)) best = cols;
  }
  return best;
}

// $BRAZE_TUNING's matmul fields (HeuristicTuning), for measuring other choices: a block tile of 2 x 4 warps,
// K slices, stages (as many as the block's shared memory holds, at most the asked number).
void applyTuning(const DeviceInfo& device, const MatmulProblem& problem, MatmulParams& p) {
  const HeuristicTuning& tuning = device.tuning;
  const int64_t element = sizeOf(problem.operand);
  if (p.wgmma) {  // its tile and stages
    const int64_t rows = tuning.matmul_block_m > 0 ? tuning.matmul_block_m : p.blockRows();
    const int64_t cols = tuning.matmul_block_n > 0 ? tuning.matmul_block_n : p.blockCols();
    MatmulParams tiled = p;
    if (setWgmmaTiles(device, problem, rows, cols, tiled)) p = tiled;
    if (tuning.matmul_stages >= 3) p.stages = std::min(p.stages, tuning.matmul_stages);
    return;
  }
  p.loads_ahead = tuning.matmul_loads_ahead != 0;
  // Never with an operand staged through registers: its slice in flight holds registers too (the s8 bmm
  // with a row-major B spilled with both).
  if (tuning.matmul_fragments_ahead >= 0) p.fragments_ahead = tuning.matmul_fragments_ahead == 1 && p.a_async && p.b_async;
  p.copy_parts = tuning.matmul_copy_parts;
  if (tuning.matmul_slice_bytes > 0) p.block_k = std::max(tuning.matmul_slice_bytes, kernel::mmaDims(p.shape).k * element) / element;
  const bool tile = tuning.matmul_block_m > 0 || tuning.matmul_block_n > 0;
  if (tile || tuning.matmul_warps_m > 0 || tuning.matmul_warps_n > 0) {
    const int64_t rows = tuning.matmul_block_m > 0 ? tuning.matmul_block_m : p.blockRows();
    const int64_t cols = tuning.matmul_block_n > 0 ? tuning.matmul_block_n : p.blockCols();
    p.warps_m = tuning.matmul_warps_m > 0 ? tuning.matmul_warps_m : tile ? 2 : p.warps_m;
    p.warps_n = tuning.matmul_warps_n > 0 ? tuning.matmul_warps_n : tile ? 4 : p.warps_n;
    // Each warp at least one mma tile; a warp count the block cannot use is cut to the tile's.
    const int64_t mma_n = 8;
    p.warps_m = std::min(p.warps_m, std::max<int64_t>(rows / 16, 1));
    p.warps_n = std::min(p.warps_n, std::max<int64_t>(cols / mma_n, 1));
    while (p.warps_m * p.warps_n > 32) (p.warps_n > 1 ? p.warps_n : p.warps_m) /= 2;  // 1024 threads at most
    p.tiles_m = std::max<int64_t>(rows / (16 * p.warps_m), 1);
    p.tiles_n = std::max<int64_t>(cols / (mma_n * p.warps_n), 1);
    p.blocks_m = ceilDiv(std::max<int64_t>(problem.m, 1), p.blockRows());
    p.blocks_n = ceilDiv(std::max<int64_t>(problem.n, 1), p.blockCols());
    p.grid = problem.batch * problem.m * problem.n == 0 ? 0 : problem.batch * p.blocks_m * p.blocks_n;
  }
  if (tuning.matmul_stages >= 2) p.stages = tuning.matmul_stages;
  const int64_t stage_bytes = p.block_k * element * (p.blockRows() + p.blockCols());
  p.stages = std::max<int64_t>(2, std::min(p.stages, device.smem_per_block_optin / stage_bytes));
}

}  // namespace

MatmulParams matmulHeuristics(const DeviceInfo& device, const MatmulProblem& problem) {
  // A GEMV for a few rows (B read along K): on tensor cores where the GPU has mma.sync, else scalar up to
  // 16 rows; matmul_gemv=1 takes the scalar one up to 64 rows (its per-lane sums, one per row and column,
  // in registers), 0 the tiled schedules whatever the rows. A linear's batch dims count as rows where
  // they fit (batch_rows); else each batch is a GEMV of its own.
  const int64_t gemv = device.tuning.matmul_gemv, gemv_mma = device.tuning.matmul_gemv_mma;
  auto gemvOf = [&](const MatmulProblem& q) -> std::optional<MatmulParams> {
    if (gemv == 0 || !q.b_k_contiguous || q.m > 64) return std::nullopt;
    // Tensor cores from two rows on (the scalar GEMV's FMAs per weight grow with the rows), unless the
    // scalar GEMV or warpgroup mmas are tuned on; one row keeps the scalar GEMV, where an mma would
    // compute 7 rows of padding.
    const bool mma_rows = gemv_mma == 1 || (gemv_mma < 0 && gemv != 1 && device.tuning.matmul_wgmma != 1 && q.m >= 2);
    const bool has_mma =
        mmaUnavailable(device, q.operand).empty() && kernel::mmaTakes(kernel::mmaShapeFor(q.operand), q.operand);
    if (mma_rows && has_mma) return gemvMmaHeuristics(device, q);
    if (q.m <= (gemv == 1 ? 64 : 16)) return gemvHeuristics(device, q);
    return std::nullopt;
  };
  if (problem.batch_rows && problem.batch > 1 && problem.m > 0) {
    MatmulProblem rows = problem;
    rows.m *= rows.batch;
    rows.batch = 1;
    if (std::optional<MatmulParams> p = gemvOf(rows)) {
      p->batch_rows = true;
      return *p;
    }
  }
  if (std::optional<MatmulParams> p = gemvOf(problem)) return *p;
  MatmulParams p;
  p.shape = kernel::mmaShapeFor(problem.operand);
  // Each warp a 32 x 32 output tile by default (2 x 4 mma tiles: 8 accumulators of 4 values); skinny
  // problems take fewer tiles rather than compute padding.
  p.tiles_m = problem.m <= 16 ? 1 : 2;
  p.tiles_n = std::clamp<int64_t>(ceilDiv(std::max<int64_t>(problem.n, 1), 8), 1, 4);
  // Four warps per block where the output has room for them, so blocks are a few warps and many.
  p.warps_m = problem.m <= p.tiles_m * 16 ? 1 : 2;
  p.warps_n = problem.n <= p.tiles_n * 8 ? 1 : 2;
  p.blocks_m = ceilDiv(std::max<int64_t>(problem.m, 1), p.blockRows());
  p.blocks_n = ceilDiv(std::max<int64_t>(problem.n, 1), p.blockCols());
  // An empty output launches nothing (a plan skips kernels of no blocks).
  p.grid = problem.batch * problem.m * problem.n == 0 ? 0 : problem.batch * p.blocks_m * p.blocks_n;
  // cp.async is sm_80's (every GPU with mma.sync here has it). Three stages of 64-byte K slices: 24 KiB of
  // shared memory for a 64 x 64 block tile of bf16, under the 48 KiB a launch gets without opting in. An
  // operand cp.async cannot copy is staged through registers (k-major).
  if (device.major * 10 + device.minor >= 80) {
    p.stages = 3;
    p.block_k = 64 / sizeOf(problem.operand);
    p.a_async = problem.a_tile.has_value();
    p.b_async = problem.b_tile.has_value();
    p.a_order = problem.a_tile.value_or(kernel::TileOrder::KMajor);
    p.b_order = problem.b_tile.value_or(kernel::TileOrder::KMajor);
    // Large problems: 256 x 128 block tiles of eight warps, four stages of 128-byte K slices (64 bytes for
    // 8-bit operands where four 128-byte stages do not fit: two k32 steps), where they still give every SM
    // a block and K has 1024 elements or more; else 128 x 128 tiles of eight 64 x 32 warp tiles in four
    // 64-byte stages (64 KiB). A warp then issues 32 (or 16) mmas per 8 to 12 (or 8) ldmatrix against 8 per
    // 6, and a block reads each A and B element once per 128 outputs or more instead of 64. Measured on an
    // H200 (compare.py --sweep, bf16 4096^3): 445 us against 519 for 128 x 128 and 3 x 64 bytes; s8 bmm
    // 16 x 1024^3 with a row-major B: 308 against 407 for 64 x 64, and 228 in 128-byte slices against 257
    // in 64-byte ones (eight slices against sixteen: half the barriers and waits per K). With K = 768
    // (seed 000's QKV linear, 24576 x 2304) the 256 x 128 tiles were slower, 545 us against 495: one block
    // per SM has no other block's main loop to hide its prologue and epilogue behind. 16-bit operands take
    // them when both are copied as stored, 8-bit ones either way.
    const bool copied = (p.a_async && p.b_async) || sizeOf(problem.operand) == 1;
    auto blocksOf = [&](int64_t rows, int64_t cols) { return problem.batch * ceilDiv(problem.m, rows) * ceilDiv(problem.n, cols); };
    auto fourStagesFit = [&](int64_t slice_bytes) { return 4 * slice_bytes * (256 + 128) <= device.smem_per_block_optin; };
    const int64_t large_slice = sizeOf(problem.operand) == 1 && !fourStagesFit(128) ? 64 : 128;
    const bool large_fits = fourStagesFit(large_slice);
    const bool long_k = problem.k >= 1024;
    if (copied && large_fits && long_k && blocksOf(256, 128) >= device.sm_count) {
      // 16-bit operands: 4 x 2 warps of 64 x 64 (8 ldmatrix per 32 mmas, against 10 for 128 x 32): 428 us
      // against 445 on the H200's bf16 4096^3 (compare.py --sweep). 8-bit ones: 2 x 4 warps of 128 x 32,
      // which the s8 bmm measured faster than 4 x 4 warps (126 us against 138).
      const bool wide_warps = sizeOf(problem.operand) == 2;
      p.warps_m = wide_warps ? 4 : 2;
      p.warps_n = wide_warps ? 2 : 4;
      p.tiles_m = wide_warps ? 4 : 8;
      p.tiles_n = wide_warps ? 8 : 4;
      p.block_k = large_slice / sizeOf(problem.operand);
      // Two sets of fragments where both operands are copied as stored (one block per SM either way):
      // H200, bf16 4096^3 382 us against 429 with one set; seed 002's s8 bmm 96 against 101. Not for the
      // smaller tiles: seed 000's QKV GEMM (128 x 128 tiles) took 503 us against 450, its blocks per SM
      // halved by the registers.
      p.fragments_ahead = p.a_async && p.b_async;
      // Four stages; three for 8-bit operands with two sets of fragments (seed 002's s8 bmm: 88 us against
      // 94 on the H200; 128 against 127 with a row-major B, which keeps four).
      p.stages = sizeOf(problem.operand) == 1 && p.fragments_ahead ? 3 : 4;
    } else if (sizeOf(problem.operand) == 2 && p.a_async && p.b_async && blocksOf(128, 128) >= device.sm_count) {
      p.warps_m = 2;
      p.warps_n = 4;
      p.tiles_m = 4;
      p.tiles_n = 4;
      // Four stages (64 KiB, opted into) where the block may have them: 485 us against 519 for three on
      // the H200's bf16 4096^3 sweep.
      if (4 * 64 * (128 + 128) <= device.smem_per_block_optin) p.stages = 4;
    }
    p.blocks_m = ceilDiv(std::max<int64_t>(problem.m, 1), p.blockRows());
    p.blocks_n = ceilDiv(std::max<int64_t>(problem.n, 1), p.blockCols());
    p.grid = problem.batch * problem.m * problem.n == 0 ? 0 : problem.batch * p.blocks_m * p.blocks_n;
    // No more stages than K has slices (shared memory the block would hold for nothing).
    p.stages = std::max<int64_t>(2, std::min(p.stages, ceilDiv(std::max<int64_t>(problem.k, 1), p.block_k)));
  }
  // Warpgroup mmas on sm_90, in tiles of two warpgroups, 128 x 256 (or 192, 128: wgmmaColumns), by default
  // for 64 rows or more where the problem gives a quarter of the SMs a block (16-bit operands) or every SM
  // one (8-bit operands copied as stored); tuned on, wherever they apply. Measured (compare.py --sweep, kernel_times.py) on an
  // H100 against mma.sync's schedule: bf16 4096^3 248 us against 357; seed 002's s8 bmm 58 against 75;
  // seed 000's QKV GEMM (K = 768) 211 against 338; the weight-only int8 linear at M = 64 (43 blocks, B
  // dequantized in registers) 88 against 105. Not for 8-bit operands computed in registers, which were
  // slower: the s8 bmm with a row-major B 120 against 93, seed 000's quantized q k^T 757 against 406.
  const int64_t wgmma = device.tuning.matmul_wgmma;
  if (wgmma != 0 && wgmmaUnavailable(device, problem).empty()) {
    const int64_t cols = wgmmaColumns(problem);
    const int64_t blocks = problem.batch * ceilDiv(problem.m, 128) * ceilDiv(problem.n, cols);
    const bool eight = sizeOf(problem.operand) == 1;
    // At least a warpgroup's 64 rows: a few rows would leave most of each 128-row tile padding.
    const bool chosen = problem.m >= kernel::kWgmmaM &&
                        (eight ? problem.a_tile && problem.b_tile && blocks >= device.sm_count : 4 * blocks >= device.sm_count);
    if (wgmma == 1 || chosen) setWgmmaTiles(device, problem, 128, cols, p);
  }
  if (p.stages >= 2) applyTuning(device, problem, p);
  if (p.wgmma) {
    if (p.blocks_m > 8 && p.blocks_m * p.blocks_n > 2 * static_cast<int64_t>(device.sm_count)) p.raster_group = 8;
    // Persistent: at most a block per SM, as warp-specialized kernels are compiled for (launch bounds of
    // one block per SM; the compute warpgroups' setmaxnreg counts on it), and consecutive tiles (a raster
    // group's) still run at once.
    if (p.warp_specialized && device.tuning.matmul_persistent == 1 && p.grid > 0) {
      p.persistent = true;
      const int64_t tiles = p.grid, most = device.tuning.matmul_persistent_blocks;
      p.grid = std::min<int64_t>(tiles, most > 0 ? most : device.sm_count);
      // Clusters of two blocks along M: B's box rows (its tile's N, or the slice's K lines) split in two halves
      // of whole 1024-byte swizzle patterns (8 lines each), and a cluster's pair of tiles for every pair of
      // blocks (a grid of whole clusters, no more than the pairs of tiles).
      const int64_t b_box_rows = p.b_order == kernel::TileOrder::KMajor ? p.blockCols() : p.block_k;
      if (device.tuning.matmul_cluster == 2 && p.blocks_m >= 2 && b_box_rows % 16 == 0) {
        p.cluster_m = 2;
        const int64_t pairs = problem.batch * ceilDiv(p.blocks_m, 2) * p.blocks_n;
        p.grid = 2 * std::min<int64_t>(pairs, std::max<int64_t>(1, (most > 0 ? most : device.sm_count) / 2));
      }
      // A block walking several tiles keeps its stages busy with the next tile's slices, however few
      // slices K has: as many stages as fit (at most 4, or the tuned number).
      if (p.grid < tiles) {
        const int64_t stage_bytes = p.block_k * sizeOf(problem.operand) * (p.blockRows() + p.blockCols());
        const int64_t wanted = device.tuning.matmul_stages >= 3 ? device.tuning.matmul_stages : 4;
        p.stages = std::max(p.stages, std::min<int64_t>(wanted, (device.smem_per_block_optin - 64) / stage_bytes));
      }
    }
    return p;  // no split-K
  }
  // Few output tiles for the SMs and a long K: split K among blocks, each keeping at least 4 slices, so that
  // every SM gets a block (no split leaves a block without slices).
  const int64_t slices = p.stages >= 2 ? ceilDiv(problem.k, p.block_k) : 0;
  const int64_t tile_blocks = problem.batch * p.blocks_m * p.blocks_n;
  if (p.stages >= 2 && tile_blocks > 0 && tile_blocks < device.sm_count && slices >= 8) {
    const int64_t wanted = std::min<int64_t>({ceilDiv(device.sm_count, tile_blocks), slices / 4, 16});
    if (wanted >= 2) {
      p.split_k = ceilDiv(slices, ceilDiv(slices, wanted));  // every split non-empty
      p.grid = tile_blocks * p.split_k;
    }
  }
  // More block tiles than run at once: groups of 8 block rows walk N together, so a wave of blocks reads
  // about sqrt(blocks) A and B tiles each instead of one A row against every B column.
  if (p.blocks_m > 8 && p.blocks_m * p.blocks_n > 2 * static_cast<int64_t>(device.sm_count)) p.raster_group = 8;
  return p;
}

}  // namespace braze
