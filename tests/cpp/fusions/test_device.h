// The device the kernel tests run on, chosen by one switch: BRAZE_TEST_DEVICE=sim (the simulated
// device: host memory, kernels run by the CPU simulator), cuda (the GPU through the driver) or hip (an
// AMD GPU through the HIP runtime); by default cuda where a GPU and NVRTC are present, else sim. Every test that runs kernels goes through
// the FusionCache and PreparedPlan on it, so the GPU suite is these tests, not a copy of them.
#pragma once

#include "ir/host_tensor.h"
#include "device/device_ops.h"
#include "device/device_tensor.h"
#include "exec/fusion_cache.h"
#include "target/device_info.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braze::testing {

class TestDevice {
 public:
  virtual ~TestDevice() = default;
  virtual std::string name() const = 0;  // "sim", "cuda" or "hip"
  virtual device::DeviceOps& ops() = 0;
  // What plans target: `simulated` on the simulated device (a described GPU), the GPU itself on cuda.
  virtual DeviceInfo plannedFor(const DeviceInfo& simulated) const = 0;
  // Inputs copied into the device's memory, each first element at its host address modulo 256 (plans
  // depend on alignment); `keep` holds the memory.
  struct Placed {
    std::vector<device::DeviceValue> values;
    std::vector<std::shared_ptr<void>> keep;
  };
  virtual Placed place(const std::vector<HostValue>& inputs) = 0;
  // A device tensor as a new row-major host tensor, once the device's queued work is done.
  virtual HostTensor fetch(const device::DeviceTensor& t) = 0;
};

// The switch's device; throws (a test failure) when BRAZE_TEST_DEVICE=cuda names a GPU that is not there.
TestDevice& testDevice();
bool testDeviceIsGpu();

// A FusionCache on the test device for `fusion`, planning for `simulated` when the device is simulated.
std::unique_ptr<exec::FusionCache> testFusionCache(std::shared_ptr<const Fusion> fusion, const PlanOptions& options,
                                                      const DeviceInfo& simulated = DeviceInfo::h100Sxm());

// Runs host inputs through `cache` (made by testFusionCache) on the test device and waits: outputs as
// host tensors (scalars as they are).
std::vector<HostValue> runOnTestDevice(exec::FusionCache& cache, const std::vector<HostValue>& inputs);

// One kernel launched on the test device as a prepared plan launches it (tensors in device memory,
// arguments packed as 8-byte words, the kernel's own grid and arguments); tensors[i] binds to
// kernel.tensors[i] and is copied back after the launch.
void launchOnTestDevice(const kernel::Kernel& kernel, const std::vector<HostTensor*>& tensors);

}  // namespace braze::testing
