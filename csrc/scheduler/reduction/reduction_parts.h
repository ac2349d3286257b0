// Outer reductions side by side: a reduction group whose parts compute nothing for one another (a GELU
// backward, with or without its bias grad, and the bias grad of the linear next to it: sums over the same
// rows of tensors of other widths; a ViT's bias grad over its tokens beside the class token's, over rows
// of its own) runs as one kernel, each part in its own range of blocks
// (kernel/joined_kernel.h), all with one block shape and one count of splits of their rows. One launch instead of
// one per part, and small parts fill the GPU together. An inner persistent kernel takes parts made
// from scalars alone beside its rows the same way (a position iota returned beside a norm).
#pragma once

#include "scheduler/independent_parts.h"
#include "scheduler/reduction/heuristics.h"
#include "scheduler/registry.h"
#include "scheduler/scheduler.h"

#include <vector>

namespace braze {

// Why a part without reductions cannot run beside a reduction kernel's part in blocks of its own, or "": it
// updates an input in place, or is no pointwise kernel alone (a transpose, with the input views it reads).
std::string sideBySidePointwiseProblem(const Candidate& part, const CandidateFacts& facts, const BoundShapes& bound);

// The verdict of `one` on the whole group where it takes it; else, where the group has reductions and
// several independent parts, that of `parts` on them; else `one`'s refusal (the kernel the group was).
using CandidateCheck = Verdict (*)(const Candidate&, const CandidateFacts&, const BoundShapes&);
using PartsCheck = Verdict (*)(const std::vector<Candidate>&, const CandidateFacts&, const BoundShapes&);
Verdict wholeOrParts(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound,
                     CandidateCheck one, PartsCheck parts);

// Whether the reduction scheduler takes a group of several independent parts side by side: each part with
// reductions one it takes alone, reducing its outer dims (the kept ones innermost), over any rows; each
// part without reductions a pointwise kernel alone (not a transpose, with the input views it reads) that
// updates no input in place; at least one part reducing.
Verdict canScheduleReductionParts(const std::vector<Candidate>& parts, const CandidateFacts& facts,
                                  const BoundShapes& bound);

// Whether the inner persistent scheduler takes a group of several independent parts: one part with
// reductions that it takes alone, and beside it parts made from scalars alone (an iota, a full) or reading a
// tensor the rows read (another slice of the rows' input), each a pointwise kernel that updates no input in
// place.
Verdict canScheduleRowsWithScalarParts(const std::vector<Candidate>& parts, const CandidateFacts& facts,
                                       const BoundShapes& bound);

namespace scheduler {

// The reduction and inner persistent schedulers' heuristics and lowering of a segment, of one part or of
// several (ReductionParams::more_parts).
SegmentHeuristics reductionSegmentHeuristics(LoweringContext& ctx, const SchedulerEntry& entry);
void lowerReductionSegment(LoweringContext& ctx, const SegmentHeuristics& heuristics);

}  // namespace scheduler
}  // namespace braze
