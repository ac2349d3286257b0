// The pieces of a block sort that the block sort lowering (lower_block_sort.cpp) and the radix select
// lowering (lower_radix_select.cpp) share: the slots in shared memory, the bitonic network over them, and
// the stores of a line's results.
#pragma once

#include "scheduler/scan/line_walk.h"
#include "scheduler/scan/lower_sort.h"

#include <functional>

namespace braze::scheduler {

// The shared arrays of a block sort: each slot's key and its element's index in the line.
struct SortSlots {
  VarId keys = -1;
  VarId at = -1;
};
SortSlots declareSortSlots(KernelBuilder& kb, const SortOp& sort, int64_t slots);

// Fills slot s with padding: index `extent`, which ranks after every element.
void padSlot(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, ExprId s);

// for (r = 0; r < ceil(count / threads); ++r) body(threadIdx.x + r * threads), where that is below `count`.
void forEachSlot(KernelBuilder& kb, int64_t count, int64_t threads, const char* name,
                 const std::function<void(ExprId)>& body);

// Sorts `count` slots (a power of two) with a bitonic network, a thread per pair of slots, each step
// followed by a barrier: the order is the stable sort's (sortBeats, equal keys by index, padding last).
void sortSlotsNetwork(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, int64_t count, int64_t threads);

// The line's position over the dims other than the sorted one.
struct LineShape {
  LineWalk walk;
  std::vector<int64_t> line_sizes;
};
LineShape lineShapeOf(const LoweringContext& ctx, const SortOp& sort);
// Points `shape` at line `line` (an index value).
void beginLine(ValueBuilder& vb, LineShape& shape, ExprId line);

// Stores slot s (the s-th best of the line) into topk's values and indices, or argsort's indices.
void storeResults(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort, const LineWalk& walk,
                  const SortSlots& slots, ExprId s);

// The workspaces a split line's parts write their best `keep` to, and the merge reads: keys in their
// compute type (exact), indices in the line, `items` parts' worth.
struct CandidateWorkspaces {
  TensorParam keys, at;
};
CandidateWorkspaces candidateWorkspaces(const SortOp& sort, int64_t items);

// A merge kernel's tensors: the workspaces (their ids in `tensors`) and the results, in the sort it
// returns.
struct MergeTensors {
  TensorId keys = -1, at = -1;
  SortOp sort;
};
MergeTensors addMergeTensors(KernelBuilder& kb, const LoweringContext& ctx, const SortOp& sort,
                             const CandidateWorkspaces& ws);

// A radix select (lower_radix_select.cpp): ScanParams::radix_per_thread.
void lowerRadixSelectLines(LoweringContext& ctx, const ScanParams& params);

}  // namespace braze::scheduler
