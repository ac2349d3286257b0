// What the matmul lowering knows of a segment's matmul and its operands: the matmul, its extents, how
// an operand is read (probed loads), and whether it can be copied into shared memory as stored.
#pragma once

#include "kernel/shared_tiles.h"
#include "scheduler/lowering_context.h"

#include <optional>
#include <utility>
#include <vector>

namespace braze::scheduler {

const Expr& matmulOf(const SegmentToLower& segment);

struct MatmulExtents {
  std::vector<int64_t> batch_sizes;
  int64_t batch = 1, m = 0, n = 0, k = 0;
};
MatmulExtents extentsOf(const SegmentToLower& segment);

// How an operand is read: every load it makes, probed at a symbolic point of its index space. It reads
// "along K" when each load moves by 0 or 1 element per step of k; `largest` is the tensor with the most
// elements among its loads (the weights, under any dequantize), with its element size and strides
// along K and along M / N.
struct OperandReads {
  bool k_contiguous = true;
  int64_t element_bytes = 2;
  int64_t largest_k_stride = 0, largest_mn_stride = 0;
};
OperandReads probeOperand(const LoweringContext& ctx, const Val* operand, size_t k_dim, size_t mn_dim);

// An operand's K dim and M / N dim: A is [.., m, k], a matmul's B [.., k, n], a linear's weight [n, k].
std::pair<size_t, size_t> operandDims(const LoweringContext& ctx, const Val* operand, bool k_last);

// The one element of one tensor the kernel reads for `operand` at `index` (an operand that is a view of
// a stored tensor): the tensor and the element offset ({-1, -1} otherwise). The ValueBuilder's
// statements go to `target`.
std::pair<TensorId, ExprId> storedElement(KernelBuilder& kb, ValueBuilder& vb, const Val* operand,
                                          const std::vector<Idx>& index, std::vector<Stmt>* target);

// Whether an operand can be copied into shared tiles as it is stored, and the order of the tile rows: a
// view (meta ops only) of one tensor of the mma's operand dtype, 16-byte aligned, read at offsets affine
// in the operand's index, contiguous along K (k-major) or, for 16-bit values, along M / N (mn-major),
// every other stride and the first element a whole number of 16-byte chunks. `k_last`: its last dim is
// K (A, a linear's weight). Where it can, where its elements lie: the kernel's tensor for `input`, at
// `origin` + sum(index[d] * strides[d]) elements (stride 0 along dims of size 1).
struct OperandStorage {
  TileOrder order = TileOrder::KMajor;
  const Val* input = nullptr;
  int64_t origin = 0;
  std::vector<int64_t> sizes, strides;
  bool k_last = true;
};
std::optional<OperandStorage> operandStorage(const LoweringContext& ctx, const Val* operand, DataType dtype, bool k_last);

// The operand's matrices as a TMA tensor map reads them (TensorParam::TmaBox::map): [rows, columns] of its
// tensor with the tile rows' contiguous dim as columns (K for k-major tiles, M / N for mn-major ones),
// and [batch, rows, columns] where its batch dims of more than one element merge into one (each stride
// spanning the next dim's elements); where its rows and batches lie apart (strides of at least a row, a
// batch's rows) and its extents fit TMA's 32-bit coordinates.
std::optional<StridedLayout> tmaMatrix(const OperandStorage& storage, DataType dtype);

}  // namespace braze::scheduler
