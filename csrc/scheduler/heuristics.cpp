#include "scheduler/heuristics.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace braze {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t nextPow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Register budget of a persistent row (tuning.persistent_values, 96 on an H100): what stays of 255
// registers after the kernel's own indexing and temporaries, so a row never spills to local memory.
// Threads per block (tuning.block_threads, 128): four warps keep enough blocks per SM for latency
// hiding and make a block reduction cheap.
// Reduced elements per split of a grid reduction, at least: below that, writing and combining the
// partials costs more than the parallelism gains.
constexpr int64_t kMinSplit = 4096;
// Vector chunks a thread of a reduction walks per row, at most (tuning.max_chunks_per_thread; fewer
// threads per row above that). On an H100 (benchmarks/python/compare.py), 4 beat 8, 2 and 1 on the bf16
// 16384x4096 norms and softmax.
// Threads per transpose block: eight warps, so a 32x32 tile is four points per thread in each phase.
constexpr int64_t kTransposeThreads = 256;
// Staged tiles per block: at most a quarter of an SM's shared memory (four blocks stay resident to
// hide the barrier), and never more than the 48 KiB a block gets without opting in.
constexpr int64_t kTransposeSharedCap = 48 * 1024;

// A staged tile in shared memory: 16-byte aligned, as the kernel IR lays shared arrays out.
int64_t tileBytes(int64_t tile_a, int64_t tile_b, int64_t element_bytes) {
  return ceilDiv(tile_a * tile_b * element_bytes, 16) * 16;
}

}  // namespace

int64_t kernelVectorize(const VectorizeInput& input) {
  int64_t factor = std::max<int64_t>(16 / std::max<int64_t>(input.widest_dtype_bytes, 1), 1);
  for (int64_t f : input.tensor_factors) factor = std::min(factor, f);
  while (factor > 1 && input.inner_extent % factor != 0) factor /= 2;
  return std::max<int64_t>(factor, 1);
}

std::string PointwiseParams::toString() const {
  if (break_point > 0) {
    return fmt::format(
        "pointwise 2D: rows = dims [0, {}), columns {}, vectorize {}, block {}x{}, {} rows per thread", break_point,
        inner, vectorize, threads_x, threads_y, unroll);
  }
  return fmt::format("pointwise: vectorize {}, unroll {}, block {}", vectorize, unroll, block);
}

namespace {

// The 2D break point: the most leading dims along which some input is broadcast while it varies
// along the rest (a bias over rows): 0 when no input is.
int64_t broadcastBreakPoint(const PointwiseProblem& problem) {
  const int64_t n = static_cast<int64_t>(problem.sizes.size());
  for (int64_t k = n - 1; k >= 1; --k) {
    bool rows = false;
    for (int64_t d = 0; d < k; ++d) rows = rows || problem.sizes[d] > 1;
    if (!rows) continue;
    for (const auto& strides : problem.input_strides) {
      bool broadcast_rows = true, varies = false;
      for (int64_t d = 0; d < n; ++d) {
        if (problem.sizes[d] < 2) continue;
        if (d < k) broadcast_rows = broadcast_rows && strides[d] == 0;
        if (d >= k) varies = varies || strides[d] != 0;
      }
      if (broadcast_rows && varies) return k;
    }
  }
  return 0;
}

PointwiseParams pointwise2D(const DeviceInfo& device, PointwiseParams p, const std::vector<int64_t>& sizes,
                            int64_t break_point) {
  p.break_point = break_point;
  p.outer = 1;
  p.inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) (d < break_point ? p.outer : p.inner) *= sizes[d];
  const int64_t columns = ceilDiv(p.inner, p.vectorize);
  p.threads_x = std::clamp<int64_t>(nextPow2(columns), 1, device.tuning.block_threads);
  p.threads_y = std::max<int64_t>(device.tuning.block_threads / p.threads_x, 1);
  p.block = p.threads_x * p.threads_y;
  p.grid = ceilDiv(columns, p.threads_x);
  // More rows per thread (more reuse of the broadcast inputs) while the blocks still fill every SM
  // twice; grid y is limited to 65535.
  const int64_t resident = static_cast<int64_t>(device.sm_count) * device.max_threads_per_sm / p.block;
  p.unroll = 1;
  while (p.unroll < device.tuning.max_rows_per_thread && p.grid * ceilDiv(p.outer, p.threads_y * p.unroll * 2) >= 2 * resident) p.unroll *= 2;
  // A power of two, so that row counts past the cap share a few kernels, not one per 65535-row band.
  p.unroll = std::max(p.unroll, nextPow2(ceilDiv(p.outer, p.threads_y * 65535)));
  p.grid_y = ceilDiv(p.outer, p.threads_y * p.unroll);
  return p;
}

}  // namespace

PointwiseParams pointwiseHeuristics(const DeviceInfo& device, const PointwiseProblem& problem) {
  PointwiseParams p;
  p.vectorize = std::max<int64_t>(problem.max_vectorize, 1);
  const int64_t chunks = std::max<int64_t>(ceilDiv(problem.total_elements, p.vectorize), 1);
  // Small problems: a block of at least one warp, no bigger than the work.
  p.block = std::clamp<int64_t>(nextPow2(chunks), device.warp_size, device.tuning.block_threads);
  // Unroll (several independent vector chunks per thread, for memory-level parallelism) only when
  // there are enough chunks to keep every SM full several times over.
  const int64_t resident = static_cast<int64_t>(device.sm_count) * device.max_threads_per_sm;
  p.unroll = 1;
  while (p.unroll < device.tuning.max_unroll && chunks >= resident * p.unroll * 4) p.unroll *= 2;
  p.grid = std::max<int64_t>(ceilDiv(chunks, p.block * p.unroll), 1);
  const int64_t break_point = broadcastBreakPoint(problem);
  if (break_point > 0) return pointwise2D(device, p, problem.sizes, break_point);
  return p;
}

std::string ReductionParams::toString() const {
  const std::string split =
      splits > 1 ? fmt::format(", split over {} blocks per row ({} elements each)", splits, split_length) : "";
  if (!inner) {
    return fmt::format("outer reduction: vectorize {}, block {}x{} (kept x reduced){} ({})", vectorize, threads_x,
                       threads_y, split, why);
  }
  const char* kind = !persistent ? "inner reduction" : shared_cache ? "inner persistent (shared memory)"
                                                                      : "inner persistent";
  return fmt::format("{}: vectorize {}, {} threads per row, {} rows per block, {} chunks per thread{} ({})", kind,
                     vectorize, threads_x, threads_y, chunks, split, why);
}

namespace {

// Values a thread may keep in registers: what a block of `threads` leaves per thread of the SM's
// register file (a 1024-thread block gets 64 registers each), less the kernel's own indexing and
// temporaries, so a row never spills to local memory.
int64_t registerValuesPerThread(const DeviceInfo& device, int64_t threads) {
  const int64_t regs = std::min<int64_t>(device.max_regs_per_thread, device.regs_per_sm / std::max<int64_t>(threads, 1));
  return std::min(device.tuning.persistent_values, std::max<int64_t>(regs - 32, 0));
}

// Splits of a row among blocks when the rows alone leave the GPU mostly idle: enough blocks for two
// waves, but every split long enough (`min_split` elements) that the partials stay cheap.
int64_t chooseSplits(const DeviceInfo& device, int64_t blocks, int64_t row_length, int64_t min_split) {
  if (blocks >= device.sm_count) return 1;
  const int64_t wanted = ceilDiv(2 * static_cast<int64_t>(device.sm_count), std::max<int64_t>(blocks, 1));
  return std::clamp<int64_t>(std::min(wanted, row_length / std::max<int64_t>(min_split, 1)), 1, 65535);
}

ReductionParams outerReduction(const DeviceInfo& device, const ReductionProblem& problem, ReductionParams p) {
  // Consecutive threads take consecutive (vectors of) kept elements: coalesced; threads in y split the
  // reduced elements and are combined by a block reduction.
  const int64_t kept_vectors = ceilDiv(problem.rows, p.vectorize);
  p.threads_x = std::clamp<int64_t>(nextPow2(kept_vectors), 1, 32);
  // Up to twice the tuned block (the block reduction across y is cheap), never past the device's limit.
  const int64_t block = std::min<int64_t>(device.tuning.block_threads * 2, device.max_threads_per_block);
  p.threads_y = std::clamp<int64_t>(nextPow2(problem.row_length), 1, block / p.threads_x);
  p.grid = ceilDiv(kept_vectors, p.threads_x);
  p.why = "reduced dims are outer";
  if (problem.splittable) {
    p.splits = chooseSplits(device, p.grid, problem.row_length, std::max<int64_t>(p.threads_y * 16, kMinSplit / 8));
    if (p.splits > 1) {
      p.split_length = ceilDiv(problem.row_length, p.splits);
      p.splits = ceilDiv(problem.row_length, p.split_length);
      p.why = fmt::format("{} blocks would leave most of {} SMs idle", p.grid, device.sm_count);
    }
  }
  return p;
}

}  // namespace

ReductionParams reductionHeuristics(const DeviceInfo& device, const ReductionProblem& problem) {
  ReductionParams p;
  p.inner = problem.inner;
  p.vectorize = std::max<int64_t>(problem.max_vectorize, 1);
  if (!problem.inner) return outerReduction(device, problem, p);
  const int64_t row_chunks = std::max<int64_t>(ceilDiv(problem.row_length, p.vectorize), 1);
  // Threads per row: a power of two leaving few idle lanes, with at most tuning.max_chunks_per_thread chunks each.
  int64_t best = -1;
  double best_waste = 2.0;
  for (int64_t t = 1; t <= device.max_threads_per_block; t *= 2) {
    const int64_t chunks = ceilDiv(row_chunks, t);
    if (chunks > device.tuning.max_chunks_per_thread) continue;
    const double waste = 1.0 - static_cast<double>(row_chunks) / static_cast<double>(chunks * t);
    // Prefer fewer threads unless they leave much more of the last chunk idle.
    if (best < 0 || waste + 1e-9 < best_waste - 0.1) {
      best = t;
      best_waste = waste;
    }
  }
  if (best < 0) best = device.max_threads_per_block;
  p.threads_x = best;
  p.chunks = ceilDiv(row_chunks, p.threads_x);
  p.threads_y = std::max<int64_t>(device.tuning.block_threads / p.threads_x, 1);
  p.threads_y = std::min(p.threads_y, nextPow2(problem.rows));
  p.grid = std::max<int64_t>(ceilDiv(problem.rows, p.threads_y), 1);
  const int64_t threads = p.threads_x * p.threads_y;
  const int64_t cached = std::max<int64_t>(problem.cached_tensors, 1);
  const int64_t values = p.chunks * p.vectorize * cached;
  const int64_t register_budget = registerValuesPerThread(device, threads);
  // Shared memory for a row: every thread's values, plus what the block reduction itself declares.
  const int64_t shared_bytes = values * threads * problem.cached_value_bytes;
  const int64_t shared_budget = device.smem_per_block_optin - threads * 8;
  if (problem.wants_persistent && values <= register_budget) {
    p.persistent = true;
    p.why = fmt::format("row kept in registers: {} values per thread", values);
  } else if (problem.wants_persistent && shared_bytes <= shared_budget) {
    p.persistent = true;
    p.shared_cache = true;
    p.why = fmt::format("row kept in shared memory: {} values per thread > {} for registers, {} KiB per block",
                        values, register_budget, ceilDiv(shared_bytes, 1024));
  } else if (problem.wants_persistent) {
    p.why = fmt::format("row too large to keep ({} values per thread, {} KiB per block): re-read from L2/HBM", values,
                        ceilDiv(shared_bytes, 1024));
  } else {
    p.why = "plain reduction";
    if (problem.splittable) {
      // A split walks whole passes of the block over the row: a multiple of threads_x chunks.
      const int64_t pass = p.threads_x * p.vectorize;
      p.splits = chooseSplits(device, p.grid, problem.row_length, std::max<int64_t>(pass * 4, kMinSplit));
      if (p.splits > 1) {
        p.split_length = ceilDiv(ceilDiv(problem.row_length, p.splits), pass) * pass;
        p.splits = ceilDiv(problem.row_length, p.split_length);
        p.chunks = p.split_length / pass;
        p.why = fmt::format("{} rows would leave most of {} SMs idle", problem.rows, device.sm_count);
      }
    }
  }
  return p;
}

std::string TransposeParams::toString() const {
  std::vector<std::string> parts;
  for (const TransposeGroupParams& g : groups) {
    const std::string dims =
        g.dim_a >= 0 ? fmt::format("a={}, b={}", g.dim_a, g.dim_b) : fmt::format("b={}", g.dim_b);
    parts.push_back(fmt::format("tile {}x{}, dims ({}), {} staged input{}", g.tile_a, g.tile_b, dims, g.staged,
                                g.staged == 1 ? "" : "s"));
  }
  return fmt::format("transpose: {}; vectorize {}, block {}, shared {} B", fmt::join(parts, "; "), vectorize, threads,
                     shared_bytes);
}

TransposeParams transposeHeuristics(const DeviceInfo& device, const TransposeProblem& problem) {
  TransposeParams p;
  p.vectorize = std::max<int64_t>(problem.max_vectorize, 1);
  p.threads = kTransposeThreads;
  const int64_t vec = p.vectorize;
  const int64_t budget = std::min<int64_t>(kTransposeSharedCap, device.smem_per_sm / 4);
  const int64_t resident_blocks = static_cast<int64_t>(device.sm_count) * (device.max_threads_per_sm / p.threads);
  for (const TransposeGroupProblem& gp : problem.groups) {
    TransposeGroupParams g;
    g.dim_a = gp.dim_a;
    g.dim_b = gp.dim_b;
    int64_t numel = 1;
    for (int64_t s : gp.sizes) numel *= s;
    if (gp.dim_b < 0 || numel == 0) {
      p.groups.push_back(g);
      continue;
    }
    const int64_t sb = gp.sizes[gp.dim_b];
    const int64_t sa = gp.dim_a >= 0 ? gp.sizes[gp.dim_a] : 1;
    const int64_t others = numel / (sa * sb);
    // Phase 2 stores rows of tile_b elements: 8 threads of 16-byte vectors or 32 threads of scalars
    // make at least 128 contiguous bytes per row; small extents shrink the tile instead of idling.
    const int64_t row = std::max(vec, nextPow2(sb));
    if (gp.dim_a < 0) {
      g.tile_b = std::min(p.threads * vec, row);
    } else if (gp.candidate_bytes.empty()) {
      // Nothing to stage (another group of the kernel is transposed): a tile of a whole block's
      // worth of points, each thread one chunk.
      g.tile_b = std::min(std::max<int64_t>(32, 8 * vec), row);
      g.tile_a = std::min(nextPow2(sa), std::max<int64_t>(p.threads * vec / g.tile_b, 1));
    } else {
      g.tile_a = std::min<int64_t>(32, nextPow2(sa));
      g.tile_b = std::min(std::max<int64_t>(32, 8 * vec), row);
      // Large problems: 64-point tiles give each thread four times the loads in flight and halve
      // the blocks, worth it while the bigger tiles still fill every SM twice over.
      const bool big = sa >= 64 && sb >= 64 && ceilDiv(sa, 64) * ceilDiv(sb, 64) * others >= 2 * resident_blocks;
      auto fits = [&](int64_t tile_a, int64_t tile_b) {
        int64_t n = 0, bytes = p.shared_bytes;
        for (int64_t b : gp.candidate_bytes) {
          if (bytes + tileBytes(tile_a, tile_b, b) > budget) break;
          bytes += tileBytes(tile_a, tile_b, b);
          ++n;
        }
        return n;
      };
      if (big && fits(64, std::max<int64_t>(64, 8 * vec)) == static_cast<int64_t>(gp.candidate_bytes.size())) {
        g.tile_a = 64;
        g.tile_b = std::max<int64_t>(64, 8 * vec);
      }
      g.staged = fits(g.tile_a, g.tile_b);
      for (int64_t i = 0; i < g.staged; ++i) p.shared_bytes += tileBytes(g.tile_a, g.tile_b, gp.candidate_bytes[i]);
    }
    g.blocks = ceilDiv(sa, g.tile_a) * ceilDiv(sb, g.tile_b) * others;
    p.grid += g.blocks;
    p.groups.push_back(g);
  }
  return p;
}

}  // namespace braze
