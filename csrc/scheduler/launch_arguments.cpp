#include "scheduler/launch_arguments.h"

#include <algorithm>

namespace braze::scheduler {
namespace {

bool readAsValue(const Expr& use, const Val* scalar);

// A scalar read only as a value, itself or through casts to an op's compute type (which kernels do).
bool readOnlyAsValue(const Val* scalar) {
  if (scalar->isFusionOutput()) return false;
  return std::all_of(scalar->uses().begin(), scalar->uses().end(), [&](const Expr* use) { return readAsValue(*use, scalar); });
}

bool readAsValue(const Expr& use, const Val* scalar) {
  if (use.kind() == OpKind::CastOp && use.output(0)->isScalar()) return readOnlyAsValue(use.output(0));
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
    launch_argument.push_back(in->isScalar() && readOnlyAsValue(in));
  }
  return launch_argument;
}

}  // namespace braze::scheduler
