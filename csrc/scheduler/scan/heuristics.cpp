#include "scheduler/scan/heuristics.h"

#include "scheduler/heuristics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace braze {

namespace {

// Resident blocks per SM, at most (sm_80 and sm_90 allow 32).
constexpr int64_t kMaxBlocksPerSm = 32;
// Lanes an SM issues an instruction for per cycle (4 schedulers of a warp each): how much of the
// work of many lines runs at once.
constexpr int64_t kLanesPerSm = 128;
// The cost model's unit is a cycle of one thread; its constants are guesses that only timings on a GPU
// can settle. A line walk spends kWalkCycles per element: a load and a compare in a loop, bound by the
// load's latency. A network step spends kNetworkStepCost instructions per pair of slots (the reads of
// their keys and indices, a compare, the writes of a swap) on the SM's lanes, and kBarrierCycles on its
// barrier.
constexpr int64_t kWalkCycles = 20;
constexpr int64_t kNetworkStepCost = 8;
constexpr int64_t kBarrierCycles = 40;

int64_t log2Of(int64_t pow2) {
  int64_t log = 0;
  while ((int64_t{1} << log) < pow2) ++log;
  return log;
}

// The time of one line walked by one thread, on data in no particular order: each element is
// compared with the last kept one, and the i-th enters with odds keep / i, moving past about keep / 2
// of the kept ones (an insertion sort of the whole line where everything is kept).
double walkCompares(int64_t extent, int64_t keep) {
  const auto n = static_cast<double>(extent), k = static_cast<double>(std::min(keep, extent));
  if (keep >= extent) return (n + n * n / 4) * kWalkCycles;
  return (n + k * k / 2 * std::log(n / k)) * kWalkCycles;
}

// How long work of `total` cycles takes when its longest chain is `chain` cycles: the chain, or the whole
// work spread over every lane of the GPU.
double timeOf(const DeviceInfo& device, double chain, double total) {
  return std::max(chain, total / static_cast<double>(device.sm_count * kLanesPerSm));
}

// A kernel launch and the gap before the next kernel: a few microseconds.
constexpr double kLaunchCycles = 5000;

// A block sort of `items` lines of `length` elements keeping the best `keep` of each: its slots, passes,
// block and grid, and its time in the cost model's cycles.
struct SortShape {
  int64_t slots = 0, passes = 0, block = 0, grid = 0;
  double chain = 0, total = 0;
};

// `slots`: the slots to use (0: enough for the whole line where it is kept or fits in twice the kept ones,
// else twice the kept ones and two per thread of the widest block, fewer where shared memory holds fewer).
// None where the kept ones do not fit.
std::optional<SortShape> sortShape(const DeviceInfo& device, const ScanProblem& problem, int64_t items,
                                   int64_t length, int64_t keep) {
  const bool ranks = rankSlots(problem.rank_keys, length);
  const int64_t slot_bytes = sortSlotBytes(problem, length);
  const int64_t fits = device.smem_per_block_optin;
  const int64_t block_widest = std::min<int64_t>(device.max_threads_per_block, 1024);
  // Rank slots: kRanksPerThread a thread, sorted in registers where they are near, and padded one per
  // thread (declareSortSlots); other slots: a thread per pair (the network's unit).
  auto blockOf = [&](int64_t slots) {
    return std::clamp<int64_t>(slots / (ranks ? kRanksPerThread : 2), device.warp_size, block_widest);
  };
  auto bytesOf = [&](int64_t slots) {
    const int64_t block = blockOf(slots);
    return blockSortBytes(ranks && slots / block >= 4 ? slots + block : slots, slot_bytes);
  };
  // One pass over the whole line where it is no longer than twice the kept ones (9 of 13 in 16 slots).
  const int64_t need = nextPow2(std::min(length, keep > INT64_MAX / 2 ? INT64_MAX : 2 * keep));
  if (bytesOf(need) > fits) return std::nullopt;
  SortShape s;
  s.slots = keep >= length ? need : std::min(nextPow2(length), std::max(need, 2 * block_widest));
  while (s.slots > need && bytesOf(s.slots) > fits) s.slots /= 2;
  s.block = blockOf(s.slots);
  s.passes = length <= s.slots ? 1 : 1 + ceilDiv(length - s.slots, s.slots - keep);
  const int64_t per_sm = std::clamp<int64_t>(
      std::min(device.max_threads_per_sm / s.block, device.smem_per_sm / bytesOf(s.slots)), 1, kMaxBlocksPerSm);
  s.grid = std::min<int64_t>(items, device.sm_count * per_sm);
  // Each pass loads its slots, then runs log (log + 1) / 2 network steps over all of them, a
  // compare-and-swap per pair; a block's threads share its SM's lanes.
  const int64_t log = log2Of(s.slots);
  const int64_t steps = log * (log + 1) / 2;
  const auto lanes = static_cast<double>(std::min(s.block, kLanesPerSm));
  const double per_pass = static_cast<double>(s.slots) + static_cast<double>(s.slots / 2 * steps * kNetworkStepCost);
  s.chain = static_cast<double>(s.passes) *
            (std::ceil(per_pass / lanes) + static_cast<double>(steps * kBarrierCycles));
  s.total = static_cast<double>(items) * static_cast<double>(s.passes) * per_pass;
  return s;
}

// A radix select: an item's elements held in registers, `per_thread` per thread (a 64-bit rank each), at
// most kRadixPerThread, in blocks of at most kRadixBlock threads, which leaves 128 registers a thread:
// NVRTC's sm_90 code for 8 ranks takes about 126 of them, and spills with 16; a line longer than a block
// holds is split into parts of kRadixBlock x kRadixPerThread elements.
constexpr int64_t kRadixPerThread = 8;
constexpr int64_t kRadixBlock = 512;
// Per element and pass: a shift, a compare and, for the elements still in the running, an add to a
// shared bin; per pass the digit's search (two sums of 16 bins) and three barriers.
constexpr int64_t kRadixElementCost = 4;
constexpr int64_t kRadixSearchCycles = 2 * 16 * 4;

struct RadixShape {
  int64_t block = 0, per_thread = 0, grid = 0, slots = 0;
  double chain = 0, total = 0;
};

// A radix select of `items` items of `length` elements keeping `keep`, on blocks of `block` threads (0: the
// narrowest that holds the item). None where it does not fit.
std::optional<RadixShape> radixShape(const DeviceInfo& device, int64_t items, int64_t length, int64_t keep,
                                     int64_t block = 0) {
  const int64_t widest = std::min<int64_t>(device.max_threads_per_block, kRadixBlock);
  RadixShape r;
  r.block = block > 0 ? block : std::clamp<int64_t>(nextPow2(ceilDiv(length, kRadixPerThread)), 128, widest);
  r.per_thread = ceilDiv(length, r.block);
  r.slots = std::max<int64_t>(2, nextPow2(keep));
  if (r.per_thread > kRadixPerThread || blockSortBytes(r.slots, kRankBytes) > device.smem_per_block_optin - kRadixSharedBytes) {
    return std::nullopt;
  }
  const int64_t per_sm = std::clamp<int64_t>(
      std::min(device.max_threads_per_sm / r.block, device.smem_per_sm / (blockSortBytes(r.slots, kRankBytes) + kRadixSharedBytes)),
      1, kMaxBlocksPerSm);
  r.grid = std::min<int64_t>(items, device.sm_count * per_sm);
  const auto lanes = static_cast<double>(std::min(r.block, kLanesPerSm));
  const int64_t passes = radixPasses(length);
  const int64_t log = log2Of(r.slots);
  const int64_t steps = log * (log + 1) / 2;
  const double per_pass = static_cast<double>(r.block * r.per_thread * kRadixElementCost);
  const double network = static_cast<double>(r.slots / 2 * steps * kNetworkStepCost);
  r.chain = static_cast<double>(r.per_thread * kWalkCycles) +
            static_cast<double>(passes) * (std::ceil(per_pass / lanes) + kRadixSearchCycles + 3 * kBarrierCycles) +
            std::ceil(network / lanes) + static_cast<double>(steps * kBarrierCycles);
  r.total = static_cast<double>(items) * (static_cast<double>(passes) * (per_pass + kRadixSearchCycles * 16) + network);
  return r;
}

// A cumsum's block scan (ScanParams::scan_chunk) where it takes at most half the time of one thread per
// line `walk` (a margin for the launch and barrier costs the model leaves out): each thread walks its
// chunk twice, and thread 0 adds the chunks' sums up, a shared read and write each; the block's two
// barriers. Its threads a power of two, a warp at least; its grid the lines, and lines x threads within
// 2^31 (CUDA's grid and HIP's total threads).
ScanParams chooseBlockScan(const DeviceInfo& device, const ScanProblem& problem, ScanParams walk) {
  if (problem.lines < 1 || problem.extent < 2) return walk;
  const auto lines = static_cast<double>(problem.lines);
  const auto line = static_cast<double>(problem.extent * kWalkCycles);
  double best = timeOf(device, line, lines * line) / 2;
  ScanParams chosen = walk;
  const int64_t widest = std::min<int64_t>(device.max_threads_per_block, 1024);
  for (int64_t threads = device.warp_size; threads <= widest && problem.lines <= ((int64_t{1} << 31) - 1) / threads;
       threads *= 2) {
    const int64_t chunk = ceilDiv(problem.extent, threads);
    const auto add_up = static_cast<double>(threads * kWalkCycles);
    const double chain = static_cast<double>(2 * chunk * kWalkCycles + 2 * kBarrierCycles) + add_up;
    const double time = timeOf(device, chain, lines * (2 * line + add_up));
    if (time < best) {
      best = time;
      chosen.block = threads;
      chosen.grid = problem.lines;
      chosen.scan_chunk = chunk;
    }
    if (chunk == 1) break;
  }
  return chosen;
}

}  // namespace

int64_t positionBits(int64_t length) {
  int64_t bits = 1;
  while (bits < 63 && (int64_t{1} << bits) < length) ++bits;  // 63 for any length past 2^62
  return bits;
}

int64_t radixPasses(int64_t length) { return ceilDiv(32 + positionBits(length), 8); }

bool rankKeys(DataType dtype) {
  return (isFloating(dtype) && dtype != DataType::Double) || (isIntegral(dtype) && sizeOf(dtype) <= 4);
}

bool rankSlots(bool rank_keys, int64_t length) { return rank_keys && positionBits(length) <= 31; }

int64_t sortSlotBytes(const ScanProblem& problem, int64_t length) {
  return rankSlots(problem.rank_keys, length) ? kRankBytes : problem.key_bytes + 8;
}

int64_t blockSortBytes(int64_t slots, int64_t slot_bytes) {
  // Saturated: a line of 2^60 slots needs more than any block holds, not a wrapped small count.
  return slots > INT64_MAX / slot_bytes ? INT64_MAX : slots * slot_bytes;
}

std::string ScanParams::toString() const {
  if (scan_chunk > 0) return fmt::format("scan: a block of {} threads per line, {} elements each", block, scan_chunk);
  if (radix_per_thread > 0) {
    const std::string select = fmt::format("radix select of {} per thread (block {}), block sort of {} slots",
                                           radix_per_thread, block, sort_slots);
    if (sort_parts > 1) {
      return fmt::format("scan: {} parts per line, each a {}; then a merge, a radix select of {} per thread (block {})",
                         sort_parts, select, merge_per_thread, merge_block);
    }
    return fmt::format("scan: {} per line", select);
  }
  if (sort_slots > 0) {
    if (sort_parts > 1) {
      return fmt::format("scan: block sort of {} parts of {} slots per line (block {}), then a merge of {} slots, {} "
                         "pass(es) (block {})",
                         sort_parts, sort_slots, block, merge_slots, merge_passes, merge_block);
    }
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
  if (problem.block_scan) return chooseBlockScan(device, problem, p);
  if (problem.keep <= 0 || problem.extent < 2 || problem.lines <= 0) return p;

  const int64_t keep = std::min(problem.keep, problem.extent);
  const std::optional<SortShape> whole =
      sortShape(device, problem, problem.lines, problem.extent, keep);
  if (!whole) return p;
  const double walk = walkCompares(problem.extent, keep);
  double best = timeOf(device, walk, static_cast<double>(problem.lines) * walk);
  std::optional<SortShape> chosen;
  if (timeOf(device, whole->chain, whole->total) < best) {
    best = timeOf(device, whole->chain, whole->total);
    chosen = whole;
  }
  // A line of several passes split into parts of one pass each, on blocks of their own, then merged.
  std::optional<SortShape> part, merge;
  const int64_t parts = ceilDiv(problem.extent, whole->slots);
  if (whole->passes > 1 && parts <= ((int64_t{1} << 31) - 1) / problem.lines) {  // lines * parts < 2^31
    part = sortShape(device, problem, problem.lines * parts, whole->slots, keep);
    merge = sortShape(device, problem, problem.lines, parts * keep, keep);
    const double split = part && merge ? timeOf(device, part->chain, part->total) +
                                             timeOf(device, merge->chain, merge->total) + kLaunchCycles
                                       : best;
    if (split < best) {
      best = split;
      chosen = part;
    } else {
      merge.reset();
    }
  }
  // A radix select of the whole line, or of parts of it and then of their candidates.
  std::optional<RadixShape> radix, radix_merge;
  if (problem.rank_keys && 2 * keep <= problem.extent) {
    const int64_t widest = std::min<int64_t>(device.max_threads_per_block, kRadixBlock);
    const int64_t part = widest * kRadixPerThread;
    const int64_t radix_parts = problem.extent <= widest * kRadixPerThread ? 1 : ceilDiv(problem.extent, part);
    if (radix_parts <= ((int64_t{1} << 31) - 1) / problem.lines) {
      radix = radix_parts == 1 ? radixShape(device, problem.lines, problem.extent, keep)
                               : radixShape(device, problem.lines * radix_parts, part, keep, widest);
      if (radix && radix_parts > 1) {
        radix_merge = radixShape(device, problem.lines, radix_parts * keep, keep);
        if (!radix_merge) radix.reset();
      }
    }
    if (radix) {
      double time = timeOf(device, radix->chain, radix->total);
      if (radix_merge) time += timeOf(device, radix_merge->chain, radix_merge->total) + kLaunchCycles;
      if (time < best) {
        p.block = radix->block;
        p.grid = radix->grid;
        p.sort_slots = radix->slots;
        p.sort_passes = 1;
        p.radix_per_thread = radix->per_thread;
        if (radix_merge) {
          p.sort_parts = radix_parts;
          p.merge_slots = radix_merge->slots;
          p.merge_block = radix_merge->block;
          p.merge_grid = radix_merge->grid;
          p.merge_per_thread = radix_merge->per_thread;
        }
        return p;
      }
    }
  }
  if (!chosen) return p;
  p.block = chosen->block;
  p.grid = chosen->grid;
  p.sort_slots = chosen->slots;
  p.sort_passes = chosen->passes;
  if (merge) {
    p.sort_parts = parts;
    p.merge_slots = merge->slots;
    p.merge_passes = merge->passes;
    p.merge_block = merge->block;
    p.merge_grid = merge->grid;
  }
  return p;
}

}  // namespace braze
