#include "ir/json_results.h"

#include "ir/ops.h"
#include "support/error.h"

#include <algorithm>
#include <set>

namespace braze {
namespace {

// A value of `v`'s kind, dtype and dims (a constant's value kept) in `scratch`.
Val* standIn(Fusion& scratch, const Val* v) {
  if (v->isTensor()) return scratch.newTensor(v->dtype(), v->asTensor()->domain(), v->asTensor()->layout());
  return scratch.newScalar(v->dtype(), v->asScalar()->isConstant() ? v->asScalar()->value() : std::nullopt);
}

std::string kindOf(const Val* v) {
  return v->isTensor() ? fmt::format("a {} tensor of rank {}", toString(v->dtype()), v->asTensor()->rank())
                       : fmt::format("a {} scalar", toString(v->dtype()));
}

// What the builder of an elementwise op or a cast makes of stand-ins of `inputs`.
Val* rebuilt(Fusion& scratch, OpKind kind, const std::vector<Val*>& inputs, const Attributes& attrs) {
  std::vector<Val*> in;
  for (const Val* v : inputs) in.push_back(standIn(scratch, v));
  switch (opInfo(kind).category) {
    case OpCategory::Unary: return unaryOp(kind, in.at(0));
    case OpCategory::Binary: return binaryOp(kind, in.at(0), in.at(1));
    case OpCategory::Ternary:
      return kind == OpKind::Addcmul ? addcmul(in.at(0), in.at(1), in.at(2), in.at(3))
                                     : ternaryOp(kind, in.at(0), in.at(1), in.at(2));
    case OpCategory::Cast: return cast(in.at(0), attrs.getDataType("dtype"));
    default: return nullptr;
  }
}

}  // namespace

void checkResultsAsBuilt(OpKind kind, const std::vector<Val*>& inputs, const std::vector<Val*>& outputs,
                         const Attributes& attrs, const std::string& where) {
  if (isElementwise(kind)) {
    const Val* out = outputs.at(0);
    // Kernels index every tensor operand as the result: the builders broadcast them to its rank first.
    for (const Val* in : inputs) {
      BRAZE_CHECK(!in->isTensor() || !out->isTensor() || in->asTensor()->rank() == out->asTensor()->rank(),
                  "fusion json: {} reads {} ({}) into {} ({}): an elementwise op's tensors have its result's rank",
                  where, in->name(), kindOf(in), out->name(), kindOf(out));
    }
    Fusion scratch;
    const Val* want = nullptr;
    try {
      want = rebuilt(scratch, kind, inputs, attrs);
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("fusion json: {}: {}", where, e.what()));
    }
    BRAZE_CHECK(want != nullptr && want->isTensor() == out->isTensor() && want->dtype() == out->dtype() &&
                    (!out->isTensor() || want->asTensor()->rank() == out->asTensor()->rank()),
                "fusion json: {} gives {} as {}, where its operands make {}", where, out->name(), kindOf(out),
                want == nullptr ? "nothing" : kindOf(want));
    return;
  }
  if (isMetaOp(kind)) {
    // A view of one tensor; its other operands are the new sizes or bounds, integers.
    BRAZE_CHECK(!inputs.empty() && inputs[0]->isTensor(), "fusion json: {} views {}, which is no tensor", where,
                inputs.empty() ? std::string("nothing") : inputs[0]->name() + " (" + kindOf(inputs[0]) + ")");
    for (size_t i = 1; i < inputs.size(); ++i) {
      BRAZE_CHECK(inputs[i]->isScalar() && isIntegral(inputs[i]->dtype()),
                  "fusion json: {} reads {} ({}) as operand {}, a size or bound: an integer scalar", where,
                  inputs[i]->name(), kindOf(inputs[i]), i);
    }
    for (const Val* out : outputs) {
      BRAZE_CHECK(out->dtype() == inputs[0]->dtype(), "fusion json: {} gives {} as {}, a view of {} ({})", where,
                  out->name(), kindOf(out), inputs[0]->name(), kindOf(inputs[0]));
    }
  }
}

void checkEveryValueIsComputed(const Fusion& fusion) {
  // Fusion::addInput has refused an input listed twice or computed by an expr.
  const std::set<const Val*> inputs(fusion.inputs().begin(), fusion.inputs().end());
  const auto computed = [&](const Val* v) {
    return inputs.count(v) != 0 || v->definition() != nullptr || (v->isScalar() && v->asScalar()->isConstant());
  };
  for (const auto& e : fusion.allExprs()) {
    for (const Val* in : e->inputs()) {
      BRAZE_CHECK(computed(in), "fusion json: expr {} ({}) reads {}, which is neither an input, a constant nor "
                  "an expr's result", e->id(), opName(e->kind()), in->name());
    }
  }
  for (const Val* out : fusion.outputs()) {
    BRAZE_CHECK(computed(out), "fusion json: output {} is neither an input, a constant nor an expr's result",
                out->name());
  }
  for (const auto& v : fusion.vals()) {
    if (!v->isTensor() || !v->asTensor()->isCpu()) continue;
    BRAZE_CHECK(inputs.count(v.get()) != 0 && v->asTensor()->rank() == 0,
                "fusion json: {} has is_cpu (a CPU scalar), which only a 0-d fusion input may have ({})", v->name(),
                kindOf(v.get()));
  }
}

}  // namespace braze
