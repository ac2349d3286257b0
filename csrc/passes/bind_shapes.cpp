#include "passes/bind_shapes.h"

#include "support/error.h"
#include "reference/evaluator.h"
#include "reference/input_check.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace braze {
namespace {

using Sizes = std::vector<int64_t>;

int64_t alignmentOf(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  return a == 0 ? 256 : static_cast<int64_t>(std::min<uintptr_t>(a & (~a + 1), 256));
}

// Elementwise operands of equal rank: each dim takes the size that is not 1 (a broadcast dim).
// scatter (x, index, src) and index_put_accumulate (acc, index, value): the builders check static
// extents; these are the bound ones, so that no write or read falls outside a tensor.
Sizes scatterSizes(const Expr& expr, const Sizes& x, const Sizes& index, const Sizes& src) {
  const std::string_view op = expr.name();
  const auto shape = [](const Sizes& s) { return fmt::format("[{}]", fmt::join(s, ", ")); };
  if (expr.kind() == OpKind::Scatter) {
    const auto dim = static_cast<size_t>(expr.attrs().getInt("dim"));
    for (size_t d = 0; d < x.size(); ++d) {
      BRAZE_CHECK(index[d] <= src[d], "scatter: index {} {} is larger than src {} {} on dim {}", expr.input(1)->name(),
                  shape(index), expr.input(2)->name(), shape(src), d);
      BRAZE_CHECK(d == dim || index[d] <= x[d], "scatter: index {} {} is larger than {} {} on dim {}",
                  expr.input(1)->name(), shape(index), expr.input(0)->name(), shape(x), d);
    }
    return x;
  }
  BRAZE_CHECK(src[0] == index[0], "{}: index {} has {} entries but value {} has {} rows", op, expr.input(1)->name(),
              index[0], expr.input(2)->name(), src[0]);
  for (size_t d = 1; d < x.size(); ++d) {
    BRAZE_CHECK(src[d] == x[d], "{}: value {} {} and acc {} {} differ on dim {}", op, expr.input(2)->name(), shape(src),
                expr.input(0)->name(), shape(x), d);
  }
  return x;
}

Sizes broadcastSizes(const Expr& expr, const BoundShapes& bound) {
  Sizes shape;
  for (const Val* in : expr.inputs()) {
    if (!in->isTensor()) continue;
    const Sizes& s = bound.sizesOf(in);
    if (shape.empty()) shape.assign(s.size(), 1);
    for (size_t d = 0; d < s.size() && d < shape.size(); ++d) {
      if (s[d] == shape[d] || s[d] == 1) continue;
      BRAZE_CHECK(shape[d] == 1, "{}: dim {} has size {} in one operand and {} in {} (sizes must match, or be 1 on a "
                  "broadcast dim)", expr.name(), d, shape[d], s[d], in->name());
      shape[d] = s[d];
    }
  }
  return shape;
}

Sizes reducedSizes(const Sizes& in, const Expr& expr) {
  const auto& dims = expr.attrs().getInts("dims");
  const bool keepdim = expr.attrs().has("keepdim") && expr.attrs().getBool("keepdim");
  Sizes shape;
  for (size_t d = 0; d < in.size(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    if (!reduced) shape.push_back(in[d]);
    if (reduced && keepdim) shape.push_back(1);
  }
  return shape;
}

// torch.matmul: batch dims broadcast; a 1-D operand loses its dim in the result.
Sizes matmulSizes(const Sizes& a, const Sizes& b, bool b_is_nk) {
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  Sizes a_batch(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  Sizes b_batch(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  Sizes batch(std::max(a_batch.size(), b_batch.size()), 1);
  auto merge = [&](const Sizes& part) {
    for (size_t i = 0; i < part.size(); ++i) {
      int64_t& slot = batch[batch.size() - part.size() + i];
      slot = part[i] == 1 ? slot : part[i];
    }
  };
  merge(a_batch);
  merge(b_batch);
  Sizes shape = batch;
  if (!a_vec) shape.push_back(a[a.size() - 2]);
  if (!b_vec) shape.push_back(b_is_nk ? b[b.size() - 2] : b.back());
  return shape;
}

Sizes gatherSizes(const Expr& expr, const Sizes& x, const Sizes& index) {
  Sizes shape = index;
  const int64_t dim = expr.attrs().getInt("dim");
  if (expr.kind() == OpKind::TakeAlongAxis) {
    for (size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<int64_t>(d) != dim && shape[d] == 1) shape[d] = x[d];
    }
  }
  return shape;
}

Sizes outputSizes(const Expr& expr, size_t output, const BoundShapes& bound) {
  auto sizes = [&](size_t i) -> const Sizes& { return bound.sizesOf(expr.input(i)); };
  switch (opInfo(expr.kind()).category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: return broadcastSizes(expr, bound);
    case OpCategory::Reduction:
    case OpCategory::Normalization: return reducedSizes(sizes(0), expr);
    case OpCategory::Meta: {
      // Sizes only; broadcast and expanded dims get stride 0 so squeezing an expanded dim is allowed.
      StridedLayout in = StridedLayout::rowMajor(sizes(0));
      const auto dims = expr.input(0)->asTensor()->logical();
      for (size_t d = 0; d < dims.size() && d < in.strides.size(); ++d) {
        if (dims[d].isBroadcast()) in.strides[d] = 0;
      }
      return viewThrough(expr, in, bound.intOperands(expr)).layout.sizes;
    }
    case OpCategory::Data: {
      if (expr.kind() == OpKind::StrideOrder) return sizes(0);
      if (expr.kind() == OpKind::Cat) {
        const int64_t dim = expr.attrs().getInt("dim");
        Sizes shape = sizes(0);
        for (size_t i = 1; i < expr.inputs().size(); ++i) shape[dim] += sizes(i)[dim];
        return shape;
      }
      Sizes shape = sizes(0);  // pad: inputs x, value, then (left, right) pairs from the last dim
      const auto ints = bound.intOperands(expr);  // value, then the widths
      for (size_t pair = 0; 2 * pair + 3 <= ints.size(); ++pair) {
        const size_t d = shape.size() - 1 - pair;
        shape[d] += ints[1 + 2 * pair] + ints[2 + 2 * pair];
        BRAZE_CHECK(shape[d] >= 0, "pad: dim {} of {} would have negative size {}", d, expr.input(0)->name(), shape[d]);
      }
      return shape;
    }
    case OpCategory::Creation: {
      if (expr.kind() == OpKind::Iota) return {toInt(bound.scalarOf(expr.input(0)))};
      return bound.intOperands(expr);  // full: inputs fill value, then the shape
    }
    case OpCategory::Indexing: {
      if (expr.kind() == OpKind::IndexSelect) {
        Sizes shape = sizes(0);
        shape[expr.attrs().getInt("dim")] = sizes(1).empty() ? 1 : sizes(1)[0];
        return shape;
      }
      return gatherSizes(expr, sizes(0), sizes(1));
    }
    case OpCategory::Matmul: return matmulSizes(sizes(0), sizes(1), expr.kind() == OpKind::Linear);
    case OpCategory::Quantize:
    case OpCategory::Scan: return sizes(0);
    case OpCategory::Scatter: return scatterSizes(expr, sizes(0), sizes(1), sizes(2));
    case OpCategory::Random: {
      Sizes shape;  // the inputs after the two bounds, the seed and the offset
      for (size_t i = 4; i < expr.inputs().size(); ++i) {
        shape.push_back(toInt(bound.scalarOf(expr.input(i))));
        BRAZE_CHECK(shape.back() >= 0, "{}: shape entry {} is {} (negative)", expr.name(), i - 4, shape.back());
      }
      return shape;
    }
    case OpCategory::ScalarQuery: break;
  }
  BRAZE_UNREACHABLE("outputSizes({}, output {})", expr.name(), output);
}

}  // namespace

const std::vector<int64_t>& BoundShapes::sizesOf(const Val* tensor) const {
  auto it = sizes_.find(tensor);
  BRAZE_ASSERT(it != sizes_.end(), "no sizes bound for {}", tensor->name());
  return it->second;
}

int64_t BoundShapes::numel(const Val* tensor) const {
  int64_t n = 1;
  for (int64_t s : sizesOf(tensor)) n *= s;
  return n;
}

int64_t BoundShapes::uniqueBytes(const Val* tensor) const {
  const auto dims = tensor->asTensor()->logical();
  const Sizes& sizes = sizesOf(tensor);
  int64_t n = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (d < dims.size() && dims[d].isBroadcast()) continue;
    n *= sizes[d];
  }
  return n * sizeOf(tensor->dtype());
}

const ScalarValue& BoundShapes::scalarOf(const Val* scalar) const {
  auto it = scalars_.find(scalar);
  BRAZE_ASSERT(it != scalars_.end(), "no value bound for {}", scalar->name());
  return it->second;
}

const InputLayout& BoundShapes::inputLayout(const Val* fusion_input) const {
  auto it = inputs_.find(fusion_input);
  BRAZE_ASSERT(it != inputs_.end(), "{} is not a bound fusion input", fusion_input->name());
  return it->second;
}

StridedLayout BoundShapes::allocatedLayout(const Val* tensor) const {
  return StridedLayout::inStrideOrder(sizesOf(tensor), tensor->asTensor()->layout().stride_order);
}

std::vector<int64_t> BoundShapes::intOperands(const Expr& expr) const {
  std::vector<int64_t> values;
  for (size_t i = 1; i < expr.inputs().size(); ++i) {
    const Val* v = expr.input(i);
    if (v->isScalar()) values.push_back(toInt(scalarOf(v)));
  }
  return values;
}

BoundShapes bindShapes(const Fusion& fusion, const std::vector<HostValue>& inputs) {
  checkInputs(fusion, inputs);
  BoundShapes bound;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Val* in = fusion.inputs()[i];
    if (const auto* t = std::get_if<HostTensor>(&inputs[i])) {
      bound.sizes_[in] = t->sizes();
      bound.inputs_[in] = {StridedLayout{t->sizes(), t->strides(), 0}, alignmentOf(t->data())};
    } else {
      bound.scalars_[in] = std::get<ScalarValue>(inputs[i]);
    }
  }
  for (const auto& val : fusion.vals()) {
    if (val->isScalar() && val->asScalar()->isConstant()) bound.scalars_[val.get()] = *val->asScalar()->value();
  }
  for (const Expr* expr : fusion.exprsToEvaluate()) {
    if (expr->kind() == OpKind::Size) {
      bound.scalars_[expr->output(0)] = ScalarValue{bound.sizesOf(expr->input(0))[expr->attrs().getInt("dim")]};
      continue;
    }
    if (expr->output(0)->isScalar()) {  // scalar arithmetic: folded here, on the host
      std::vector<HostValue> values;
      for (const Val* in : expr->inputs()) values.emplace_back(bound.scalarOf(in));
      std::vector<const HostValue*> operands;
      for (const HostValue& v : values) operands.push_back(&v);
      const auto results = evaluateExpr(*expr, operands);
      bound.scalars_[expr->output(0)] = std::get<ScalarValue>(results[0]);
      continue;
    }
    for (size_t o = 0; o < expr->outputs().size(); ++o) bound.sizes_[expr->output(o)] = outputSizes(*expr, o, bound);
  }
  return bound;
}

std::string BoundShapes::toString(const Fusion& fusion) const {
  std::string out;
  for (const auto& v : fusion.vals()) {
    if (auto it = sizes_.find(v.get()); it != sizes_.end()) {
      out += fmt::format("{}: [{}]", v->name(), fmt::join(it->second, ", "));
      if (auto in = inputs_.find(v.get()); in != inputs_.end()) {
        out += fmt::format(" strides [{}] offset {} aligned {}", fmt::join(in->second.layout.strides, ", "),
                           in->second.layout.offset, in->second.alignment_bytes);
      }
      out += '\n';
    } else if (auto sc = scalars_.find(v.get()); sc != scalars_.end()) {
      out += fmt::format("{} = {}\n", v->name(), ::braze::toString(sc->second));
    }
  }
  return out;
}

}  // namespace braze
