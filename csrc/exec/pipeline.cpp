#include "exec/pipeline.h"

#include "ir/verifier.h"
#include "kernel/printer.h"
#include "kernel/verifier.h"
#include "passes/bind_shapes.h"
#include "passes/mark_aliases_prepare.h"
#include "segmenter/segment_views.h"
#include "segmenter/segmenter.h"
#include "segmenter/verify_plan.h"
#include "support/dump.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <unordered_map>

namespace braze {

void dumpAfter(std::string_view step, const std::string& text) {
  if (!dumpEnabled(fmt::format("after:{}", step))) return;
  std::fprintf(stderr, "== after %.*s ==\n%s", static_cast<int>(step.size()), step.data(), text.c_str());
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stderr);
}

SegmentedFusion planSegments(const Fusion& fusion, const std::vector<HostValue>& inputs, const PlanOptions& options) {
  if (verifiersEnabled()) verifyFusion(fusion);
  auto prepared = std::make_shared<Fusion>(fusion);  // passes edit a copy: the user's fusion stays as defined
  BoundShapes bound = bindShapes(*prepared, inputs);
  dumpAfter("bind", bound.toString(*prepared));

  BookendReport report;
  // Output chains first: their decisions do not depend on the kernels.
  markOutputChains(*prepared, bound, options.bookend, report);
  if (verifiersEnabled()) verifyFusion(*prepared);
  dumpAfter("bookend-outputs", prepared->toString());

  SegmentedFusion plan = segmentFusion(prepared, bound);
  dumpAfter("segment", plan.toString());

  // Input chains need the kernels (the double-read rule), so they are decided on a first plan.
  std::unordered_map<const Expr*, int64_t> kernel_of;
  for (const Segment& s : plan.segments) {
    for (const Expr* e : s.exprs) kernel_of[e] = s.id;
  }
  const auto kernelOf = [&](const Expr* e) { return kernel_of.count(e) ? kernel_of.at(e) : -1; };
  if (markInputChains(*prepared, bound, options.bookend, kernelOf, report)) plan = segmentFusion(prepared, bound);
  plan.bookending = std::move(report);
  if (verifiersEnabled()) verifyPlan(plan);
  dumpAfter("bookend-inputs", plan.toString());
  if (dumpEnabled("segments")) std::fprintf(stderr, "%s", plan.toString().c_str());
  return plan;
}

LoweredPlan lowerPlan(SegmentedFusion plan, const DeviceInfo& device) {
  LoweredPlan lowered{std::move(plan), {}};
  lowered.plan.device = device.toString();
  for (Segment& segment : lowered.plan.segments) {
    if (segment.kind != SegmentKind::Kernel || !segment.scheduler) {
      lowered.kernels.emplace_back();
      continue;
    }
    const kernel::SegmentToLower to_lower = segmentToLower(lowered.plan, segment);
    const kernel::SegmentHeuristics heuristics = kernel::segmentHeuristics(to_lower, device);
    const auto* matmul = std::get_if<MatmulParams>(&heuristics.params);
    if (matmul != nullptr && !matmul->gemv) {
      // A GPU without mma.sync (an AMD GPU, or older than sm_80) has no kernel for a tensor-core matmul
      // (the GEMV needs none): the segment says why, and runs where the reference can run it.
      const Expr* mm = *std::find_if(segment.exprs.begin(), segment.exprs.end(), [](const Expr* e) {
        return opInfo(e->kind()).category == OpCategory::Matmul;
      });
      if (std::string why = mmaUnavailable(device, mm->input(0)->dtype()); !why.empty()) {
        segment.scheduler.reset();
        segment.refusals.emplace_back(SchedulerKind::Matmul, std::move(why));
        lowered.kernels.emplace_back();
        continue;
      }
    }
    dumpAfter("heuristics", fmt::format("segment {}: {}", segment.id, heuristics.toString()));
    kernel::Kernel k = kernel::lowerSegment(to_lower, device, heuristics);
    if (verifiersEnabled()) kernel::verifyKernel(k);
    // The plan shows what the heuristics chose.
    segment.vectorize = k.vectorize;
    segment.heuristics = kernel::launchSummary(k);
    dumpAfter("lower", kernel::printKernel(k));
    if (dumpEnabled("heuristics")) std::fprintf(stderr, "%s: %s\n", k.name.c_str(), segment.heuristics.c_str());
    lowered.kernels.emplace_back(std::move(k));
  }
  return lowered;
}

LoweredPlan planAndLower(const Fusion& fusion, const std::vector<HostValue>& inputs, const ExecuteOptions& options) {
  return lowerPlan(planSegments(fusion, inputs, options.plan), options.device);
}

}  // namespace braze
