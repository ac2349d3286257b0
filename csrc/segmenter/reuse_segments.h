// Reusing a segmentation for other inputs: a fusion planned once for a shape class (exec's
// InputSignature::shapeClassOf: the same dtypes, ranks, strides pattern and extents of the same power
// of two) is not bookended and segmented again for each new sequence length or batch size of that class.
// The segmentation is kept where it still holds at the new sizes, as nvFuser keeps a runtime whose
// segments' schedulers still take them: every segment is chosen by the same scheduler as before, and
// no cut a scheduler refused is accepted now (that cut would then merge: the class is planned afresh).
// What the sizes decide inside a segment (heuristics, kernels) is decided again by lowering.
#pragma once

#include "segmenter/segmented_fusion.h"

#include <optional>
#include <string>

namespace braze {

struct ReusedSegments {
  std::optional<SegmentedFusion> plan;  // `planned`, bound to the new inputs; none when it does not hold
  std::string why_not;                  // the segment or cut that decided, when it does not
};

// `planned`: a plan made by planSegments (exec/pipeline.h) for other inputs of the same shape class.
ReusedSegments reuseSegments(const SegmentedFusion& planned, const std::vector<HostValue>& inputs);

}  // namespace braze
