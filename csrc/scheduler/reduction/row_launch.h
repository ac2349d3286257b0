// The launch values of the row kernels (an inner reduction's, and the inner-outer kernel with its
// finish) that their code leaves open: the grid, the index arguments (rows, row groups, blocks, partial
// rows) and the workspaces' sizes, every one a function of the heuristics' parameters. The lowering
// takes them from there, and so does the relaunch of a kernel lowered for another row count of the same
// code (SchedulerEntry::relaunch; a FusionCache's canonical row count, exec/canonical_rows.h), whose
// parameters come from the problem they were chosen for with the row count replaced.
#pragma once

#include "scheduler/inner_outer/heuristics.h"
#include "scheduler/reduction/heuristics.h"
#include "scheduler/scheduler.h"

#include <optional>
#include <span>

namespace braze::scheduler {

// The row groups an inner row kernel walks (threads_y rows each).
int64_t rowGroups(const ReductionParams& params);

// SchedulerEntry::relaunch of the reduction and inner-persistent schedulers: an inner reduction without
// a grid split, whose code reads the row count only as its "rows" argument (the row length is in it).
bool relaunchRows(const SegmentHeuristics& lowered_at, const SegmentHeuristics& heuristics, std::span<Kernel> kernels);
// SchedulerEntry::relaunch of the inner-outer scheduler: its kernel and the finish.
bool relaunchInnerOuter(const SegmentHeuristics& lowered_at, const SegmentHeuristics& heuristics,
                        std::span<Kernel> kernels);

// SchedulerEntry::heuristics_at_rows of the reduction and inner-persistent schedulers (inner reductions
// only: an outer one's rows are its kept elements) and of the inner-outer scheduler.
std::optional<SegmentHeuristics> rowHeuristicsAtRows(const DeviceInfo& device, const SegmentHeuristics& chosen,
                                                     int64_t from, int64_t to);
std::optional<SegmentHeuristics> innerOuterHeuristicsAtRows(const DeviceInfo& device, const SegmentHeuristics& chosen,
                                                            int64_t from, int64_t to);

}  // namespace braze::scheduler
