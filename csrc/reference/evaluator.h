// The CPU reference evaluator: the oracle every later stage is compared with. It evaluates a fusion
// op by op on host tensors of any layout, in float64 for floating math (rounded to each result's
// dtype, as CUDA rounds) and exactly, with C++ wrap-around, for integers. Simple, not fast.
#pragma once

#include "ir/fusion.h"
#include "reference/host_tensor.h"

#include <vector>

namespace braze {

// Checks the inputs against the fusion's definitions (count, kind, dtype, rank, static extents,
// broadcast dims), evaluates, and returns the outputs in order. Outputs that alias an input (declared
// with aliasOutputToInput) are written into that input and, like nvFuser, not returned.
// Outputs are row-major, except outputs that are fusion inputs, which are returned as given.
std::vector<HostValue> evaluate(const Fusion& fusion, const std::vector<HostValue>& inputs);

}  // namespace braze
