// The scheduler table's rows for reductions (entry.h): both lowered by the row lowering (lower.cpp), with
// any parts beside the rows in blocks of their own (reduction_parts.h), relaunched at other row counts by
// row_launch.
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduction_parts.h"
#include "scheduler/reduction/row_launch.h"

namespace braze {

const SchedulerEntry& innerPersistentScheduler() {
  static const SchedulerEntry entry{
      SchedulerKind::InnerPersistent, "inner_persistent", canScheduleInnerPersistent, nullptr,
      [](scheduler::LoweringContext& ctx) { return scheduler::reductionSegmentHeuristics(ctx, innerPersistentScheduler()); },
      scheduler::lowerReductionSegment, scheduler::relaunchRows, scheduler::rowHeuristicsAtRows};
  return entry;
}

const SchedulerEntry& reductionScheduler() {
  static const SchedulerEntry entry{
      SchedulerKind::Reduction, "reduction", canScheduleReduction, nullptr,
      [](scheduler::LoweringContext& ctx) { return scheduler::reductionSegmentHeuristics(ctx, reductionScheduler()); },
      scheduler::lowerReductionSegment, scheduler::relaunchRows, scheduler::rowHeuristicsAtRows};
  return entry;
}

}  // namespace braze
