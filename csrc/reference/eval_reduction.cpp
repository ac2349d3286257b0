// Reductions (sum, prod, max, min, any, all) and statistics (var, var_mean, welford), accumulated
// exactly (float64 or int64) and rounded once to the output type.
#include "support/error.h"
#include "reference/eval_ops.h"
#include "reference/evaluator.h"
#include "reference/pointwise_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace braze::reference {
namespace {

// Splits the input's dims into kept and reduced ones and calls fn(kept_linear_index, element_offset)
// for every input element; kept_linear_index is the row-major index among kept dims.
template <typename Fn>
void forEachInput(const HostTensor& in, const std::vector<int64_t>& dims, Fn&& fn) {
  std::vector<bool> reduced(in.rank(), false);
  for (int64_t d : dims) reduced[d] = true;
  forEachIndex(in.sizes(), [&](const std::vector<int64_t>& index) {
    int64_t kept = 0;
    for (int64_t d = 0; d < in.rank(); ++d) {
      if (!reduced[d]) kept = kept * in.sizes()[d] + index[d];
    }
    fn(kept, in.offsetOf(index));
  });
}

std::vector<int64_t> outputShape(const HostTensor& in, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < in.rank(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) shape.push_back(in.sizes()[d]);
    if (reduced && keepdim) shape.push_back(1);
  }
  return shape;
}

int64_t keptCount(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t reducedCount(const HostTensor& in, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= in.sizes()[d];
  return n;
}

HostTensor basicReduction(const Expr& expr, const HostTensor& in) {
  const auto& dims = expr.attrs().getInts("dims");
  const DataType out_dtype = expr.output(0)->dtype();
  const OpKind kind = expr.kind();
  const auto shape = outputShape(in, dims, expr.attrs().getBool("keepdim"));
  const int64_t kept = keptCount(shape);
  // The user's dtype= casts each element first, as torch's does and kernels do (a sum of Float in BFloat16
  // rounds each term to BFloat16, one in Int32 truncates each: [0.6, 1.7, 2.9] sums to 3; a max of Int32 in
  // UInt8 compares wrapped values; a sum in Bool is true where any element is nonzero), then accumulates
  // in the output's type: floats in float64, integers with wrap-around.
  const DataType cast_to = out_dtype != in.dtype() ? out_dtype : DataType::Null;
  HostTensor out = HostTensor::empty(out_dtype, shape);
  if (isFloating(out_dtype)) {
    double init = 0.0;
    if (kind == OpKind::Prod || kind == OpKind::All) init = 1.0;
    if (kind == OpKind::Max) init = -std::numeric_limits<double>::infinity();
    if (kind == OpKind::Min) init = std::numeric_limits<double>::infinity();
    std::vector<double> acc(kept, init);
    forEachInput(in, dims, [&](int64_t k, int64_t off) {
      double v = in.readDouble(off);
      if (cast_to != DataType::Null) v = roundToType(v, cast_to);
      double& a = acc[k];
      switch (kind) {
        case OpKind::Sum: a += v; break;
        case OpKind::Prod: a *= v; break;
        case OpKind::Max: a = (std::isnan(a) || std::isnan(v)) ? std::nan("") : std::max(a, v); break;
        case OpKind::Min: a = (std::isnan(a) || std::isnan(v)) ? std::nan("") : std::min(a, v); break;
        case OpKind::Any: a = (a != 0.0 || v != 0.0); break;
        case OpKind::All: a = (a != 0.0 && v != 0.0); break;
        default: BRAZE_UNREACHABLE("reduction {}", expr.name());
      }
    });
    // A nudged reference (ScopedReductionNudge) moves the sums and products a kernel accumulates in float.
    const double nudge = kind == OpKind::Sum || kind == OpKind::Prod ? ScopedReductionNudge::factor() : 1.0;
    for (int64_t k = 0; k < kept; ++k) out.writeDouble(k, acc[k] * nudge);
    return out;
  }
  int64_t init = 0;
  if (kind == OpKind::Prod || kind == OpKind::All) init = 1;
  if (kind == OpKind::Max) init = std::numeric_limits<int64_t>::min();
  if (kind == OpKind::Min) init = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> acc(kept, init);
  forEachInput(in, dims, [&](int64_t k, int64_t off) {
    int64_t v = 0;
    if (isFloating(in.dtype())) {  // into an integer dtype=: converted as a cast converts
      const double f = in.readDouble(off);
      v = isBool(out_dtype) ? int64_t{f != 0.0} : floatToInt(f, out_dtype);
    } else {
      v = in.readInt(off);
      if (cast_to != DataType::Null) v = isBool(cast_to) ? int64_t{v != 0} : wrapToType(v, cast_to);
    }
    int64_t& a = acc[k];
    switch (kind) {
      case OpKind::Sum: a = static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(v)); break;
      case OpKind::Prod: a = static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(v)); break;
      case OpKind::Max: a = std::max(a, v); break;
      case OpKind::Min: a = std::min(a, v); break;
      case OpKind::Any: a = (a != 0 || v != 0); break;
      case OpKind::All: a = (a != 0 && v != 0); break;
      default: BRAZE_UNREACHABLE("reduction {}", expr.name());
    }
  });
  for (int64_t k = 0; k < kept; ++k) out.writeInt(k, isBool(out_dtype) ? acc[k] != 0 : wrapToType(acc[k], out_dtype));
  return out;
}

// Mean and sum of squared deviations per kept position, by two passes in float64.
void moments(const HostTensor& in, const std::vector<int64_t>& dims, int64_t kept, std::vector<double>& mean,
             std::vector<double>& m2) {
  const int64_t n = reducedCount(in, dims);
  mean.assign(kept, 0.0);
  m2.assign(kept, 0.0);
  forEachInput(in, dims, [&](int64_t k, int64_t off) { mean[k] += in.readDouble(off); });
  for (double& m : mean) m = n > 0 ? m / static_cast<double>(n) : std::nan("");
  forEachInput(in, dims, [&](int64_t k, int64_t off) {
    const double d = in.readDouble(off) - mean[k];
    m2[k] += d * d;
  });
  const double nudge = ScopedReductionNudge::factor();  // as basicReduction's sums
  for (double& m : mean) m *= nudge;
  for (double& m : m2) m *= nudge;
}

}  // namespace

std::vector<HostValue> evalReduction(const Expr& expr, const Operands& operands) {
  const HostTensor& in = tensorOf(*operands[0]);
  if (opInfo(expr.kind()).category == OpCategory::Reduction) return {basicReduction(expr, in)};

  const auto& dims = expr.attrs().getInts("dims");
  const bool keepdim = expr.attrs().has("keepdim") && expr.attrs().getBool("keepdim");
  const auto shape = outputShape(in, dims, keepdim);
  const int64_t kept = keptCount(shape);
  const int64_t n = reducedCount(in, dims);
  std::vector<double> mean, m2;
  moments(in, dims, kept, mean, m2);
  auto tensorFrom = [&](DataType dtype, auto&& value_at) {
    HostTensor t = HostTensor::empty(dtype, shape);
    for (int64_t k = 0; k < kept; ++k) {
      if (isFloating(dtype)) {
        t.writeDouble(k, value_at(k));
      } else {
        t.writeInt(k, static_cast<int64_t>(value_at(k)));
      }
    }
    return t;
  };
  if (expr.kind() == OpKind::Welford) {
    return {tensorFrom(expr.output(0)->dtype(), [&](int64_t k) { return mean[k]; }),
            tensorFrom(expr.output(1)->dtype(), [&](int64_t k) { return m2[k]; }),
            tensorFrom(expr.output(2)->dtype(), [&](int64_t) { return static_cast<double>(n); })};
  }
  // Bessel-style correction; a non-positive divisor gives inf or NaN as in torch.
  const double divisor = static_cast<double>(n) - expr.attrs().getDouble("correction");
  auto variance = [&](int64_t k) { return divisor > 0 ? m2[k] / divisor : m2[k] / std::max(divisor, 0.0); };
  HostTensor var = tensorFrom(expr.output(0)->dtype(), variance);
  if (expr.kind() == OpKind::Var) return {var};
  return {var, tensorFrom(expr.output(1)->dtype(), [&](int64_t k) { return mean[k]; })};
}

}  // namespace braze::reference
