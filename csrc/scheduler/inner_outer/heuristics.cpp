#include "scheduler/inner_outer/heuristics.h"

#include <fmt/format.h>

#include <algorithm>

namespace braze {
namespace {

// Each block walks at least this many row groups: fewer, and the partial sums (a row of floats per
// block row and outer reduction) approach the bytes of the rows themselves.
constexpr int64_t kMinRowGroupsPerBlock = 4;
// Shared memory a block may take to add up its thread rows' partial sums: beyond it (wide rows, which
// have few rows per block anyway) each thread row stores its own.
constexpr int64_t kMaxCombineBytes = 32 * 1024;
// Rows of an extra reduction whose loads a thread has in flight at once, at most.
constexpr int64_t kMaxExtraRowsInFlight = 4;

// Grouped reductions: as many items as the blocks chosen for the rows (a group split into slices where
// groups are fewer), then as many blocks as keep every block at the same item count.
void chooseGroupItems(const GroupedOuterProblem& grouped, InnerOuterParams& p) {
  const int64_t thread_rows = p.inner.threads_y;
  const int64_t group_row_groups = std::max<int64_t>(ceilDiv(grouped.group_rows, thread_rows), 1);
  const int64_t slices = std::clamp<int64_t>(ceilDiv(p.blocks, std::max<int64_t>(grouped.groups, 1)), 1,
                                             group_row_groups);
  p.slice_rows = ceilDiv(group_row_groups, slices) * thread_rows;
  p.group_slices = std::max<int64_t>(ceilDiv(grouped.group_rows, p.slice_rows), 1);
  const int64_t items = std::max<int64_t>(p.groupItems(), 1);
  const int64_t waves = ceilDiv(items, std::min(p.blocks, items));
  p.blocks = ceilDiv(items, waves);
}

}  // namespace

std::string InnerOuterParams::toString() const {
  std::string extra;
  for (const ExtraOuterParams& e : extras) {
    const std::string over = e.own_rows == 0 ? "the rows" : fmt::format("{} rows of their own", e.own_rows);
    extra += fmt::format("; {} more columns over {}: vectorize {}, {} chunks per thread, {} rows in flight",
                         e.columns, over, e.vectorize, e.chunks, e.rows_in_flight);
  }
  if (problem.grouped.reductions > 0) {
    extra += fmt::format("; {} sums over the {} rows of each of {} groups: {} slice(s) of {} rows per block item",
                         problem.grouped.reductions, problem.grouped.group_rows, problem.grouped.groups, group_slices,
                         slice_rows);
  }
  std::string beside;
  for (const PointwiseParams& part : parts) beside += fmt::format("; then {}", part.toString());
  return fmt::format("inner-outer persistent: {}{}; {}partial sums finished by a {}x{} block (columns x partial "
                     "rows){}",
                     inner.toString(), extra, combine_in_block ? "a partial row per block, its thread rows added in "
                                                                 "shared memory; " : "",
                     finish_threads_x, finish_threads_y, beside);
}

InnerOuterParams innerOuterHeuristics(const DeviceInfo& given, const InnerOuterProblem& problem) {
  // Grouped reductions walk the rows in their own order, which a staged kernel's copies of the next row
  // group do not follow.
  DeviceInfo device = given;
  if (problem.grouped.reductions > 0) device.tuning.persistent_staged = 0;
  InnerOuterParams p;
  p.problem = problem;
  ReductionProblem rows = problem.rows;
  rows.wants_persistent = true;
  rows.splittable = false;
  // A thread keeps one partial sum per element of its row share and outer (or grouped) reduction: like a
  // kept tensor.
  rows.cached_tensors = std::max<int64_t>(rows.cached_tensors, 1) + problem.outer_reductions +
                        problem.grouped.reductions;
  // An item of a grouped walk holds one group's rows: no more thread rows than a group has.
  if (problem.grouped.reductions > 0) {
    rows.rows = std::clamp<int64_t>(problem.grouped.group_rows, 1, std::max<int64_t>(rows.rows, 1));
  }
  p.inner = reductionHeuristics(device, rows);
  // The shared memory of the rows kept there (or staged), and of a grouped item's thread rows adding up
  // their sums.
  const auto row_cache_bytes_of = [&](const ReductionParams& inner) -> int64_t {
    const int64_t kept_values = inner.chunks * inner.vectorize * rows.cached_tensors;
    return inner.shared_cache ? kept_values * inner.threads_x * inner.threads_y * problem.rows.cached_value_bytes
           : inner.staged     ? 2 * inner.stage_bytes
                              : 0;
  };
  const auto group_combine_bytes_of = [&](const ReductionParams& inner) -> int64_t {
    return inner.threads_y > 1 ? problem.grouped.reductions * inner.threads_y * problem.rows.row_length *
                                     problem.accumulator_bytes
                               : 0;
  };
  // (With a KiB to spare for the block reductions' own shared memory and each array's alignment.) Where an
  // item's sums would not fit beside the row cache, one thread row per block, which adds up nothing.
  if (problem.grouped.reductions > 0 &&
      row_cache_bytes_of(p.inner) + group_combine_bytes_of(p.inner) + 1024 > device.smem_per_block_optin) {
    rows.rows = 1;
    p.inner = reductionHeuristics(device, rows);
  }
  p.inner.problem.rows = problem.rows.rows;
  p.inner.grid = std::max<int64_t>(ceilDiv(problem.rows.rows, p.inner.threads_y), 1);
  const int64_t threads = p.inner.threads_x * p.inner.threads_y;
  // Registers: the kept row (dead by the time the extra rows are walked) or, streamed, a few vectors.
  const int64_t kept = p.inner.chunks * p.inner.vectorize * rows.cached_tensors;
  // Staged (tuning persistent_staged=1): the rows are in shared memory, the partial sums in registers.
  const bool in_registers = p.inner.persistent && !p.inner.shared_cache && !p.inner.staged;
  int64_t extra_sums = 0;  // per thread, over the extra reductions
  for (const ExtraOuterProblem& e : problem.extras) {
    ExtraOuterParams ep;
    ep.columns = e.columns;
    ep.own_rows = e.own_rows;
    ep.vectorize = std::max<int64_t>(e.max_vectorize, 1);
    ep.chunks = std::max<int64_t>(ceilDiv(e.columns, threads * ep.vectorize), 1);
    // A row's loads hold chunks x vectorize elements in registers until they are added: as many rows in
    // flight as the registers of the kept rows (dead by then; not the outer sums, still live) hold.
    const int64_t row_registers = ceilDiv(ep.chunks * ep.vectorize * std::max<int64_t>(e.element_bytes, 1), 4);
    const int64_t free_registers = in_registers ? kept - p.inner.chunks * p.inner.vectorize * problem.outer_reductions : 32;
    ep.rows_in_flight = std::clamp<int64_t>(free_registers / row_registers, 1, kMaxExtraRowsInFlight);
    p.extras.push_back(ep);
    extra_sums += ep.chunks * ep.vectorize;
  }
  const int64_t row_groups = std::max<int64_t>(ceilDiv(problem.rows.rows, p.inner.threads_y), 1);
  // Resident blocks per SM: by threads, and by registers (kept values plus the kernel's own ~32).
  // A staged kernel is counted as if its rows were kept: its blocks walk the rows once, so one that the SMs
  // cannot hold at once would wait for another to finish them all (the layer-norm backward at 4096 columns
  // takes 80 registers staged, 103 kept; its partial sums and temporaries alone would count 48).
  const int64_t regs = std::min<int64_t>(device.max_regs_per_thread,
                                         (in_registers || p.inner.staged ? kept : 0) + extra_sums + 32);
  int64_t per_sm = std::max<int64_t>(device.max_threads_per_sm / threads, 1);
  per_sm = std::clamp<int64_t>(device.regs_per_sm / (threads * regs), 1, per_sm);
  const int64_t combine_bytes = problem.outer_reductions * p.inner.threads_y * problem.rows.row_length *
                                problem.accumulator_bytes;
  const int64_t row_cache_bytes = row_cache_bytes_of(p.inner);
  p.group_combine_bytes = group_combine_bytes_of(p.inner);
  p.combine_in_block = p.inner.threads_y > 1 && combine_bytes <= kMaxCombineBytes &&
                       row_cache_bytes + p.group_combine_bytes + combine_bytes + 1024 <= device.smem_per_block_optin;
  p.combine_bytes = p.combine_in_block ? combine_bytes : 0;
  const int64_t shared = row_cache_bytes + p.group_combine_bytes + p.combine_bytes;
  if (shared > 0) per_sm = std::clamp<int64_t>(device.smem_per_sm / shared, 1, per_sm);
  const int64_t resident = static_cast<int64_t>(device.sm_count) * per_sm;
  // A block per SM at least while there are row groups for them, more while each keeps several.
  const int64_t floor = std::min<int64_t>(device.sm_count, row_groups);
  p.blocks = std::clamp<int64_t>(row_groups / kMinRowGroupsPerBlock, floor, std::max(resident, floor));
  if (problem.grouped.reductions > 0) chooseGroupItems(problem.grouped, p);
  p.partial_rows = p.combine_in_block ? p.blocks : p.blocks * p.inner.threads_y;
  // The finish: a warp (wavefront) across columns, the rest of a tuned block down the partial rows.
  p.finish_threads_x = device.warp_size;
  // Twice the tuned block, within what a block may launch (block_threads=1024 would ask for 2048).
  const int64_t finish_threads = std::min<int64_t>(device.tuning.block_threads * 2, device.max_threads_per_block);
  p.finish_threads_y = std::clamp<int64_t>(nextPow2(p.partial_rows), 1,
                                           std::max<int64_t>(finish_threads / device.warp_size, 1));
  return p;
}

}  // namespace braze
