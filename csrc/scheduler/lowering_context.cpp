#include "scheduler/lowering_context.h"

#include "ir/fusion.h"
#include "support/error.h"
#include "ir/strided_layout.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace braze::scheduler {
namespace {

int64_t maxOffset(const StridedLayout& layout) {
  int64_t off = layout.offset;
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    if (layout.sizes[d] > 0) off += (layout.sizes[d] - 1) * std::abs(layout.strides[d]);
  }
  return off;
}

}  // namespace

// The kernel's parameters (the segment's inputs, then its outputs) and what heuristics and lowering
// read of them: each input's vectorize factor, the widest dtype, and whether indices need 64 bits.
LoweringContext makeLoweringContext(const SegmentToLower& segment, const DeviceInfo& device) {
  BRAZE_ASSERT(segment.scheduler != SchedulerKind::Alias && segment.bound != nullptr,
               "segment {} is an alias segment: it has no kernel", segment.id);
  const BoundShapes& bound = *segment.bound;
  LoweringContext ctx{segment, bound, device, Kernel{}, {}, {}, 1, {}, {}};
  Kernel& k = ctx.kernel;
  k.name = fmt::format("braze_s{}_{}", segment.id, toString(segment.scheduler));
  k.warp_size = device.warp_size;
  k.check_indices = device.tuning.index_checks != 0;
  KernelBuilder kb(k);
  // Room for the lowerings' additions too (a workspace, the index-error record): a TensorParam is large.
  k.tensors.reserve(segment.inputs.size() + segment.outputs.size() + 2);
  int64_t max_offset = 0;
  for (const Val* in : segment.inputs) {
    // A CPU scalar (or a view of one) is no parameter: the ValueBuilder reads it as a launch argument.
    if (!in->isTensor() || cpuScalarInputOf(in) != nullptr) continue;
    const auto& [layout, storage] = segment.input_views.at(in);
    TensorParam p{in->name(), in->dtype(), false, in, storage, layout.layout, layout.alignment_bytes};
    max_offset = std::max(max_offset, maxOffset(p.layout));
    ctx.input_factors.push_back(vectorizeFactor(in->dtype(), p.layout, p.alignment_bytes));
    ctx.widest_dtype_bytes = std::max(ctx.widest_dtype_bytes, sizeOf(in->dtype()));
    ctx.inputs[in] = kb.addTensor(std::move(p));
  }
  for (const Val* out : segment.outputs) {
    TensorParam p{out->name(), out->dtype(), true, out, out, bound.allocatedLayout(out), 16};
    if (auto it = segment.output_views.find(out); it != segment.output_views.end()) {
      p.storage = it->second.storage;
      p.layout = it->second.layout.layout;
      p.alignment_bytes = it->second.layout.alignment_bytes;
    }
    max_offset = std::max(max_offset, maxOffset(p.layout));
    ctx.widest_dtype_bytes = std::max(ctx.widest_dtype_bytes, sizeOf(out->dtype()));
    ctx.outputs[out] = kb.addTensor(std::move(p));
  }
  // 32-bit index arithmetic is faster; every offset and every element count must fit.
  int64_t max_elements = 0;
  for (const Val* in : segment.inputs) {
    // An expanded input's logical size (what the kernel's linear indices span), not its storage.
    if (in->isTensor() && cpuScalarInputOf(in) == nullptr) max_elements = std::max(max_elements, bound.numel(in));
  }
  for (const Expr* e : segment.exprs) {
    for (const Val* v : e->outputs()) {
      if (v->isTensor()) max_elements = std::max(max_elements, bound.numel(v));
    }
    // A pad shifts indices by its widths, constants in the code: a width past 32 bits (one side
    // far out, the other far in) is index arithmetic past 32 bits, whatever the sizes.
    if (e->kind() == OpKind::Pad) {
      const std::vector<int64_t> operands = bound.intOperands(*e);  // the value, then the widths
      for (size_t i = 1; i < operands.size(); ++i) {
        const int64_t w = operands[i];
        max_elements = std::max(max_elements, w == INT64_MIN ? INT64_MAX : std::abs(w));
      }
    }
  }
  k.index64 = std::max(max_offset, max_elements) >= std::numeric_limits<int32_t>::max();
  return ctx;
}

std::vector<OutputGroup> groupOutputs(const LoweringContext& ctx) {
  std::vector<OutputGroup> groups;
  for (const Val* out : ctx.segment.outputs) {
    const auto& sizes = ctx.bound.sizesOf(out);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const OutputGroup& g) { return g.sizes == sizes; });
    if (it == groups.end()) {
      groups.push_back({sizes, {}, ctx.bound.numel(out), 0, 0});
      it = std::prev(groups.end());
    }
    it->outputs.push_back(out);
  }
  return groups;
}

Kernel followUpKernel(const LoweringContext& ctx, const std::string& suffix) {
  Kernel k;
  k.name = ctx.kernel.name + suffix;
  k.warp_size = ctx.kernel.warp_size;
  k.check_indices = ctx.kernel.check_indices;
  k.index64 = ctx.kernel.index64;
  return k;
}

TensorParam workspaceParam(const std::string& name, DataType dtype, int64_t numel, bool zeroed) {
  TensorParam param;
  param.name = name;
  param.dtype = dtype;
  param.layout = StridedLayout::rowMajor({numel});
  param.workspace = true;
  param.zeroed = zeroed;
  return param;
}

void emitChunk(KernelBuilder& kb, ValueBuilder& vb, ExprId predicate, int64_t width, VarId lane_var,
               const std::function<void(Chunk&)>& build, std::vector<Stmt>* later) {
  Chunk chunk;
  const ExprId lane = width > 1 ? kb.ref(lane_var) : -1;
  vb.beginChunk(&chunk.pre, width > 1 ? &chunk.body : &chunk.pre, width, lane);
  build(chunk);
  // A predicate that always holds opens no block.
  const bool guarded = later == nullptr && kb.constValue(predicate) != std::optional<int64_t>(1);
  if (guarded) kb.openIf(predicate);
  auto& target = kb.current();
  target.insert(target.end(), std::make_move_iterator(chunk.pre.begin()), std::make_move_iterator(chunk.pre.end()));
  if (later != nullptr) kb.pushTarget(later);
  if (width > 1 && !chunk.body.empty()) {
    kb.openFor(lane_var, kb.index(0), kb.index(width), kb.index(1), /*unroll=*/true);
    kb.current() = std::move(chunk.body);
    kb.close();
  }
  auto& after = kb.current();
  after.insert(after.end(), std::make_move_iterator(chunk.post.begin()), std::make_move_iterator(chunk.post.end()));
  if (later != nullptr) kb.popTarget();
  if (guarded) kb.close();
}

void storeOutput(KernelBuilder& kb, ValueBuilder& vb, Chunk& chunk, TensorId out, const std::vector<Idx>& index,
                 ExprId value, ExprId guard) {
  const TensorParam& param = kb.kernel().tensors[out];
  // A float rounded to a bf16 or half output's dtype is stored unrounded: the store rounds it the same
  // way (to nearest even), once instead of twice.
  if (param.dtype == DataType::BFloat16 || param.dtype == DataType::Half) {
    ExprId v = value;
    if (kb.expr(v).kind == EKind::VarRef) v = kb.boundValue(kb.expr(v).ref).value_or(v);
    const KExpr& e = kb.expr(v);
    if (e.kind == EKind::Cast && e.dtype == param.dtype && e.from == DataType::Float) value = e.args[0];
  }
  int64_t coefficient = 0;
  const ExprId base = vb.flatOffset(param.layout, index, &coefficient);
  const int64_t width = vb.width();
  const int64_t bytes = width * sizeOf(param.dtype);
  if (width > 1 && coefficient == 1 && !vb.laneDependent(base) && kb.divisibility(base) % width == 0 &&
      param.alignment_bytes % bytes == 0) {
    const VarId buffer = kb.arrayVar("out", param.dtype, width);
    kb.pushTarget(&chunk.pre);
    kb.declare(buffer);
    kb.popTarget();
    kb.pushTarget(&chunk.body);
    kb.localWrite(buffer, vb.lane(), value);
    kb.popTarget();
    kb.pushTarget(&chunk.post);
    if (guard >= 0) kb.openIf(guard);
    kb.vecStore(out, base, buffer, kb.index(0), static_cast<int>(width));
    if (guard >= 0) kb.close();
    kb.popTarget();
    return;
  }
  const ExprId offset = coefficient == 0 ? base : kb.add(base, kb.mul(vb.lane(), kb.index(coefficient)));
  kb.pushTarget(width > 1 ? &chunk.body : &chunk.pre);
  if (guard >= 0) kb.openIf(guard);
  kb.store(out, offset, value);
  if (guard >= 0) kb.close();
  kb.popTarget();
}

}  // namespace braze::scheduler
