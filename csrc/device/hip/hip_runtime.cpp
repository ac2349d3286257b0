#include "device/hip/hip_runtime.h"

#include "support/error.h"
#include "device/hip/rocm_paths.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include <unistd.h>

namespace braze::device {
namespace {

std::vector<std::string> runtimeCandidates() {
  return rocmLibraryCandidates({"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"});
}

template <typename Fn>
bool resolve(const DynamicLibrary& library, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(library.symbol(name));
  return fn != nullptr;
}

struct Loaded {
  HipRuntime* api = nullptr;  // the library with every function resolved, initialized or not
  bool usable = false;        // hipInit succeeded and there is a device
  std::string reason;         // why not usable
};

// Never freed: outputs may be released from static destructors, as with the CUDA driver.
Loaded load() {
  Loaded loaded;
  // The HIP runtime reaches AMD GPUs through the amdgpu driver's /dev/kfd: without it there is no AMD GPU
  // to find, and loading libamdhip64 would only bring comgr's LLVM into the process (Ubuntu 24.04's ROCm
  // 5.7, beside an NVIDIA driver, crashed a Python process in LLVM's static initializers).
  if (::access("/dev/kfd", F_OK) != 0) {
    loaded.reason = "no /dev/kfd (the amdgpu kernel driver is not loaded): no AMD GPU";
    return loaded;
  }
  const std::vector<std::string> candidates = runtimeCandidates();
  std::optional<DynamicLibrary> library = DynamicLibrary::open(candidates);
  if (!library) {
    loaded.reason = fmt::format("libamdhip64 not found (looked for {})", fmt::join(candidates, ", "));
    return loaded;
  }
  auto* api = new HipRuntime{std::move(*library)};
  const DynamicLibrary& lib = api->library;
  const bool properties = resolve(lib, "hipGetDevicePropertiesR0600", api->getDeviceProperties) ||
                          resolve(lib, "hipGetDeviceProperties", api->getDeviceProperties);
  const bool complete =
      properties && resolve(lib, "hipInit", api->init) && resolve(lib, "hipGetDeviceCount", api->getDeviceCount) &&
      resolve(lib, "hipGetDevice", api->getDevice) && resolve(lib, "hipSetDevice", api->setDevice) &&
      resolve(lib, "hipRuntimeGetVersion", api->runtimeGetVersion) &&
      resolve(lib, "hipDeviceGetName", api->deviceGetName) &&
      resolve(lib, "hipDeviceGetAttribute", api->deviceGetAttribute) &&
      resolve(lib, "hipModuleLoadData", api->moduleLoadData) &&
      resolve(lib, "hipModuleGetFunction", api->moduleGetFunction) &&
      resolve(lib, "hipModuleLaunchKernel", api->moduleLaunchKernel) &&
      resolve(lib, "hipMallocAsync", api->mallocAsync) && resolve(lib, "hipFreeAsync", api->freeAsync) &&
      resolve(lib, "hipMemsetAsync", api->memsetAsync) && resolve(lib, "hipStreamSynchronize", api->streamSynchronize) &&
      resolve(lib, "hipDeviceSynchronize", api->deviceSynchronize) &&
      resolve(lib, "hipMemcpy", api->memcpy) && resolve(lib, "hipHostMalloc", api->hostMalloc) &&
      resolve(lib, "hipHostGetDevicePointer", api->hostGetDevicePointer) &&
      resolve(lib, "hipGetErrorName", api->getErrorName) && resolve(lib, "hipGetErrorString", api->getErrorString);
  if (!complete) {  // before ROCm 5.2 (no stream-ordered allocator)
    loaded.reason = fmt::format("{} lacks functions braze needs (ROCm 5.2 or newer is)", lib.path());
    delete api;
    return loaded;
  }
  resolve(lib, "hipStreamGetId", api->streamGetId);
  resolve(lib, "hipStreamIsCapturing", api->streamIsCapturing);
  loaded.api = api;
  // hipInit fails without a GPU, and also for a driver or /dev/kfd it cannot use: the reason names the call.
  if (const HipError initialized = api->init(0); initialized != kHipSuccess) {
    loaded.reason = fmt::format("{}: hipInit failed: {}", lib.path(), api->describe(initialized));
    return loaded;
  }
  int count = 0;
  if (const HipError counted = api->getDeviceCount(&count); counted != kHipSuccess || count == 0) {
    loaded.reason = counted != kHipSuccess
                        ? fmt::format("{}: hipGetDeviceCount failed: {}", lib.path(), api->describe(counted))
                        : fmt::format("{}: no AMD GPU (hipGetDeviceCount: 0)", lib.path());
    return loaded;
  }
  loaded.usable = true;
  return loaded;
}

const Loaded& loaded() {
  static const Loaded once = load();
  return once;
}

}  // namespace

std::string HipRuntime::describe(HipError result) const {
  return fmt::format("{} ({})", getErrorName(result), getErrorString(result));
}

void HipRuntime::check(HipError result, std::string_view call, std::string_view context) const {
  if (result == kHipSuccess) return;
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, false, "{} failed: {}{}", call, describe(result),
                   context.empty() ? std::string() : fmt::format(" ({})", context));
}

const HipRuntime* hipRuntime() { return loaded().usable ? loaded().api : nullptr; }

const HipRuntime& requireHipRuntime() {
  const HipRuntime* api = hipRuntime();
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, api != nullptr, "no HIP runtime: {}", hipUnavailableReason());
  return *api;
}

std::string hipUnavailableReason() { return loaded().usable ? "" : loaded().reason; }

std::string hipRuntimeVersion() {
  const HipRuntime* api = loaded().api;
  int version = 0;
  if (api == nullptr || api->runtimeGetVersion(&version) != kHipSuccess) return "";
  // HIP_VERSION: major * 10^7 + minor * 10^5 + patch.
  return fmt::format("{}.{}.{}", version / 10000000, version / 100000 % 100, version % 100000);
}

std::string hipRuntimeLibraryPath() {
  const HipRuntime* api = loaded().api;
  return api == nullptr ? std::string() : api->library.path();
}

}  // namespace braze::device
