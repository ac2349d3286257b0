#include "segmenter/reuse_segments.h"

#include "segmenter/verify_plan.h"
#include "ir/verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_set>

namespace braze {
namespace {

template <typename T>
void appendNew(std::vector<T>& to, const std::vector<T>& from, const std::unordered_set<T>& skip = {}) {
  for (const T& x : from) {
    if (skip.count(x) == 0 && std::find(to.begin(), to.end(), x) == to.end()) to.push_back(x);
  }
}

// The candidate a producer segment and its consumer would make as one: the producer's exprs then the
// consumer's (the views both read, once), the inputs neither makes, and the outputs read outside both.
Candidate unionOf(const SegmentedFusion& plan, const Segment& producer, const Segment& consumer) {
  Candidate c;
  appendNew(c.exprs, producer.exprs);
  appendNew(c.exprs, consumer.exprs);
  const std::unordered_set<const Val*> made(producer.outputs.begin(), producer.outputs.end());
  appendNew(c.inputs, producer.inputs);
  appendNew(c.inputs, consumer.inputs, made);
  const std::unordered_set<const Expr*> inside(c.exprs.begin(), c.exprs.end());
  std::unordered_set<const Expr*> planned;  // exprs some segment runs (others, if any, read nothing)
  for (const Segment& s : plan.segments) planned.insert(s.exprs.begin(), s.exprs.end());
  for (const Val* out : producer.outputs) {
    bool read_outside = out->isFusionOutput();
    for (const Expr* use : out->uses()) read_outside = read_outside || (planned.count(use) != 0 && inside.count(use) == 0);
    if (read_outside) c.outputs.push_back(out);
  }
  appendNew(c.outputs, consumer.outputs);
  return c;
}

}  // namespace

ReusedSegments reuseSegments(const SegmentedFusion& planned, const std::vector<HostValue>& inputs) {
  // The decisions copied, the sizes bound afresh (copying the old ones first would only discard them).
  SegmentedFusion plan{static_cast<const SegmentedPlan&>(planned), bindShapes(*planned.fusion, inputs)};
  const auto name = [](const std::optional<SchedulerKind>& kind) { return kind ? toString(*kind) : "no scheduler"; };
  for (const Segment& s : plan.segments) {
    const std::optional<SchedulerKind> now =
        chooseScheduler(Candidate{s.exprs, s.inputs, s.outputs}, plan.bound, /*reasons=*/false).kind;
    if (now != s.scheduler) {
      return {std::nullopt,
              fmt::format("segment {} is taken by {} at these sizes, not {}", s.id, name(now), name(s.scheduler))};
    }
  }
  std::set<std::pair<int64_t, int64_t>> asked;
  for (const SegmentEdge& edge : plan.edges) {
    if (edge.reason != CutReason::SchedulerRefused || !asked.insert({edge.producer, edge.consumer}).second) continue;
    const Segment& producer = plan.segments.at(static_cast<size_t>(edge.producer));
    const Segment& consumer = plan.segments.at(static_cast<size_t>(edge.consumer));
    const std::optional<SchedulerKind> joined =
        chooseScheduler(unionOf(plan, producer, consumer), plan.bound, /*reasons=*/false).kind;
    if (joined) {
      return {std::nullopt, fmt::format("segments {} and {}, cut where no scheduler took both, are taken together "
                                        "by {} at these sizes", edge.producer, edge.consumer, toString(*joined))};
    }
  }
  // Where the sizes are those it was planned for, it is these inputs' own plan, not a reused one.
  const std::vector<Val*>& ins = plan.fusion->inputs();
  plan.reused = std::any_of(ins.begin(), ins.end(), [&](const Val* in) {
    return in->isTensor() && planned.bound.sizesOf(in) != plan.bound.sizesOf(in);
  });
  if (verifiersEnabled()) verifyPlan(plan);
  return {std::move(plan), ""};
}

}  // namespace braze
