// Where lowerPlan (exec/pipeline.h) may take a kernel segment's kernels from instead of lowering them
// at the plan's sizes: a FusionCache's kernels lowered once for a canonical row count
// (exec/canonical_rows.h).
#pragma once

#include "exec/pipeline.h"
#include "scheduler/scheduler.h"

#include <optional>
#include <string>
#include <vector>

namespace braze {

class SegmentKernelSource {
 public:
  struct Given {
    SegmentHeuristics heuristics;         // the segment's at the plan's sizes, which the kernels follow
    std::vector<kernel::Kernel> kernels;  // the segment's own, then its follow-ups
    std::vector<kernel::CodeDigest> digests;  // theirs (LoweredPlan::digests)
    std::string lowered_for;              // for the plan's text (Segment::kernels_lowered_for)
  };
  virtual ~SegmentKernelSource() = default;
  // The kernels of `segment` with the heuristics, tensor parameters and launch values of `lowering` (the
  // segment at the plan's sizes, which the source may ask for its heuristics); none to lower them as
  // usual.
  virtual std::optional<Given> kernelsFor(const Segment& segment, scheduler::SegmentLowering& lowering) = 0;
};

}  // namespace braze
