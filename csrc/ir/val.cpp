#include "ir/val.h"

#include "support/error.h"
#include "ir/fusion.h"
#include "ir/numerics.h"

#include <cmath>

namespace braze {

std::string toString(const ScalarValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "True" : "False";
  if (const int64_t* i = std::get_if<int64_t>(&value)) return fmt::format("{}", *i);
  const double d = std::get<double>(value);
  if (std::isnan(d)) return "float('nan')";
  if (std::isinf(d)) return d > 0 ? "float('inf')" : "float('-inf')";
  // Shortest text that parses back to the same double, always with a '.' or exponent (reads as float).
  std::string text = fmt::format("{}", d);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

double toDouble(const ScalarValue& value) {
  return std::visit([](auto v) { return static_cast<double>(v); }, value);
}

int64_t toInt(const ScalarValue& value) {
  return std::visit([](auto v) { return static_cast<int64_t>(v); }, value);
}

ScalarValue valueOfType(const ScalarValue& value, DataType dtype) {
  if (isBool(dtype)) return toDouble(value) != 0.0;
  if (isIntegral(dtype)) {
    return std::holds_alternative<double>(value) ? numerics::floatToInt(std::get<double>(value), dtype)
                                                 : numerics::wrapToType(toInt(value), dtype);
  }
  return numerics::roundToType(toDouble(value), dtype);
}

std::string_view toString(IterType type) {
  switch (type) {
    case IterType::Iteration: return "i";
    case IterType::Reduction: return "r";
    case IterType::Broadcast: return "b";
    case IterType::Expanded: return "bS";
  }
  return "?";
}

bool Val::isFusionInput() const { return fusion_->isInput(this); }
bool Val::isFusionOutput() const { return fusion_->isOutput(this); }

TensorView* Val::asTensor() {
  BRAZE_ASSERT(is_tensor_, "{} is not a tensor", name());
  return static_cast<TensorView*>(this);
}
const TensorView* Val::asTensor() const {
  BRAZE_ASSERT(is_tensor_, "{} is not a tensor", name());
  return static_cast<const TensorView*>(this);
}
Scalar* Val::asScalar() {
  BRAZE_ASSERT(!is_tensor_, "{} is not a scalar", name());
  return static_cast<Scalar*>(this);
}
const Scalar* Val::asScalar() const {
  BRAZE_ASSERT(!is_tensor_, "{} is not a scalar", name());
  return static_cast<const Scalar*>(this);
}

// Without fmt: lowering names every kernel parameter, on every plan.
std::string Val::name() const { return (is_tensor_ ? "T" : "S") + std::to_string(id_); }

std::vector<IterDomain> TensorView::logical() const {
  std::vector<IterDomain> dims;
  dims.reserve(domain_.size());
  for (const IterDomain& id : domain_) {
    if (!id.isReduction()) dims.push_back(id);
  }
  return dims;
}

int64_t TensorView::rank() const {
  int64_t rank = 0;
  for (const IterDomain& id : domain_) rank += id.isReduction() ? 0 : 1;
  return rank;
}

std::vector<int64_t> TensorView::staticShape() const {
  std::vector<int64_t> shape;
  for (const IterDomain& id : logical()) shape.push_back(id.extent);
  return shape;
}

namespace {

// What nvFuser says of a dim out of range, for the ops whose messages its tests match.
std::string_view nvfuserAxisPhrase(std::string_view op) {
  if (op == "cat") return " [nvFuser: Invalid dimension to cat]";
  if (op == "permute") return " [nvFuser: dims argument is out of range, expects]";
  if (op == "squeeze") return " [nvFuser: Squeeze dim is outside of Tensor size!]";
  if (op == "take_along_axis") return " [nvFuser: Tensor arguments have dimension]";
  if (op == "topk" || op == "size" || op == "index_select") return " [nvFuser: Tried to access out of boundary index]";
  return "";
}

}  // namespace

int64_t TensorView::normalizeAxis(int64_t axis, std::string_view op) const {
  const int64_t r = rank();
  BRAZE_INDEX_CHECK(axis >= -r && axis < r, "{}: dim {} is out of range for {} of rank {} (expected a dim in [{}, {})){}",
                    op, axis, name(), r, -r, r, nvfuserAxisPhrase(op));
  return axis < 0 ? axis + r : axis;
}

}  // namespace braze
