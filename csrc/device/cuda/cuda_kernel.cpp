#include "device/cuda/cuda_kernel.h"

#include "support/error.h"
#include "device/cuda/nvrtc.h"

#include <limits>
#include <map>
#include <mutex>
#include <tuple>

namespace braze::device {
namespace {

using CacheKey = std::tuple<int, CompileOptions, std::string, std::string>;  // ordinal, options, name, source

// Modules are never unloaded: a cached function must stay valid for as long as the process may
// launch it, and the primary context they live in is never released either.
struct LoadedKernels {
  std::mutex mutex;
  std::map<CacheKey, CuFunction> functions;
};

LoadedKernels& cache() {
  static auto* kernels = new LoadedKernels;  // never destroyed, like the driver it points into
  return *kernels;
}

}  // namespace

std::vector<CuFunction> loadCudaKernels(const std::vector<CompileJob>& jobs, int ordinal) {
  const CudaDriver& driver = useDevice(ordinal);
  LoadedKernels& kernels = cache();
  std::vector<CuFunction> functions(jobs.size(), nullptr);
  std::vector<size_t> missing;  // indices into jobs
  {
    std::lock_guard<std::mutex> lock(kernels.mutex);
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto it = kernels.functions.find(CacheKey{ordinal, jobs[i].options, jobs[i].name, jobs[i].source});
      if (it != kernels.functions.end()) {
        functions[i] = it->second;
      } else {
        missing.push_back(i);
      }
    }
  }
  if (missing.empty()) return functions;
  // Compiled outside the lock: NVRTC takes tens of milliseconds, and two threads compiling the same
  // kernel at once share one compile in the kernel cache (the second module loaded is dropped below).
  std::vector<CompileJob> to_compile;
  for (size_t i : missing) to_compile.push_back(jobs[i]);
  const std::vector<CachedKernel> compiled = compileAll(to_compile);
  // Loaded on this thread: modules need the context made current above, and loading is fast.
  for (size_t m = 0; m < missing.size(); ++m) {
    const CompileJob& job = jobs[missing[m]];
    CuModule module = nullptr;
    driver.check(driver.moduleLoadData(&module, compiled[m].kernel->cubin.data()), "cuModuleLoadData",
                 fmt::format("kernel {} for {}", job.name, job.options.arch));
    CuFunction function = nullptr;
    driver.check(driver.moduleGetFunction(&function, module, job.name.c_str()), "cuModuleGetFunction",
                 fmt::format("kernel {}", job.name));
    std::lock_guard<std::mutex> lock(kernels.mutex);
    functions[missing[m]] =
        kernels.functions.emplace(CacheKey{ordinal, job.options, job.name, job.source}, function).first->second;
  }
  return functions;
}

CuFunction loadCudaKernel(const std::string& source, const std::string& name, const CompileOptions& options,
                          int ordinal) {
  return loadCudaKernels({CompileJob{source, name, options}}, ordinal).front();
}

void synchronizeDevice(const std::string& what) {
  const CudaDriver& driver = requireCudaDriver();
  driver.check(driver.ctxSynchronize(), "cuCtxSynchronize", what);
}

}  // namespace braze::device
