#include "scheduler/reduction/reduction_parts.h"

#include "passes/alias_analysis.h"
#include "scheduler/independent_parts.h"
#include "scheduler/pointwise/entry.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduction_domain.h"
#include "scheduler/reduction/row_lowering.h"
#include "scheduler/reduction/row_totals.h"
#include "support/error.h"

#include <algorithm>
#include <optional>

namespace braze {

std::string sideBySidePointwiseProblem(const Candidate& part, const CandidateFacts& facts, const BoundShapes& bound) {
  // A reduction kernel writes no input in place: the update would be a buffer and a copy.
  for (const Val* out : part.outputs) {
    if (out->fusion()->outputAliases().count(const_cast<Val*>(out)) != 0) {
      return fmt::format("side by side, {} updates an input in place", out->name());
    }
  }
  // The pointwise scheduler's, not a transpose's (whose tiles a part in one-dimensional blocks would lose),
  // with the views it reads of inputs (a permute) as the kernel will hold them.
  const SchedulerChoice choice = chooseScheduler(withInputViews(part), bound, facts.reasons);
  if (choice.kind != SchedulerKind::Pointwise) return "side by side, a part is no pointwise kernel";
  return "";
}

Verdict wholeOrParts(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound,
                     CandidateCheck one, PartsCheck parts) {
  Verdict whole = one(candidate, facts, bound);
  if (whole.ok || facts.reductions.empty() || facts.unsupported != nullptr) return whole;
  const std::vector<Candidate> split = independentParts(candidate);
  if (split.size() == 1) return whole;
  return parts(split, facts, bound).ok ? Verdict::yes() : whole;
}

Verdict canScheduleReductionParts(const std::vector<Candidate>& parts, const CandidateFacts& facts,
                                  const BoundShapes& bound) {
  bool any_reduces = false;
  for (const Candidate& part : parts) {
    CandidateFacts part_facts = analyzeCandidate(part);
    part_facts.reasons = facts.reasons;
    if (part_facts.reductions.empty()) {
      if (std::string why = sideBySidePointwiseProblem(part, facts, bound); !why.empty()) return Verdict::no(why);
      continue;
    }
    auto domain_or = commonReductionDomain(part_facts, bound);
    if (auto* why = std::get_if<std::string>(&domain_or)) return Verdict::no("side by side, a part: " + *why);
    const auto& domain = std::get<ReductionDomain>(domain_or);
    if (domain.inner) return Verdict::no("side by side, a part reduces its innermost dims (an inner reduction)");
    any_reduces = true;
    Verdict v = canScheduleOneReductionDomain(part, part_facts, bound);
    if (!v.ok) return Verdict::no("side by side, a part: " + v.reason);
  }
  if (!any_reduces) return Verdict::no("side by side, no part reduces");
  return Verdict::yes();
}

namespace {

// The fusion input `v` is a view of (through meta ops), or `v` itself.
const Val* viewRootOf(const Val* v) {
  const Val* root = v->isTensor() && !v->isFusionInput() ? inputViewRoot(v) : nullptr;
  return root == nullptr ? v : root;
}

}  // namespace

Verdict canScheduleRowsWithScalarParts(const std::vector<Candidate>& parts, const CandidateFacts& facts,
                                       const BoundShapes& bound) {
  const auto rows_part = std::find_if(parts.begin(), parts.end(), [](const Candidate& p) { return reduces(p.exprs); });
  const Candidate* rows = rows_part == parts.end() ? nullptr : &*rows_part;
  for (const Candidate& part : parts) {
    if (&part == rows) continue;
    if (reduces(part.exprs)) return Verdict::no("beside the rows, another part reduces");
    // A part made from scalars alone, or one reading a tensor the rows read too (DeepSeek's rotated key part,
    // sliced off the projection whose other slice the latent norm reads: one kernel reads the projection
    // once). One reading only tensors no row reads is a kernel of its own, the rows' keeping their blocks.
    const bool scalars = std::all_of(part.inputs.begin(), part.inputs.end(), readsAsScalar);
    const bool shares_a_tensor = rows != nullptr && std::any_of(part.inputs.begin(), part.inputs.end(), [&](const Val* v) {
      return !readsAsScalar(v) && std::any_of(rows->inputs.begin(), rows->inputs.end(), [&](const Val* r) {
        return !readsAsScalar(r) && viewRootOf(r) == viewRootOf(v);
      });
    });
    if (!scalars && !shares_a_tensor) return Verdict::no("beside the rows, a part reads no tensor the rows read");
    if (std::string why = sideBySidePointwiseProblem(part, facts, bound); !why.empty()) return Verdict::no(why);
  }
  if (rows == nullptr) return Verdict::no("beside the rows, no part reduces");
  CandidateFacts rows_facts = analyzeCandidate(*rows);
  rows_facts.reasons = facts.reasons;
  Verdict v = canScheduleOneInnerPersistent(*rows, rows_facts, bound);
  if (!v.ok) return Verdict::no("the rows without the values made from scalars: " + v.reason);
  return Verdict::yes();
}

namespace scheduler {
namespace {

// The parts of a segment the check took side by side, each as a segment of its own (the same id, shapes
// and views), those with reductions first; the segment alone where the reduction scheduler takes it as
// one domain (its independent parts then share the one walk: a pointwise output beside a reduction of the
// same rows).
std::vector<SegmentToLower> segmentParts(const SegmentToLower& segment) {
  const Candidate whole{segment.exprs, segment.inputs, segment.outputs};
  const CandidateFacts facts = analyzeCandidate(whole);
  const bool one = segment.scheduler == SchedulerKind::InnerPersistent
                       ? canScheduleRowsWithTotals(whole, facts, *segment.bound).ok
                       : canScheduleReductionWithTotals(whole, facts, *segment.bound).ok;
  if (one) return {segment};
  std::vector<SegmentToLower> parts = independentParts(segment);
  std::stable_partition(parts.begin(), parts.end(), [](const SegmentToLower& part) { return reduces(part.exprs); });
  return parts;
}

// Part i's own parameters: the common block and split, its vectors, blocks and problem.
ReductionParams partParams(const ReductionParams& params, size_t i) {
  ReductionParams own = params;
  own.more_parts.clear();
  if (i > 0) {
    const ReductionPart& part = params.more_parts[i - 1];
    own.vectorize = part.vectorize;
    own.grid = part.grid;
    own.problem = part.problem;
    own.split_length = partSplitLength(part.problem, params.splits);
  }
  return own;
}

}  // namespace

SegmentHeuristics reductionSegmentHeuristics(LoweringContext& ctx, const SchedulerEntry& entry) {
  const bool persistent = entry.kind == SchedulerKind::InnerPersistent;
  const std::vector<SegmentToLower> parts = segmentParts(ctx.segment);
  if (parts.size() == 1) return heuristicsOf(entry, RowLowering(ctx).choose(persistent));
  std::vector<ReductionProblem> problems;
  std::vector<PointwiseParams> pointwise;
  std::optional<ReductionParams> rows;  // inner persistent: the rows' own parameters
  for (const SegmentToLower& part : parts) {
    LoweringContext part_ctx = makeLoweringContext(part, ctx.device);
    if (!reduces(part.exprs)) {
      pointwise.push_back(choosePointwise(part_ctx));
    } else if (persistent) {
      rows = RowLowering(part_ctx).choose(true);
    } else {
      problems.push_back(RowLowering(part_ctx).rowProblem(false));
    }
  }
  ReductionParams params = rows ? std::move(*rows)
                                : outerReductionParts(ctx.device, problems,
                                                      pointwise.empty() ? 1 : ctx.device.tuning.block_threads);
  for (PointwiseParams& p : pointwise) {
    // One-dimensional blocks of the kernel's threads (kernel/joined_kernel.h), one vector chunk per thread
    // where tiles of rows were chosen (their rows per thread are no chunks).
    p = inBlocksOf(std::move(p), params.threads_x * params.threads_y);
    params.more_parts.push_back({p.vectorize, 0, {}, p});
  }
  return heuristicsOf(entry, std::move(params));
}

void lowerReductionSegment(LoweringContext& ctx, const SegmentHeuristics& heuristics) {
  const auto& params = paramsOf<ReductionParams>(heuristics);
  if (params.more_parts.empty()) {
    RowLowering(ctx).lower(params);
    return;
  }
  const std::vector<SegmentToLower> parts = segmentParts(ctx.segment);
  BRAZE_ASSERT(parts.size() == params.more_parts.size() + 1, "segment {}: {} parts, heuristics for {}", ctx.segment.id,
               parts.size(), params.more_parts.size() + 1);
  lowerSideBySide(ctx, parts, [&](LoweringContext& part_ctx, size_t i) {
    if (i > 0 && params.more_parts[i - 1].pointwise) {
      lowerPointwise(part_ctx, *params.more_parts[i - 1].pointwise);
    } else {
      RowLowering(part_ctx).lower(partParams(params, i));
    }
  });
  ctx.kernel.summary = params.toString();
}

}  // namespace scheduler
}  // namespace braze
