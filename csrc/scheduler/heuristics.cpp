#include "scheduler/heuristics.h"

#include <fmt/format.h>

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

}  // namespace braze
