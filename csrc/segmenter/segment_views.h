// How the kernels of a plan see its segments: the view a segment input is read through (a fusion input
// as bound, another kernel's buffer, or the view alias segments make of one of those), and the
// segment-local description lowering takes.
#pragma once

#include "scheduler/scheduler.h"
#include "segmenter/segmented_fusion.h"

namespace braze {

scheduler::SegmentInputView segmentInputView(const SegmentedFusion& plan, const Val* input);

// A kernel segment (one a scheduler accepted) as lowering reads it.
scheduler::SegmentToLower segmentToLower(const SegmentedFusion& plan, const Segment& segment);

}  // namespace braze
