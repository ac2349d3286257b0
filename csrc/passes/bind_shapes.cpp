#include "passes/bind_shapes.h"

#include "support/error.h"
#include "reference/evaluator.h"
#include "reference/input_check.h"
#include "ir/shape_rules.h"
#include "ir/size_rules.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace braze {
namespace {

// Meta ops take their sizes from their views (broadcast and expanded dims get stride 0, so squeezing
// an expanded dim is allowed); every other op from its size rules, which check its operands.
Sizes outputSizes(const Expr& expr, const BoundShapes& bound) {
  auto operand = [&](size_t i) -> const Sizes& { return bound.sizesOf(expr.input(i)); };
  auto scalar = [&](size_t i) { return toInt(bound.scalarOf(expr.input(i))); };
  if (std::optional<Sizes> sizes = resultSizes(expr, operand, scalar)) return *std::move(sizes);
  BRAZE_ASSERT(opInfo(expr.kind()).category == OpCategory::Meta, "no size rule for {}", expr.name());
  StridedLayout in = StridedLayout::rowMajor(operand(0));
  const auto dims = expr.input(0)->asTensor()->logical();
  if (expr.kind() == OpKind::Squeeze) {
    // As the reference checks it: a squeezed dim is 1, or expanded (one value however long).
    for (int64_t d : expr.attrs().getInts("dims")) {
      BRAZE_CHECK(operand(0)[d] == 1 || dims[d].type == IterType::Expanded, "squeeze: dim {} of {} has size {}, not 1",
                  d, expr.input(0)->name(), operand(0)[d]);
    }
  }
  for (size_t d = 0; d < dims.size() && d < in.strides.size(); ++d) {
    if (dims[d].isBroadcast()) in.strides[d] = 0;
  }
  return viewThrough(expr, in, bound.intOperands(expr)).layout.sizes;
}

}  // namespace

void BoundShapes::checkOwner(const Val* v) const {
  BRAZE_ASSERT(fusion_ == nullptr || v->fusion() == fusion_, "{} is a val of another fusion than the bound one",
               v->name());
}

const std::vector<int64_t>& BoundShapes::sizesOf(const Val* tensor) const {
  checkOwner(tensor);
  const std::vector<int64_t>* sizes = sizes_.find(tensor);
  BRAZE_ASSERT(sizes != nullptr, "no sizes bound for {}", tensor->name());
  return *sizes;
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
  checkOwner(scalar);
  const ScalarValue* value = scalars_.find(scalar);
  BRAZE_ASSERT(value != nullptr, "no value bound for {}", scalar->name());
  return *value;
}

const InputLayout& BoundShapes::inputLayout(const Val* fusion_input) const {
  checkOwner(fusion_input);
  const InputLayout* layout = inputs_.find(fusion_input);
  BRAZE_ASSERT(layout != nullptr, "{} is not a bound fusion input", fusion_input->name());
  return *layout;
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
  bound.fusion_ = &fusion;
  // Val ids are dense from 0: the tables sized for the fusion's vals once, not grown val by val (the
  // input layouts, of the first ids only, grow as they are set).
  bound.sizes_.reserve(fusion.vals().size());
  bound.scalars_.reserve(fusion.vals().size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Val* in = fusion.inputs()[i];
    if (const auto* t = std::get_if<HostTensor>(&inputs[i])) {
      bound.sizes_.set(in, t->sizes());
      bound.inputs_.set(in, {StridedLayout{t->sizes(), t->strides(), 0},
                             addressAlignment(reinterpret_cast<uintptr_t>(t->data()))});
    } else {
      bound.scalars_.set(in, valueOfType(std::get<ScalarValue>(inputs[i]), in->dtype()));
    }
  }
  for (const auto& val : fusion.vals()) {
    if (val->isScalar() && val->asScalar()->isConstant()) bound.scalars_.set(val.get(), *val->asScalar()->value());
  }
  for (const Expr* expr : fusion.exprsToEvaluate()) {
    if (expr->kind() == OpKind::Size) {
      bound.scalars_.set(expr->output(0), ScalarValue{bound.sizesOf(expr->input(0))[expr->attrs().getInt("dim")]});
      continue;
    }
    if (expr->output(0)->isScalar()) {  // scalar arithmetic: folded here, on the host
      std::vector<HostValue> values;
      for (const Val* in : expr->inputs()) values.emplace_back(bound.scalarOf(in));
      std::vector<const HostValue*> operands;
      for (const HostValue& v : values) operands.push_back(&v);
      const auto results = evaluateExpr(*expr, operands);
      bound.scalars_.set(expr->output(0), std::get<ScalarValue>(results[0]));
      continue;
    }
    Sizes sizes = outputSizes(*expr, bound);
    checkElementCount(expr->name(), sizes);
    const std::vector<Val*>& outs = expr->outputs();
    for (size_t o = 0; o + 1 < outs.size(); ++o) bound.sizes_.set(outs[o], sizes);
    if (!outs.empty()) bound.sizes_.set(outs.back(), std::move(sizes));
  }
  return bound;
}

std::string BoundShapes::toString(const Fusion& fusion) const {
  std::string out;
  for (const auto& v : fusion.vals()) {
    if (const auto* sizes = sizes_.find(v.get())) {
      out += fmt::format("{}: [{}]", v->name(), fmt::join(*sizes, ", "));
      if (const InputLayout* in = inputs_.find(v.get())) {
        out += fmt::format(" strides [{}] offset {} aligned {}", fmt::join(in->layout.strides, ", "),
                           in->layout.offset, in->alignment_bytes);
      }
      out += '\n';
    } else if (const ScalarValue* sc = scalars_.find(v.get())) {
      out += fmt::format("{} = {}\n", v->name(), ::braze::toString(*sc));
    }
  }
  return out;
}

}  // namespace braze
