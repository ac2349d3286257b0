// The whole pipeline on host tensors: plan (bookending, segmentation), heuristics for a chosen
// device, lowering to kernel IR, and the CPU simulator for every kernel segment. What `execute`
// runs for numpy inputs; the reference evaluator stays the oracle it is compared with.
#pragma once

#include "kernel/kernel_ir.h"
#include "scheduler/device_info.h"
#include "segmenter/explain.h"

#include <vector>

namespace braze::kernel {

struct CompiledPlan {
  SegmentedFusion plan;
  std::vector<std::optional<Kernel>> kernels;  // per segment: the kernel, or none (alias, or no scheduler)
};

// Lowers every kernel segment of a plan for `device`. Segments no scheduler accepts keep no kernel
// (they run on the reference evaluator) and say so in the plan.
CompiledPlan compilePlan(SegmentedFusion plan, const DeviceInfo& device);

// Runs a compiled plan: alias segments as views, kernels on the simulator, segments without a
// kernel on the reference evaluator. Inputs must be those the plan was made for.
std::vector<HostValue> runOnSimulator(const CompiledPlan& compiled, const std::vector<HostValue>& inputs);

struct ExecuteOptions {
  PlanOptions plan;
  DeviceInfo device = DeviceInfo::h100Sxm();
};
// explain + compilePlan for options.device. BRAZE_DUMP: "segments" prints the plan, "heuristics" each
// kernel's parameters, "kernel" the CUDA source (to stderr). The first half of every execute.
CompiledPlan planAndCompile(const Fusion& fusion, const std::vector<HostValue>& inputs, const ExecuteOptions& options);

// planAndCompile + runOnSimulator.
std::vector<HostValue> executeOnSimulator(const Fusion& fusion, const std::vector<HostValue>& inputs,
                                          const ExecuteOptions& options = {}, CompiledPlan* compiled_out = nullptr);

}  // namespace braze::kernel
