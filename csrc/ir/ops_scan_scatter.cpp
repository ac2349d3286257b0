// Builders of the ops whose elements depend on other positions than their own: cumsum, topk and
// argsort (scans of a line), scatter and index_put_accumulate (writes at positions an index gives), and the random tensors.
#include "support/error.h"
#include "ir/ops.h"
#include "ir/ops_util.h"
#include "ir/numerics.h"

#include <cmath>
#include <utility>

namespace braze {

using detail::checkShapeScalar;
using detail::newTensorLike;
using detail::shapeString;
using detail::staticValueOr;

TensorView* cumsum(TensorView* x, int64_t dim) {
  BRAZE_CHECK(x != nullptr, "cumsum: operand is None");
  dim = x->normalizeAxis(dim, "cumsum");
  // torch promotes integer and bool sums to Int64 and keeps floating types.
  const DataType dtype = isFloating(x->dtype()) ? x->dtype() : DataType::Int64;
  TensorView* result = newTensorLike(x->fusion(), dtype, x->logical());
  x->fusion()->newExpr(OpKind::Cumsum, {x}, {result}, {{"dim", dim}});
  return result;
}

std::pair<TensorView*, TensorView*> topk(TensorView* x, Val* k, int64_t dim, bool largest, bool sorted) {
  BRAZE_CHECK(x != nullptr && k != nullptr, "topk: an operand is None");
  BRAZE_CHECK(x->rank() > 0, "topk: {} is a 0-dim tensor; topk needs a dim to select along", x->name());
  checkShapeScalar(k, "topk", "k");
  dim = x->normalizeAxis(dim, "topk");
  std::vector<IterDomain> dims = x->logical();
  // A constant k is checked now (a negative one too, which staticValueOr would read as symbolic).
  const Scalar* constant = k->asScalar();
  const std::optional<int64_t> given =
      constant->value() ? std::optional<int64_t>(toInt(*constant->value())) : std::nullopt;
  const int64_t extent = dims[static_cast<size_t>(dim)].extent;
  BRAZE_CHECK(!given || *given >= 0, "topk: k = {} is negative [nvFuser: Unexpected size of axis]", given.value_or(0));
  BRAZE_CHECK(!given || extent < 0 || *given <= extent,
              "topk: k = {} is not in [0, {}], the size of dim {} of {} [nvFuser: selected index k out of range]",
              given.value_or(0), extent, dim, x->name());
  const int64_t count = given.value_or(IterDomain::kSymbolic);
  dims[static_cast<size_t>(dim)] = IterDomain{count, IterType::Iteration};  // k = 1 too: a chosen element
  TensorView* values = newTensorLike(x->fusion(), x->dtype(), dims);
  TensorView* indices = newTensorLike(x->fusion(), DataType::Int64, dims);
  x->fusion()->newExpr(OpKind::TopK, {x, k}, {values, indices}, {{"dim", dim}, {"largest", largest}, {"sorted", sorted}});
  return {values, indices};
}

TensorView* argsort(TensorView* x, int64_t dim, bool descending, bool stable) {
  BRAZE_CHECK(x != nullptr, "argsort: operand is None");
  BRAZE_CHECK(x->rank() > 0, "argsort: {} is a 0-dim tensor; argsort needs a dim to sort along", x->name());
  dim = x->normalizeAxis(dim, "argsort");
  TensorView* result = newTensorLike(x->fusion(), DataType::Int64, x->logical());
  x->fusion()->newExpr(OpKind::Argsort, {x}, {result}, {{"dim", dim}, {"descending", descending}, {"stable", stable}});
  return result;
}

TensorView* scatter(TensorView* x, TensorView* index, TensorView* src, int64_t dim) {
  BRAZE_CHECK(x != nullptr && index != nullptr && src != nullptr, "scatter: an operand is None");
  BRAZE_TYPE_CHECK(isIntegral(index->dtype()), "scatter: the index {} must be an integer tensor, got {}", index->name(),
                   toString(index->dtype()));
  BRAZE_TYPE_CHECK(src->dtype() == x->dtype(), "scatter: src {} has dtype {} but {} has {}", src->name(),
                   toString(src->dtype()), x->name(), toString(x->dtype()));
  dim = x->normalizeAxis(dim, "scatter");
  BRAZE_CHECK(index->rank() == x->rank() && src->rank() == x->rank(),
              "scatter: index {} (rank {}) and src {} (rank {}) need the rank {} of {}", index->name(), index->rank(),
              src->name(), src->rank(), x->rank(), x->name());
  for (int64_t d = 0; d < x->rank(); ++d) {
    const int64_t n = index->logical()[d].extent, s = src->logical()[d].extent, e = x->logical()[d].extent;
    BRAZE_CHECK(n < 0 || s < 0 || n <= s, "scatter: index {} {} is larger than src {} {} on dim {}", index->name(),
                shapeString(index), src->name(), shapeString(src), d);
    BRAZE_CHECK(d == dim || n < 0 || e < 0 || n <= e, "scatter: index {} {} is larger than {} {} on dim {}",
                index->name(), shapeString(index), x->name(), shapeString(x), d);
  }
  TensorView* result = newTensorLike(x->fusion(), x->dtype(), x->logical());
  x->fusion()->newExpr(OpKind::Scatter, {x, index, src}, {result}, {{"dim", dim}});
  return result;
}

TensorView* indexPutAccumulate(TensorView* acc, TensorView* index, TensorView* value) {
  BRAZE_CHECK(acc != nullptr && index != nullptr && value != nullptr, "index_put_accumulate: an operand is None");
  BRAZE_TYPE_CHECK(isIntegral(index->dtype()), "index_put_accumulate: the index {} must be an integer tensor, got {}",
                   index->name(), toString(index->dtype()));
  BRAZE_TYPE_CHECK(value->dtype() == acc->dtype(), "index_put_accumulate: value {} has dtype {} but acc {} has {}",
                   value->name(), toString(value->dtype()), acc->name(), toString(acc->dtype()));
  BRAZE_CHECK(index->rank() == 1, "index_put_accumulate: the index {} must be 1-D, got rank {}", index->name(),
              index->rank());
  BRAZE_CHECK(acc->rank() >= 1 && value->rank() == acc->rank(),
              "index_put_accumulate: value {} {} must have the rank of acc {} {} (one row per index)", value->name(),
              shapeString(value), acc->name(), shapeString(acc));
  const auto a = acc->logical(), v = value->logical();
  const int64_t rows = index->logical()[0].extent;
  BRAZE_CHECK(rows < 0 || v[0].extent < 0 || rows == v[0].extent,
              "index_put_accumulate: index {} has {} entries but value {} has {} rows", index->name(), rows,
              value->name(), v[0].extent);
  for (size_t d = 1; d < a.size(); ++d) {
    BRAZE_CHECK(a[d].extent < 0 || v[d].extent < 0 || a[d].extent == v[d].extent,
                "index_put_accumulate: value {} {} and acc {} {} differ on dim {}", value->name(), shapeString(value),
                acc->name(), shapeString(acc), d);
  }
  TensorView* result = newTensorLike(acc->fusion(), acc->dtype(), a);
  acc->fusion()->newExpr(OpKind::IndexPutAccumulate, {acc, index, value}, {result});
  return result;
}

namespace {

TensorView* randomTensor(OpKind kind, Val* a, Val* b, const std::vector<Val*>& shape, Val* seed, Val* offset,
                         DataType dtype) {
  const std::string_view op = opName(kind);
  BRAZE_CHECK(a != nullptr && b != nullptr && seed != nullptr && offset != nullptr, "{}: an operand is None", op);
  BRAZE_TYPE_CHECK(isFloating(dtype),
                   "{}: the dtype must be floating, got {} [nvFuser: Random distributions only create floating point types]",
                   op, toString(dtype));
  for (Val* v : {a, b}) {
    BRAZE_TYPE_CHECK(v->isScalar() && !isBool(v->dtype()), "{}: {} must be a numeric scalar", op, v->name());
  }
  for (Val* v : {seed, offset}) {
    BRAZE_TYPE_CHECK(v->isScalar() && isIntegral(v->dtype()), "{}: rng_seed and rng_offset must be integer scalars, got {}",
                     op, v->name());
  }
  // Constant bounds are checked here; symbolic ones give what the formula gives (kernels check nothing).
  const auto constant = [](Val* v) -> std::optional<double> {
    if (!v->asScalar()->isConstant()) return std::nullopt;
    return toDouble(*v->asScalar()->value());
  };
  const std::optional<double> ca = constant(a), cb = constant(b);
  if (kind == OpKind::Uniform && ca && cb) {
    BRAZE_CHECK(*ca <= *cb, "uniform: minval {} is greater than maxval {}", *ca, *cb);
    // As torch's uniform_: a bound the dtype does not hold as a finite number makes every draw inf or NaN.
    // (A bound's own dtype rounds it: 1e30 is finite as a Double scalar but not in a Half result.)
    for (const auto& [name, bound] : {std::pair{"minval", *ca}, std::pair{"maxval", *cb}}) {
      BRAZE_CHECK(std::isfinite(bound) && std::isfinite(numerics::roundToType(bound, dtype)),
                  "uniform: {} {} is out of bounds for {}: a bound must be a finite number of the dtype", name, bound,
                  toString(dtype));
    }
  }
  if (kind == OpKind::Normal && cb) BRAZE_CHECK(*cb >= 0, "normal: std {} is negative", *cb);
  Fusion* fusion = a->fusion();
  std::vector<IterDomain> dims;
  for (Val* s : shape) {
    checkShapeScalar(s, op, "shape");
    const int64_t extent = staticValueOr(s, IterDomain::kSymbolic);
    BRAZE_CHECK(extent >= -1, "{}: shape entry {} is negative", op, extent);
    dims.push_back(extent == 1 ? IterDomain{1, IterType::Broadcast} : IterDomain{extent, IterType::Iteration});
  }
  std::vector<Val*> inputs{a, b, seed, offset};
  inputs.insert(inputs.end(), shape.begin(), shape.end());
  TensorView* result = newTensorLike(fusion, dtype, std::move(dims));
  fusion->newExpr(kind, std::move(inputs), {result}, {{"dtype", dtype}});
  return result;
}

}  // namespace

TensorView* uniform(Val* low, Val* high, const std::vector<Val*>& shape, Val* seed, Val* offset, DataType dtype) {
  return randomTensor(OpKind::Uniform, low, high, shape, seed, offset, dtype);
}

TensorView* normal(Val* mean, Val* std, const std::vector<Val*>& shape, Val* seed, Val* offset, DataType dtype) {
  return randomTensor(OpKind::Normal, mean, std, shape, seed, offset, dtype);
}

}  // namespace braze
