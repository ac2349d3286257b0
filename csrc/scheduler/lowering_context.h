// What every scheduler's lowering starts from: a kernel segment of a plan (SegmentToLower), and the
// context built once from it and the device (LoweringContext: the kernel with its tensor parameters and
// what heuristics read of them), with the helpers the lowerings share (output groups, predicated
// chunks, output stores, workspaces). The scheduler table (scheduler/scheduler.h) says which
// scheduler's heuristics and lowering a segment gets; the ValueBuilder fills their loops with the
// segment's math.
#pragma once

#include "kernel/kernel_ir.h"
#include "scheduler/heuristics.h"
#include "scheduler/value_builder.h"
#include "passes/bind_shapes.h"
#include "target/device_info.h"
#include "scheduler/registry.h"

#include <functional>
#include <string>
#include <unordered_map>

namespace braze::scheduler {

// What a kernel reads for a segment input: a fusion input as bound, another kernel's output as a fresh
// row-major buffer, an alias segment's output as the view it makes of one of those (`storage`).
struct SegmentInputView {
  InputLayout layout;
  const Val* storage = nullptr;  // whose buffer the view's offsets start from
};

// All that lowering reads of one kernel segment, without the plan around it: its exprs, the tensors it
// reads and writes, the scheduler that accepted it, the shapes bound for this execute, and the view
// each tensor input is read through.
struct SegmentToLower {
  int64_t id = 0;  // names the kernel: braze_s<id>_<scheduler>
  SchedulerKind scheduler = SchedulerKind::Pointwise;
  std::vector<const Expr*> exprs;
  std::vector<const Val*> inputs;
  std::vector<const Val*> outputs;
  const BoundShapes* bound = nullptr;
  std::unordered_map<const Val*, SegmentInputView> input_views;  // every tensor input
  // An output written into another tensor's memory (an input updated in place): its layout there and
  // that tensor. Every other output is a buffer of its own (BoundShapes::allocatedLayout).
  std::unordered_map<const Val*, SegmentInputView> output_views;
};

// Drops the scalar lets of `k` that nothing reads (dead_lets.cpp).
void removeDeadLets(Kernel& k);

// What the per-scheduler lowerings share: the kernel with its tensor parameters, and the builders.
struct LoweringContext {
  const SegmentToLower& segment;
  const BoundShapes& bound;
  const DeviceInfo& device;
  Kernel kernel;
  std::unordered_map<const Val*, TensorId> inputs;   // segment input -> parameter
  std::unordered_map<const Val*, TensorId> outputs;  // segment output -> parameter
  int64_t widest_dtype_bytes = 1;
  std::vector<int64_t> input_factors;  // vectorizeFactor of every input parameter
  // Kernels launched right after `kernel`, in order, that finish what it started (the inner-outer
  // scheduler's sum of per-block partials): they read its shared workspaces and write segment outputs.
  std::vector<Kernel> follow_ups;
};

// The segment's outputs by shape, in order of first appearance: a pointwise or transpose kernel
// iterates over each group's index space in its own range of blocks.
struct OutputGroup {
  std::vector<int64_t> sizes;
  std::vector<const Val*> outputs;
  int64_t numel = 0;
  int64_t blocks = 0;       // filled by the lowering
  int64_t first_block = 0;
};
std::vector<OutputGroup> groupOutputs(const LoweringContext& ctx);

// The context of `segment` on `device`: its kernel named braze_s<id>_<scheduler>, the tensor parameters
// (inputs, then outputs), each input's vectorize factor, the widest dtype, 64-bit indexing where a
// tensor needs it, and whether index values are checked.
LoweringContext makeLoweringContext(const SegmentToLower& segment, const DeviceInfo& device);

// A kernel that runs after ctx's own (LoweringContext::follow_ups), named after it with `suffix`, with
// its warp size, index width and index checks.
Kernel followUpKernel(const LoweringContext& ctx, const std::string& suffix);

// A workspace tensor of a kernel (scratch the launcher allocates: no Val): `numel` elements, zeroed at
// the first launch when asked (the kernel leaves it zeroed again).
TensorParam workspaceParam(const std::string& name, DataType dtype, int64_t numel, bool zeroed);

// One predicated chunk of `width` lanes: `pre` runs once, `body` per lane, `post` once after the
// lanes (vector stores).
struct Chunk {
  std::vector<Stmt> pre, body, post;
};
// Emits `if (predicate) { pre; for lane { body }; post }`, with `build` filling the chunk through vb. With
// `later` (a chunk that needs no predicate), emits `pre` here and `for lane { body }; post` into *later.
void emitChunk(KernelBuilder& kb, ValueBuilder& vb, ExprId predicate, int64_t width, VarId lane_var,
               const std::function<void(Chunk&)>& build, std::vector<Stmt>* later = nullptr);
// Stores value (of the output's dtype) at `index` of an output parameter: through a lane buffer and
// one vector store when the access allows it, else one scalar store per lane; only where `guard` (an
// expression the lanes share) holds, if one is given.
void storeOutput(KernelBuilder& kb, ValueBuilder& vb, Chunk& chunk, TensorId out, const std::vector<Idx>& index,
                 ExprId value, ExprId guard = -1);

}  // namespace braze::scheduler
