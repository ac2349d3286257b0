// The pipeline: every step from a fusion and one execute's inputs (their sizes, strides, alignment and
// scalar values, never their data) to kernels a device can load, in order, in one file:
//
//   bind             concrete sizes and scalars for every tensor and value      passes/bind_shapes
//   bookend-outputs  segment_set where meta-op chains ending at outputs meet compute   passes/mark_aliases_prepare
//   segment          the exprs cut into alias and kernel segments                segmenter/segmenter
//   bookend-inputs   the same for chains that start at inputs (needs the kernels), then segment again
//   heuristics       per kernel segment: its scheduler's parameters, as a value   scheduler/<name>/heuristics
//   lower            per kernel segment: kernel IR following those parameters    scheduler/<name>/lower
//
// then PreparedPlan (exec/prepared_plan.h) emits each kernel's source (codegen/), loads it through the
// device (device/) and lays out the launch. BRAZE_DUMP=after:<step> prints the IR a step made (steps
// above, and emit for the CUDA source), to stderr; the verifiers (ir/verifier.h,
// segmenter/verify_plan.h, kernel/verifier.h) check the IR at each stage boundary in debug builds and
// with BRAZE_VERIFY=1, which the tests set.
#pragma once

#include "ir/host_tensor.h"
#include "kernel/kernel_ir.h"
#include "target/device_info.h"
#include "segmenter/segmented_fusion.h"

#include <optional>
#include <string_view>
#include <vector>

namespace braze {

struct PlanOptions {
  BookendPolicy bookend = BookendPolicy::Auto;
  // Every kernel segment runs on the reference evaluator as a host step (host-memory devices only):
  // the plan's segmentation and views are then checked bit for bit against evaluate().
  bool kernels_on_reference = false;
};

// Steps bind .. bookend-inputs: the segmented plan, without kernels.
SegmentedFusion planSegments(const Fusion& fusion, const std::vector<HostValue>& inputs, const PlanOptions& options = {});

struct LoweredPlan {
  SegmentedFusion plan;
  std::vector<std::optional<kernel::Kernel>> kernels;  // per segment: its kernel, or none (alias, no scheduler)
};

// Steps heuristics and lower: every kernel segment's parameters, then its kernel IR, for `device`. Segments no scheduler
// accepts keep no kernel (the reference evaluator runs them) and say why in the plan; the plan's
// segments show the heuristics chosen.
LoweredPlan lowerPlan(SegmentedFusion plan, const DeviceInfo& device);

struct ExecuteOptions {
  PlanOptions plan;
  DeviceInfo device = DeviceInfo::h100Sxm();
};
// The whole pipeline up to kernel IR.
LoweredPlan planAndLower(const Fusion& fusion, const std::vector<HostValue>& inputs, const ExecuteOptions& options);

// Whether BRAZE_DUMP asks for the IR after `step`; prints `text` to stderr if so.
void dumpAfter(std::string_view step, const std::string& text);

}  // namespace braze
