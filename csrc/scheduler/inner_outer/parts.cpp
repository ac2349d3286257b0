// An inner-outer kernel with parts beside its rows: a group whose rows the inner-outer scheduler takes
// alone, and beside them pointwise work that shares nothing with them (a DiT block's norm backward beside
// the cast of a conditioning grad, as Thunder hands both in one region). Each part runs in one-dimensional
// blocks of the rows' threads after the rows' blocks, with the vectors it has alone; the finish kernel is
// the rows'. One launch fewer than a pointwise kernel of its own.
#include "scheduler/independent_parts.h"
#include "scheduler/inner_outer/entry.h"
#include "scheduler/pointwise/entry.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduction_parts.h"

#include <algorithm>

namespace braze {
namespace {

// The group's parts with reductions together (the rows: a norm backward and a bias grad beside it share no
// value, yet one inner-outer walk takes both) first, then each part without reductions; empty where no part
// reduces or none does not.
template <typename Group>
std::vector<Group> rowsAndPointwiseParts(const Group& whole, const std::vector<Group>& parts) {
  std::vector<const Group*> reducing;
  std::vector<Group> result(1);
  for (const Group& part : parts) {
    if (reduces(part.exprs)) {
      reducing.push_back(&part);
    } else {
      result.push_back(part);
    }
  }
  if (reducing.empty() || result.size() == 1) return {};
  result.front() = partsTogether(whole, reducing);
  return result;
}

// The rows (every part with reductions) one the inner-outer scheduler takes alone; the other parts
// pointwise kernels alone that update no input in place.
Verdict canScheduleRowsWithPointwiseParts(const Candidate& candidate, const CandidateFacts& facts,
                                          const BoundShapes& bound) {
  const std::vector<Candidate> parts = rowsAndPointwiseParts(candidate, independentParts(candidate));
  if (parts.empty()) return Verdict::no("no part without reductions beside the rows");
  for (size_t i = 1; i < parts.size(); ++i) {
    if (std::string why = sideBySidePointwiseProblem(parts[i], facts, bound); !why.empty()) return Verdict::no(why);
  }
  CandidateFacts rows_facts = analyzeCandidate(parts.front());
  rows_facts.reasons = facts.reasons;
  Verdict v = canScheduleInnerOuter(parts.front(), rows_facts, bound);
  if (!v.ok) return Verdict::no("the rows without the parts beside them: " + v.reason);
  return Verdict::yes();
}

}  // namespace

Verdict canScheduleInnerOuterOrParts(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  Verdict whole = canScheduleInnerOuter(candidate, facts, bound);
  if (whole.ok || facts.reductions.empty() || facts.unsupported != nullptr) return whole;
  return canScheduleRowsWithPointwiseParts(candidate, facts, bound).ok ? Verdict::yes() : whole;
}

namespace scheduler {
namespace {

// The segment alone where the scheduler takes it whole; else the rows, then the parts beside them.
std::vector<SegmentToLower> segmentParts(const SegmentToLower& segment) {
  const Candidate whole{segment.exprs, segment.inputs, segment.outputs};
  if (canScheduleInnerOuter(whole, analyzeCandidate(whole), *segment.bound).ok) return {segment};
  std::vector<SegmentToLower> parts = rowsAndPointwiseParts(segment, independentParts(segment));
  BRAZE_ASSERT(!parts.empty(), "segment {}: no rows and parts beside them", segment.id);
  return parts;
}

}  // namespace

InnerOuterParams innerOuterSegmentHeuristics(LoweringContext& ctx) {
  const std::vector<SegmentToLower> parts = segmentParts(ctx.segment);
  if (parts.size() == 1) return innerOuterRowHeuristics(ctx);
  LoweringContext rows_ctx = makeLoweringContext(parts.front(), ctx.device);
  InnerOuterParams params = innerOuterRowHeuristics(rows_ctx);
  for (size_t i = 1; i < parts.size(); ++i) {
    LoweringContext part_ctx = makeLoweringContext(parts[i], ctx.device);
    params.parts.push_back(inBlocksOf(choosePointwise(part_ctx), params.inner.threads_x * params.inner.threads_y));
  }
  return params;
}

void lowerInnerOuterSegment(LoweringContext& ctx, const InnerOuterParams& params) {
  if (params.parts.empty()) {
    lowerInnerOuterRows(ctx, params);
    return;
  }
  const std::vector<SegmentToLower> parts = segmentParts(ctx.segment);
  BRAZE_ASSERT(parts.size() == params.parts.size() + 1, "segment {}: {} parts, heuristics for {}", ctx.segment.id,
               parts.size(), params.parts.size() + 1);
  lowerSideBySide(ctx, parts, [&](LoweringContext& part_ctx, size_t i) {
    if (i == 0) {
      lowerInnerOuterRows(part_ctx, params);
    } else {
      lowerPointwise(part_ctx, params.parts[i - 1]);
    }
  });
  ctx.kernel.summary = params.toString();
}

}  // namespace scheduler
}  // namespace braze
