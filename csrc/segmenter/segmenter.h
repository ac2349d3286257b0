// The segmenter: cuts a prepared fusion (after bookending) into as few segments as the schedulers
// accept. Starts from one group per expr, merges neighbours (producer into consumer, and siblings
// that read the same input) while some scheduler accepts the union, the union moves no more bytes
// than the parts, and no cycle appears; segment_set is a hard cut. Input views (meta ops reading a
// fusion input) are not grouped at all: every kernel that reads one composes its index map, and an
// output that is one becomes an alias segment. Deterministic, and near-linear in the number of exprs.
#pragma once

#include "segmenter/segmented_fusion.h"

namespace braze {

// `fusion` and `bound` must describe the same graph; the result keeps both.
SegmentedFusion segmentFusion(std::shared_ptr<const Fusion> fusion, BoundShapes bound);

}  // namespace braze
