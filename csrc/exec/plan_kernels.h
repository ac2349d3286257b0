// Planning for a device: the plan (bookending, segmentation), then heuristics and lowering to kernel IR
// for every kernel segment. Running a plan is the exec path's (runtime/prepared_plan.h), on any device.
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

struct ExecuteOptions {
  PlanOptions plan;
  DeviceInfo device = DeviceInfo::h100Sxm();
};
// explain + compilePlan for options.device. BRAZE_DUMP: "segments" prints the plan, "heuristics" each
// kernel's parameters, "kernel" the CUDA source (to stderr). The first half of every execute.
CompiledPlan planAndCompile(const Fusion& fusion, const std::vector<HostValue>& inputs, const ExecuteOptions& options);

}  // namespace braze::kernel
