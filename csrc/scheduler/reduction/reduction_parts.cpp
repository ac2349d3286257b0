#include "scheduler/reduction/reduction_parts.h"

#include "kernel/joined_kernel.h"
#include "passes/alias_analysis.h"
#include "scheduler/pointwise/entry.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduction_domain.h"
#include "scheduler/reduction/row_lowering.h"
#include "scheduler/reduction/row_totals.h"
#include "support/error.h"

#include <algorithm>
#include <numeric>
#include <optional>
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

// Whether each expr of `exprs` computes from scalars alone: it reads no tensor from outside `exprs` but 0-dim
// ones (read as scalars: a loss term computed on the host) and none computed from one, and reduces nothing
// (an iota, a full, the casts and meta ops after them).
std::vector<bool> madeFromScalars(const std::vector<const Expr*>& exprs) {
  std::unordered_set<const Val*> made, produced;
  for (const Expr* e : exprs) produced.insert(e->outputs().begin(), e->outputs().end());
  std::vector<bool> scalar(exprs.size(), false);
  for (size_t i = 0; i < exprs.size(); ++i) {
    const OpCategory category = opInfo(exprs[i]->kind()).category;
    const bool computes = category != OpCategory::Reduction && category != OpCategory::Normalization &&
                          category != OpCategory::Matmul && category != OpCategory::Scan &&
                          category != OpCategory::Scatter;
    scalar[i] = computes && std::all_of(exprs[i]->inputs().begin(), exprs[i]->inputs().end(),
                                        [&](const Val* v) {
                                          return made.count(v) != 0 || (produced.count(v) == 0 && readsAsScalar(v));
                                        });
    if (scalar[i]) made.insert(exprs[i]->outputs().begin(), exprs[i]->outputs().end());
  }
  return scalar;
}

// A part of a group: its exprs in the group's order, and those of them whose outputs it writes.
struct PartExprs {
  std::vector<const Expr*> exprs;
  std::unordered_set<const Expr*> writers;
};

// The group's exprs in parts that read nothing another part computes. A value made from scalars alone
// (madeFromScalars) links none of its readers: each part computes it again where it reads it, and writes
// none of it; where such a value writes an output of the group, a part of its own writes it (nanoGPT's
// positions, an iota returned for the backward and read by the position embedding's gather in a norm).
std::vector<PartExprs> partExprs(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs) {
  const std::vector<bool> scalar = madeFromScalars(exprs);
  std::vector<int64_t> parent(exprs.size());
  std::iota(parent.begin(), parent.end(), 0);
  std::unordered_map<const Val*, int64_t> producer;
  for (size_t i = 0; i < exprs.size(); ++i) {
    for (const Val* out : exprs[i]->outputs()) producer[out] = static_cast<int64_t>(i);
  }
  for (size_t i = 0; i < exprs.size(); ++i) {
    for (const Val* in : exprs[i]->inputs()) {
      auto it = producer.find(in);
      if (it == producer.end() || scalar[static_cast<size_t>(it->second)] != scalar[i]) continue;
      const int64_t a = findRoot(parent, static_cast<int64_t>(i)), b = findRoot(parent, it->second);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);  // the earlier expr stays the root
    }
  }
  const std::unordered_set<const Val*> written(outputs.begin(), outputs.end());
  std::unordered_map<int64_t, std::unordered_set<size_t>> members;  // root -> its exprs' positions
  std::unordered_set<int64_t> writing;  // roots of values made from scalars that write an output
  for (size_t i = 0; i < exprs.size(); ++i) {
    const int64_t root = findRoot(parent, static_cast<int64_t>(i));
    members[root].insert(i);
    if (scalar[i] && std::any_of(exprs[i]->outputs().begin(), exprs[i]->outputs().end(),
                                 [&](const Val* v) { return written.count(v) != 0; })) {
      writing.insert(root);
    }
  }
  std::vector<PartExprs> parts;
  for (size_t i = 0; i < exprs.size(); ++i) {
    const int64_t root = findRoot(parent, static_cast<int64_t>(i));
    if (root != static_cast<int64_t>(i) || (scalar[i] && writing.count(root) == 0)) continue;
    std::unordered_set<size_t>& own = members[root];
    if (!scalar[i]) {
      // The values made from scalars it reads, computed again in it (walked backwards: producers come first).
      for (size_t j = exprs.size(); j-- > 0;) {
        if (own.count(j) == 0) continue;
        for (const Val* in : exprs[j]->inputs()) {
          auto it = producer.find(in);
          if (it != producer.end() && scalar[static_cast<size_t>(it->second)]) own.insert(static_cast<size_t>(it->second));
        }
      }
    }
    PartExprs part;
    for (size_t j = 0; j < exprs.size(); ++j) {
      if (own.count(j) == 0) continue;
      part.exprs.push_back(exprs[j]);
      if (scalar[j] == scalar[i]) part.writers.insert(exprs[j]);
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

// The part of a group (or segment) that `part` is: the inputs its exprs read and the outputs its writers write.
template <typename Group>
Group partOf(const Group& whole, PartExprs part) {
  std::unordered_set<const Val*> read, written;
  for (const Expr* e : part.exprs) read.insert(e->inputs().begin(), e->inputs().end());
  for (const Expr* e : part.writers) written.insert(e->outputs().begin(), e->outputs().end());
  Group own = whole;
  own.exprs = std::move(part.exprs);
  std::erase_if(own.inputs, [&](const Val* v) { return read.count(v) == 0; });
  std::erase_if(own.outputs, [&](const Val* v) { return written.count(v) == 0; });
  return own;
}

template <typename Group>
std::vector<Group> partsOf(const Group& whole) {
  std::vector<PartExprs> exprs = partExprs(whole.exprs, whole.outputs);
  if (exprs.size() <= 1) return {whole};
  std::vector<Group> parts;
  for (PartExprs& part : exprs) parts.push_back(partOf(whole, std::move(part)));
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

// Why a part without reductions cannot run in a reduction kernel's blocks, or "".
std::string pointwisePartProblem(const Candidate& part, const CandidateFacts& facts, const BoundShapes& bound) {
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

}  // namespace

std::vector<Candidate> independentParts(const Candidate& candidate) { return partsOf(candidate); }

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
  std::optional<int64_t> reduced_per_result;
  for (const Candidate& part : parts) {
    CandidateFacts part_facts = analyzeCandidate(part);
    part_facts.reasons = facts.reasons;
    if (part_facts.reductions.empty()) {
      if (std::string why = pointwisePartProblem(part, facts, bound); !why.empty()) return Verdict::no(why);
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

Verdict canScheduleRowsWithScalarParts(const std::vector<Candidate>& parts, const CandidateFacts& facts,
                                       const BoundShapes& bound) {
  const Candidate* rows = nullptr;
  for (const Candidate& part : parts) {
    if (reduces(part.exprs)) {
      if (rows != nullptr) return Verdict::no("beside the rows, another part reduces");
      rows = &part;
      continue;
    }
    if (!std::all_of(part.inputs.begin(), part.inputs.end(), readsAsScalar)) {
      return Verdict::no("beside the rows, a part reads tensors");
    }
    if (std::string why = pointwisePartProblem(part, facts, bound); !why.empty()) return Verdict::no(why);
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
