#include "scheduler/pointwise/heuristics.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace braze {

std::string PointwiseParams::toString() const {
  std::string beside;
  for (const PointwiseParams& part : more_parts) beside += "; then " + part.toString();
  if (break_point > 0) {
    return fmt::format(
        "pointwise 2D: rows = dims [0, {}), columns {}, vectorize {}, block {}x{}, {} rows per thread{}", break_point,
        inner, vectorize, threads_x, threads_y, unroll, beside);
  }
  return fmt::format("pointwise: vectorize {}, unroll {}, block {}{}", vectorize, unroll, block, beside);
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

PointwiseParams inBlocksOf(PointwiseParams params, int64_t threads) {
  if (params.break_point > 0) params = PointwiseParams{.vectorize = params.vectorize, .more_parts = std::move(params.more_parts)};
  params.block = threads;
  for (PointwiseParams& part : params.more_parts) part = inBlocksOf(std::move(part), threads);
  return params;
}

PointwiseParams joinPointwiseParts(std::vector<PointwiseParams> parts) {
  if (parts.empty()) return {};
  // Every part's blocks have the first's shape or as many threads in one dimension (kernel/joined_kernel.h).
  int64_t threads = parts[0].break_point > 0 ? parts[0].threads_x * parts[0].threads_y : 1;
  for (const PointwiseParams& p : parts) {
    if (parts[0].break_point == 0) threads = std::max(threads, p.break_point > 0 ? p.threads_x * p.threads_y : p.block);
  }
  PointwiseParams joined = std::move(parts[0]);
  if (joined.break_point == 0) joined.block = threads;
  for (size_t i = 1; i < parts.size(); ++i) joined.more_parts.push_back(inBlocksOf(std::move(parts[i]), threads));
  return joined;
}

}  // namespace braze
