// Lowering: from a kernel segment of a plan, and the device it will run on, to kernel IR. The
// segment's scheduler picks the loop structure (pointwise chunks, or rows for the reductions), its
// heuristics the sizes; the ValueBuilder fills the loops with the segment's math.
#pragma once

#include "kernel/kernel_ir.h"
#include "scheduler/value_builder.h"
#include "passes/bind_shapes.h"
#include "target/device_info.h"
#include "scheduler/heuristics.h"
#include "scheduler/pointwise/heuristics.h"
#include "scheduler/reduction/heuristics.h"
#include "scheduler/matmul/heuristics.h"
#include "scheduler/scan/heuristics.h"
#include "scheduler/transpose/heuristics.h"
#include "scheduler/registry.h"

#include <functional>
#include <string>
#include <variant>
#include <unordered_map>

namespace braze::kernel {

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
};

// A kernel segment's heuristics, chosen before it is lowered and passed to the lowering as a value: the
// pipeline's heuristics step makes them (BRAZE_DUMP=after:heuristics prints them), lowering follows
// them. A transpose segment whose loads cannot be staged gets pointwise parameters and says why.
struct SegmentHeuristics {
  std::variant<PointwiseParams, ReductionParams, TransposeParams, ScanParams, MatmulParams> params;
  std::string fallback;  // why a transpose segment is lowered as pointwise ("" otherwise)
  std::string toString() const;
};
SegmentHeuristics segmentHeuristics(const SegmentToLower& segment, const DeviceInfo& device);

Kernel lowerSegment(const SegmentToLower& segment, const DeviceInfo& device, const SegmentHeuristics& heuristics);

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

// Each scheduler's two halves: its heuristics for the segment (from the context's shapes, layouts and
// device), then the kernel those parameters describe.
PointwiseParams choosePointwise(LoweringContext& ctx);
void lowerPointwise(LoweringContext& ctx, const PointwiseParams& params);
ReductionParams chooseReduction(LoweringContext& ctx, bool persistent_wanted);
void lowerReduction(LoweringContext& ctx, const ReductionParams& params);
// Shared-memory tiles for segments that read an input across the output's inner dim; falls back to
// lowerPointwise (saying why in the kernel's summary) when no load can be staged.
// Transpose: TransposeParams, or why its loads cannot be staged (then the pointwise lowering runs).
std::variant<TransposeParams, std::string> chooseTranspose(LoweringContext& ctx);
void lowerTranspose(LoweringContext& ctx, const TransposeParams& params);

ScanParams chooseScan(LoweringContext& ctx);
void lowerScan(LoweringContext& ctx, const ScanParams& params);
MatmulParams chooseMatmul(LoweringContext& ctx);
void lowerMatmul(LoweringContext& ctx, const MatmulParams& params);

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
// one vector store when the access allows it, else one scalar store per lane.
void storeOutput(KernelBuilder& kb, ValueBuilder& vb, Chunk& chunk, TensorId out, const std::vector<Idx>& index,
                 ExprId value);

}  // namespace braze::kernel
