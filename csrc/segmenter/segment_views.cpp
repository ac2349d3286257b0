#include "segmenter/segment_views.h"

#include "support/error.h"

namespace braze {

scheduler::SegmentInputView segmentInputView(const SegmentedFusion& plan, const Val* input) {
  if (plan.fusion->isInput(input)) return {plan.bound.inputLayout(input), input};
  const Segment* producer = plan.producerOf(input);
  if (producer != nullptr && producer->kind == SegmentKind::Kernel) {
    return {InputLayout{plan.bound.allocatedLayout(input), 16}, input};
  }
  // Made by an alias segment (its output, or a view inside it): the view its meta op makes of its
  // operand, itself a view, a fusion input or a kernel's buffer.
  const Expr* e = input->definition();
  BRAZE_ASSERT(e != nullptr && isMetaOp(e->kind()), "segment input {} is neither an input, a kernel output nor a view",
               input->name());
  scheduler::SegmentInputView view = segmentInputView(plan, e->input(0));
  ViewResult result = viewThrough(*e, view.layout.layout, plan.bound.intOperands(*e));
  BRAZE_ASSERT(result.is_view, "alias segment output {} is not a view: {}", input->name(), result.reason);
  view.layout.layout = std::move(result.layout);
  return view;
}

scheduler::SegmentToLower segmentToLower(const SegmentedFusion& plan, const Segment& segment) {
  BRAZE_CHECK(segment.kind == SegmentKind::Kernel && segment.scheduler.has_value(),
              "segment {} has no kernel scheduler ({}); it cannot be compiled", segment.id,
              segment.refusals.empty() ? "alias segment" : segment.refusals.back().second);
  scheduler::SegmentToLower lower{segment.id, *segment.scheduler, segment.exprs, segment.inputs, segment.outputs,
                               &plan.bound, {}, {}};
  for (const Val* in : segment.inputs) {
    if (in->isTensor()) lower.input_views.emplace(in, segmentInputView(plan, in));
  }
  for (const Val* out : segment.outputs) {
    auto it = plan.written_in_place.find(out);
    if (it != plan.written_in_place.end()) lower.output_views[out] = {plan.bound.inputLayout(it->second), it->second};
  }
  return lower;
}

}  // namespace braze
