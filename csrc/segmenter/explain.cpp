#include "segmenter/explain.h"

#include "support/dump.h"
#include "support/error.h"
#include "reference/evaluator.h"
#include "segmenter/segmenter.h"

#include <cstdio>
#include <unordered_map>

namespace braze {

SegmentedFusion explain(const Fusion& fusion, const std::vector<HostValue>& inputs, const PlanOptions& options) {
  auto prepared = std::make_shared<Fusion>(fusion);  // passes edit a copy: the user's fusion stays as defined
  BoundShapes bound = bindShapes(*prepared, inputs);
  BookendReport report;
  // Output chains first: their decisions do not depend on the kernels.
  markOutputChains(*prepared, bound, options.bookend, report);
  SegmentedFusion plan = segmentFusion(prepared, bound);
  // Input chains need the kernels (the double-read rule), so they are decided on a first plan.
  std::unordered_map<const Expr*, int64_t> kernel_of;
  for (const Segment& s : plan.segments) {
    for (const Expr* e : s.exprs) kernel_of[e] = s.id;
  }
  const bool cut = markInputChains(*prepared, bound, options.bookend,
                                   [&](const Expr* e) { return kernel_of.count(e) ? kernel_of.at(e) : -1; }, report);
  if (cut) plan = segmentFusion(prepared, bound);
  plan.bookending = std::move(report);
  return plan;
}

std::unordered_map<const Val*, HostValue> planValues(const SegmentedFusion& plan, const std::vector<HostValue>& inputs) {
  const Fusion& fusion = *plan.fusion;
  BRAZE_ASSERT(inputs.size() == fusion.inputs().size(), "running a plan: {} inputs for a plan of {}", inputs.size(),
               fusion.inputs().size());
  std::unordered_map<const Val*, HostValue> values;
  for (size_t i = 0; i < inputs.size(); ++i) values.emplace(fusion.inputs()[i], inputs[i]);
  for (const auto& val : fusion.vals()) {
    if (val->isScalar() && plan.bound.hasScalar(val.get())) values.emplace(val.get(), plan.bound.scalarOf(val.get()));
  }
  return values;
}

void runAliasSegment(const SegmentedFusion& plan, const Segment& segment,
                     std::unordered_map<const Val*, HostValue>& values) {
  for (const Expr* e : segment.exprs) {
    const HostTensor& in = std::get<HostTensor>(values.at(e->input(0)));
    const ViewResult view = viewThrough(*e, StridedLayout{in.sizes(), in.strides(), in.offset()},
                                        plan.bound.intOperands(*e));
    BRAZE_ASSERT(view.is_view, "alias segment {}: {}", segment.id, view.reason);
    values.insert_or_assign(e->output(0), in.view(view.layout.sizes, view.layout.strides, view.layout.offset));
  }
}

void runSegmentOnReference(const Segment& segment, std::unordered_map<const Val*, HostValue>& values) {
  // A kernel sees only its inputs and scalars, and leaves only its outputs behind.
  std::unordered_map<const Val*, HostValue> local;
  for (const Val* in : segment.inputs) local.emplace(in, values.at(in));
  for (const Expr* e : segment.exprs) {
    std::vector<const HostValue*> operands;
    for (const Val* in : e->inputs()) {
      auto it = in->isScalar() ? values.find(in) : local.find(in);
      BRAZE_ASSERT(it != (in->isScalar() ? values.end() : local.end()), "segment {}: {} reads {}, which it has no "
                   "value for", segment.id, e->name(), in->name());
      operands.push_back(&it->second);
    }
    std::vector<HostValue> results = evaluateExpr(*e, operands);
    for (size_t i = 0; i < results.size(); ++i) local.insert_or_assign(e->output(i), std::move(results[i]));
  }
  for (const Val* out : segment.outputs) {
    values.insert_or_assign(out, std::get<HostTensor>(local.at(out)).contiguous());
  }
}

std::vector<HostValue> runOnReference(const SegmentedFusion& plan, const std::vector<HostValue>& inputs) {
  auto values = planValues(plan, inputs);
  for (const Segment& segment : plan.segments) {
    if (segment.kind == SegmentKind::Alias) {
      runAliasSegment(plan, segment, values);
    } else {
      runSegmentOnReference(segment, values);
    }
  }
  return collectOutputs(*plan.fusion, values, /*row_major=*/false);
}

std::vector<HostValue> executeSegmented(const Fusion& fusion, const std::vector<HostValue>& inputs,
                                        const PlanOptions& options) {
  const SegmentedFusion plan = explain(fusion, inputs, options);
  if (dumpEnabled("segments")) std::fprintf(stderr, "%s", plan.toString().c_str());
  return runOnReference(plan, inputs);
}

}  // namespace braze
