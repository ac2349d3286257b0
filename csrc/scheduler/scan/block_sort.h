// The pieces of a block sort that the block sort lowering (lower_block_sort.cpp) and the radix select
// lowering (lower_radix_select.cpp) share: the work items (lines, or parts of long lines), the slots in
// shared memory, the bitonic network over them, and the stores of an item's best.
//
// A slot holds an element of its work item by the element's position p in the item (0 .. length - 1);
// among equal keys, positions are in the order of the elements' indices in the line, so ordering equal
// keys by position is the stable sort's order. Keys of 32 order bits (rankKeys: floats but double,
// integers of 32 bits or fewer) are held as one 64-bit rank a slot (keyRank),
// larger for a better element and unique in the item, so that the network compares one integer per pair;
// other keys as the key in its compute type and the position.
#pragma once

#include "scheduler/scan/line_walk.h"
#include "scheduler/scan/lower_sort.h"

#include <functional>
#include <string>

namespace braze::scheduler {

// The shared arrays of a block sort.
struct SortSlots {
  VarId ranks = -1;           // rank keys: each slot's rank, -1 for padding
  VarId keys = -1, at = -1;   // other keys: each slot's key and position, `length` for padding
  int64_t length = 0;         // the item's elements: positions are below it
  int64_t position_bits = 0;  // the bits of a position in a rank
  // Ranks a thread sorts in registers (sortSlotsNetwork): slots / threads where that is 4 or more, else 1.
  // Slot s then lies at s + s / per_thread: a thread's consecutive slots start a bank apart.
  int64_t per_thread = 1;
};
// Whether the slots of `sort`'s items of `length` elements hold ranks: rankKeys of its input, and
// positions that fit a rank (rankSlots). The kernel then needs 64-bit index math (Kernel::index64).
bool ranksKeys(const SortOp& sort, int64_t length);
// `threads`: the block's, which the network runs on.
SortSlots declareSortSlots(KernelBuilder& kb, const SortOp& sort, int64_t slots, int64_t length, int64_t threads);

// The rank of a key (compute type) at `position` (bits: positionBits of the item's length):
// order(key) * 2^bits + (2^bits - 1 - position) for the largest, 2^32 - 1 - order(key) in its place for
// the smallest. order: a float's EKind::OrderKey (NaN above all, -0 as +0), an integer plus 2^31. It takes
// 32 + bits bits, and the earlier of equal keys ranks higher.
ExprId keyRank(KernelBuilder& kb, const SortOp& sort, int64_t position_bits, ExprId key, ExprId position);

// Fills slot s with the element at `position` whose key (compute type) is `key`, or with padding, which
// ranks after every element.
void fillSlot(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, ExprId s, ExprId key, ExprId position);
void padSlot(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, ExprId s);
// Writes rank `rank` (an index value) into slot s of rank slots.
void writeRank(KernelBuilder& kb, const SortSlots& slots, ExprId s, ExprId rank);
// The position of slot s's element (an index value; `length` or more for padding).
ExprId slotPosition(KernelBuilder& kb, const SortSlots& slots, ExprId s);

// for (r = 0; r < ceil(count / threads); ++r) body(threadIdx.x + r * threads), where that is below `count`.
void forEachSlot(KernelBuilder& kb, int64_t count, int64_t threads, const char* name,
                 const std::function<void(ExprId)>& body);

// Sorts `count` slots (a power of two, all declared) with a bitonic network: the order is the stable
// sort's (sortBeats, equal keys by position, padding last). A step pairs slots `half` apart, a thread per
// pair, followed by a barrier; where ranks are sorted per_thread at a time, the steps of half below
// per_thread run in registers instead, each thread on its own consecutive slots, one load and store of
// them for all such steps of a stage (and for all stages of runs up to per_thread).
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

// A work item's elements by position p: whether the element exists (null: every position below the
// item's length holds one), its key in the sort's compute type, and its index in the line.
struct ItemElements {
  std::function<ExprId(ExprId p)> exists, key, index;
};
// A LineItem's elements: the line's from `first` on (a split line's last part ends early).
ItemElements lineElements(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort, const LineItem& line);

// What a block sort and a radix select both take: their block's threads, their grid (blocks take items
// blockIdx.x, + grid, ...), their items of `length` elements, the slots the best are sorted in, and how
// an item begins, what its elements are and where its s-th best (s < keep) goes from slot s.
struct ItemWork {
  int64_t threads = 0, grid = 0, slots = 0;
  int64_t items = 0, length = 0;
  std::function<void(ExprId item)> begin_item;
  ItemElements elements;
  std::function<void(const SortSlots&, ExprId s)> store;
};

// The workspaces a split line's parts write their best `keep` to, and the merge reads: keys in their
// compute type (exact), indices in the line (`extent` for padding), lines x parts items' worth.
struct CandidateWorkspaces {
  TensorParam keys, at;
};

// The store of an item's s-th best (s < keep) from slot s: into topk's values and indices, or argsort's
// indices, where the item is a whole line; else into the candidate workspaces, which it adds to the
// kernel and returns in *ws.
std::function<void(const SortSlots&, ExprId)> itemStore(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort,
                                                        const LineItem& line, const ItemElements& elements,
                                                        CandidateWorkspaces* ws);

// The work of a kernel over LineItems (threads, grid and slots left to the caller); where the items are
// parts, their best go to the candidate workspaces it returns in *ws.
ItemWork lineWork(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort, LineItem& line, CandidateWorkspaces* ws);

// A merge kernel's view of the lines it finishes: each line's candidates (its parts' best) as an item's
// elements, and the store of its results.
struct MergeLines {
  SortOp sort;  // the sort, its results this kernel's tensors
  int64_t lines = 0, candidates = 0;  // candidates per line
  std::function<void(ExprId line)> begin;
  ItemElements elements;
  std::function<void(const SortSlots&, ExprId s)> store;
  ItemWork work() const;  // threads, grid and slots left to the caller
};
// The follow-up kernel that selects each line's best `keep` among its parts' candidates: `emit` lowers
// its body over `lines` and returns the kernel's summary.
Kernel lowerMergeKernel(const LoweringContext& ctx, const SortOp& sort, const ScanParams& params,
                        const CandidateWorkspaces& ws,
                        const std::function<std::string(KernelBuilder&, MergeLines&)>& emit);

// A radix select (lower_radix_select.cpp): ScanParams::radix_per_thread.
void lowerRadixSelectLines(LoweringContext& ctx, const ScanParams& params);

}  // namespace braze::scheduler
