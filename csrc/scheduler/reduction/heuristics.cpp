#include "scheduler/reduction/heuristics.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace braze {
namespace {

// Reduced elements per split of a grid reduction, at least: below that, writing and combining the
// partials costs more than the parallelism gains.
constexpr int64_t kMinSplit = 4096;
// Outer reductions: reduced elements (rows) each thread in y walks per split, at least.
constexpr int64_t kMinOuterRowsPerThread = 8;

}  // namespace

std::string ReductionParams::toString() const {
  // An outer reduction's split length is a launch argument (the launch summary shows it), not the kernel's.
  const std::string split = splits <= 1 ? ""
                            : inner     ? fmt::format(", split over {} blocks per row ({} elements each)", splits, split_length)
                                        : fmt::format(", split over {} blocks per row", splits);
  if (!inner) {
    std::string beside;
    std::vector<int64_t> vectors;
    bool same_rows = true;
    for (const ReductionPart& part : more_parts) {
      if (part.pointwise) continue;
      vectors.push_back(part.vectorize);
      same_rows = same_rows && part.problem.row_length == problem.row_length;
    }
    if (!vectors.empty()) {
      beside = fmt::format("; beside it in the blocks after, {} more over {} (vectorize {})", vectors.size(),
                           same_rows ? "the same rows" : "rows of their own", fmt::join(vectors, ", "));
    }
    for (const ReductionPart& part : more_parts) {
      if (part.pointwise) beside += fmt::format("; then {}", part.pointwise->toString());
    }
    return fmt::format("outer reduction: vectorize {}, block {}x{} (kept x reduced){} ({}){}", vectorize, threads_x,
                       threads_y, split, why, beside);
  }
  const char* kind = !persistent    ? "inner reduction"
                     : staged       ? "inner persistent (staged in shared memory)"
                     : shared_cache ? "inner persistent (shared memory)"
                                    : "inner persistent";
  std::string beside;
  if (problem.row_totals > 0) {
    beside = fmt::format("; then {} total{} over the rows, combined by the last block", problem.row_totals,
                         problem.row_totals == 1 ? "" : "s");
  }
  for (const ReductionPart& part : more_parts) {
    if (part.pointwise) beside += fmt::format("; then {}", part.pointwise->toString());
  }
  return fmt::format("{}: vectorize {}, {} threads per row, {} rows per block, {} chunks per thread{} ({}){}", kind,
                     vectorize, threads_x, threads_y, chunks, split, why, beside);
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

// Consecutive threads take consecutive (vectors of) kept elements: coalesced; a warp (wavefront) at most
// across them, threads in y split the reduced elements and are combined by a block reduction.
void outerBlock(const DeviceInfo& device, const ReductionProblem& problem, int64_t kept_vectors, ReductionParams& p) {
  p.threads_x = std::clamp<int64_t>(nextPow2(kept_vectors), 1, device.warp_size);
  // Up to twice the tuned block (the block reduction across y is cheap), never past the device's limit.
  const int64_t block = std::min<int64_t>(device.tuning.block_threads * 2, device.max_threads_per_block);
  p.threads_y = std::clamp<int64_t>(nextPow2(problem.row_length), 1, block / p.threads_x);
}

// A split of the rows among `blocks` blocks in y (each of the kernel's blocks in x), where they would
// leave most SMs idle. A split gives each thread in y at least kMinOuterRowsPerThread rows: the partials
// (a kept row per split) stay small next to the rows themselves, while bias grads over a few thousand
// rows still fill the GPU.
void splitOuterRows(const DeviceInfo& device, int64_t row_length, int64_t blocks, ReductionParams& p) {
  p.splits = chooseSplits(device, blocks, row_length, p.threads_y * kMinOuterRowsPerThread);
  if (p.splits > 1) {
    p.split_length = ceilDiv(row_length, p.splits);
    p.splits = ceilDiv(row_length, p.split_length);
    p.why = fmt::format("{} blocks would leave most of {} SMs idle", blocks, device.sm_count);
  }
}

ReductionParams outerReduction(const DeviceInfo& device, const ReductionProblem& problem, ReductionParams p) {
  const int64_t kept_vectors = ceilDiv(problem.rows, p.vectorize);
  outerBlock(device, problem, kept_vectors, p);
  p.grid = ceilDiv(kept_vectors, p.threads_x);
  p.why = "reduced dims are outer";
  if (problem.splittable) splitOuterRows(device, problem.row_length, p.grid, p);
  return p;
}

// Staging (tuning.persistent_staged, ReductionParams::staged) of a row kept in registers: where the GPU
// has cp.async (sm_80 on), every staged input's chunk is whole cp.asyncs (4, 8 or 16 bytes, or 16-byte
// pieces) and two stages fit a block. The grid is the blocks the SMs hold at once, each walking the same
// number of row groups but the last: a block beyond them would start only when another had walked all
// of its groups, doubling the time. So the count is a floor: by threads, shared memory, and registers as
// if the row were still kept in them (`values` per thread and the kernel's own 32; the staged kernel
// needs fewer, but softmax keeps exp(x - max) in registers across its passes anyway).
void stageRows(const DeviceInfo& device, const ReductionProblem& problem, int64_t values, ReductionParams& p) {
  if (device.tuning.persistent_staged != 1 || device.vendor != GpuVendor::Nvidia || device.major < 8) return;
  if (!p.persistent || p.shared_cache || p.splits > 1 || problem.row_data_bytes <= 0) return;
  const int64_t chunk_bytes = p.vectorize * problem.row_data_min_bytes;
  if (chunk_bytes % 4 != 0) return;  // wider elements' chunks are then multiples of 4 (or of 16 past 16)
  const int64_t threads = p.threads_x * p.threads_y;
  const int64_t stage = p.threads_y * p.chunks * p.threads_x * p.vectorize * problem.row_data_bytes;
  if (2 * stage + threads * 8 > device.smem_per_block_optin) return;
  // Per block: two stages, each staged input's array 128-byte aligned, and the block reduction's words.
  const int64_t block_smem = 2 * stage + 1024;
  const int64_t registers = std::min<int64_t>(device.max_regs_per_thread, (values + 32 + 7) / 8 * 8);
  const int64_t resident = std::max<int64_t>(std::min({device.max_threads_per_sm / threads, device.smem_per_sm / block_smem,
                                                       device.regs_per_sm / (threads * registers)}),
                                             1);
  const int64_t groups = ceilDiv(problem.rows, p.threads_y);
  const int64_t most = std::max<int64_t>(std::min(groups, resident * device.sm_count), 1);
  const int64_t per_block = std::max<int64_t>(ceilDiv(groups, most), 1);
  p.staged = true;
  p.stage_bytes = stage;
  p.grid = std::max<int64_t>(ceilDiv(groups, per_block), 1);
  // Nothing that depends on the row count: the text heads the kernel's source, which serves every row count.
  p.why = fmt::format("rows staged by cp.async, {} KiB per stage, up to {} blocks per SM", ceilDiv(stage, 1024), resident);
}

}  // namespace

ReductionParams outerReductionParts(const DeviceInfo& device, const std::vector<ReductionProblem>& problems,
                                    int64_t min_threads) {
  ReductionParams p;
  p.inner = false;
  p.problem = problems.front();
  std::vector<int64_t> kept_vectors;
  int64_t widest = 0;
  bool splittable = true;
  ReductionProblem longest = problems.front();  // the most rows any part reduces: the block's y and the split
  for (const ReductionProblem& problem : problems) {
    kept_vectors.push_back(ceilDiv(problem.rows, std::max<int64_t>(problem.max_vectorize, 1)));
    widest = std::max(widest, kept_vectors.back());
    splittable = splittable && problem.splittable;
    longest.row_length = std::max(longest.row_length, problem.row_length);
  }
  outerBlock(device, longest, widest, p);
  // Threads in y past the rows idle in the reduction parts; blocks of other parts need them.
  p.threads_y = std::max(p.threads_y, std::min<int64_t>(min_threads, device.max_threads_per_block) / p.threads_x);
  int64_t blocks = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    const int64_t grid = ceilDiv(kept_vectors[i], p.threads_x);
    blocks += grid;
    if (i == 0) {
      p.vectorize = std::max<int64_t>(problems[i].max_vectorize, 1);
      p.grid = grid;
    } else {
      p.more_parts.push_back({std::max<int64_t>(problems[i].max_vectorize, 1), grid, problems[i]});
    }
  }
  p.why = "reduced dims are outer";
  if (splittable) splitOuterRows(device, longest.row_length, blocks, p);
  // One split count for all (the blocks in y); each part's splits as long as its rows need, so a part of
  // fewer rows than splits leaves its last splits empty (their partials the reduction's identity).
  p.split_length = partSplitLength(p.problem, p.splits);
  return p;
}

int64_t partSplitLength(const ReductionProblem& part, int64_t splits) {
  return splits > 1 ? std::max<int64_t>(ceilDiv(part.row_length, splits), 1) : 0;
}

// Totals over the rows (ReductionProblem::row_totals): the last block combines a partial per block, so the
// blocks are as many as the SMs hold at once, each walking every grid-th row group (the last fewer), rather
// than one block per row group: a router's z-loss over a million tokens of 64 experts would leave the
// last block 262,144 partials to read. Resident blocks by threads, and by the registers of a row kept in
// them (`values` and the kernel's own 32) or the shared memory of one kept there.
void walkRowGroupsForTotals(const DeviceInfo& device, int64_t values, int64_t shared_bytes, ReductionParams& p) {
  const int64_t threads = p.threads_x * p.threads_y;
  int64_t resident = std::max<int64_t>(device.max_threads_per_sm / threads, 1);
  if (p.persistent && !p.shared_cache) {
    const int64_t registers = std::min<int64_t>(device.max_regs_per_thread, (values + 32 + 7) / 8 * 8);
    resident = std::min(resident, device.regs_per_sm / (threads * registers));
  }
  if (p.shared_cache) resident = std::min(resident, device.smem_per_sm / (shared_bytes + 1024));
  const int64_t most = std::max<int64_t>(std::max<int64_t>(resident, 1) * device.sm_count, 1);
  const int64_t per_block = ceilDiv(p.grid, std::min(p.grid, most));
  p.grid = std::max<int64_t>(ceilDiv(p.grid, per_block), 1);
}

ReductionParams reductionHeuristics(const DeviceInfo& device, const ReductionProblem& problem) {
  ReductionParams p;
  p.inner = problem.inner;
  p.problem = problem;
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
  const int64_t cached = std::max<int64_t>(problem.cached_tensors, 1);
  auto shape = [&](int64_t threads_x) {
    p.threads_x = threads_x;
    p.chunks = ceilDiv(row_chunks, p.threads_x);
    p.threads_y = std::max<int64_t>(device.tuning.block_threads / p.threads_x, 1);
    p.threads_y = std::min(p.threads_y, nextPow2(problem.rows));
  };
  shape(best);
  // A row that would leave registers is spread over more threads first (fewer values each), while
  // that still fits the block.
  while (problem.wants_persistent && p.chunks > 1 && p.threads_x * 2 <= device.max_threads_per_block &&
         p.chunks * p.vectorize * cached > registerValuesPerThread(device, p.threads_x * p.threads_y)) {
    shape(p.threads_x * 2);
  }
  p.grid = std::max<int64_t>(ceilDiv(problem.rows, p.threads_y), 1);
  const int64_t threads = p.threads_x * p.threads_y;
  const int64_t values = p.chunks * p.vectorize * cached;
  const int64_t register_budget = registerValuesPerThread(device, threads);
  // Shared memory for a row: every thread's values, plus what the block reduction itself declares.
  const int64_t shared_bytes = values * threads * problem.cached_value_bytes;
  const int64_t shared_budget = device.smem_per_block_optin - threads * 8;
  if (problem.wants_persistent && values <= register_budget) {
    p.persistent = true;
    p.why = fmt::format("row kept in registers: {} values per thread", values);
    stageRows(device, problem, values, p);
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
  // (A staged kernel's blocks walk the row groups already, as many as the SMs hold.)
  if (problem.row_totals > 0 && !p.staged && p.splits == 1) walkRowGroupsForTotals(device, values, shared_bytes, p);
  return p;
}

}  // namespace braze
