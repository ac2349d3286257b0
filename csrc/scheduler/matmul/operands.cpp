#include "scheduler/matmul/operands.h"

#include "support/error.h"
#include "scheduler/heuristics.h"
#include "scheduler/load_probe.h"

namespace braze::scheduler {
namespace {

// Whether `val` is a stored tensor seen through views only: every op between it and the segment's
// inputs is a meta op (permute, broadcast, expand, squeeze, slice, reshape).
bool viewOfInput(const std::vector<const Expr*>& exprs, const Val* val) {
  for (const Expr* e : exprs) {
    for (const Val* out : e->outputs()) {
      if (out != val) continue;
      if (opInfo(e->kind()).category != OpCategory::Meta) return false;
      for (const Val* in : e->inputs()) {
        if (in->isTensor() && !viewOfInput(exprs, in)) return false;
      }
      return true;
    }
  }
  return true;  // defined by no expr of the segment: one of its inputs
}

}  // namespace

const Expr& matmulOf(const SegmentToLower& segment) {
  for (const Expr* e : segment.exprs) {
    if (opInfo(e->kind()).category == OpCategory::Matmul) return *e;
  }
  BRAZE_UNREACHABLE("matmul segment {} has no matmul", segment.id);
}

MatmulExtents extentsOf(const SegmentToLower& segment) {
  const Expr& mm = matmulOf(segment);
  const auto& out = segment.bound->sizesOf(mm.output(0));
  const auto& a = segment.bound->sizesOf(mm.input(0));
  MatmulExtents s;
  s.batch_sizes.assign(out.begin(), out.end() - 2);
  for (int64_t d : s.batch_sizes) s.batch *= d;
  s.m = out[out.size() - 2];
  s.n = out.back();
  s.k = a.back();
  return s;
}

OperandReads probeOperand(const LoweringContext& ctx, const Val* operand, size_t k_dim, size_t mn_dim) {
  const auto& sizes = ctx.bound.sizesOf(operand);
  Kernel scratch;
  scratch.tensors = ctx.kernel.tensors;
  scratch.index64 = true;
  KernelBuilder kb(scratch);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  SymbolicPoint point{sizes, std::vector<VarId>(sizes.size(), -1), -1, 1, -1};
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1) point.vars[d] = kb.scalarVar("p", DataType::Int64, true);
  }
  OperandReads reads;
  int64_t largest = -1, largest_k = -1;
  for (const ProbedLoad& load : probeLoads(kb, vb, point, {operand})) {
    const int64_t along_k = load.strides ? (*load.strides)[k_dim] : -1;
    if (along_k != 0 && along_k != 1) reads.k_contiguous = false;
    const TensorParam& param = scratch.tensors[load.tensor];
    const int64_t numel = param.layout.numel();
    if (along_k == 1 && numel > largest_k) {
      largest_k = numel;
      reads.element_bytes = sizeOf(param.dtype);
    }
    if (numel > largest) {
      largest = numel;
      reads.largest_k_stride = along_k;
      reads.largest_mn_stride = load.strides ? (*load.strides)[mn_dim] : -1;
    }
  }
  return reads;
}

std::pair<size_t, size_t> operandDims(const LoweringContext& ctx, const Val* operand, bool k_last) {
  const size_t nd = ctx.bound.sizesOf(operand).size();
  return k_last ? std::pair{nd - 1, nd - 2} : std::pair{nd - 2, nd - 1};
}

std::pair<TensorId, ExprId> storedElement(KernelBuilder& kb, ValueBuilder& vb, const Val* operand,
                                          const std::vector<Idx>& index, std::vector<Stmt>* target) {
  std::pair<TensorId, ExprId> found{-1, -1};
  int loads = 0;
  vb.beginChunk(target, target, 1, -1);
  vb.setLoadInterceptor([&](TensorId tensor, ExprId offset) -> std::optional<ExprId> {
    ++loads;
    found = {tensor, offset};
    const DataType dtype = kb.kernel().tensors[tensor].dtype;
    return isFloating(dtype) ? kb.constant(0.0, dtype) : kb.constantInt(0, dtype);
  });
  kb.pushTarget(target);
  vb.valueAt(operand, index);
  kb.popTarget();
  vb.setLoadInterceptor(nullptr);
  return loads == 1 ? found : std::pair<TensorId, ExprId>{-1, -1};
}

std::optional<OperandStorage> operandStorage(const LoweringContext& ctx, const Val* operand, DataType dtype, bool k_last) {
  if (!viewOfInput(ctx.segment.exprs, operand)) return std::nullopt;
  const auto& sizes = ctx.bound.sizesOf(operand);
  const size_t nd = sizes.size();
  if (nd < 2) return std::nullopt;
  Kernel scratch;
  scratch.tensors = ctx.kernel.tensors;
  scratch.index64 = true;
  KernelBuilder kb(scratch);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  std::vector<Stmt> dropped;
  TensorId tensor = -1;
  // The offset at constant coordinates (folded to a constant), or nullopt.
  auto offsetAt = [&](const std::vector<int64_t>& coords) -> std::optional<int64_t> {
    std::vector<Idx> index;
    for (int64_t c : coords) index.push_back({kb.index(c), false});
    const auto [t, offset] = storedElement(kb, vb, operand, index, &dropped);
    if (t < 0 || (tensor >= 0 && t != tensor)) return std::nullopt;
    tensor = t;
    return kb.constValue(offset);
  };
  const std::vector<int64_t> origin_coords(nd, 0);
  const std::optional<int64_t> origin = offsetAt(origin_coords);
  if (!origin) return std::nullopt;
  std::vector<int64_t> strides(nd, 0), corner(nd, 0);
  int64_t corner_offset = *origin;
  for (size_t d = 0; d < nd; ++d) {
    if (sizes[d] <= 1) continue;
    std::vector<int64_t> step = origin_coords, last = origin_coords;
    step[d] = 1;
    last[d] = sizes[d] - 1;
    const std::optional<int64_t> one = offsetAt(step), end = offsetAt(last);
    if (!one || !end || *end != *origin + (sizes[d] - 1) * (*one - *origin)) return std::nullopt;
    strides[d] = *one - *origin;
    corner[d] = sizes[d] - 1;
    corner_offset += (sizes[d] - 1) * strides[d];
  }
  if (offsetAt(corner) != corner_offset) return std::nullopt;
  const TensorParam& param = scratch.tensors[tensor];
  const int64_t chunk = 16 / sizeOf(dtype);
  if (param.dtype != dtype || param.alignment_bytes % 16 != 0 || *origin % chunk != 0) return std::nullopt;
  const size_t k_dim = k_last ? nd - 1 : nd - 2, mn_dim = k_last ? nd - 2 : nd - 1;
  std::optional<TileOrder> order;
  size_t contiguous = k_dim;
  if (strides[k_dim] == 1 && sizes[k_dim] > 1) {
    order = TileOrder::KMajor;
  } else if (strides[mn_dim] == 1 && sizes[mn_dim] > 1 && sizeOf(dtype) == 2) {
    order = TileOrder::MnMajor;
    contiguous = mn_dim;
  } else {
    return std::nullopt;
  }
  for (size_t d = 0; d < nd; ++d) {
    if (d != contiguous && sizes[d] > 1 && strides[d] % chunk != 0) return std::nullopt;
  }
  return OperandStorage{*order, param.val, *origin, std::vector<int64_t>(sizes.begin(), sizes.end()), strides, k_last};
}

std::optional<StridedLayout> tmaMatrix(const OperandStorage& storage, DataType dtype) {
  const size_t nd = storage.sizes.size();
  // The batch dims of more than one element, as one: each one's stride spans the next one's elements.
  int64_t batches = 1, batch_stride = 0;
  for (size_t d = 0; d + 2 < nd; ++d) {
    if (storage.sizes[d] == 1) continue;
    if (batches > 1 && batch_stride != storage.sizes[d] * storage.strides[d]) return std::nullopt;
    batches *= storage.sizes[d];
    batch_stride = storage.strides[d];
  }
  const size_t k_dim = storage.k_last ? nd - 1 : nd - 2, mn_dim = storage.k_last ? nd - 2 : nd - 1;
  const bool k_major = storage.order == TileOrder::KMajor;
  const size_t row_dim = k_major ? mn_dim : k_dim, column_dim = k_major ? k_dim : mn_dim;
  const int64_t rows = storage.sizes[row_dim], columns = storage.sizes[column_dim];
  const int64_t chunk = 16 / sizeOf(dtype);
  // A single row's stride is free: the least whole number of 16-byte chunks that holds the row.
  const int64_t row_stride = rows > 1 ? storage.strides[row_dim] : ceilDiv(columns, chunk) * chunk;
  constexpr int64_t kCoordinates = int64_t{1} << 31;
  if (row_stride < columns || rows >= kCoordinates || columns >= kCoordinates || batches >= kCoordinates) {
    return std::nullopt;
  }
  if (batches == 1) return StridedLayout{{rows, columns}, {row_stride, 1}, storage.origin};
  if (batch_stride < rows * row_stride) return std::nullopt;  // batches that overlap (an expanded dim, say)
  return StridedLayout{{batches, rows, columns}, {batch_stride, row_stride, 1}, storage.origin};
}

}  // namespace braze::scheduler
