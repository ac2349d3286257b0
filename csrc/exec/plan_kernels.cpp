#include "exec/plan_kernels.h"

#include "support/dump.h"
#include "support/error.h"
#include "codegen/cuda_emitter.h"
#include "segmenter/segment_views.h"

#include <cstdio>

namespace braze::kernel {

CompiledPlan compilePlan(SegmentedFusion plan, const DeviceInfo& device) {
  CompiledPlan compiled{std::move(plan), {}};
  for (const Segment& segment : compiled.plan.segments) {
    if (segment.kind != SegmentKind::Kernel || !segment.scheduler) {
      compiled.kernels.emplace_back();
      continue;
    }
    compiled.kernels.emplace_back(lowerSegment(segmentToLower(compiled.plan, segment), device));
  }
  // The plan shows what the heuristics chose.
  for (size_t s = 0; s < compiled.kernels.size(); ++s) {
    if (compiled.kernels[s]) {
      compiled.plan.segments[s].vectorize = compiled.kernels[s]->vectorize;
      compiled.plan.segments[s].heuristics = launchSummary(*compiled.kernels[s]);
    }
  }
  return compiled;
}

CompiledPlan planAndCompile(const Fusion& fusion, const std::vector<HostValue>& inputs, const ExecuteOptions& options) {
  CompiledPlan compiled = compilePlan(explain(fusion, inputs, options.plan), options.device);
  if (dumpEnabled("segments")) std::fprintf(stderr, "%s", compiled.plan.toString().c_str());
  for (const auto& k : compiled.kernels) {
    if (!k) continue;
    if (dumpEnabled("heuristics")) std::fprintf(stderr, "%s: %s\n", k->name.c_str(), launchSummary(*k).c_str());
    if (dumpEnabled("kernel")) std::fprintf(stderr, "%s\n", emitCuda(*k).c_str());
  }
  return compiled;
}

}  // namespace braze::kernel
