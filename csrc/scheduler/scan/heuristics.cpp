#include "scheduler/scan/heuristics.h"

#include "scheduler/heuristics.h"

#include <fmt/format.h>

#include <algorithm>

namespace braze {

std::string ScanParams::toString() const { return fmt::format("scan: one thread per line, block {}", block); }

ScanParams scanHeuristics(const DeviceInfo& device, const ScanProblem& problem) {
  ScanParams p;
  // Few lines: a block no wider than they need (a warp at least), so the threads that work share it.
  const int64_t widest = std::max<int64_t>(device.warp_size, device.tuning.block_threads);
  p.block = std::clamp<int64_t>(nextPow2(std::max<int64_t>(problem.lines, 1)), device.warp_size, widest);
  p.grid = std::max<int64_t>(ceilDiv(problem.lines, p.block), 1);
  return p;
}

}  // namespace braze
