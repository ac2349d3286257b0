// Elementwise ops (unary, binary, ternary, cast) with broadcasting over equal-rank operands.
#include "support/error.h"
#include "ir/ops.h"
#include "reference/eval_ops.h"
#include "reference/pointwise_math.h"

#include <array>
#include <cmath>
#include <span>

namespace braze::reference {
namespace {

// One operand of an elementwise op: a tensor read through broadcast strides, or a scalar.
struct Source {
  const HostTensor* tensor = nullptr;
  std::vector<int64_t> strides;  // 0 on broadcast dims
  ScalarValue scalar;
};

// The result shape: each dim's size is shared by every operand that is not 1 there. A size-1 dim
// broadcasts only where the definition says so (checked when the fusion was built, and by the size rules).
std::vector<int64_t> broadcastShape(const Expr& expr, const Operands& operands) {
  std::vector<int64_t> shape;
  for (size_t i = 0; i < operands.size(); ++i) {
    const auto* t = std::get_if<HostTensor>(operands[i]);
    if (t == nullptr) continue;
    if (shape.empty() && t->rank() > 0) shape.assign(t->rank(), 1);
    BRAZE_ASSERT(static_cast<int64_t>(shape.size()) == t->rank() || t->rank() == 0, "{}: operand ranks differ", expr.name());
    for (int64_t d = 0; d < t->rank(); ++d) {
      if (t->sizes()[d] != 1) shape[d] = t->sizes()[d];  // sizes that differ were refused (ir/size_rules.cpp)
    }
  }
  return shape;
}

std::vector<Source> sources(const Operands& operands, const std::vector<int64_t>& shape) {
  std::vector<Source> result;
  for (const HostValue* v : operands) {
    Source s;
    if (const auto* t = std::get_if<HostTensor>(v)) {
      s.tensor = t;
      s.strides.assign(shape.size(), 0);
      for (int64_t d = 0; d < t->rank(); ++d) s.strides[d] = (t->sizes()[d] == 1) ? 0 : t->strides()[d];
    } else {
      s.scalar = scalarOf(*v);
    }
    result.push_back(std::move(s));
  }
  return result;
}

// Iterates every index of `shape` keeping each source's element offset up to date (row-major order).
template <typename Fn>
void forEachElement(const std::vector<int64_t>& shape, const std::vector<Source>& srcs, Fn&& fn) {
  std::vector<int64_t> offsets(srcs.size(), 0);
  int64_t linear = 0;
  forEachIndex(shape, [&](const std::vector<int64_t>& index) {
    for (size_t s = 0; s < srcs.size(); ++s) {
      if (srcs[s].tensor == nullptr) continue;
      int64_t off = 0;
      for (size_t d = 0; d < index.size(); ++d) off += index[d] * srcs[s].strides[d];
      offsets[s] = off;
    }
    fn(linear++, offsets);
  });
}

bool computesInFloat(const Expr& expr, DataType promoted) {
  return isFloating(promoted) || opInfo(expr.kind()).result == ResultType::FloatOfPromoted;
}

// The type an op computes in: the builder's promotion of its value operands (not where's condition,
// nor clamp's and threshold's bounds, which adapt to x).
DataType computeDtype(const Expr& expr) {
  const auto& in = expr.inputs();
  if (expr.kind() == OpKind::Where) return promotedType({in[1], in[2]});
  if (expr.kind() == OpKind::Clamp || expr.kind() == OpKind::Threshold) {
    return in[0]->isTensor() ? in[0]->dtype() : promotedType(in);
  }
  return promotedType(in);
}

double readD(const Source& s, int64_t offset) { return s.tensor ? s.tensor->readDouble(offset) : toDouble(s.scalar); }
// A float operand of integer math (clamp of an Int32 x to Float bounds) converts as kernels convert it:
// truncated, saturated, NaN 0.
int64_t readI(const Source& s, int64_t offset) {
  if (s.tensor != nullptr) {
    return isFloating(s.tensor->dtype()) ? floatToInt(s.tensor->readDouble(offset), DataType::Int64) : s.tensor->readInt(offset);
  }
  return std::holds_alternative<double>(s.scalar) ? floatToInt(std::get<double>(s.scalar), DataType::Int64) : toInt(s.scalar);
}

// Reads one element of every operand and evaluates it in float64 (or exactly in int64, below).
// An integer operand of float math is first converted to the type that math is done in (floatMathType).
double elementFloat(const Expr& expr, const std::vector<Source>& srcs, const std::vector<int64_t>& off, DataType dtype) {
  std::array<double, 4> x{};
  std::array<DataType, 4> dtypes{};
  BRAZE_ASSERT(srcs.size() <= x.size(), "{}: {} operands", expr.name(), srcs.size());
  for (size_t i = 0; i < srcs.size(); ++i) dtypes[i] = expr.input(i)->dtype();
  const DataType math = floatMathType(dtype, std::span<const DataType>(dtypes.data(), srcs.size()));
  for (size_t i = 0; i < srcs.size(); ++i) {
    x[i] = readD(srcs[i], off[i]);
    if (!isFloating(dtypes[i])) x[i] = roundToType(x[i], math);
  }
  return elementwiseFloat(expr.kind(), std::span<const double>(x.data(), srcs.size()), dtype);
}

int64_t elementInt(const Expr& expr, const std::vector<Source>& srcs, const std::vector<int64_t>& off, DataType dtype) {
  std::array<int64_t, 4> x{};
  BRAZE_ASSERT(srcs.size() <= x.size(), "{}: {} operands", expr.name(), srcs.size());
  for (size_t i = 0; i < srcs.size(); ++i) x[i] = readI(srcs[i], off[i]);
  return elementwiseInt(expr.kind(), std::span<const int64_t>(x.data(), srcs.size()), dtype);
}

// Writes a float64 result into the output's type: rounding for floats, CUDA's conversion for ints.
void storeFloat(HostTensor& out, int64_t offset, double v) {
  if (isFloating(out.dtype())) {
    out.writeDouble(offset, v);
  } else {
    out.writeInt(offset, floatToInt(v, out.dtype()));
  }
}

ScalarValue scalarResult(DataType dtype, bool in_float, double f, int64_t i) {
  if (isBool(dtype)) return in_float ? f != 0.0 : i != 0;
  if (isIntegral(dtype)) return in_float ? floatToInt(f, dtype) : wrapToType(i, dtype);
  return roundToType(in_float ? f : static_cast<double>(i), dtype);
}

}  // namespace

std::vector<HostValue> evalElementwise(const Expr& expr, const Operands& operands) {
  const Val* out_val = expr.output(0);
  const DataType out_dtype = out_val->dtype();
  const bool is_cast = expr.kind() == OpKind::CastOp;
  const DataType dtype = is_cast ? expr.input(0)->dtype() : computeDtype(expr);
  const bool in_float = is_cast ? isFloating(dtype) : computesInFloat(expr, dtype);
  if (is_cast && dtype == out_dtype && std::holds_alternative<HostTensor>(*operands[0])) {
    // A cast to its own dtype is the tensor as it is (bits included: an e5m2 infinity, which a rounding
    // store would saturate), as the kernels emit no conversion for it.
    return {std::get<HostTensor>(*operands[0]).contiguous()};
  }
  const std::vector<int64_t> shape = broadcastShape(expr, operands);
  const std::vector<Source> srcs = sources(operands, shape);

  auto computeFloat = [&](const std::vector<int64_t>& off) {
    return is_cast ? readD(srcs[0], off[0]) : elementFloat(expr, srcs, off, out_dtype);  // nextafter steps in the result type
  };
  auto computeInt = [&](const std::vector<int64_t>& off) {
    return is_cast ? readI(srcs[0], off[0]) : elementInt(expr, srcs, off, dtype);
  };

  if (out_val->isScalar()) {
    const std::vector<int64_t> none(srcs.size(), 0);
    return {in_float ? scalarResult(out_dtype, true, computeFloat(none), 0)
                     : scalarResult(out_dtype, false, 0.0, computeInt(none))};
  }
  HostTensor out = HostTensor::empty(out_dtype, shape);
  forEachElement(shape, srcs, [&](int64_t linear, const std::vector<int64_t>& off) {
    if (in_float) {
      storeFloat(out, linear, computeFloat(off));
    } else {
      out.writeInt(linear, computeInt(off));
    }
  });
  return {out};
}

}  // namespace braze::reference
