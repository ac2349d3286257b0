#include "scheduler/launch_arguments.h"

namespace braze::scheduler {
namespace {

bool readAsValue(const Expr& use, const Val* scalar) {
  if (isElementwise(use.kind())) return use.output(0)->isTensor();
  if (use.kind() != OpKind::Uniform && use.kind() != OpKind::Normal) return false;
  // uniform(low, high, seed, offset, shape...): the shape's entries size the result.
  for (size_t i = 4; i < use.inputs().size(); ++i) {
    if (use.input(i) == scalar) return false;
  }
  return true;
}

}  // namespace

std::vector<bool> launchArgumentInputs(const Fusion& fusion) {
  std::vector<bool> launch_argument;
  launch_argument.reserve(fusion.inputs().size());
  for (const Val* in : fusion.inputs()) {
    bool value_only = in->isScalar() && !fusion.isOutput(in);
    for (size_t u = 0; value_only && u < in->uses().size(); ++u) value_only = readAsValue(*in->uses()[u], in);
    launch_argument.push_back(value_only);
  }
  return launch_argument;
}

}  // namespace braze::scheduler
