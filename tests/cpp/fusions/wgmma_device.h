// Test helpers of the wgmma schedules: a described H100 small enough that the simulator's problems take
// wgmma where tuned on, and a run of a case through the whole execute path on the simulated device.
#pragma once

#include "fusions/kernel_corpus.h"
#include "exec/host_execute.h"

#include <memory>
#include <string>

namespace braze::testing {

// An H100 with four SMs (a small problem then fills a quarter of them), with `tuning` (HeuristicTuning).
inline DeviceInfo fourSmH100(const std::string& tuning) {
  DeviceInfo device = DeviceInfo::h100Sxm();
  device.sm_count = 4;
  device.tuning = HeuristicTuning::parse(tuning);
  return device;
}

// Runs `c` through a FusionCache for `device` on `sim` (the cache is kept in `cache`), checks its outputs
// against the reference and returns its one kernel.
inline const kernel::Kernel& runOnSimulator(const KernelCase& c, const DeviceInfo& device,
                                            std::unique_ptr<exec::FusionCache>& cache, device::SimDeviceOps& sim,
                                            const std::string& what) {
  cache = std::make_unique<exec::FusionCache>(c.fusion, c.options.plan, &sim, device);
  expectClose(exec::runOnHost(*cache, c.inputs), evaluate(*c.fusion, c.inputs), what);
  return onlyKernel(cache->lastPlan()->compiled());
}

}  // namespace braze::testing
