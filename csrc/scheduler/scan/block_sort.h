// The pieces of a block sort that the block sort lowering (lower_block_sort.cpp) and the radix select
// lowering (lower_radix_select.cpp) share: the slots in shared memory, the bitonic network over them, and
// the stores of a line's results.
#pragma once

#include "scheduler/scan/line_walk.h"
#include "scheduler/scan/lower_sort.h"

#include <functional>
#include <string>

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

// A work item: a line, or one of its `parts` parts of `part_length` elements where a long line is split
// over blocks (ScanParams::sort_parts).
struct LineItem {
  LineShape shape;
  int64_t parts = 1, part_length = 0;
  ExprId item = -1;   // the item being lowered, set by beginItem
  ExprId first = -1;  // its first element in its line
};
LineItem lineItemOf(const LoweringContext& ctx, const SortOp& sort, int64_t parts, int64_t part_length);
void beginItem(KernelBuilder& kb, ValueBuilder& vb, LineItem& line, ExprId item);

// Stores slot s (the s-th best of the line) into topk's values and indices, or argsort's indices.
void storeResults(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort, const LineWalk& walk,
                  const SortSlots& slots, ExprId s);

// The workspaces a split line's parts write their best `keep` to, and the merge reads: keys in their
// compute type (exact), indices in the line, lines x parts items' worth.
struct CandidateWorkspaces {
  TensorParam keys, at;
};

// The store of an item's s-th best from slot s: into the results where the item is a whole line, else
// into the candidate workspaces, which it adds to the kernel and returns in *ws.
std::function<void(const SortSlots&, ExprId)> itemStore(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort,
                                                        const LineItem& line, CandidateWorkspaces* ws);

// A merge kernel's view of the lines it finishes: each line's candidates (the parts' best) in the
// workspaces, and the store of its results.
struct MergeLines {
  SortOp sort;  // the sort, its results this kernel's tensors
  TensorId keys = -1, at = -1;
  int64_t lines = 0, candidates = 0;  // candidates per line
  ExprId first = -1;                  // the line's first candidate, set by begin
  std::function<void(ExprId line)> begin;
  std::function<void(const SortSlots&, ExprId s)> store;  // the line's s-th best from slot s
};
// The follow-up kernel that selects each line's best `keep` among its parts' candidates: `emit` lowers
// its body over `lines` and returns the kernel's summary.
Kernel lowerMergeKernel(const LoweringContext& ctx, const SortOp& sort, const ScanParams& params,
                        const CandidateWorkspaces& ws, bool index64,
                        const std::function<std::string(KernelBuilder&, MergeLines&)>& emit);

// A radix select (lower_radix_select.cpp): ScanParams::radix_per_thread.
void lowerRadixSelectLines(LoweringContext& ctx, const ScanParams& params);

}  // namespace braze::scheduler
