// The braze._C module is assembled from one bind function per concept; module.cpp calls them in
// order. Each file binds the C++ API thinly: argument conversion and nvFuser naming live in the
// pure-Python package (python_frontend/braze/), so the C++ side stays a mirror of csrc/ir.
#pragma once

#include "target/device_info.h"

#include <nanobind/nanobind.h>

#include <string>

namespace braze::python {

void bindErrors(nanobind::module_& m);   // braze::Error kinds -> ValueError / TypeError / ...
void bindIr(nanobind::module_& m);       // DataType, Fusion, Val handles, FusionGuard, definitions
void bindOps(nanobind::module_& m);      // the op builders of ir/ops.h
void bindExecute(nanobind::module_& m);  // host evaluation through the reference evaluator
void bindPlan(nanobind::module_& m);     // fd.explain's Plan, and planning for a named GPU
void bindGpu(nanobind::module_& m);      // the FusionCache: GPU tensors through DLPack, host arrays simulated
void bindFastMethod(nanobind::module_& m);  // FusionDefinition.execute's cached torch path, in C

// A described GPU by name (h100, h200, a100, l4), or an error naming the choices.
DeviceInfo deviceNamed(const std::string& name);

}  // namespace braze::python
