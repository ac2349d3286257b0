#include "device/cuda/query_device.h"

#include "device/cuda/cuda_driver.h"
#include "device/tuning_from_env.h"
#include "support/error.h"

#include <utility>

namespace braze {
namespace {

// CU_DEVICE_ATTRIBUTE_* values from cuda.h; they are part of the driver's ABI and never renumbered.
enum Attribute : int {
  kMaxThreadsPerBlock = 1,           // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
  kWarpSize = 10,                    // CU_DEVICE_ATTRIBUTE_WARP_SIZE
  kMultiprocessorCount = 16,         // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  kMemoryClockRateKhz = 36,          // CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE (peak, kHz)
  kGlobalMemoryBusWidthBits = 37,    // CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH
  kL2CacheSize = 38,                 // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE (bytes)
  kMaxThreadsPerMultiprocessor = 39, // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
  kComputeCapabilityMajor = 75,      // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
  kComputeCapabilityMinor = 76,      // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
  kMaxSharedMemoryPerSm = 81,        // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
  kMaxRegistersPerSm = 82,           // CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR
  kMaxSharedMemoryPerBlockOptin = 97,  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
};

}  // namespace

std::optional<DeviceInfo> queryDevice(int ordinal) {
  using device::kCudaSuccess;
  const device::CudaDriver* api = device::cudaDriver();
  if (api == nullptr) return std::nullopt;
  int count = 0;
  if (api->deviceGetCount(&count) != kCudaSuccess || ordinal < 0 || ordinal >= count) return std::nullopt;
  device::CuDevice device = 0;
  if (api->deviceGet(&device, ordinal) != kCudaSuccess) return std::nullopt;

  auto attribute = [&](Attribute id, const char* what) {
    int value = 0;
    api->check(api->deviceGetAttribute(&value, id, device), fmt::format("cuDeviceGetAttribute({})", what),
               fmt::format("device {}", ordinal));
    return value;
  };
  DeviceInfo info;
  char name[256] = {};
  info.name = api->deviceGetName(name, sizeof(name) - 1, device) == kCudaSuccess ? name : "unknown CUDA device";
  info.major = attribute(kComputeCapabilityMajor, "COMPUTE_CAPABILITY_MAJOR");
  info.minor = attribute(kComputeCapabilityMinor, "COMPUTE_CAPABILITY_MINOR");
  info.sm_count = attribute(kMultiprocessorCount, "MULTIPROCESSOR_COUNT");
  info.warp_size = attribute(kWarpSize, "WARP_SIZE");
  info.max_threads_per_block = attribute(kMaxThreadsPerBlock, "MAX_THREADS_PER_BLOCK");
  info.max_threads_per_sm = attribute(kMaxThreadsPerMultiprocessor, "MAX_THREADS_PER_MULTIPROCESSOR");
  info.regs_per_sm = attribute(kMaxRegistersPerSm, "MAX_REGISTERS_PER_MULTIPROCESSOR");
  info.max_regs_per_thread = 255;  // no driver attribute; 255 on every arch since sm_35
  info.smem_per_sm = attribute(kMaxSharedMemoryPerSm, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR");
  info.smem_per_block_optin = attribute(kMaxSharedMemoryPerBlockOptin, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
  info.l2_bytes = attribute(kL2CacheSize, "L2_CACHE_SIZE");
  // Double data rate: two transfers per memory clock, each as wide as the bus.
  const double clock_hz = 1e3 * attribute(kMemoryClockRateKhz, "MEMORY_CLOCK_RATE");
  const double bus_bytes = attribute(kGlobalMemoryBusWidthBits, "GLOBAL_MEMORY_BUS_WIDTH") / 8.0;
  info.memory_bandwidth_gbs = 2.0 * clock_hz * bus_bytes / 1e9;
  return withTuningFromEnv(std::move(info));
}

}  // namespace braze
