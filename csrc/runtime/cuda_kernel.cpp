#include "runtime/cuda_kernel.h"

#include "ir/error.h"
#include "runtime/nvrtc.h"

#include <limits>
#include <map>
#include <mutex>
#include <tuple>

namespace braze::runtime {
namespace {

// Without opting in, a block may have at most 48 KiB of dynamic shared memory on every arch.
constexpr int64_t kDefaultDynamicSharedLimit = 48 * 1024;

using CacheKey = std::tuple<int, std::string, std::string, std::string>;  // ordinal, arch, name, source

// Modules are never unloaded: a cached function must stay valid for as long as the process may
// launch it, and the primary context they live in is never released either.
struct KernelCache {
  std::mutex mutex;
  std::map<CacheKey, CuFunction> functions;
};

KernelCache& cache() {
  static auto* kernels = new KernelCache;  // never destroyed, like the driver it points into
  return *kernels;
}

unsigned launchDim(int64_t value, const std::string& name, const char* what) {
  BRAZE_ASSERT(value > 0 && value <= std::numeric_limits<unsigned>::max(), "kernel {}: {} of {} cannot be launched",
               name, what, value);
  return static_cast<unsigned>(value);
}

}  // namespace

CuFunction loadCudaKernel(const std::string& source, const std::string& name, const std::string& arch, int ordinal) {
  const CudaDriver& driver = useDevice(ordinal);
  KernelCache& kernels = cache();
  CacheKey key{ordinal, arch, name, source};
  {
    std::lock_guard<std::mutex> lock(kernels.mutex);
    if (auto it = kernels.functions.find(key); it != kernels.functions.end()) return it->second;
  }
  // Compiled outside the lock: NVRTC takes tens of milliseconds, and two threads compiling the same
  // kernel at once only waste one compile (the second result is dropped below).
  const CompiledKernel compiled = compileCuda(source, name, {.arch = arch});
  CuModule module = nullptr;
  driver.check(driver.moduleLoadData(&module, compiled.cubin.data()), "cuModuleLoadData",
               fmt::format("kernel {} for {}", name, arch));
  CuFunction function = nullptr;
  driver.check(driver.moduleGetFunction(&function, module, name.c_str()), "cuModuleGetFunction",
               fmt::format("kernel {}", name));
  std::lock_guard<std::mutex> lock(kernels.mutex);
  return kernels.functions.emplace(std::move(key), function).first->second;
}

void launchCudaKernel(CuFunction function, const std::string& name, const LaunchShape& shape,
                      std::vector<void*>& args, CuStream stream) {
  const CudaDriver& driver = requireCudaDriver();
  if (shape.shared_bytes > kDefaultDynamicSharedLimit) {
    driver.check(driver.funcSetAttribute(function, kFuncAttributeMaxDynamicSharedSizeBytes,
                                         static_cast<int>(shape.shared_bytes)),
                 "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                 fmt::format("kernel {} asks for {} bytes of dynamic shared memory", name, shape.shared_bytes));
  }
  const unsigned shared = shape.shared_bytes == 0 ? 0u : launchDim(shape.shared_bytes, name, "shared memory");
  driver.check(driver.launchKernel(function, launchDim(shape.grid[0], name, "grid.x"),
                                   launchDim(shape.grid[1], name, "grid.y"), 1, launchDim(shape.block[0], name, "block.x"),
                                   launchDim(shape.block[1], name, "block.y"), 1, shared, stream, args.data(), nullptr),
               "cuLaunchKernel",
               fmt::format("kernel {}, grid ({}, {}), block ({}, {}), {} bytes of shared memory", name, shape.grid[0],
                           shape.grid[1], shape.block[0], shape.block[1], shape.shared_bytes));
}

void synchronizeDevice(const std::string& what) {
  const CudaDriver& driver = requireCudaDriver();
  driver.check(driver.ctxSynchronize(), "cuCtxSynchronize", what);
}

}  // namespace braze::runtime
