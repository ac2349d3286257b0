// Checks execute-time inputs against a fusion's definitions before anything runs, so a mistake is
// reported as "input 1: expected BFloat16, got Float" rather than as a wrong answer or a crash.
#pragma once

#include "ir/fusion.h"
#include "ir/host_tensor.h"

#include <vector>

namespace braze {

// Count, tensor-vs-scalar, dtype, rank, static extents, broadcast (size-1) and expanded (stride-0)
// dims, and declared contiguity in the declared stride order.
void checkInputs(const Fusion& fusion, const std::vector<HostValue>& inputs);
// Input `index` (def) is a Bool scalar: it takes True, False, 0 or 1 (a kernel would take 2 as true, the
// reference as 2). Also checked on every run of a plan the value does not select (a launch argument).
void checkBoolScalarInput(size_t index, const Val* def, const ScalarValue& value);

}  // namespace braze
