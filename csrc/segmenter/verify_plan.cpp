#include "segmenter/verify_plan.h"

#include "support/error.h"

#include <unordered_map>
#include <unordered_set>

namespace braze {

void verifyPlan(const SegmentedFusion& plan) {
  const Fusion& fusion = *plan.fusion;
  std::unordered_set<const Val*> written(fusion.inputs().begin(), fusion.inputs().end());
  std::unordered_map<const Expr*, int64_t> owner;  // compute expr -> the segment that runs it
  std::unordered_set<int64_t> ids;
  for (const Segment& s : plan.segments) {
    BRAZE_ASSERT(ids.insert(s.id).second, "two segments have id {}", s.id);
    for (const Val* in : s.inputs) {
      BRAZE_ASSERT(written.count(in) != 0 || in->isScalar(),
                   "segment {} reads {} before any earlier segment writes it", s.id, in->name());
    }
    std::unordered_set<const Val*> made;
    const std::unordered_set<const Val*> reads(s.inputs.begin(), s.inputs.end());
    for (const Expr* e : s.exprs) {
      for (const Val* in : e->inputs()) {
        BRAZE_ASSERT(made.count(in) != 0 || reads.count(in) != 0 || in->isScalar() || fusion.isInput(in),
                     "segment {}: {} reads {}, which the segment neither makes first nor lists among its inputs",
                     s.id, e->name(), in->name());
      }
      BRAZE_ASSERT(s.kind != SegmentKind::Alias || isMetaOp(e->kind()), "alias segment {} holds {}, not a meta op",
                   s.id, e->name());
      if (!isMetaOp(e->kind())) {
        auto [it, fresh] = owner.emplace(e, s.id);
        BRAZE_ASSERT(fresh, "{} is in segments {} and {}", e->name(), it->second, s.id);
      }
      made.insert(e->outputs().begin(), e->outputs().end());
    }
    for (const Val* out : s.outputs) {
      BRAZE_ASSERT(made.count(out) != 0, "segment {} lists {} among its outputs but does not make it", s.id, out->name());
      written.insert(out);
    }
    BRAZE_ASSERT(s.kind == SegmentKind::Alias || s.scheduler.has_value() || !s.refusals.empty(),
                 "kernel segment {} has neither a scheduler nor a reason why none accepts it", s.id);
  }
  const std::vector<Expr*> evaluated = fusion.exprsToEvaluate();
  const std::vector<char> computes = fusion.computesNeededValues(evaluated);
  for (const Expr* e : evaluated) {
    BRAZE_ASSERT(isMetaOp(e->kind()) || owner.count(e) != 0 || e->outputs()[0]->isScalar() || computes[e->id()] == 0,
                 "{} is in no segment", e->name());
  }
  for (const Val* out : fusion.outputs()) {
    BRAZE_ASSERT(written.count(out) != 0 || out->isScalar(), "output {} is written by no segment", out->name());
  }
  for (const SegmentEdge& edge : plan.edges) {
    BRAZE_ASSERT(ids.count(edge.producer) != 0 && ids.count(edge.consumer) != 0,
                 "the cut at {} joins segments {} and {}, which are not both in the plan", edge.tensor->name(),
                 edge.producer, edge.consumer);
  }
}

}  // namespace braze
