// Builders: each checks its operands, infers the result's dtype and shape, and adds one expr to the
// operands' fusion (or FusionGuard::current() when there are no operands). Errors name the op, the
// operand and what was expected. Operand conventions (how an Expr's inputs are laid out) are
// documented on each builder; the evaluator and the printer rely on them.
#pragma once

#include "ir/fusion.h"

#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace braze {

// ---- definitions --------------------------------------------------------------------------------
// A fusion input, as nvFuser's define_tensor. shape entries: -1 symbolic, 1 broadcast, n != 1 static.
// contiguity: nullopt for broadcast dims, and for an expanded broadcast (a symbolic or > 1 extent with
// stride 0); listed in allocation order (outermost first) when stride_order is given, as nvFuser does.
// stride_order[d]: 0 for the innermost dim, rank-1 for the outermost (negative entries count from the
// end); empty for row-major. Every check of define_tensor's arguments is here (Python checks only types).
TensorView* defineTensor(const std::vector<int64_t>& shape, const std::vector<std::optional<bool>>& contiguity,
                         DataType dtype, bool is_cpu = false, const std::vector<int64_t>& stride_order = {});
// nvFuser's single-flag form: the flag on every dim but size-1 ones (broadcasts, nullopt); no flag
// (nvFuser's default, False) assumes nothing about strides.
TensorView* defineTensorSameContiguity(const std::vector<int64_t>& shape, std::optional<bool> every_dim_contiguous,
                                      DataType dtype, bool is_cpu = false, const std::vector<int64_t>& stride_order = {});
// A symbolic scalar input (value bound at execute), or a constant when value is set.
Scalar* defineScalar(DataType dtype, std::optional<ScalarValue> value = std::nullopt);

// ---- elementwise (operands may be tensors or scalars; tensors must have equal ranks) ------------
// PyTorch's result_type: tensors decide the type unless a scalar is of a higher category (tensor int
// + scalar float -> Float). The type an elementwise op computes in, before Half/BFloat16 -> Float.
DataType promotedType(const std::vector<Val*>& operands);
Val* unaryOp(OpKind kind, Val* x);
Val* binaryOp(OpKind kind, Val* a, Val* b);
// where(cond, a, b), lerp(start, end, weight), clamp(x, min, max), threshold(x, threshold, value),
// addcmul(x, t1, t2, value): inputs in that order.
Val* ternaryOp(OpKind kind, Val* a, Val* b, Val* c);
Val* addcmul(Val* x, Val* t1, Val* t2, Val* value);
Val* cast(Val* x, DataType dtype);
inline Val* add(Val* a, Val* b) { return binaryOp(OpKind::Add, a, b); }
inline Val* sub(Val* a, Val* b) { return binaryOp(OpKind::Sub, a, b); }
inline Val* mul(Val* a, Val* b) { return binaryOp(OpKind::Mul, a, b); }
inline Val* div(Val* a, Val* b) { return binaryOp(OpKind::Div, a, b); }

// ---- reductions ---------------------------------------------------------------------------------
// dtype Null keeps the input's type (sum of a Bool or integer tensor gives Int64, as torch does).
TensorView* reduce(OpKind kind, TensorView* x, std::vector<int64_t> dims, bool keepdim = false,
                   DataType dtype = DataType::Null);
TensorView* var(TensorView* x, std::vector<int64_t> dims, double correction = 1.0, bool keepdim = false);
// Returns (var, mean).
std::pair<TensorView*, TensorView*> varMean(TensorView* x, std::vector<int64_t> dims, double correction = 1.0,
                                            bool keepdim = false);
// Returns (avg, var_sum, n): the Welford triple; var = var_sum / (n - correction).
std::tuple<TensorView*, TensorView*, TensorView*> welford(TensorView* x, std::vector<int64_t> dims);

// ---- meta ops (views) ---------------------------------------------------------------------------
TensorView* broadcast(TensorView* x, const std::vector<bool>& is_broadcast_dim);
// inputs: x, then one Int64 scalar per output dim.
TensorView* broadcastInDim(TensorView* x, std::vector<Val*> shape, const std::vector<int64_t>& broadcast_dims);
// inputs: x, then one scalar per dim; -1 keeps the dim's extent.
TensorView* expand(TensorView* x, const std::vector<Val*>& shape);
// inputs: x, then one scalar per new dim; one entry may be -1 (inferred).
TensorView* reshape(TensorView* x, const std::vector<Val*>& new_shape);
TensorView* permute(TensorView* x, const std::vector<int64_t>& dims);
// Removes size-1 dims (broadcast dims, or static extent 1). squeeze_expanded allows expanded dims.
TensorView* squeeze(TensorView* x, const std::vector<int64_t>& dims, bool squeeze_expanded = false);
// inputs: x, then starts, ends, strides (one scalar per dim each). Without manual_normalization,
// negative indices count from the end and out-of-range ones are clamped, as in Python.
TensorView* slice(TensorView* x, const std::vector<Val*>& starts, const std::vector<Val*>& ends,
                  const std::vector<Val*>& strides, bool manual_normalization = false);
TensorView* set(TensorView* x);
// Like set, but a hard segment boundary: the segmenter never fuses across it.
TensorView* segmentSet(TensorView* x);

// ---- data movement ------------------------------------------------------------------------------
// inputs: x, value, then pad widths as (left, right) pairs starting from the last dim (torch's F.pad).
TensorView* pad(TensorView* x, const std::vector<Val*>& pad_widths, Val* value = nullptr);
TensorView* cat(const std::vector<TensorView*>& tensors, int64_t dim);
// A copy of x allocated with nvFuser's stride_order ([1, 0] is row-major, [0, 1] column-major): the
// values are x's; a fusion output made by it comes back with those strides.
TensorView* strideOrder(TensorView* x, const std::vector<int64_t>& stride_order);

// ---- creation -----------------------------------------------------------------------------------
// inputs: fill value, then one scalar per dim.
TensorView* full(const std::vector<Val*>& shape, Val* fill_value, DataType dtype);
// inputs: length, start, step. Values start + i * step for i in [0, length).
TensorView* iota(Val* length, Val* start, Val* step, DataType dtype);

// ---- indexing -----------------------------------------------------------------------------------
// out[..., i, ...] = x[..., index[i], ...] along dim; index is 1-D integer.
TensorView* indexSelect(TensorView* x, TensorView* index, int64_t dim);
// torch.gather: index has x's rank, index.size(d) <= x.size(d) for d != dim; out has index's shape.
TensorView* gather(TensorView* x, TensorView* index, int64_t dim);
// numpy take_along_axis: like gather, but index's other dims must equal x's (or broadcast).
TensorView* takeAlongAxis(TensorView* x, TensorView* index, int64_t dim);

// ---- matmul -------------------------------------------------------------------------------------
// torch.matmul shapes (1-D, 2-D, batched with broadcast). Integer operands accumulate exactly and
// default to an Int32 result (never the operands' 8-bit type: see the XLA seed); dtype overrides.
TensorView* matmul(TensorView* a, TensorView* b, DataType dtype = DataType::Null);
// a @ weight^T + bias; weight is [out, in] (or [in]); bias [out] may be null.
TensorView* linear(TensorView* a, TensorView* weight, TensorView* bias = nullptr, DataType dtype = DataType::Null);

// ---- quantization -------------------------------------------------------------------------------
// Granularity from the scale's shape and the arguments: a scale of rank 0 (or one element) is per
// tensor; a 1-D scale with `axis` is per channel along axis; `block_shape` (one entry per dim of x)
// is per block, scale[d] = ceil(x.size(d) / block_shape[d]).
struct QuantAxis {
  std::optional<int64_t> axis;
  std::vector<int64_t> block_shape;
};
// q = saturate(round_half_even(x / scale) + zero_point) for integers; a saturating cast of x / scale
// for fp8. zero_point may be null (zero); it must have the scale's shape.
TensorView* quantize(TensorView* x, TensorView* scale, TensorView* zero_point, DataType dtype,
                     const QuantAxis& granularity = {});
// x = (q - zero_point) * scale, in dtype (default Float).
TensorView* dequantize(TensorView* q, TensorView* scale, TensorView* zero_point, DataType dtype = DataType::Float,
                       const QuantAxis& granularity = {});

// ---- scalar queries -----------------------------------------------------------------------------
// torch.cumsum along dim; integer and bool inputs accumulate in Int64, as torch does.
TensorView* cumsum(TensorView* x, int64_t dim);
// torch.topk along dim: the k largest (or smallest) elements of each line and their Int64 indices, in
// order (ties: the lower index first; NaN counts as larger than any number, as in torch). k is a scalar
// (a constant or an input): the result's dim has extent k.
std::pair<TensorView*, TensorView*> topk(TensorView* x, Val* k, int64_t dim, bool largest, bool sorted);
// torch.argsort along dim: the Int64 indices that sort each line, ascending or descending; always stable.
TensorView* argsort(TensorView* x, int64_t dim, bool descending, bool stable);
// torch.scatter (out of place): x with out[..., index[i, j], ...] = src[i, j] along dim; index has x's
// rank and is no larger than src on any dim. Where index repeats a position, the last write wins.
TensorView* scatter(TensorView* x, TensorView* index, TensorView* src, int64_t dim);
// acc.index_put_((index,), value, accumulate=True) out of place: acc [N, ...], index [M] (integers),
// value [M, ...]; out[index[i], ...] += value[i, ...], in order, rounded to acc's dtype at each add (as
// torch does); negative indices count from the end.
TensorView* indexPutAccumulate(TensorView* acc, TensorView* index, TensorView* value);
// Random tensors of `shape`: uniform in [low, high), or normal with mean and std. Element i of the
// row-major result is a function of (seed, offset, i) only (Philox4x32-10, ir/random_numbers.h), so a
// tensor is the same whatever runs it; seed and offset are Int64 scalars.
TensorView* uniform(Val* low, Val* high, const std::vector<Val*>& shape, Val* seed, Val* offset, DataType dtype);
TensorView* normal(Val* mean, Val* std, const std::vector<Val*>& shape, Val* seed, Val* offset, DataType dtype);

Scalar* size(TensorView* x, int64_t dim);
std::vector<Val*> shape(TensorView* x);  // size() of every logical dim

}  // namespace braze
