#include "device/hip/query_hip_device.h"

#include "device/hip/hip_runtime.h"
#include "device/tuning_from_env.h"

#include <cctype>
#include <utility>
#include <vector>

namespace braze {
namespace {

// hipDeviceAttribute_t values of HIP's headers (hip_runtime_api.h; ROCm 5 and 6 number the
// CUDA-compatible attributes alike).
enum Attribute : int {
  kL2CacheSize = 19,
  kMaxThreadsPerMultiProcessor = 57,
  kMemoryBusWidth = 59,
  kMemoryClockRate = 60,  // kHz
  kMultiprocessorCount = 63,
  kMaxSharedMemoryPerBlock = 74,
  kWarpSize = 87,
};

}  // namespace

std::string gfxArchIn(std::string_view properties) {
  for (size_t at = properties.find("gfx"); at != std::string_view::npos; at = properties.find("gfx", at + 1)) {
    size_t end = at + 3;
    while (end < properties.size() && std::isalnum(static_cast<unsigned char>(properties[end]))) ++end;
    // An ISA name has a digit after "gfx" and ends the string or a ':' feature list.
    const bool ends = end == properties.size() || properties[end] == '\0' || properties[end] == ':';
    if (end > at + 3 && std::isdigit(static_cast<unsigned char>(properties[at + 3])) && ends) {
      return std::string(properties.substr(at, end - at));
    }
  }
  return "";
}

DeviceInfo amdPresetFor(const std::string& gfx_arch, int cus) {
  DeviceInfo info = gfx_arch.starts_with("gfx94") ? DeviceInfo::mi300x()
                    : cus == DeviceInfo::mi210().sm_count ? DeviceInfo::mi210()
                                                          : DeviceInfo::mi250x();
  info.gfx_arch = gfx_arch;
  return info;
}

std::optional<DeviceInfo> queryHipDevice(int ordinal) {
  using device::kHipSuccess;
  const device::HipRuntime* api = device::hipRuntime();
  if (api == nullptr) return std::nullopt;
  int count = 0;
  if (api->getDeviceCount(&count) != kHipSuccess || ordinal < 0 || ordinal >= count) return std::nullopt;
  std::vector<char> properties(16384, '\0');  // larger than any release's hipDeviceProp_t
  if (api->getDeviceProperties(properties.data(), ordinal) != kHipSuccess) return std::nullopt;
  const std::string arch = gfxArchIn(std::string_view(properties.data(), properties.size()));
  if (arch.empty()) return std::nullopt;
  auto attribute = [&](Attribute id, int64_t fallback, int64_t lo, int64_t hi) -> int64_t {
    int value = 0;
    if (api->deviceGetAttribute(&value, id, ordinal) != kHipSuccess || value < lo || value > hi) return fallback;
    return value;
  };
  const int cus = static_cast<int>(attribute(kMultiprocessorCount, 0, 1, 4096));
  DeviceInfo info = amdPresetFor(arch, cus);
  char name[256] = {};
  if (api->deviceGetName(name, sizeof(name) - 1, ordinal) == kHipSuccess && name[0] != '\0') info.name = name;
  if (cus > 0) info.sm_count = cus;
  info.warp_size = static_cast<int>(attribute(kWarpSize, info.warp_size, 32, 64));
  info.max_threads_per_sm = static_cast<int>(attribute(kMaxThreadsPerMultiProcessor, info.max_threads_per_sm, 256, 4096));
  info.smem_per_block_optin = attribute(kMaxSharedMemoryPerBlock, info.smem_per_block_optin, 16 * 1024, 1 << 20);
  info.l2_bytes = attribute(kL2CacheSize, info.l2_bytes, 1 << 20, int64_t{1} << 30);
  const int64_t clock_khz = attribute(kMemoryClockRate, 0, 100'000, 10'000'000);
  const int64_t bus_bits = attribute(kMemoryBusWidth, 0, 64, 65536);
  // Double data rate, as for NVIDIA's HBM: two transfers per clock, each as wide as the bus.
  if (clock_khz > 0 && bus_bits > 0) info.memory_bandwidth_gbs = 2.0 * 1e3 * clock_khz * (bus_bits / 8.0) / 1e9;
  return withTuningFromEnv(std::move(info));
}

}  // namespace braze
