// The planning driver: from a fusion and one execute's inputs to a SegmentedFusion, without running
// anything. C++ `explain` and Python `fd.explain(inputs)` return it; execute runs it.
#pragma once

#include "ir/host_tensor.h"
#include "segmenter/segmented_fusion.h"

#include <unordered_map>
#include <vector>

namespace braze {

struct PlanOptions {
  BookendPolicy bookend = BookendPolicy::Auto;
};

SegmentedFusion explain(const Fusion& fusion, const std::vector<HostValue>& inputs, const PlanOptions& options = {});

// Runs a plan on the CPU: alias segments build views of their inputs (outputs share the inputs'
// storage), kernel segments run the reference evaluator on their exprs and write fresh row-major
// outputs, as a kernel would. Inputs must be those the plan was made for.
std::vector<HostValue> runOnReference(const SegmentedFusion& plan, const std::vector<HostValue>& inputs);

// The pieces of running a plan, shared with the simulator's and the GPU's runners: every fusion input
// and bound scalar by value; an alias segment's views; a segment evaluated by the reference.
std::unordered_map<const Val*, HostValue> planValues(const SegmentedFusion& plan, const std::vector<HostValue>& inputs);
void runAliasSegment(const SegmentedFusion& plan, const Segment& segment,
                     std::unordered_map<const Val*, HostValue>& values);
void runSegmentOnReference(const Segment& segment, std::unordered_map<const Val*, HostValue>& values);

// explain + runOnReference; prints the plan to stderr when BRAZE_DUMP contains "segments".
std::vector<HostValue> executeSegmented(const Fusion& fusion, const std::vector<HostValue>& inputs,
                                        const PlanOptions& options = {});

}  // namespace braze
