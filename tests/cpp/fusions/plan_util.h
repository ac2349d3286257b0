// Test helpers for plans: random inputs for a fusion, and the check every segmentation test ends
// with (the segmented run equals the reference evaluator's, bit for bit, and again on a rerun).
#pragma once

#include "fusions/host_util.h"
#include "reference/evaluator.h"
#include "exec/host_execute.h"
#include "exec/pipeline.h"

#include <gtest/gtest.h>

#include <cmath>

namespace braze::testing {

// One random tensor per tensor input, sized by `sizes` where given, else by the static shape.
inline std::vector<HostValue> randomInputs(const Fusion& fusion, uint64_t seed,
                                           const std::vector<std::vector<int64_t>>& sizes = {}) {
  std::vector<HostValue> inputs;
  for (size_t i = 0; i < fusion.inputs().size(); ++i) {
    const Val* in = fusion.inputs()[i];
    if (in->isScalar()) {
      inputs.emplace_back(ScalarValue{int64_t{3}});
      continue;
    }
    const auto shape = i < sizes.size() && !sizes[i].empty() ? sizes[i] : in->asTensor()->staticShape();
    inputs.emplace_back(randomTensor(in->dtype(), shape, seed + i));
  }
  return inputs;
}

inline void expectSameValues(const std::vector<HostValue>& got, const std::vector<HostValue>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const HostTensor& g = asTensor(got[i]);
    const HostTensor& w = asTensor(want[i]);
    ASSERT_EQ(g.sizes(), w.sizes()) << "output " << i;
    const auto gv = valuesOf(g), wv = valuesOf(w);
    for (size_t k = 0; k < gv.size(); ++k) {
      if (std::isnan(wv[k])) {
        EXPECT_TRUE(std::isnan(gv[k])) << "output " << i << " element " << k;
      } else {
        ASSERT_EQ(gv[k], wv[k]) << "output " << i << " element " << k;
      }
    }
  }
}

// The fusion's plan run through the execute path on the simulated device with every kernel segment on
// the reference evaluator (PlanOptions::kernels_on_reference): alias segments as views, the rest as
// host steps. What the plan's segmentation and views compute, exactly.
inline std::vector<HostValue> runPlanOnReference(const Fusion& fusion, const std::vector<HostValue>& inputs,
                                                 PlanOptions options = {}) {
  options.kernels_on_reference = true;
  exec::FusionCache cache(std::make_shared<Fusion>(fusion), options, &device::simDeviceOps(), DeviceInfo::h100Sxm());
  return exec::runOnHost(cache, inputs);
}

// The plan, run segment by segment, equals the unsegmented reference bit for bit; returns the plan.
inline SegmentedFusion expectMatchesReference(const Fusion& fusion, const std::vector<HostValue>& inputs,
                                              const PlanOptions& options = {}) {
  const SegmentedFusion plan = planSegments(fusion, inputs, options);
  const auto want = evaluate(fusion, inputs);
  expectSameValues(runPlanOnReference(fusion, inputs, options), want);
  expectSameValues(runPlanOnReference(fusion, inputs, options), want);  // repeated runs agree
  return plan;
}

}  // namespace braze::testing
