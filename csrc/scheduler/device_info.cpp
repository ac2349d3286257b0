#include "scheduler/device_info.h"

#include "ir/error.h"
#include "runtime/cuda_driver.h"

#include <cctype>

namespace braze {

std::string DeviceInfo::arch() const { return fmt::format("sm_{}{}", major, minor); }

std::string DeviceInfo::toString() const {
  return fmt::format("{} ({}, {} SMs, {} threads/SM, {} KiB smem/SM, {} KiB smem/block opt-in, {} MiB L2, {:.0f} GB/s)",
                     name, arch(), sm_count, max_threads_per_sm, smem_per_sm / 1024, smem_per_block_optin / 1024,
                     l2_bytes / (1024 * 1024), memory_bandwidth_gbs);
}

DeviceInfo DeviceInfo::h100Sxm() { return DeviceInfo{}; }  // the defaults

DeviceInfo DeviceInfo::h200() {
  // 132 SMs like the H100 SXM, but more of GH100's L2 enabled: the driver reports 60 MiB, not 50
  // (read on an H200, driver 580). 141 GB of HBM3e at a published 4.8 TB/s (4814 from clock and bus).
  DeviceInfo info;
  info.name = "NVIDIA H200";
  info.l2_bytes = 60 * 1024 * 1024;
  info.memory_bandwidth_gbs = 4800;
  return info;
}

DeviceInfo DeviceInfo::a100() {
  DeviceInfo info;
  info.name = "NVIDIA A100-SXM4-80GB";
  info.major = 8;
  info.minor = 0;
  info.sm_count = 108;
  info.smem_per_sm = 164 * 1024;
  info.smem_per_block_optin = 163 * 1024;
  info.l2_bytes = 40 * 1024 * 1024;
  info.memory_bandwidth_gbs = 2039;
  return info;
}

DeviceInfo DeviceInfo::l4() {
  DeviceInfo info;
  info.name = "NVIDIA L4";
  info.major = 8;
  info.minor = 9;
  info.sm_count = 58;
  info.max_threads_per_sm = 1536;  // sm_89 keeps 48 warps per SM, not sm_80/sm_90's 64
  info.smem_per_sm = 100 * 1024;
  info.smem_per_block_optin = 99 * 1024;
  info.l2_bytes = 48 * 1024 * 1024;
  info.memory_bandwidth_gbs = 300;  // GDDR6: an L4 is bandwidth-poor, which shifts the heuristics
  return info;
}

std::optional<DeviceInfo> DeviceInfo::preset(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "h100") return h100Sxm();
  if (lower == "h200") return h200();
  if (lower == "a100") return a100();
  if (lower == "l4") return l4();
  return std::nullopt;
}

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
  using runtime::kCudaSuccess;
  const runtime::CudaDriver* api = runtime::cudaDriver();
  if (api == nullptr) return std::nullopt;
  int count = 0;
  if (api->deviceGetCount(&count) != kCudaSuccess || ordinal < 0 || ordinal >= count) return std::nullopt;
  runtime::CuDevice device = 0;
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
  return info;
}

}  // namespace braze
