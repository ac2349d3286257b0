// The scan scheduler's lowering of scatter and index_put_accumulate (lower_scatter.cpp says how).
#pragma once

#include "scheduler/lowering_context.h"
#include "scheduler/scan/heuristics.h"

namespace braze::scheduler {

void lowerScatterLines(LoweringContext& ctx, const ScanParams& params);

}  // namespace braze::scheduler
