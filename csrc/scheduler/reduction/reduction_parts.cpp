#include "scheduler/reduction/reduction_parts.h"

#include "kernel/joined_kernel.h"
#include "passes/alias_analysis.h"
#include "scheduler/pointwise/entry.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduction_domain.h"
#include "scheduler/reduction/row_lowering.h"
#include "support/error.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace braze {
namespace {

bool reduces(const std::vector<const Expr*>& exprs) {
  return std::any_of(exprs.begin(), exprs.end(), [](const Expr* e) {
    const OpCategory category = opInfo(e->kind()).category;
    return category == OpCategory::Reduction || category == OpCategory::Normalization;
  });
}

int64_t findRoot(std::vector<int64_t>& parent, int64_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

// Which part each expr of `exprs` is in (a part's index, parts numbered by their first expr).
std::vector<size_t> partOfEach(const std::vector<const Expr*>& exprs) {
  std::vector<int64_t> parent(exprs.size());
  std::iota(parent.begin(), parent.end(), 0);
  std::unordered_map<const Val*, int64_t> producer;
  for (size_t i = 0; i < exprs.size(); ++i) {
    for (const Val* out : exprs[i]->outputs()) producer[out] = static_cast<int64_t>(i);
  }
  for (size_t i = 0; i < exprs.size(); ++i) {
    for (const Val* in : exprs[i]->inputs()) {
      auto it = producer.find(in);
      if (it == producer.end()) continue;
      const int64_t a = findRoot(parent, static_cast<int64_t>(i)), b = findRoot(parent, it->second);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);  // the earlier expr stays the root
    }
  }
  std::unordered_map<int64_t, size_t> number;
  std::vector<size_t> part(exprs.size());
  for (size_t i = 0; i < exprs.size(); ++i) {
    part[i] = number.try_emplace(findRoot(parent, static_cast<int64_t>(i)), number.size()).first->second;
  }
  return part;
}

// The part of a group (or segment) that `exprs` are: the inputs they read and the outputs they write.
template <typename Group>
Group partOf(const Group& whole, std::vector<const Expr*> exprs) {
  std::unordered_set<const Val*> read, written;
  for (const Expr* e : exprs) {
    read.insert(e->inputs().begin(), e->inputs().end());
    written.insert(e->outputs().begin(), e->outputs().end());
  }
  Group part = whole;
  part.exprs = std::move(exprs);
  std::erase_if(part.inputs, [&](const Val* v) { return read.count(v) == 0; });
  std::erase_if(part.outputs, [&](const Val* v) { return written.count(v) == 0; });
  return part;
}

template <typename Group>
std::vector<Group> partsOf(const Group& whole) {
  const std::vector<size_t> part = partOfEach(whole.exprs);
  const size_t count = part.empty() ? 0 : *std::max_element(part.begin(), part.end()) + 1;
  if (count <= 1) return {whole};
  std::vector<std::vector<const Expr*>> exprs(count);
  for (size_t i = 0; i < whole.exprs.size(); ++i) exprs[part[i]].push_back(whole.exprs[i]);
  std::vector<Group> parts;
  for (auto& list : exprs) parts.push_back(partOf(whole, std::move(list)));
  return parts;
}

// The group with the chains of meta ops that make the views of fusion inputs it reads, those inputs read
// instead: what its kernel holds.
Candidate withInputViews(const Candidate& group) {
  Candidate whole;
  std::unordered_set<const Expr*> added;
  for (const Val* in : group.inputs) {
    const Val* root = in->isTensor() && !in->isFusionInput() ? inputViewRoot(in) : nullptr;
    if (root == nullptr) {
      whole.inputs.push_back(in);
      continue;
    }
    if (std::find(whole.inputs.begin(), whole.inputs.end(), root) == whole.inputs.end()) whole.inputs.push_back(root);
    for (const Expr* e : inputViewChain(in)) {
      if (added.insert(e).second) whole.exprs.push_back(e);
    }
  }
  whole.exprs.insert(whole.exprs.end(), group.exprs.begin(), group.exprs.end());
  whole.outputs = group.outputs;
  return whole;
}

}  // namespace

std::vector<Candidate> independentParts(const Candidate& candidate) { return partsOf(candidate); }

Verdict canScheduleReductionParts(const std::vector<Candidate>& parts, const CandidateFacts& facts,
                                  const BoundShapes& bound) {
  std::optional<int64_t> reduced_per_result;
  for (const Candidate& part : parts) {
    CandidateFacts part_facts = analyzeCandidate(part);
    part_facts.reasons = facts.reasons;
    if (part_facts.reductions.empty()) {
      // A reduction kernel writes no input in place: the update would be a buffer and a copy.
      for (const Val* out : part.outputs) {
        if (out->fusion()->outputAliases().count(const_cast<Val*>(out)) != 0) {
          return Verdict::no(fmt::format("side by side, {} updates an input in place", out->name()));
        }
      }
      // The pointwise scheduler's, not a transpose's (whose tiles a part in one-dimensional blocks would lose),
      // with the views it reads of inputs (a permute) as the kernel will hold them.
      const SchedulerChoice choice = chooseScheduler(withInputViews(part), bound, facts.reasons);
      if (choice.kind != SchedulerKind::Pointwise) return Verdict::no("side by side, a part is no pointwise kernel");
      continue;
    }
    auto domain_or = commonReductionDomain(part_facts, bound);
    if (auto* why = std::get_if<std::string>(&domain_or)) return Verdict::no("side by side, a part: " + *why);
    const auto& domain = std::get<ReductionDomain>(domain_or);
    if (domain.inner) return Verdict::no("side by side, a part reduces its innermost dims (an inner reduction)");
    const int64_t reduced = domain.outer_numel == 0 ? 0 : domain.full_numel / domain.outer_numel;
    if (reduced_per_result && *reduced_per_result != reduced) {
      return Verdict::no(fmt::format("side by side, the parts reduce {} and {} elements per result (other rows)",
                                     *reduced_per_result, reduced));
    }
    reduced_per_result = reduced;
    Verdict v = canScheduleOneReductionDomain(part, part_facts, bound);
    if (!v.ok) return Verdict::no("side by side, a part: " + v.reason);
  }
  if (!reduced_per_result) return Verdict::no("side by side, no part reduces");
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
  if (canScheduleOneReductionDomain(whole, analyzeCandidate(whole), *segment.bound).ok) return {segment};
  std::vector<SegmentToLower> parts = partsOf(segment);
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
  }
  return own;
}

}  // namespace

SegmentHeuristics reductionSegmentHeuristics(LoweringContext& ctx, const SchedulerEntry& entry) {
  const std::vector<SegmentToLower> parts = segmentParts(ctx.segment);
  if (parts.size() == 1) return heuristicsOf(entry, RowLowering(ctx).choose(false));
  std::vector<ReductionProblem> problems;
  std::vector<PointwiseParams> pointwise;
  for (const SegmentToLower& part : parts) {
    LoweringContext part_ctx = makeLoweringContext(part, ctx.device);
    if (reduces(part.exprs)) {
      problems.push_back(RowLowering(part_ctx).rowProblem(false));
    } else {
      pointwise.push_back(choosePointwise(part_ctx));
    }
  }
  ReductionParams params =
      outerReductionParts(ctx.device, problems, pointwise.empty() ? 1 : ctx.device.tuning.block_threads);
  for (PointwiseParams& p : pointwise) {
    // One-dimensional blocks of the kernel's threads (kernel/joined_kernel.h), one vector chunk per thread
    // where tiles of rows were chosen (their rows per thread are no chunks).
    if (p.break_point > 0) p = PointwiseParams{.vectorize = p.vectorize};
    p.block = params.threads_x * params.threads_y;
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
  std::vector<Kernel> kernels;
  for (size_t i = 0; i < parts.size(); ++i) {
    LoweringContext part_ctx = makeLoweringContext(parts[i], ctx.device);
    if (i > 0 && params.more_parts[i - 1].pointwise) {
      lowerPointwise(part_ctx, *params.more_parts[i - 1].pointwise);
    } else {
      RowLowering(part_ctx).lower(partParams(params, i));
    }
    BRAZE_ASSERT(part_ctx.follow_ups.empty(), "segment {}: a part side by side has a second kernel", ctx.segment.id);
    kernels.push_back(std::move(part_ctx.kernel));
  }
  kernel::joinKernels(ctx.kernel, kernels);
  ctx.kernel.summary = params.toString();
}

}  // namespace scheduler
}  // namespace braze
