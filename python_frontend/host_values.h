// Host values across the Python boundary: HostTensor objects and Python numbers in, the same out.
// Shared by plain evaluation (bind_execute.cpp) and planned execution (bind_plan.cpp).
#pragma once

#include "ir/host_tensor.h"

#include <nanobind/nanobind.h>

#include <vector>

namespace braze::python {

// Input `index` of an execute: a HostTensor (wrapped numpy memory) or a bool/int/float.
HostValue hostValueFromPython(nanobind::handle item, size_t index);
nanobind::list hostValuesToPython(std::vector<HostValue> values);

}  // namespace braze::python
