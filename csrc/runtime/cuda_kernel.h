// Generated CUDA source to a launched kernel: compiled with NVRTC for the device's arch, loaded into
// the current context with cuModuleLoadData, and launched with cuLaunchKernel. Loaded kernels are
// cached in memory by (arch, source) for the life of the process, so a plan run twice compiles once;
// the disk cache and FusionCache come later.
#pragma once

#include "runtime/cuda_driver.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace braze::runtime {

// The extern "C" kernel `name` of `source`, compiled for `arch` ("sm_90") and loaded into device
// `ordinal`'s primary context (made current). Compile errors carry NVRTC's log (see compileCuda).
CuFunction loadCudaKernel(const std::string& source, const std::string& name, const std::string& arch,
                          int ordinal = 0);

struct LaunchShape {
  std::array<int64_t, 2> grid{1, 1};
  std::array<int64_t, 2> block{1, 1};
  int64_t shared_bytes = 0;  // dynamic shared memory per block
};

// Launches `function` on `stream` (default: the legacy default stream) with `args` (one pointer per kernel parameter, each
// pointing at the parameter's value) and does not wait. Above 48 KiB of dynamic shared memory the
// function's limit is raised first, as the driver requires. `name` is for error messages.
void launchCudaKernel(CuFunction function, const std::string& name, const LaunchShape& shape,
                      std::vector<void*>& args, CuStream stream = nullptr);

// Waits for the device; a fault of a kernel launched before shows here, named after `what`.
void synchronizeDevice(const std::string& what);

}  // namespace braze::runtime
