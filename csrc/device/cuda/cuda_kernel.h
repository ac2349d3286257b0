// Generated CUDA source to a launched kernel: compiled with NVRTC for the device's arch (through the
// kernel cache: memory, then disk, then NVRTC), loaded into the current context with cuModuleLoadData,
// and launched with cuLaunchKernel. Loaded functions are kept for the life of the process, so a plan
// run twice compiles and loads once.
#pragma once

#include "device/cuda/cuda_driver.h"
#include "device/device_handles.h"
#include "device/parallel_compile.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace braze::device {

// The extern "C" kernel of each job (its `name`), compiled with its options and loaded into device
// `ordinal`'s primary context (made current). Kernels not loaded before are compiled in parallel
// (compileAll: a compile error names its kernel and carries NVRTC's log), then loaded in order.
std::vector<CuFunction> loadCudaKernels(const std::vector<CompileJob>& jobs, int ordinal = 0);
CuFunction loadCudaKernel(const std::string& source, const std::string& name, const CompileOptions& options,
                          int ordinal = 0);

// Waits for the device; a fault of a kernel launched before shows here, named after `what`.
void synchronizeDevice(const std::string& what);

}  // namespace braze::device
