// The independent parts of a group: its exprs split where nothing one part computes is read by another
// (they may read the same inputs). Kernels whose parts are independent run them side by side, each part
// in its own range of blocks with its own parameters (kernel/joined_kernel.h): a norm's rows beside an
// unrelated scaling, two pointwise ops of unrelated shapes, a GELU backward beside a bias grad.
#pragma once

#include "scheduler/lowering_context.h"
#include "scheduler/scheduler.h"

#include <cstddef>
#include <functional>
#include <vector>

namespace braze {

// Whether any expr of `exprs` reduces (a reduction or a normalization).
bool reduces(const std::vector<const Expr*>& exprs);

// The group's exprs in parts that read nothing another part computes (they may read the same inputs),
// each in the group's order, the parts in the order of their first exprs. One part where all are linked.
// A value made from scalars alone links none of its readers: each part that reads it computes it, and
// one part of its own writes it where it is an output of the group.
std::vector<Candidate> independentParts(const Candidate& candidate);
// The same of a segment: each part a segment of its own, with the segment's id, shapes and views.
std::vector<scheduler::SegmentToLower> independentParts(const scheduler::SegmentToLower& segment);
// Some of a segment's independent parts as one segment: their exprs in the segment's order, the inputs
// they read and the outputs they write.
scheduler::SegmentToLower partsTogether(const scheduler::SegmentToLower& segment,
                                        const std::vector<const scheduler::SegmentToLower*>& parts);
Candidate partsTogether(const Candidate& candidate, const std::vector<const Candidate*>& parts);

// The group with the chains of meta ops that make the views of fusion inputs it reads, those inputs read
// instead: what its kernel holds (a permute of an input read inside it makes it a transpose).
Candidate withInputViews(const Candidate& group);

namespace scheduler {

// Lowers each of `parts` alone (`lower` of its own context and its place) and joins their kernels into ctx's
// kernel (kernel/joined_kernel.h): one launch, each part in its own range of blocks. The first part's
// follow-up kernels (an inner-outer kernel's finish) become the segment's.
void lowerSideBySide(LoweringContext& ctx, const std::vector<SegmentToLower>& parts,
                     const std::function<void(LoweringContext&, size_t)>& lower);

}  // namespace scheduler
}  // namespace braze
