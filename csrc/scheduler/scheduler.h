// The scheduler table: every scheduler kind, in priority order, with what it registers: its structural
// check (which groups of exprs the segmenter may make one of its segments), its device check (why a
// planned segment has no kernel on this device), its heuristics (a pure function of the device and the
// segment's shapes) and its lowering to kernel IR. It is the only list of the kinds: the segmenter
// asks it in order, the pipeline takes a segment's entry from it, and nothing else switches on the
// kind. Adding a scheduler is a folder and a row here.
#pragma once

#include "scheduler/lowering_context.h"
#include "scheduler/registry.h"

#include <any>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace braze {

struct SchedulerEntry;

// A kernel segment's heuristics, chosen before it is lowered and passed to the lowering as a value: the
// pipeline's heuristics step makes them (BRAZE_DUMP=after:heuristics prints them), the lowering of
// `lowering` follows them: the segment's own scheduler, or another it falls back to (a transpose whose
// loads cannot be staged is lowered as pointwise, and says why).
struct SegmentHeuristics {
  const SchedulerEntry* lowering = nullptr;
  std::any params;        // the parameters of `lowering`'s scheduler (its <kind>/heuristics.h)
  std::string summary;    // the parameters, one line
  // Which scheduler fell back to `lowering`'s, and why ("transpose fell back to pointwise (...)"), or "".
  std::string fallback;
  std::string toString() const;
};

struct SchedulerEntry {
  SchedulerKind kind;
  std::string_view name;  // "pointwise": kernel names, explain, refusals
  // During segmentation, for every group considered: cheap, one pass over the group's exprs.
  Verdict (*accepts)(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound);
  // For a planned kernel segment on the context's device: why the device has no kernel for it (the
  // segment then runs where the reference evaluator can run it), or nothing. Null: every device has one.
  std::optional<std::string> (*refuse)(scheduler::LoweringContext& ctx) = nullptr;
  // Null for the alias scheduler, which makes no kernel.
  SegmentHeuristics (*heuristics)(scheduler::LoweringContext& ctx) = nullptr;
  void (*lower)(scheduler::LoweringContext& ctx, const SegmentHeuristics& heuristics) = nullptr;
  // For kernels this lowering made (the segment's, then its follow-ups) at other sizes, whose heuristics
  // there were `lowered_at`: sets the launch values `heuristics` fix (grid, index arguments, workspace
  // sizes), as lowering with them would. False where the two differ in more than what the code leaves
  // open (the row count of an inner reduction, not its row length), or a kernel has an open value it does
  // not know. Null: the code has every size in it.
  bool (*relaunch)(const SegmentHeuristics& lowered_at, const SegmentHeuristics& heuristics,
                   std::span<kernel::Kernel> kernels) = nullptr;
  // The heuristics `chosen` (this lowering's) become where the segment's sizes differ only in their
  // leading dims, by `to` / `from`: the same pure function of the device and of the problem they were
  // chosen for, its row count scaled, without reading the segment again. None where the problem has no
  // such row count. Null: the heuristics are chosen from the segment itself.
  std::optional<SegmentHeuristics> (*heuristics_at_rows)(const DeviceInfo& device, const SegmentHeuristics& chosen,
                                                         int64_t from, int64_t to) = nullptr;
};

// The heuristics `entry`'s scheduler chose (`params`, a <kind>/heuristics.h value that prints itself).
template <typename Params>
SegmentHeuristics heuristicsOf(const SchedulerEntry& entry, Params params, std::string fallback = "") {
  std::string summary = params.toString();
  return {&entry, std::move(params), std::move(summary), std::move(fallback)};
}
// The parameters `heuristics` holds, as the scheduler that lowers them reads them.
template <typename Params>
const Params& paramsOf(const SegmentHeuristics& heuristics) {
  return std::any_cast<const Params&>(heuristics.params);
}

// Every scheduler, in priority order: the first whose check accepts a group schedules it.
std::span<const SchedulerEntry> schedulers();
const SchedulerEntry& schedulerFor(SchedulerKind kind);

namespace scheduler {

// One kernel segment on its way to kernel IR, through its scheduler's entry: the lowering context is
// built once, then the device check, the heuristics and the lowering each read it.
class SegmentLowering {
 public:
  SegmentLowering(const SegmentToLower& segment, const DeviceInfo& device);
  std::optional<std::string> refusal();
  SegmentHeuristics heuristics();  // chosen once, on the first call
  // The kernel, without its dead lets; the context is spent but for its follow-ups.
  Kernel lower(const SegmentHeuristics& heuristics);
  // The kernels that run right after it and finish its work (LoweringContext::follow_ups), after lower().
  std::vector<Kernel> takeFollowUps() { return std::move(ctx_.follow_ups); }
  // The kernel and its follow-ups, in launch order.
  std::vector<Kernel> lowerAll(const SegmentHeuristics& heuristics);
  // Its tensor parameters and what the heuristics read, before lower().
  const LoweringContext& context() const { return ctx_; }

 private:
  const SchedulerEntry& entry_;
  LoweringContext ctx_;
  std::optional<SegmentHeuristics> heuristics_;
};

}  // namespace scheduler
}  // namespace braze
