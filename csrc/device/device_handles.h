// The handles DeviceOps speaks in, the same for every backend: an address in the device's memory (a
// CUdeviceptr on a CUDA GPU, a hipDeviceptr_t on an AMD one, a host address on the simulated device),
// an opaque stream (CUstream, hipStream_t, or a queue of the simulated device), an opaque loaded kernel,
// and a launch's shape.
#pragma once

#include <array>
#include <cstdint>

namespace braze::device {

using DevicePtr = unsigned long long;
using StreamHandle = struct StreamOpaque*;
using KernelHandle = struct KernelOpaque*;

struct LaunchShape {
  std::array<int64_t, 2> grid{1, 1};
  std::array<int64_t, 2> block{1, 1};
  int64_t shared_bytes = 0;  // dynamic shared memory per block
};

}  // namespace braze::device
