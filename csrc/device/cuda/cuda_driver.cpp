#include "device/cuda/cuda_driver.h"

#include "support/error.h"
#include "support/dynamic_library.h"

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>

namespace braze::device {

// The layout of CUDA_KERNEL_NODE_PARAMS_v2 in cuda.h (x86-64 and aarch64).
static_assert(offsetof(CuKernelNodeParams, params) == 40 && sizeof(CuKernelNodeParams) == 72);

namespace {

const std::string kDriverNames[] = {"libcuda.so.1", "libcuda.so"};

template <typename Fn>
bool resolve(const DynamicLibrary& library, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(library.symbol(name));
  return fn != nullptr;
}

struct LoadedDriver {
  std::optional<DynamicLibrary> library;
  CudaDriver api;
  bool usable = false;
  std::string reason;  // why it is not usable
};

// Resolves every function first, so a driver too old for one of them is reported as such instead of
// crashing on a null pointer at the first launch.
bool resolveAll(const DynamicLibrary& lib, CudaDriver& api, std::string& missing) {
  const std::pair<const char*, bool> found[] = {
      {"cuInit", resolve(lib, "cuInit", api.init)},
      {"cuDeviceGetCount", resolve(lib, "cuDeviceGetCount", api.deviceGetCount)},
      {"cuDeviceGet", resolve(lib, "cuDeviceGet", api.deviceGet)},
      {"cuDeviceGetName", resolve(lib, "cuDeviceGetName", api.deviceGetName)},
      {"cuDeviceGetAttribute", resolve(lib, "cuDeviceGetAttribute", api.deviceGetAttribute)},
      {"cuDevicePrimaryCtxRetain", resolve(lib, "cuDevicePrimaryCtxRetain", api.devicePrimaryCtxRetain)},
      {"cuCtxSetCurrent", resolve(lib, "cuCtxSetCurrent", api.ctxSetCurrent)},
      {"cuCtxSynchronize", resolve(lib, "cuCtxSynchronize", api.ctxSynchronize)},
      {"cuCtxGetCurrent", resolve(lib, "cuCtxGetCurrent", api.ctxGetCurrent)},
      {"cuCtxPushCurrent_v2", resolve(lib, "cuCtxPushCurrent_v2", api.ctxPushCurrent)},
      {"cuCtxPopCurrent_v2", resolve(lib, "cuCtxPopCurrent_v2", api.ctxPopCurrent)},
      {"cuModuleLoadData", resolve(lib, "cuModuleLoadData", api.moduleLoadData)},
      {"cuModuleGetFunction", resolve(lib, "cuModuleGetFunction", api.moduleGetFunction)},
      {"cuFuncSetAttribute", resolve(lib, "cuFuncSetAttribute", api.funcSetAttribute)},
      {"cuLaunchKernel", resolve(lib, "cuLaunchKernel", api.launchKernel)},
      {"cuMemAlloc_v2", resolve(lib, "cuMemAlloc_v2", api.memAlloc)},
      {"cuMemFree_v2", resolve(lib, "cuMemFree_v2", api.memFree)},
      {"cuMemcpyHtoD_v2", resolve(lib, "cuMemcpyHtoD_v2", api.memcpyHtoD)},
      {"cuMemcpyDtoH_v2", resolve(lib, "cuMemcpyDtoH_v2", api.memcpyDtoH)},
      {"cuMemsetD8_v2", resolve(lib, "cuMemsetD8_v2", api.memsetD8)},
      {"cuMemHostAlloc", resolve(lib, "cuMemHostAlloc", api.memHostAlloc)},
      {"cuMemHostGetDevicePointer_v2", resolve(lib, "cuMemHostGetDevicePointer_v2", api.memHostGetDevicePointer)},
      {"cuMemAllocAsync", resolve(lib, "cuMemAllocAsync", api.memAllocAsync)},
      {"cuMemFreeAsync", resolve(lib, "cuMemFreeAsync", api.memFreeAsync)},
      {"cuMemsetD8Async", resolve(lib, "cuMemsetD8Async", api.memsetD8Async)},
      {"cuStreamSynchronize", resolve(lib, "cuStreamSynchronize", api.streamSynchronize)},
      {"cuDeviceGetDefaultMemPool", resolve(lib, "cuDeviceGetDefaultMemPool", api.deviceGetDefaultMemPool)},
      {"cuMemPoolSetAttribute", resolve(lib, "cuMemPoolSetAttribute", api.memPoolSetAttribute)},
      {"cuGetErrorName", resolve(lib, "cuGetErrorName", api.getErrorName)},
      {"cuGetErrorString", resolve(lib, "cuGetErrorString", api.getErrorString)},
  };
  for (const auto& [name, ok] : found) {
    if (!ok) missing += missing.empty() ? name : fmt::format(", {}", name);
  }
  return missing.empty();
}

LoadedDriver* loadDriver() {
  // Never freed: kernel caches and device buffers may be released from static destructors, after a
  // function-local static holding the library would already be gone.
  auto* loaded = new LoadedDriver;
  loaded->library = DynamicLibrary::open(kDriverNames);
  if (!loaded->library) {
    loaded->reason = fmt::format("no CUDA driver found; host inputs run on the CPU simulator (looked for {})",
                                 fmt::join(kDriverNames, ", "));
    return loaded;
  }
  CudaDriver& api = loaded->api;
  std::string missing;
  if (!resolveAll(*loaded->library, api, missing)) {
    loaded->reason = fmt::format("the CUDA driver {} lacks {}; host inputs run on the CPU simulator",
                                 loaded->library->path(), missing);
    return loaded;
  }
  // Optional: graphs (cuGraphInstantiate is cuGraphInstantiateWithFlags in cuda.h since CUDA 12).
  resolve(*loaded->library, "cuGraphCreate", api.graphCreate);
  resolve(*loaded->library, "cuGraphAddKernelNode_v2", api.graphAddKernelNode);
  resolve(*loaded->library, "cuGraphInstantiateWithFlags", api.graphInstantiate);
  resolve(*loaded->library, "cuGraphExecKernelNodeSetParams_v2", api.graphExecKernelNodeSetParams);
  resolve(*loaded->library, "cuGraphLaunch", api.graphLaunch);
  resolve(*loaded->library, "cuGraphExecDestroy", api.graphExecDestroy);
  resolve(*loaded->library, "cuGraphDestroy", api.graphDestroy);
  resolve(*loaded->library, "cuStreamIsCapturing", api.streamIsCapturing);
  resolve(*loaded->library, "cuStreamGetId", api.streamGetId);
  resolve(*loaded->library, "cuDriverGetVersion", api.driverGetVersion);
  resolve(*loaded->library, "cuTensorMapEncodeTiled", api.tensorMapEncodeTiled);
  // cuInit fails with CUDA_ERROR_NO_DEVICE where libcuda is mounted but no GPU is (CI containers).
  if (const CuResult result = api.init(0); result != kCudaSuccess) {
    loaded->reason = fmt::format("cuInit failed: {}; host inputs run on the CPU simulator", api.errorText(result));
    return loaded;
  }
  int count = 0;
  if (const CuResult result = api.deviceGetCount(&count); result != kCudaSuccess || count == 0) {
    loaded->reason = fmt::format("the CUDA driver sees no device ({}); host inputs run on the CPU simulator",
                                 result == kCudaSuccess ? "0 devices" : api.errorText(result));
    return loaded;
  }
  loaded->usable = true;
  return loaded;
}

// Loaded once per process; C++ makes the first call's initialization thread-safe.
const LoadedDriver& loaded() {
  static const LoadedDriver* driver = loadDriver();
  return *driver;
}

}  // namespace

std::string CudaDriver::errorText(CuResult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (getErrorName == nullptr || getErrorName(result, &name) != kCudaSuccess || name == nullptr) {
    return fmt::format("CUresult {}", result);
  }
  if (getErrorString(result, &text) != kCudaSuccess || text == nullptr) return name;
  return fmt::format("{} ({})", name, text);
}

void CudaDriver::check(CuResult result, std::string_view call, std::string_view context) const {
  if (result == kCudaSuccess) return;
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, false, "{} failed: {}{}", call, errorText(result),
                   context.empty() ? std::string() : fmt::format(" ({})", context));
}

const CudaDriver* cudaDriver() {
  const LoadedDriver& driver = loaded();
  return driver.usable ? &driver.api : nullptr;
}

bool cudaAvailable() { return cudaDriver() != nullptr; }

const std::string& cudaUnavailableReason() { return loaded().reason; }

std::string cudaDriverLibraryPath() {
  const LoadedDriver& driver = loaded();
  return driver.library ? driver.library->path() : std::string();
}

std::string cudaDriverVersion() {
  const CudaDriver* driver = cudaDriver();
  int version = 0;
  if (driver == nullptr || driver->driverGetVersion == nullptr || driver->driverGetVersion(&version) != kCudaSuccess) {
    return "";
  }
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

const CudaDriver& requireCudaDriver() {
  const CudaDriver* driver = cudaDriver();
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, driver != nullptr, "{}", cudaUnavailableReason());
  return *driver;
}

CuContext primaryContext(int ordinal) {
  const CudaDriver& driver = requireCudaDriver();
  // Retained once per device and never released: the primary context lives as long as the process,
  // and releasing it while cached modules still point into it would invalidate them.
  static std::mutex mutex;
  static std::map<int, CuContext> contexts;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = contexts.find(ordinal);
  if (it == contexts.end()) {
    CuDevice device = 0;
    CuContext context = nullptr;
    driver.check(driver.deviceGet(&device, ordinal), "cuDeviceGet", fmt::format("device {}", ordinal));
    driver.check(driver.devicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain",
                 fmt::format("device {}", ordinal));
    it = contexts.emplace(ordinal, context).first;
  }
  return it->second;
}

const CudaDriver& useDevice(int ordinal) {
  const CudaDriver& driver = requireCudaDriver();
  driver.check(driver.ctxSetCurrent(primaryContext(ordinal)), "cuCtxSetCurrent", fmt::format("device {}", ordinal));
  return driver;
}

}  // namespace braze::device
