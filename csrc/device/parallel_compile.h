// Compiling the kernels of a plan at once. Each NVRTC program is independent (NVRTC is thread-safe
// across programs), and a fusion's kernels are independent sources, so a cold plan of N kernels takes
// about as long as its slowest kernel instead of the sum of all of them.
#pragma once

#include "device/kernel_cache.h"

#include <string>
#include <vector>

namespace braze::device {

struct CompileJob {
  std::string source;
  std::string name;  // the kernel's name: errors name it
  CompileOptions options;
};

// Every job through `cache` (memory, disk, NVRTC), on at most hardware_concurrency threads, the
// calling thread among them (a single job runs on it alone). Results are in the jobs' order. A failing
// job does not stop the others: they all finish (and are cached), then the error of the first failing
// job in job order is thrown, with the names of the other kernels that failed appended.
std::vector<CachedKernel> compileAll(const std::vector<CompileJob>& jobs, KernelCache& cache = processKernelCache());

}  // namespace braze::device
