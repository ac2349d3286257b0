#include "scheduler/scan/heuristics.h"

#include "scheduler/heuristics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace braze {

namespace {

// Resident blocks per SM, at most (sm_80 and sm_90 allow 32).
constexpr int64_t kMaxBlocksPerSm = 32;
// Lanes an SM issues an instruction for per cycle (4 schedulers of a warp each): how much of the
// work of many lines runs at once.
constexpr int64_t kLanesPerSm = 128;
// One step of a block sort's network (a compare-and-swap through shared memory, then a barrier)
// against one compare of a line walk (a load and a compare in registers): a guess at the ratio of
// their times that only timings on a GPU can settle.
constexpr int64_t kNetworkStepCost = 4;

int64_t log2Of(int64_t pow2) {
  int64_t log = 0;
  while ((int64_t{1} << log) < pow2) ++log;
  return log;
}

// The compares of one line walked by one thread, on data in no particular order: each element is
// compared with the last kept one, and the i-th enters with odds keep / i, moving past about keep / 2
// of the kept ones (an insertion sort of the whole line where everything is kept).
double walkCompares(int64_t extent, int64_t keep) {
  const auto n = static_cast<double>(extent), k = static_cast<double>(std::min(keep, extent));
  if (keep >= extent) return n + n * n / 4;
  return n + k * k / 2 * std::log(n / k);
}

// How long `lines` lines take when each is a chain of `chain` steps and all of them `total`: the
// longest chain, or the whole work spread over every lane of the GPU.
double timeOf(const DeviceInfo& device, double chain, double total) {
  return std::max(chain, total / static_cast<double>(device.sm_count * kLanesPerSm));
}

}  // namespace

int64_t blockSortBytes(int64_t slots, int64_t key_bytes) { return slots * (key_bytes + 8); }

std::string ScanParams::toString() const {
  if (sort_slots > 0) {
    return fmt::format("scan: block sort of {} slots per line, {} pass(es), block {}", sort_slots, sort_passes, block);
  }
  return fmt::format("scan: one thread per line, block {}", block);
}

ScanParams scanHeuristics(const DeviceInfo& device, const ScanProblem& problem) {
  ScanParams p;
  // Few lines: a block no wider than they need (a warp at least), so the threads that work share it.
  const int64_t widest = std::max<int64_t>(device.warp_size, device.tuning.block_threads);
  p.block = std::clamp<int64_t>(nextPow2(std::max<int64_t>(problem.lines, 1)), device.warp_size, widest);
  p.grid = std::max<int64_t>(ceilDiv(problem.lines, p.block), 1);
  if (problem.keep <= 0 || problem.extent < 2 || problem.lines <= 0) return p;

  // A block sort: slots enough for the whole line where it is kept (argsort), else at least twice the
  // kept elements (each pass then takes in as many new ones) and two per thread of the widest block.
  const int64_t fits = device.smem_per_block_optin;
  const int64_t keep = std::min(problem.keep, problem.extent);
  const int64_t need = nextPow2(keep >= problem.extent ? problem.extent : 2 * keep);
  if (blockSortBytes(need, problem.key_bytes) > fits) return p;
  const int64_t block_widest = std::min<int64_t>(device.max_threads_per_block, 1024);
  int64_t slots = keep >= problem.extent ? need : std::min(nextPow2(problem.extent), std::max(need, 2 * block_widest));
  while (slots > need && blockSortBytes(slots, problem.key_bytes) > fits) slots /= 2;
  const int64_t block = std::clamp<int64_t>(slots, device.warp_size, block_widest);
  const int64_t passes =
      problem.extent <= slots ? 1 : 1 + ceilDiv(problem.extent - slots, slots - keep);
  const int64_t log = log2Of(slots);
  const auto lines = static_cast<double>(problem.lines);
  // Each pass loads its slots, then runs log (log + 1) / 2 network steps over all of them; a thread
  // takes slots / block of them.
  const auto per_slot = static_cast<double>(1 + log * (log + 1) / 2 * kNetworkStepCost);
  const auto slot_passes = static_cast<double>(passes * slots);
  const double block_time = timeOf(device, static_cast<double>(passes * ceilDiv(slots, block)) * per_slot,
                                   lines * slot_passes * per_slot);
  const double walk = walkCompares(problem.extent, keep);
  const double walk_time = timeOf(device, walk, lines * walk);
  if (block_time >= walk_time) return p;

  const int64_t per_sm = std::clamp<int64_t>(
      std::min(device.max_threads_per_sm / block, device.smem_per_sm / blockSortBytes(slots, problem.key_bytes)), 1,
      kMaxBlocksPerSm);
  p.block = block;
  p.grid = std::min<int64_t>(problem.lines, device.sm_count * per_sm);
  p.sort_slots = slots;
  p.sort_passes = passes;
  return p;
}

}  // namespace braze
