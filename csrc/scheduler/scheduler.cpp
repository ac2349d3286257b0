#include "scheduler/scheduler.h"

#include "scheduler/alias/entry.h"
#include "scheduler/inner_outer/entry.h"
#include "scheduler/matmul/entry.h"
#include "scheduler/pointwise/entry.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/scan/entry.h"
#include "scheduler/transpose/entry.h"
#include "support/error.h"

#include <array>

namespace braze {

std::span<const SchedulerEntry> schedulers() {
  // Priority order. Alias first: a group of meta ops only is a view, never a kernel. Inner persistent
  // and inner-outer persistent before reduction (they take the normalizations and their backward
  // passes, rows kept on chip), transpose before pointwise (it takes the permutes it can tile). Matmul last: only groups with a matmul, which every other
  // refuses, reach it.
  static const std::array<SchedulerEntry, 8> table{aliasScheduler(),     innerPersistentScheduler(),
                                                   innerOuterPersistentScheduler(),
                                                   reductionScheduler(), transposeScheduler(),
                                                   scanScheduler(),      pointwiseScheduler(),
                                                   matmulScheduler()};
  return table;
}

const SchedulerEntry& schedulerFor(SchedulerKind kind) {
  for (const SchedulerEntry& entry : schedulers()) {
    if (entry.kind == kind) return entry;
  }
  BRAZE_UNREACHABLE("SchedulerKind {} has no row in the scheduler table", static_cast<int>(kind));
}

std::string SegmentHeuristics::toString() const {
  return fallback.empty() ? summary : fmt::format("{}; {}", fallback, summary);
}

namespace scheduler {

SegmentLowering::SegmentLowering(const SegmentToLower& segment, const DeviceInfo& device)
    : entry_(schedulerFor(segment.scheduler)), ctx_(makeLoweringContext(segment, device)) {
  BRAZE_ASSERT(entry_.heuristics != nullptr, "segment {} is an {} segment: it has no kernel", segment.id, entry_.name);
}

std::optional<std::string> SegmentLowering::refusal() {
  return entry_.refuse == nullptr ? std::nullopt : entry_.refuse(ctx_);
}

SegmentHeuristics SegmentLowering::heuristics() {
  if (!heuristics_) heuristics_ = entry_.heuristics(ctx_);
  return *heuristics_;
}

Kernel SegmentLowering::lower(const SegmentHeuristics& heuristics) {
  heuristics.lowering->lower(ctx_, heuristics);
  if (!heuristics.fallback.empty()) ctx_.kernel.summary = heuristics.toString();
  removeDeadLets(ctx_.kernel);
  for (Kernel& k : ctx_.follow_ups) removeDeadLets(k);
  return std::move(ctx_.kernel);
}

std::vector<Kernel> SegmentLowering::lowerAll(const SegmentHeuristics& heuristics) {
  std::vector<Kernel> kernels{lower(heuristics)};
  for (Kernel& next : takeFollowUps()) kernels.push_back(std::move(next));
  return kernels;
}

}  // namespace scheduler
}  // namespace braze
