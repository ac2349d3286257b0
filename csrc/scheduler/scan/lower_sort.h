// The scan scheduler's lowerings of topk and argsort: a line walk per thread (lower_sort.cpp) or a block
// sort per line (lower_block_sort.cpp), as ScanParams::sort_slots says.
#pragma once

#include "scheduler/lowering_context.h"
#include "scheduler/scan/heuristics.h"

namespace braze::scheduler {

// What both lowerings read from the segment's topk or argsort.
struct SortOp {
  const Val* x = nullptr;
  size_t dim = 0;
  bool descending = true;  // topk's largest, argsort's descending
  int64_t extent = 1;      // of the sorted dim
  int64_t keep = 1;        // elements kept per line: k, or the whole line
  const Val* values = nullptr;  // topk's values (argsort has none)
  TensorId values_param = -1;   // -1 where that result is not written
  TensorId indices_param = -1;
  DataType compute = DataType::Float;  // what the keys are compared in
};
SortOp sortOpOf(LoweringContext& ctx);

// x at `index` in the keys' compute type, read through the meta ops between x and the segment's inputs;
// what that takes is added to the innermost open block.
ExprId sortKeyAt(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort, const std::vector<Idx>& index);

// Whether key a ranks before key b (not counting their indices): strictly larger (descending) or
// smaller, NaN above every number.
ExprId sortBeats(KernelBuilder& kb, const SortOp& sort, ExprId a, ExprId b);

void lowerSortLines(LoweringContext& ctx, const ScanParams& params);
void lowerBlockSortLines(LoweringContext& ctx, const ScanParams& params);

}  // namespace braze::scheduler
