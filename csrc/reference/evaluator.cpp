// The evaluator's driver: checks and binds inputs, evaluates exprs in dependency order by category,
// and returns the outputs.
#include "reference/evaluator.h"


#include "support/error.h"
#include "reference/eval_ops.h"
#include "reference/input_check.h"
#include "ir/size_rules.h"

#include <unordered_map>

namespace braze {

namespace {
thread_local double reduction_nudge = 0.0;
}  // namespace

ScopedReductionNudge::ScopedReductionNudge(double nudge) : previous_(reduction_nudge) { reduction_nudge = nudge; }
ScopedReductionNudge::~ScopedReductionNudge() { reduction_nudge = previous_; }
double ScopedReductionNudge::factor() { return 1.0 + reduction_nudge; }

namespace {

using reference::Operands;

std::vector<HostValue> evalByCategory(const Expr& expr, const Operands& operands) {
  switch (opInfo(expr.kind()).category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: return reference::evalElementwise(expr, operands);
    case OpCategory::Reduction:
    case OpCategory::Normalization: return reference::evalReduction(expr, operands);
    case OpCategory::Meta:
    case OpCategory::Data:
    case OpCategory::ScalarQuery: return reference::evalShapeOp(expr, operands);
    case OpCategory::Creation: return reference::evalCreation(expr, operands);
    case OpCategory::Indexing: return reference::evalIndexing(expr, operands);
    case OpCategory::Matmul: return reference::evalMatmul(expr, operands);
    case OpCategory::Quantize: return reference::evalQuantize(expr, operands);
    case OpCategory::Scan:
    case OpCategory::Scatter:
    case OpCategory::Random: return reference::evalScanScatter(expr, operands);
  }
  BRAZE_UNREACHABLE("no evaluator for {}", expr.name());
}

}  // namespace

std::vector<HostValue> evaluateExpr(const Expr& expr, const std::vector<const HostValue*>& operands) {
  // The op's size rules, checked before it runs: the planner binds every plan with the same rules.
  std::optional<Sizes> sizes;
  if (!expr.outputs().empty() && expr.output(0)->isTensor()) {
    sizes = resultSizes(
        expr, [&](size_t i) -> const Sizes& { return std::get<HostTensor>(*operands[i]).sizes(); },
        [&](size_t i) { return toInt(std::get<ScalarValue>(*operands[i])); });
  }
  std::vector<HostValue> results = evalByCategory(expr, operands);
  BRAZE_ASSERT(results.size() == expr.outputs().size(), "{} produced {} values for {} outputs", expr.name(),
               results.size(), expr.outputs().size());
  for (const HostValue& result : results) {
    const auto* tensor = std::get_if<HostTensor>(&result);
    BRAZE_ASSERT(!sizes || tensor == nullptr || tensor->sizes() == *sizes, "{} computed sizes {}, its size rule says {}",
                 expr.name(), sizesString(tensor->sizes()), sizesString(*sizes));
  }
  return results;
}

std::vector<HostValue> evaluate(const Fusion& fusion, const std::vector<HostValue>& inputs) {
  checkInputs(fusion, inputs);
  std::unordered_map<const Val*, HostValue> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    HostValue value = inputs[i];
    // A scalar input holds its dtype's value, as a kernel's argument does (a Float 0.1 is 0.100000001).
    if (auto* scalar = std::get_if<ScalarValue>(&value)) *scalar = valueOfType(*scalar, fusion.inputs()[i]->dtype());
    values.emplace(fusion.inputs()[i], std::move(value));
  }
  for (const auto& val : fusion.vals()) {
    if (val->isScalar() && val->asScalar()->isConstant()) values.emplace(val.get(), *val->asScalar()->value());
  }
  for (const Expr* expr : fusion.exprsToEvaluate()) {
    Operands operands;
    for (const Val* in : expr->inputs()) {
      auto it = values.find(in);
      BRAZE_ASSERT(it != values.end(), "{} has no value when evaluating {}", in->name(), expr->name());
      operands.push_back(&it->second);
    }
    std::vector<HostValue> results = evaluateExpr(*expr, operands);
    for (size_t i = 0; i < results.size(); ++i) values.insert_or_assign(expr->outputs()[i], std::move(results[i]));
  }
  return collectOutputs(fusion, values, /*row_major=*/true);
}

std::vector<HostValue> collectOutputs(const Fusion& fusion, const std::unordered_map<const Val*, HostValue>& values,
                                      bool row_major) {
  // Copy every output first, then write the aliased ones into their inputs: an output that views an
  // aliased input must show the value from before the in-place update.
  std::vector<HostValue> outputs;
  std::vector<std::pair<HostTensor, HostTensor>> in_place;  // (input storage, new value)
  for (size_t i = 0; i < fusion.outputs().size(); ++i) {
    const Val* out = fusion.outputs()[i];
    const HostValue& value = values.at(out);
    switch (fusion.outputUse(i)) {
      case Fusion::OutputUse::WrittenIntoInput: {
        const Val* input = fusion.outputAliases().at(const_cast<Val*>(out));
        const HostTensor& target = std::get<HostTensor>(values.at(input));
        const HostTensor& result = std::get<HostTensor>(value);
        BRAZE_CHECK(target.sizes() == result.sizes(), "output {} has shape [{}] but aliases input {} of shape [{}]",
                    out->name(), fmt::join(result.sizes(), ", "), input->name(), fmt::join(target.sizes(), ", "));
        in_place.emplace_back(target, result.contiguous());
        continue;  // like nvFuser, an output written into an input is not returned
      }
      case Fusion::OutputUse::UpdatedInput:
        outputs.push_back(values.at(fusion.outputAliases().at(const_cast<Val*>(out))));  // written below
        continue;
      case Fusion::OutputUse::Returned:
        break;
    }
    if (const auto* tensor = std::get_if<HostTensor>(&value)) {
      // An input returned as itself is the caller's tensor, unless the fusion updates it: then, like any
      // view of it, a copy from before the update (as a plan's saved output is).
      bool updated = false;
      for (const auto& [aliased_out, input] : fusion.outputAliases()) updated = updated || input == out;
      const bool as_is = fusion.isInput(out) ? !updated : !row_major;
      outputs.emplace_back(as_is ? *tensor : tensor->contiguous());
    } else {
      outputs.push_back(value);
    }
  }
  for (auto& [target, value] : in_place) {
    int64_t next = 0;
    forEachIndex(target.sizes(), [&](const std::vector<int64_t>& index) {
      const int64_t offset = target.offsetOf(index);
      if (isFloating(target.dtype())) {
        target.writeDouble(offset, value.readDouble(next++));
      } else {
        target.writeInt(offset, value.readInt(next++));
      }
    });
  }
  return outputs;
}

}  // namespace braze
