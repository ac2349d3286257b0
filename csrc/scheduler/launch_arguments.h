// Which scalar inputs of a fusion reach its kernels only as launch arguments. Lowering makes every scalar
// input that an elementwise or random op reads as a value a kernel argument (ValueBuilder::scalar), so a
// new value of such an input needs no new plan: a prepared plan passes each run's value. A scalar that
// sizes a tensor, feeds a scalar expression (whose value the source holds as a literal) or is itself an
// output is part of what a plan is made for.
#pragma once

#include "ir/fusion.h"

#include <vector>

namespace braze::scheduler {

// Per fusion input: true for a scalar read only as a value by elementwise ops with tensor results and by
// uniform and normal (their bounds, seed and offset, not their shape), directly or through scalar casts
// (a Double input beside a Float tensor is cast to float first: the kernel casts the argument).
std::vector<bool> launchArgumentInputs(const Fusion& fusion);

}  // namespace braze::scheduler
