#include "ir/verifier.h"

#include "support/error.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <unordered_set>

namespace braze {
namespace {

// "add -> T5": how a broken invariant names an expr.
std::string label(const Expr& e) {
  return e.outputs().empty() ? std::string(e.name()) : fmt::format("{} -> {}", e.name(), e.outputs()[0]->name());
}

}  // namespace

void verifyFusion(const Fusion& fusion) {
  std::unordered_set<const Val*> vals;
  for (const auto& v : fusion.vals()) {
    BRAZE_ASSERT(v->fusion() == &fusion, "{} belongs to another fusion", v->name());
    BRAZE_ASSERT(v->dtype() != DataType::Null, "{} has no dtype", v->name());
    vals.insert(v.get());
    if (v->isTensor()) {
      const TensorView* t = const_cast<Val*>(v.get())->asTensor();
      const TensorLayout& layout = t->layout();
      BRAZE_ASSERT(layout.contiguity.empty() || static_cast<int64_t>(layout.contiguity.size()) == t->rank(),
                   "{} has rank {} but {} contiguity flags", t->name(), t->rank(), layout.contiguity.size());
      BRAZE_ASSERT(layout.stride_order.empty() || static_cast<int64_t>(layout.stride_order.size()) == t->rank(),
                   "{} has rank {} but a stride order of {}", t->name(), t->rank(), layout.stride_order.size());
    }
  }
  for (const auto& e : fusion.allExprs()) {
    for (const Val* in : e->inputs()) {
      BRAZE_ASSERT(vals.count(in) != 0, "{} reads {}, which is not in the fusion", label(*e), in->name());
      BRAZE_ASSERT(std::count(in->uses().begin(), in->uses().end(), e.get()) != 0,
                   "{} reads {}, which does not list it among its uses", label(*e), in->name());
    }
    for (const Val* out : e->outputs()) {
      BRAZE_ASSERT(vals.count(out) != 0, "{} writes {}, which is not in the fusion", label(*e), out->name());
      BRAZE_ASSERT(out->definition() == e.get(), "{} writes {}, whose definition is another expr", label(*e),
                   out->name());
    }
  }
  for (const Val* in : fusion.inputs()) {
    BRAZE_ASSERT(vals.count(in) != 0, "input {} is not in the fusion", in->name());
    BRAZE_ASSERT(in->definition() == nullptr, "input {} has a definition", in->name());
  }
  for (const Val* out : fusion.outputs()) BRAZE_ASSERT(vals.count(out) != 0, "output {} is not in the fusion", out->name());
  // The order to evaluate: each operand is an input, a definition-less scalar, or defined earlier.
  std::unordered_set<const Val*> defined(fusion.inputs().begin(), fusion.inputs().end());
  for (const Expr* e : fusion.exprsToEvaluate()) {
    for (const Val* in : e->inputs()) {
      BRAZE_ASSERT(defined.count(in) != 0 || (in->isScalar() && in->definition() == nullptr),
                   "{} reads {} before anything defines it", label(*e), in->name());
    }
    defined.insert(e->outputs().begin(), e->outputs().end());
  }
  for (const auto& [out, in] : fusion.outputAliases()) {
    BRAZE_ASSERT(fusion.isOutput(out) && fusion.isInput(in), "alias {} -> {}: not an output and an input",
                 out->name(), in->name());
    BRAZE_ASSERT(out->isTensor() && in->isTensor() && out->dtype() == in->dtype() &&
                     out->asTensor()->rank() == in->asTensor()->rank(),
                 "output {} is written into input {} of another dtype or rank", out->name(), in->name());
  }
}

bool verifiersEnabled() {
#ifndef NDEBUG
  return true;
#else
  static const bool enabled = [] {
    const char* env = std::getenv("BRAZE_VERIFY");
    return env != nullptr && std::string_view(env) == "1";
  }();
  return enabled;
#endif
}

}  // namespace braze
