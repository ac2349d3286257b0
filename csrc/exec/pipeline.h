// The pipeline: every step from a fusion and one execute's inputs (their sizes, strides, alignment and
// scalar values, never their data) to kernels loaded on a device, in order, in one file:
//
//   bind             concrete sizes and scalars for every tensor and value      passes/bind_shapes
//   bookend-outputs  segment_set where meta-op chains ending at outputs meet compute   passes/mark_aliases_prepare
//   segment          the exprs cut into alias and kernel segments                segmenter/segmenter
//   bookend-inputs   the same for chains that start at inputs (needs the kernels), then segment again
//   heuristics       per kernel segment: its scheduler's device check and parameters   scheduler/scheduler.h
//   lower            per kernel segment: kernel IR following those parameters    scheduler/<name>/lower
//   emit             per kernel: its source in the device's dialect, and how it is compiled   codegen/
//   compile          every kernel compiled (or found in the caches) and loaded   device/
//
// then PreparedPlan (exec/prepared_plan.h) binds the loaded kernels' arguments and launches them.
// BRAZE_DUMP=after:<step> prints the IR a step made (the steps above up to emit, whose dump is each
// kernel's source), to stderr; the verifiers (ir/verifier.h, segmenter/verify_plan.h, kernel/verifier.h)
// check the IR at each stage boundary in debug builds and with BRAZE_VERIFY=1, which the tests set.
#pragma once

#include "device/device_ops.h"
#include "ir/host_tensor.h"
#include "kernel/code_digest.h"
#include "kernel/kernel_ir.h"
#include "target/device_info.h"
#include "segmenter/in_place_copies.h"
#include "segmenter/segmented_fusion.h"

#include <optional>
#include <functional>
#include <string_view>
#include <vector>

namespace braze {

struct PlanOptions {
  BookendPolicy bookend = BookendPolicy::Auto;
  // Every kernel segment runs on the reference evaluator as a host step (host-memory devices only):
  // the plan's segmentation and views are then checked bit for bit against evaluate().
  bool kernels_on_reference = false;
  // A FusionCache keeps each shape class's segmentation for the class's later signatures where it holds
  // (segmenter/reuse_segments.h); false segments every signature afresh.
  bool reuse_segments = true;
  // With reuse_segments: the kernels of inner reductions (and inner-outer ones) are lowered for a
  // canonical row count of the class and given each signature's launch values (exec/canonical_rows.h),
  // so another batch size lowers nothing; false lowers every signature's kernels for its own sizes.
  bool reuse_kernels = true;
};

// Steps bind .. bookend-inputs: the segmented plan, without kernels.
SegmentedFusion planSegments(const Fusion& fusion, const std::vector<HostValue>& inputs, const PlanOptions& options = {});

struct LoweredPlan {
  SegmentedFusion plan;
  // Per segment: its kernel, or none (alias, no scheduler); then one copy kernel per in-place copy;
  // then the follow-up kernels.
  std::vector<std::optional<kernel::Kernel>> kernels;
  std::vector<InPlaceCopy> copies;  // the in-place updates' copies, after the segments' kernels
  // A kernel that runs right after its segment's own and finishes its work (the inner-outer
  // scheduler's second pass): the segment, and the kernel's index in `kernels`.
  struct FollowUp {
    size_t segment = 0;
    size_t kernel = 0;
  };
  std::vector<FollowUp> follow_ups;
  // Per kernel, its code digest where lowering was given it (a SegmentKernelSource's); digestOf works
  // out the others.
  std::vector<std::optional<kernel::CodeDigest>> digests;
  kernel::CodeDigest digestOf(size_t k) const {
    return k < digests.size() && digests[k] ? *digests[k] : kernel::codeDigest(*kernels[k]);
  }
};

// Where lowerPlan may take a segment's kernels from (exec/segment_kernel_source.h).
class SegmentKernelSource;

// Steps heuristics and lower: every kernel segment's parameters, then its kernel IR, for `device`. Segments no scheduler
// accepts keep no kernel (the reference evaluator runs them) and say why in the plan; the plan's
// segments show the heuristics chosen. The in-place updates' copies get a copy kernel each.
LoweredPlan lowerPlan(SegmentedFusion plan, const DeviceInfo& device, SegmentKernelSource* source = nullptr);

struct ExecuteOptions {
  PlanOptions plan;
  DeviceInfo device = DeviceInfo::h100Sxm();
};
// The whole pipeline up to kernel IR.
LoweredPlan planAndLower(const Fusion& fusion, const std::vector<HostValue>& inputs, const ExecuteOptions& options);

// One kernel as its device's compiler takes it.
struct EmittedKernel {
  std::string source;               // in the device's dialect: CUDA, or HIP for an AMD GPU
  device::CompileOptions options;  // the arch it is compiled for (sm_90a where it uses wgmma) and flags
};

// Whether kernel `k` of a plan is emitted, compiled and launched: not for segments without a kernel,
// kernels with no block to run (a zero-size dim) and, with PlanOptions::kernels_on_reference, any.
bool launchesKernel(const std::optional<kernel::Kernel>& k, const PlanOptions& options);

// Step emit: every kernel the plan launches (launchesKernel), as source; none for the others.
struct EmittedPlan {
  LoweredPlan lowered;
  PlanOptions options;
  std::vector<std::optional<EmittedKernel>> kernels;  // per segment
};
EmittedPlan emitPlan(LoweredPlan plan, const DeviceInfo& target, const PlanOptions& options = {});

// Step compile: every emitted kernel compiled (or found in the memory and disk caches) and loaded by
// `ops`, all at once, on as many threads as there are kernels (and cores).
struct LoadedKernel {
  device::KernelHandle function = nullptr;
  kernel::CodeDigest digest;  // what the function's source is known by (kernel/code_digest.h)
};
struct CompiledPlan {
  LoweredPlan lowered;
  PlanOptions options;
  std::vector<std::optional<LoadedKernel>> kernels;  // per kernel of `lowered`: none where none was emitted
};
CompiledPlan compilePlan(EmittedPlan plan, device::DeviceOps& ops);

// Whether BRAZE_DUMP asks for the IR after `step`; prints the text `make_text` makes to stderr if so (made
// only then: printing a plan or a kernel costs more than planning it).
void dumpAfter(std::string_view step, const std::function<std::string()>& make_text);

}  // namespace braze
