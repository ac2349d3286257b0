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

// Register budget of a persistent row, in values per thread: what stays of 255 registers after the
// kernel's own indexing and temporaries, so a row never spills to local memory.
constexpr int64_t kPersistentValuesPerThread = 96;
// Threads per block the heuristics aim at: four warps keep enough blocks per SM for latency hiding
// and make a block reduction cheap.
constexpr int64_t kTargetBlock = 128;
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
  return fmt::format("pointwise: vectorize {}, unroll {}, block {}, grid {}", vectorize, unroll, block, grid);
}

PointwiseParams pointwiseHeuristics(const DeviceInfo& device, const PointwiseProblem& problem) {
  PointwiseParams p;
  p.vectorize = std::max<int64_t>(problem.max_vectorize, 1);
  const int64_t chunks = std::max<int64_t>(ceilDiv(problem.total_elements, p.vectorize), 1);
  // Small problems: a block of at least one warp, no bigger than the work.
  p.block = std::clamp<int64_t>(nextPow2(chunks), device.warp_size, kTargetBlock);
  // Unroll (several independent vector chunks per thread, for memory-level parallelism) only when
  // there are enough chunks to keep every SM full several times over.
  const int64_t resident = static_cast<int64_t>(device.sm_count) * device.max_threads_per_sm;
  p.unroll = 1;
  while (p.unroll < 4 && chunks >= resident * p.unroll * 4) p.unroll *= 2;
  p.grid = std::max<int64_t>(ceilDiv(chunks, p.block * p.unroll), 1);
  return p;
}

std::string ReductionParams::toString() const {
  if (!inner) {
    return fmt::format("outer reduction: vectorize {}, block {}x{} (kept x reduced), grid {}", vectorize, threads_x,
                       threads_y, grid);
  }
  return fmt::format("{}: vectorize {}, {} threads per row, {} rows per block, {} chunks per thread, grid {} ({})",
                     persistent ? "inner persistent" : "inner reduction", vectorize, threads_x, threads_y, chunks, grid,
                     why);
}

ReductionParams reductionHeuristics(const DeviceInfo& device, const ReductionProblem& problem) {
  ReductionParams p;
  p.inner = problem.inner;
  p.vectorize = std::max<int64_t>(problem.max_vectorize, 1);
  if (!problem.inner) {
    // Outer: consecutive threads take consecutive kept elements (coalesced); threads in y split the
    // reduced elements and are combined by a block reduction.
    p.vectorize = 1;
    p.threads_x = std::clamp<int64_t>(nextPow2(problem.rows), 1, 32);
    p.threads_y = std::clamp<int64_t>(nextPow2(problem.row_length), 1, kTargetBlock * 2 / p.threads_x);
    p.grid = ceilDiv(problem.rows, p.threads_x);
    p.why = "reduced dims are outer";
    return p;
  }
  const int64_t row_chunks = std::max<int64_t>(ceilDiv(problem.row_length, p.vectorize), 1);
  // Threads per row: a power of two leaving few idle lanes, with at most 8 chunks per thread.
  int64_t best = -1;
  double best_waste = 2.0;
  for (int64_t t = 1; t <= device.max_threads_per_block; t *= 2) {
    const int64_t chunks = ceilDiv(row_chunks, t);
    if (chunks > 8) continue;
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
  p.threads_y = std::max<int64_t>(kTargetBlock / p.threads_x, 1);
  p.threads_y = std::min(p.threads_y, nextPow2(problem.rows));
  const int64_t values = p.chunks * p.vectorize * std::max<int64_t>(problem.cached_tensors, 1);
  if (problem.wants_persistent && values <= kPersistentValuesPerThread) {
    p.persistent = true;
    p.why = fmt::format("row kept in registers: {} values per thread", values);
  } else if (problem.wants_persistent) {
    p.why = fmt::format("row too large for registers ({} values per thread > {}): re-read from L2/HBM", values,
                        kPersistentValuesPerThread);
  } else {
    p.why = "plain reduction";
  }
  p.grid = std::max<int64_t>(ceilDiv(problem.rows, p.threads_y), 1);
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
  return fmt::format("transpose: {}; vectorize {}, block {}, grid {}, shared {} B", fmt::join(parts, "; "), vectorize,
                     threads, grid, shared_bytes);
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
