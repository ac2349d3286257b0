// The scan scheduler's lowering of topk and argsort (lower_sort.cpp says how).
#pragma once

#include "scheduler/lowering_context.h"
#include "scheduler/scan/heuristics.h"

namespace braze::scheduler {

void lowerSortLines(LoweringContext& ctx, const ScanParams& params);

}  // namespace braze::scheduler
