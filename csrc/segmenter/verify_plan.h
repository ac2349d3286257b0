// The segment graph's invariants, checked after segmentation (exec/pipeline.cpp): segments come in an
// order that respects their dependencies (each reads only fusion inputs, scalars and what earlier
// segments write), every compute expr is in exactly one segment (meta ops reading an input may be
// inlined into several), alias segments hold only meta ops, every fusion output is written, and every
// cut names segments that exist. A broken invariant is an Internal error naming the segment.
#pragma once

#include "segmenter/segmented_fusion.h"

namespace braze {

void verifyPlan(const SegmentedFusion& plan);

}  // namespace braze
