// Builders that move or create data: pad, cat, full, iota, and the definitions of fusion inputs.
#include "support/error.h"
#include "ir/ops.h"
#include "ir/ops_util.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace braze {

using detail::checkShapeScalar;
using detail::newTensorLike;
using detail::shapeString;
using detail::staticValueOr;

namespace detail {

std::vector<int64_t> normalizedStrideOrder(const std::vector<int64_t>& given, size_t rank, std::string_view op) {
  if (given.empty()) return {};
  BRAZE_CHECK(given.size() == rank, "{}: stride_order [{}] has {} entries but the rank is {}", op,
              fmt::join(given, ", "), given.size(), rank);
  std::vector<int64_t> order = given;
  for (int64_t& k : order) k = k < 0 ? k + static_cast<int64_t>(rank) : k;
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < rank; ++i) {
    BRAZE_CHECK(sorted[i] == static_cast<int64_t>(i), "{}: stride_order [{}] is not a permutation of 0..{}", op,
                fmt::join(given, ", "), rank - 1);
  }
  return order;
}

}  // namespace detail

using detail::normalizedStrideOrder;

TensorView* defineTensorSameContiguity(const std::vector<int64_t>& shape, std::optional<bool> every_dim_contiguous,
                                      DataType dtype, bool is_cpu, const std::vector<int64_t>& stride_order) {
  // One flag for every dim, listed in allocation order as the other form is: None on size-1 dims
  // (broadcasts), the flag elsewhere; no flag means nothing is assumed about strides (nvFuser's False).
  const size_t rank = shape.size();
  const std::vector<int64_t> order = normalizedStrideOrder(stride_order, rank, "define_tensor");
  std::vector<size_t> allocation(rank);
  for (size_t d = 0; d < rank; ++d) allocation[d] = d;
  if (!order.empty()) std::sort(allocation.begin(), allocation.end(), [&](size_t a, size_t b) { return order[a] > order[b]; });
  std::vector<std::optional<bool>> contiguity;
  for (size_t d : allocation) {
    contiguity.push_back(shape[d] == 1 ? std::nullopt : std::optional<bool>(every_dim_contiguous.value_or(false)));
  }
  return defineTensor(shape, contiguity, dtype, is_cpu, order);
}

TensorView* defineTensor(const std::vector<int64_t>& shape, const std::vector<std::optional<bool>>& contiguity,
                         DataType dtype, bool is_cpu, const std::vector<int64_t>& given_stride_order) {
  Fusion* fusion = FusionGuard::current();
  const size_t rank = shape.size();
  BRAZE_TYPE_CHECK(dtype != DataType::Null, "define_tensor: a dtype is required");
  BRAZE_CHECK(contiguity.size() == rank, "define_tensor: contiguity has {} entries but shape [{}] has {}",
              contiguity.size(), fmt::join(shape, ", "), rank);
  BRAZE_CHECK(!is_cpu || rank == 0, "define_tensor: is_cpu=True is only allowed for 0-dim tensors (got rank {})", rank);
  const std::vector<int64_t> stride_order = normalizedStrideOrder(given_stride_order, rank, "define_tensor");
  // nvFuser lists contiguity in allocation order (outermost first) when a stride order is given;
  // braze keeps it per logical dim: logical dim d sits at allocation position rank-1-stride_order[d].
  std::vector<std::optional<bool>> logical_contiguity = contiguity;
  if (!stride_order.empty()) {
    for (size_t d = 0; d < rank; ++d) logical_contiguity[d] = contiguity[rank - 1 - stride_order[d]];
  }
  std::vector<IterDomain> dims;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t extent = shape[d];
    BRAZE_CHECK(extent >= -1, "define_tensor: shape[{}] = {} (expected -1 for symbolic, or a size >= 0) [nvFuser: The value {} at "
                "index {} was neither symbolic(-1), zero_element(0), broadcast(1), or static(>1)]", d, extent, extent, d);
    if (extent == 1) {
      BRAZE_CHECK(!logical_contiguity[d].has_value(),
                  "define_tensor: dim {} has size 1, a broadcast dim, so its contiguity must be None, got {}", d,
                  *logical_contiguity[d]);
      dims.push_back({1, IterType::Broadcast});
    } else if (!logical_contiguity[d].has_value()) {
      // None on a dim that is not size 1: an expanded broadcast (stride 0), like nvFuser.
      dims.push_back({extent, IterType::Expanded});
    } else {
      dims.push_back({extent, IterType::Iteration});
    }
  }
  TensorView* tv = fusion->newTensor(dtype, std::move(dims), {logical_contiguity, stride_order}, is_cpu);
  fusion->addInput(tv);
  return tv;
}

Scalar* defineScalar(DataType dtype, std::optional<ScalarValue> value) {
  Fusion* fusion = FusionGuard::current();
  if (value) return fusion->constant(*value, dtype);
  BRAZE_TYPE_CHECK(dtype != DataType::Null, "define_scalar: a symbolic scalar needs a dtype");
  Scalar* s = fusion->newScalar(dtype);
  fusion->addInput(s);
  return s;
}

TensorView* pad(TensorView* x, const std::vector<Val*>& pad_widths, Val* value) {
  BRAZE_CHECK(x != nullptr, "pad: operand is None");
  const int64_t rank = x->rank();
  BRAZE_CHECK(pad_widths.size() % 2 == 0 && static_cast<int64_t>(pad_widths.size()) <= 2 * rank,
              "pad: pad_widths needs (left, right) pairs for at most {} dims, got {} entries [nvFuser: {}]", rank,
              pad_widths.size(),
              pad_widths.size() % 2 != 0 ? "Invalid number of padding widths"
                                         : "Number of pad widths must be at most twice the input dimension");
  Fusion* fusion = x->fusion();
  if (value == nullptr) value = fusion->constant(int64_t{0}, x->dtype());
  BRAZE_CHECK(value->isScalar(), "pad: value must be a scalar, got tensor {}", value->name());
  auto dims = x->logical();
  for (size_t i = 0; i < pad_widths.size(); ++i) checkShapeScalar(pad_widths[i], "pad", "pad_widths");
  for (size_t pair = 0; pair < pad_widths.size() / 2; ++pair) {
    IterDomain& id = dims[rank - 1 - pair];
    const int64_t left = staticValueOr(pad_widths[2 * pair], IterDomain::kSymbolic - 100);
    const int64_t right = staticValueOr(pad_widths[2 * pair + 1], IterDomain::kSymbolic - 100);
    const bool known = left > -100 && right > -100 && id.extent >= 0;
    if (known && left == 0 && right == 0) continue;
    const int64_t extent = known ? id.extent + left + right : IterDomain::kSymbolic;
    BRAZE_CHECK(!known || extent >= 0, "pad: dim {} of {} would have negative extent {}", rank - 1 - pair, x->name(), extent);
    id = {extent, IterType::Iteration};
  }
  std::vector<Val*> inputs{x, value};
  inputs.insert(inputs.end(), pad_widths.begin(), pad_widths.end());
  TensorView* result = newTensorLike(fusion, x->dtype(), std::move(dims));
  fusion->newExpr(OpKind::Pad, std::move(inputs), {result});
  return result;
}

TensorView* strideOrder(TensorView* x, const std::vector<int64_t>& stride_order) {
  BRAZE_CHECK(x != nullptr, "stride_order: operand is None");
  const std::vector<int64_t> order = normalizedStrideOrder(stride_order, static_cast<size_t>(x->rank()), "stride_order");
  TensorLayout layout = detail::defaultLayout(x->logical());
  layout.stride_order = order;
  TensorView* result = x->fusion()->newTensor(x->dtype(), x->logical(), std::move(layout));
  x->fusion()->newExpr(OpKind::StrideOrder, {x}, {result}, {{"stride_order", order}});
  return result;
}

TensorView* cat(const std::vector<TensorView*>& tensors, int64_t dim) {
  BRAZE_CHECK(!tensors.empty(), "cat: needs at least one tensor [nvFuser: Attempting to concatenate empty list of tensors]");
  for (TensorView* t : tensors) BRAZE_CHECK(t != nullptr, "cat: a tensor is None");
  TensorView* first = tensors[0];
  dim = first->normalizeAxis(dim, "cat");
  auto dims = first->logical();
  DataType dtype = first->dtype();
  int64_t total = 0;
  for (TensorView* t : tensors) {
    BRAZE_CHECK(t->rank() == first->rank(),
                "cat: all tensors need rank {} like {}, but {} has rank {} [nvFuser: Unexpected number of dimensions]",
                first->rank(), first->name(), t->name(), t->rank());
    BRAZE_TYPE_CHECK(t->dtype() == dtype, "cat: all tensors need dtype {} like {}, but {} has {}", toString(dtype),
                     first->name(), t->name(), toString(t->dtype()));
    const auto these = t->logical();
    for (int64_t d = 0; d < first->rank(); ++d) {
      if (d == dim) continue;
      const int64_t a = dims[d].extent;
      const int64_t b = these[d].extent;
      BRAZE_CHECK(a < 0 || b < 0 || a == b, "cat: dim {} of {} {} does not match {} {} (only dim {} may differ)", d,
                  t->name(), shapeString(t), first->name(), shapeString(first), dim);
      if (dims[d].isBroadcast() && !these[d].isBroadcast()) dims[d] = these[d];
    }
    const int64_t extent = these[dim].extent;
    total = (total < 0 || extent < 0) ? IterDomain::kSymbolic : total + extent;
  }
  dims[dim] = total == 1 ? IterDomain{1, IterType::Broadcast} : IterDomain{total, IterType::Iteration};
  std::vector<Val*> inputs(tensors.begin(), tensors.end());
  TensorView* result = newTensorLike(first->fusion(), dtype, std::move(dims));
  first->fusion()->newExpr(OpKind::Cat, std::move(inputs), {result}, {{"dim", dim}});
  return result;
}

TensorView* full(const std::vector<Val*>& shape, Val* fill_value, DataType dtype) {
  BRAZE_CHECK(fill_value != nullptr && fill_value->isScalar(), "full: fill_value must be a scalar");
  BRAZE_TYPE_CHECK(dtype != DataType::Null, "full: a dtype is required");
  Fusion* fusion = fill_value->fusion();
  std::vector<IterDomain> dims;
  for (Val* s : shape) {
    checkShapeScalar(s, "full", "shape");
    const int64_t extent = staticValueOr(s, IterDomain::kSymbolic);
    BRAZE_CHECK(extent >= -1, "full: shape entry {} is negative", extent);
    dims.push_back(extent == 1 ? IterDomain{1, IterType::Broadcast} : IterDomain{extent, IterType::Iteration});
  }
  std::vector<Val*> inputs{fill_value};
  inputs.insert(inputs.end(), shape.begin(), shape.end());
  TensorView* result = newTensorLike(fusion, dtype, std::move(dims));
  fusion->newExpr(OpKind::Full, std::move(inputs), {result}, {{"dtype", dtype}});
  return result;
}

TensorView* iota(Val* length, Val* start, Val* step, DataType dtype) {
  BRAZE_CHECK(length != nullptr, "iota: length is None");
  checkShapeScalar(length, "iota", "length");
  BRAZE_TYPE_CHECK(dtype != DataType::Null && !isBool(dtype), "iota: a numeric dtype is required, got {}", toString(dtype));
  Fusion* fusion = length->fusion();
  if (start == nullptr) start = fusion->constant(int64_t{0}, dtype);
  if (step == nullptr) step = fusion->constant(int64_t{1}, dtype);
  BRAZE_CHECK(start->isScalar() && step->isScalar(), "iota: start and step must be scalars");
  // As nvFuser and torch.arange refuse them: a zero step repeats start, an infinite one gives inf and NaN.
  for (const auto& [name, v] : {std::pair{"start", start}, std::pair{"step", step}}) {
    if (!v->asScalar()->isConstant()) continue;
    const double value = toDouble(*v->asScalar()->value());
    BRAZE_CHECK(std::isfinite(value), "iota: {} must be a finite number, got {} [nvFuser: iota: length, start, step "
                "must be finite numbers.]", name, value);
  }
  if (step->asScalar()->isConstant()) {
    BRAZE_CHECK(toDouble(*step->asScalar()->value()) != 0.0, "iota: step must not be 0 [nvFuser: iota: step value "
                "must not equal zero.]");
  }
  const int64_t extent = staticValueOr(length, IterDomain::kSymbolic);
  TensorView* result = newTensorLike(fusion, dtype, {IterDomain{extent, IterType::Iteration}});
  fusion->newExpr(OpKind::Iota, {length, start, step}, {result}, {{"dtype", dtype}});
  return result;
}

}  // namespace braze
