// Test helpers for generated kernels: run a fusion through the whole execute path on the test device
// (fusions/test_device.h: the simulated device, or a GPU) and compare with the reference evaluator
// within dtype-aware tolerances (kernels accumulate in float where the reference uses float64, and
// CUDA's float math is not correctly rounded).
#pragma once

#include "fusions/plan_util.h"
#include "fusions/test_device.h"
#include "exec/pipeline.h"
#include "exec/prepared_plan.h"
#include "device/cuda/cuda_driver.h"
#include "device/cuda/nvrtc.h"

#include <gtest/gtest.h>

#include <cmath>

namespace braze::testing {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

inline Tolerance toleranceFor(DataType dtype) {
  switch (dtype) {
    case DataType::Double: return {1e-12, 1e-12};
    case DataType::Float: return {2e-5, 2e-5};
    case DataType::Half: return {4e-3, 1e-3};
    case DataType::BFloat16: return {1.6e-2, 1e-2};
    default: return isFloat8(dtype) ? Tolerance{0.26, 0.05} : Tolerance{0, 0};
  }
}

inline void expectClose(const std::vector<HostValue>& got, const std::vector<HostValue>& want,
                        const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const HostTensor& g = asTensor(got[i]);
    const HostTensor& w = asTensor(want[i]);
    ASSERT_EQ(g.sizes(), w.sizes()) << what << " output " << i;
    ASSERT_EQ(g.dtype(), w.dtype()) << what << " output " << i;
    const Tolerance tol = toleranceFor(w.dtype());
    const auto gv = valuesOf(g), wv = valuesOf(w);
    for (size_t k = 0; k < gv.size(); ++k) {
      if (std::isnan(wv[k])) {
        ASSERT_TRUE(std::isnan(gv[k])) << what << " output " << i << " element " << k << ": got " << gv[k];
      } else if (std::isinf(wv[k])) {
        ASSERT_EQ(gv[k], wv[k]) << what << " output " << i << " element " << k;
      } else {
        ASSERT_LE(std::abs(gv[k] - wv[k]), tol.atol + tol.rtol * std::abs(wv[k]))
            << what << " output " << i << " element " << k << ": got " << gv[k] << ", want " << wv[k];
      }
    }
  }
}

// The fusion through a FusionCache on the test device (planned for options.device when it is the
// simulated one), against the reference; returns the compiled plan that ran.
inline LoweredPlan expectDeviceMatches(const Fusion& fusion, const std::vector<HostValue>& inputs,
                                                const ExecuteOptions& options = {}) {
  const auto cache = testFusionCache(std::make_shared<Fusion>(fusion), options.plan, options.device);
  const auto got = runOnTestDevice(*cache, inputs);
  expectClose(got, evaluate(fusion, inputs), "on the " + testDevice().name() + " device");
  return cache->lastPlan()->compiled();
}

// Constant scalar Vals: the sizes of a broadcast or expand.
inline std::vector<Val*> ints(Fusion& f, const std::vector<int64_t>& values) {
  std::vector<Val*> out;
  for (int64_t v : values) out.push_back(f.constant(v));
  return out;
}

// Why GPU tests cannot run here ("" when they can): no driver or device, or no NVRTC.
inline std::string gpuUnavailableReason() {
  if (!device::cudaAvailable()) return device::cudaUnavailableReason();
  if (!device::nvrtcAvailable()) return "NVRTC not found (no libnvrtc, or no CUDA include dir with cuda_bf16.h)";
  return "";
}

#define BRAZE_SKIP_WITHOUT_GPU()                                                            \
  if (const std::string reason = ::braze::testing::gpuUnavailableReason(); !reason.empty()) { \
    GTEST_SKIP() << "GPU test skipped: " << reason;                                          \
  }

// The one kernel of a plan (a test failure when there are several).
// A hand-built kernel's parameter: n contiguous elements of dtype.
inline kernel::TensorParam vectorParam(std::string name, DataType dtype, int64_t n, bool output) {
  kernel::TensorParam p;
  p.name = std::move(name);
  p.dtype = dtype;
  p.output = output;
  p.layout = StridedLayout{{n}, {1}, 0};
  return p;
}

inline const kernel::Kernel& onlyKernel(const LoweredPlan& compiled) {
  const kernel::Kernel* found = nullptr;
  for (const auto& k : compiled.kernels) {
    if (!k) continue;
    EXPECT_EQ(found, nullptr) << "more than one kernel:\n" << compiled.plan.toString();
    found = &*k;
  }
  if (found == nullptr) throw std::runtime_error("no kernel in plan:\n" + compiled.plan.toString());
  return *found;
}

}  // namespace braze::testing
