// Reduction builders: sum/prod/max/min/any/all, var, var_mean, welford. Reduced dims stay in the
// output's domain as Reduction dims (not in its logical shape), or become broadcast dims with keepdim.
#include "support/error.h"
#include "ir/ops.h"
#include "ir/ops_util.h"

#include <algorithm>
#include <set>

namespace braze {
namespace {

std::vector<int64_t> normalizeDims(TensorView* x, std::vector<int64_t> dims, std::string_view op) {
  // torch reads dim=[] as every dim, a reduction over nothing would return x: nvFuser refuses it, so
  // neither meaning is taken silently.
  BRAZE_CHECK(!dims.empty() || x->logical().empty(),
              "{}: dims is empty for {} of rank {}: name the dims to reduce (nvFuser: No reduction axis specified)",
              op, x->name(), x->logical().size());
  std::set<int64_t> seen;
  for (int64_t& d : dims) {
    d = x->normalizeAxis(d, op);
    BRAZE_CHECK(seen.insert(d).second, "{}: dim {} appears twice in dims for {}", op, d, x->name());
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

// The output domain of a reduction over `dims` (sorted, normalized).
std::vector<IterDomain> reducedDomain(TensorView* x, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<IterDomain> out;
  const std::vector<IterDomain> in = x->logical();
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (!std::binary_search(dims.begin(), dims.end(), d)) {
      out.push_back(in[d]);
    } else if (keepdim) {
      out.push_back({1, IterType::Broadcast});
    } else {
      out.push_back({in[d].extent, IterType::Reduction});
    }
  }
  return out;
}

TensorView* newReductionOutput(Fusion* fusion, DataType dtype, std::vector<IterDomain> dims) {
  return detail::newTensorLike(fusion, dtype, std::move(dims));
}

void checkTensor(Val* x, std::string_view op) {
  BRAZE_CHECK(x != nullptr, "{}: operand is None", op);
  BRAZE_TYPE_CHECK(x->isTensor(), "{}: expected a tensor, got scalar {}", op, x->name());
}

// A broadcast dim: 1 at execute time, as inputs are checked and ops type their results. (A static extent of
// 1 on an iteration dim is not enough: such a dim broadcasts against a longer one at execute time.)
bool sizeOne(const IterDomain& id) { return id.type == IterType::Broadcast; }

}  // namespace

TensorView* reduce(OpKind kind, TensorView* x, std::vector<int64_t> dims, bool keepdim, DataType dtype) {
  BRAZE_ASSERT(opInfo(kind).category == OpCategory::Reduction, "{} is not a reduction", opName(kind));
  const std::string_view op = opName(kind);
  checkTensor(x, op);
  dims = normalizeDims(x, std::move(dims), op);
  if (dtype == DataType::Null) {
    dtype = x->dtype();
    // torch: sum/prod of bools and integers accumulate and return Int64; any/all return Bool.
    if ((kind == OpKind::Sum || kind == OpKind::Prod) && !isFloating(dtype)) dtype = DataType::Int64;
    if (kind == OpKind::Any || kind == OpKind::All) dtype = DataType::Bool;
  }
  // A sum, product, max or min over broadcast dims only reduces one element: its value, cast. Such a
  // reduction is a squeeze instead (as nvFuser makes it), so that a dim a definition broadcast to 1 and
  // then summed over (Thunder's layer-norm backward has two) is no reduction of another extent that
  // keeps the real row reductions from sharing a kernel. The cast stays even to the same dtype: the
  // result is never a view of the operand. Where real dims are reduced too, the reduction stays whole.
  const bool one_element_is_the_value =
      kind == OpKind::Sum || kind == OpKind::Prod || kind == OpKind::Max || kind == OpKind::Min;
  const bool only_size_one = std::all_of(dims.begin(), dims.end(), [&](int64_t d) { return sizeOne(x->logical()[d]); });
  if (one_element_is_the_value && !dims.empty() && only_size_one) {
    TensorView* value = squeeze(x, dims);
    if (keepdim) {  // kept as broadcast dims, as a reduction keeps them
      std::vector<bool> kept(x->logical().size(), false);
      for (int64_t d : dims) kept[d] = true;
      value = broadcast(value, kept);
    }
    Val* result = cast(value, dtype);
    // A sum starts from +0: -0.0 summed alone is +0.0, as torch and numpy give it.
    if (kind == OpKind::Sum && isFloating(dtype)) result = cast(add(result, x->fusion()->constant(0.0)), dtype);
    return result->asTensor();
  }
  Fusion* fusion = x->fusion();
  TensorView* out = newReductionOutput(fusion, dtype, reducedDomain(x, dims, keepdim));
  fusion->newExpr(kind, {x}, {out}, {{"dims", dims}, {"keepdim", keepdim}, {"dtype", dtype}});
  return out;
}

namespace {
DataType statsType(TensorView* x, std::string_view op) {
  // Statistics of low-precision floats are returned in the input type, of integers in Float.
  BRAZE_TYPE_CHECK(!isBool(x->dtype()), "{}: {} is Bool; expected a numeric tensor", op, x->name());
  return isFloating(x->dtype()) ? x->dtype() : DataType::Float;
}
}  // namespace

TensorView* var(TensorView* x, std::vector<int64_t> dims, double correction, bool keepdim) {
  checkTensor(x, "var");
  dims = normalizeDims(x, std::move(dims), "var");
  BRAZE_CHECK(correction >= 0, "var: correction must be >= 0, got {}", correction);
  TensorView* out = newReductionOutput(x->fusion(), statsType(x, "var"), reducedDomain(x, dims, keepdim));
  x->fusion()->newExpr(OpKind::Var, {x}, {out}, {{"dims", dims}, {"correction", correction}, {"keepdim", keepdim}});
  return out;
}

std::pair<TensorView*, TensorView*> varMean(TensorView* x, std::vector<int64_t> dims, double correction, bool keepdim) {
  checkTensor(x, "var_mean");
  dims = normalizeDims(x, std::move(dims), "var_mean");
  BRAZE_CHECK(correction >= 0, "var_mean: correction must be >= 0, got {}", correction);
  const DataType dtype = statsType(x, "var_mean");
  TensorView* var_out = newReductionOutput(x->fusion(), dtype, reducedDomain(x, dims, keepdim));
  TensorView* mean_out = newReductionOutput(x->fusion(), dtype, reducedDomain(x, dims, keepdim));
  x->fusion()->newExpr(OpKind::VarMean, {x}, {var_out, mean_out},
                       {{"dims", dims}, {"correction", correction}, {"keepdim", keepdim}});
  return {var_out, mean_out};
}

std::tuple<TensorView*, TensorView*, TensorView*> welford(TensorView* x, std::vector<int64_t> dims) {
  checkTensor(x, "welford");
  dims = normalizeDims(x, std::move(dims), "welford");
  // Welford's running statistics are kept in Float at least, as nvFuser does.
  const DataType dtype = x->dtype() == DataType::Double ? DataType::Double : DataType::Float;
  const auto domain = reducedDomain(x, dims, /*keepdim=*/false);
  TensorView* avg = newReductionOutput(x->fusion(), dtype, domain);
  TensorView* var_sum = newReductionOutput(x->fusion(), dtype, domain);
  TensorView* n = newReductionOutput(x->fusion(), DataType::Int64, domain);
  x->fusion()->newExpr(OpKind::Welford, {x}, {avg, var_sum, n}, {{"dims", dims}});
  return {avg, var_sum, n};
}

}  // namespace braze
