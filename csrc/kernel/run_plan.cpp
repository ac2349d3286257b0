#include "kernel/run_plan.h"

#include "ir/dump.h"
#include "ir/error.h"
#include "kernel/cuda_emitter.h"
#include "kernel/lower.h"
#include "kernel/simulator.h"
#include "reference/evaluator.h"

#include <cstdio>

namespace braze::kernel {

CompiledPlan compilePlan(SegmentedFusion plan, const DeviceInfo& device) {
  CompiledPlan compiled{std::move(plan), {}};
  for (const Segment& segment : compiled.plan.segments) {
    if (segment.kind != SegmentKind::Kernel || !segment.scheduler) {
      compiled.kernels.emplace_back();
      continue;
    }
    compiled.kernels.emplace_back(lowerSegment(compiled.plan, segment, device));
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

std::vector<HostValue> runOnSimulator(const CompiledPlan& compiled, const std::vector<HostValue>& inputs) {
  const SegmentedFusion& plan = compiled.plan;
  auto values = planValues(plan, inputs);
  for (size_t s = 0; s < plan.segments.size(); ++s) {
    const Segment& segment = plan.segments[s];
    if (segment.kind == SegmentKind::Alias) {
      runAliasSegment(plan, segment, values);
      continue;
    }
    if (!compiled.kernels[s]) {
      runSegmentOnReference(segment, values);
      continue;
    }
    const Kernel& kernel = *compiled.kernels[s];
    for (const TensorParam& p : kernel.tensors) {
      if (p.output) values.insert_or_assign(p.val, HostTensor::empty(p.dtype, plan.bound.sizesOf(p.val)));
    }
    std::vector<HostTensor> workspaces;  // zero-filled, as a launcher provides them
    workspaces.reserve(kernel.tensors.size());
    std::vector<HostTensor*> bound;
    for (const TensorParam& p : kernel.tensors) {
      if (p.workspace) {
        bound.push_back(&workspaces.emplace_back(HostTensor::empty(p.dtype, {p.layout.numel()})));
      } else {
        bound.push_back(&std::get<HostTensor>(values.at(p.storage)));
      }
    }
    simulate(kernel, bound);
    for (size_t t = 0; t < kernel.tensors.size(); ++t) {
      const TensorParam& p = kernel.tensors[t];
      if (!p.zeroed) continue;
      for (int64_t i = 0; i < bound[t]->numel(); ++i) {
        BRAZE_CHECK_KIND(ErrorKind::Index, bound[t]->readInt(i) == 0,
                    "kernel {} left its workspace {} non-zero at element {}: the next launch would misread it",
                    kernel.name, p.name, i);
      }
    }
  }
  return collectOutputs(*plan.fusion, values, /*row_major=*/false);
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

std::vector<HostValue> executeOnSimulator(const Fusion& fusion, const std::vector<HostValue>& inputs,
                                          const ExecuteOptions& options, CompiledPlan* compiled_out) {
  CompiledPlan compiled = planAndCompile(fusion, inputs, options);
  std::vector<HostValue> outputs = runOnSimulator(compiled, inputs);
  if (compiled_out != nullptr) *compiled_out = std::move(compiled);
  return outputs;
}

}  // namespace braze::kernel
