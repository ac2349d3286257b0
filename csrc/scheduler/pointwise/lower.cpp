// The pointwise lowering (also the transpose lowering's fallback). 1D: each thread computes `unroll`
// chunks of `vectorize` consecutive output elements; outputs of different shapes share one launch,
// each group of equally shaped outputs taking its own range of blocks (RoPE's q and k in one kernel).
// 2D, when an input is broadcast along the leading dims (a bias): blocks are tiles of rows x columns,
// a thread walks several rows of one column vector, so the broadcast input's vector is read once. Outputs
// made by a cat of costly inputs compute, per chunk, the input the chunk falls in (cat_pieces.h). A segment
// of independent parts with outputs of unrelated shapes (independent_parts.h) lowers each part alone, with
// the parameters it has alone, and joins them into one launch (kernel/joined_kernel.h).
#include "support/error.h"
#include "scheduler/access_probe.h"
#include "scheduler/cat_pieces.h"
#include "scheduler/independent_parts.h"
#include "scheduler/pointwise/entry.h"
#include "ir/strided_layout.h"

#include <numeric>

namespace braze::scheduler {
namespace {

// Stores each output at `index`. A kernel that writes an input in place (an output in that input's
// memory) computes every value, each bound to a local, before it stores any: a value reading the input
// then reads its old element. Each thread reads and writes only its own elements of such an input
// (updatesWrittenByKernels), so the order within the thread is all that matters.
void storeOutputs(KernelBuilder& kb, ValueBuilder& vb, Chunk& c, const LoweringContext& ctx,
                  const std::vector<const Val*>& outputs, const std::vector<Idx>& index) {
  if (ctx.segment.output_views.empty()) {
    for (const Val* out : outputs) storeOutput(kb, vb, c, ctx.outputs.at(out), index, vb.valueAt(out, index));
    return;
  }
  std::vector<ExprId> values;
  for (const Val* out : outputs) values.push_back(vb.bind("value", vb.valueAt(out, index)));
  for (size_t i = 0; i < outputs.size(); ++i) storeOutput(kb, vb, c, ctx.outputs.at(outputs[i]), index, values[i]);
}

void lowerPointwise2D(LoweringContext& ctx, const PointwiseParams& params, const OutputGroup& group) {
  Kernel& k = ctx.kernel;
  const int64_t vec = params.vectorize;
  k.grid = {params.grid, params.grid_y};
  k.block = {params.threads_x, params.threads_y};
  k.summary = params.toString();
  k.vectorize = vec;
  const std::vector<int64_t> row_sizes(group.sizes.begin(), group.sizes.begin() + params.break_point);
  const std::vector<int64_t> column_sizes(group.sizes.begin() + params.break_point, group.sizes.end());
  KernelBuilder kb(k);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  const VarId u = kb.scalarVar("u", DataType::Int64, true);
  const VarId lane = kb.scalarVar("lane", DataType::Int64, true);
  const ExprId column = kb.letValue("column", kb.add(kb.mul(kb.blockIdx(0), kb.index(params.threads_x)), kb.threadIdx(0)));
  const ExprId column_ok = kb.lt(column, kb.index(params.inner / vec));
  kb.openFor(u, kb.index(0), kb.index(params.unroll), kb.index(1), /*unroll=*/params.unroll <= 8);
  const ExprId row = kb.letValue(
      "row", kb.add(kb.mul(kb.add(kb.mul(kb.blockIdx(1), kb.index(params.unroll)), kb.ref(u)), kb.index(params.threads_y)),
                    kb.threadIdx(1)));
  // The row count is a launch argument: another batch size with the same rows per thread shares the kernel.
  emitChunk(kb, vb, kb.land(column_ok, kb.lt(row, kb.extent("rows", params.outer))), vec, lane, [&](Chunk& c) {
    std::vector<Idx> index = vb.unflatten(row, false, row_sizes);
    const auto columns = vb.unflatten(kb.mul(column, kb.index(vec)), vec > 1, column_sizes);
    index.insert(index.end(), columns.begin(), columns.end());
    storeOutputs(kb, vb, c, ctx, group.outputs, index);
  });
  kb.close();
}

// The parts a pointwise segment runs side by side, each with its own parameters: its independent parts
// where its outputs have more than one shape (two ops of unrelated shapes: each keeps its own vectors),
// else the segment alone (outputs of one shape share one walk). A segment that updates an input in place
// stays one walk: another part might read the input it updates.
std::vector<SegmentToLower> pointwiseParts(const SegmentToLower& segment) {
  const std::vector<const Val*>& outs = segment.outputs;
  const bool one_shape = std::all_of(outs.begin(), outs.end(), [&](const Val* out) {
    return segment.bound->sizesOf(out) == segment.bound->sizesOf(outs.front());
  });
  if (one_shape || !segment.output_views.empty()) return {segment};
  return independentParts(segment);
}

PointwiseParams chooseOnePart(LoweringContext& ctx) {
  const std::vector<OutputGroup> groups = groupOutputs(ctx);
  VectorizeInput vin;
  vin.widest_dtype_bytes = ctx.widest_dtype_bytes;
  vin.tensor_factors = ctx.input_factors;
  // With one output shape, the probe says which inputs the lanes walk: an input read at one offset per
  // output row (a gather's index, a per-row scale) is one scalar load before the lanes, so neither its
  // dtype nor its own layout limits the vector (an Int64 index tensor would otherwise cap a bf16
  // embedding gather at two lanes).
  std::vector<InputAccess> access;
  if (groups.size() == 1) {
    access = probeInputAccess(ctx, groups[0].outputs[0]);
    const std::vector<int64_t>& sizes = groups[0].sizes;
    int64_t inner = static_cast<int64_t>(sizes.size()) - 1;
    while (inner > 0 && sizes[inner] == 1) --inner;
    vin.widest_dtype_bytes = 1;
    vin.tensor_factors.clear();
    for (const TensorParam& p : ctx.kernel.tensors) {
      if (p.output) vin.widest_dtype_bytes = std::max(vin.widest_dtype_bytes, sizeOf(p.dtype));
    }
    size_t input = 0;
    for (const TensorParam& p : ctx.kernel.tensors) {
      if (p.output || p.val == nullptr) continue;
      const auto& strides = access[&p - ctx.kernel.tensors.data()].strides;
      const bool walked = !strides || inner < 0 || (*strides)[static_cast<size_t>(inner)] != 0;
      if (walked) {
        vin.widest_dtype_bytes = std::max(vin.widest_dtype_bytes, sizeOf(p.dtype));
        vin.tensor_factors.push_back(ctx.input_factors[input]);
      }
      ++input;
    }
  }
  vin.inner_extent = 0;
  PointwiseProblem problem;
  int64_t bytes = 0;
  for (const auto& t : ctx.kernel.tensors) bytes += sizeOf(t.dtype);
  problem.bytes_per_element = bytes;
  for (const OutputGroup& g : groups) {
    vin.inner_extent = std::gcd(vin.inner_extent, innerExtent(g.sizes));
    problem.total_elements += g.numel;
    if (g.numel >= std::accumulate(problem.sizes.begin(), problem.sizes.end(), int64_t{1}, std::multiplies<>()) ||
        problem.sizes.empty()) {
      problem.sizes = g.sizes;
    }
  }
  problem.max_vectorize = kernelVectorize(vin);
  if (groups.size() == 1) {
    for (const auto& [val, tensor] : ctx.inputs) {
      if (access[tensor].strides) problem.input_strides.push_back(*access[tensor].strides);
    }
  }
  return pointwiseHeuristics(ctx.device, problem);
}

void lowerOnePart(LoweringContext& ctx, const PointwiseParams& params) {
  std::vector<OutputGroup> groups = groupOutputs(ctx);
  if (params.break_point > 0) {
    lowerPointwise2D(ctx, params, groups[0]);
    return;
  }
  const int64_t vec = params.vectorize;

  int64_t total_blocks = 0;
  for (OutputGroup& g : groups) {
    const int64_t chunks = g.numel / vec;
    g.blocks = (chunks + params.block * params.unroll - 1) / (params.block * params.unroll);
    g.first_block = total_blocks;
    total_blocks += g.blocks;
  }
  Kernel& k = ctx.kernel;
  k.grid = {total_blocks, 1};
  k.block = {params.block, 1};
  k.summary = params.toString();
  k.vectorize = vec;

  KernelBuilder kb(k);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  const VarId u = kb.scalarVar("u", DataType::Int64, true);
  const VarId lane = kb.scalarVar("lane", DataType::Int64, true);
  for (const OutputGroup& g : groups) {
    if (g.blocks == 0) continue;
    const ExprId block = kb.blockIdx(0);
    const bool guarded = groups.size() > 1;
    if (guarded) {
      kb.openIf(kb.land(kb.le(kb.index(g.first_block), block), kb.lt(block, kb.index(g.first_block + g.blocks))));
    }
    const ExprId local_block = kb.sub(block, kb.index(g.first_block));
    kb.openFor(u, kb.index(0), kb.index(params.unroll), kb.index(1), /*unroll=*/true);
    const ExprId chunk = kb.add(kb.mul(kb.add(kb.mul(local_block, kb.index(params.unroll)), kb.ref(u)),
                                       kb.index(params.block)),
                                kb.threadIdx(0));
    const ExprId chunk_var = kb.letValue("chunk", chunk);
    // One group: its chunk count is a launch argument, so sizes that keep the heuristics' choice (and
    // whose index arithmetic does not name them) share one compiled kernel.
    const ExprId chunks = guarded ? kb.index(g.numel / vec) : kb.extent("chunks", g.numel / vec);
    const Expr* cat = splittingCat(ctx.segment.exprs, g.outputs, ctx.bound);
    emitChunk(kb, vb, kb.lt(chunk_var, chunks), vec, lane, [&](Chunk& c) {
      const auto index = vb.unflatten(kb.mul(chunk_var, kb.index(vec)), vec > 1, g.sizes);
      const auto store = [&](Chunk& sub, size_t) { storeOutputs(kb, vb, sub, ctx, g.outputs, index); };
      if (cat == nullptr || !buildByPiece(kb, vb, c, *cat, g.outputs[0], index, vec, lane, store)) store(c, 0);
    });
    kb.close();
    if (guarded) kb.close();
  }
}

}  // namespace

PointwiseParams choosePointwise(LoweringContext& ctx) {
  const std::vector<SegmentToLower> parts = pointwiseParts(ctx.segment);
  if (parts.size() == 1) return chooseOnePart(ctx);
  std::vector<PointwiseParams> each;
  for (const SegmentToLower& part : parts) {
    LoweringContext part_ctx = makeLoweringContext(part, ctx.device);
    each.push_back(chooseOnePart(part_ctx));
  }
  return joinPointwiseParts(std::move(each));
}

void lowerPointwise(LoweringContext& ctx, const PointwiseParams& params) {
  if (params.more_parts.empty()) {
    lowerOnePart(ctx, params);
    return;
  }
  const std::vector<SegmentToLower> parts = pointwiseParts(ctx.segment);
  BRAZE_ASSERT(parts.size() == params.more_parts.size() + 1, "segment {}: {} parts, heuristics for {}", ctx.segment.id,
               parts.size(), params.more_parts.size() + 1);
  lowerSideBySide(ctx, parts, [&](LoweringContext& part_ctx, size_t i) {
    PointwiseParams own = i == 0 ? params : params.more_parts[i - 1];
    own.more_parts.clear();
    lowerOnePart(part_ctx, own);
  });
  ctx.kernel.summary = params.toString();
}

}  // namespace braze::scheduler

namespace braze {

const SchedulerEntry& pointwiseScheduler() {
  static const SchedulerEntry entry{
      SchedulerKind::Pointwise, "pointwise", canSchedulePointwise, nullptr,
      [](scheduler::LoweringContext& ctx) { return heuristicsOf(pointwiseScheduler(), scheduler::choosePointwise(ctx)); },
      [](scheduler::LoweringContext& ctx, const SegmentHeuristics& h) {
        scheduler::lowerPointwise(ctx, paramsOf<PointwiseParams>(h));
      }};
  return entry;
}

}  // namespace braze
