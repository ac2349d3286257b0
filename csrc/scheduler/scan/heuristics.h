// The scan scheduler's parameters: a cumsum walks `extent` elements along `dim` for each of `lines`
// lines (every position of the other dims), one thread per line, `block` threads per block, or splits
// long lines over a block's threads where lines are few (a block scan). topk and
// argsort either walk their lines the same way or, where a line is long enough to keep a block busy,
// sort it in shared memory with one block per line (a block sort).
#pragma once

#include "ir/data_type.h"
#include "target/device_info.h"

#include <cstdint>
#include <string>

namespace braze {

struct ScanProblem {
  int64_t lines = 0;
  int64_t extent = 0;
  // topk and argsort: the elements kept per line (argsort: all of them), and the bytes of a key as a
  // kernel compares it (its compute type). keep = 0: not a sort.
  int64_t keep = 0;
  int64_t key_bytes = 4;
  bool rank_keys = false;  // keys of 32 order bits (rankKeys): sorted as ranks, radix selects
  bool block_scan = false;  // an integer cumsum, whose lines may each be split over a block's threads
};

struct ScanParams {
  int64_t block = 128;
  int64_t grid = 1;
  // A block sort: each block takes lines blockIdx.x, + grid, ... and sorts `sort_slots` (a power of two)
  // elements of its line at a time in shared memory; each of `sort_passes` passes keeps the best `keep`
  // first and fills the other slots with the next elements of the line. 0: one thread walks each line.
  int64_t sort_slots = 0;
  int64_t sort_passes = 0;
  // A topk of long lines split over blocks: each line is `sort_parts` parts of sort_slots elements,
  // each part a block sort of one pass (blocks take (line, part) pairs); a follow-up kernel block sorts
  // each line's parts x keep best, `merge_slots` at a time in `merge_passes` passes, with `merge_block`
  // threads in `merge_grid` blocks. sort_parts = 1: no split, no merge.
  int64_t sort_parts = 1;
  int64_t merge_slots = 0;
  int64_t merge_passes = 0;
  int64_t merge_block = 0;
  int64_t merge_grid = 0;
  // A topk by radix select (ScanProblem::rank_keys): each block holds `radix_per_thread` elements of its
  // work item (a line, or a part of one) per thread, finds the key of the k-th best 8 bits at a time with
  // histograms in shared memory, and block sorts only the k best, in sort_slots slots (k's power of two).
  // A split line's merge is a radix select as well, over its parts' candidates, merge_per_thread per
  // thread (merge_slots, merge_block, merge_grid as above; no passes). 0: no radix select.
  int64_t radix_per_thread = 0;
  int64_t merge_per_thread = 0;
  // A cumsum's block scan: one block of `block` threads per line (grid: the lines), thread t summing the
  // `scan_chunk` elements from t * scan_chunk, thread 0 adding those sums up in order, then each thread
  // walking its chunk again from the sum of the chunks before it. 0: one thread walks each line.
  int64_t scan_chunk = 0;
  std::string toString() const;  // heads the kernel's source
};

ScanParams scanHeuristics(const DeviceInfo& device, const ScanProblem& problem);

// Whether keys of `dtype` (a sort's input) have 32 order bits, so that a 64-bit rank holds a key and its
// position: float, half, bf16 and fp8 (compared as float) and integers of 32 bits or fewer; not double,
// int64 or bool.
bool rankKeys(DataType dtype);
// Whether an item of `length` elements of rank keys is sorted as ranks: its positions fit the rank's 31
// bits below the key's 32 (a longer item keeps (key, position) slots).
bool rankSlots(bool rank_keys, int64_t length);
// The bytes of a block sort's slot: a 64-bit rank for rank keys (the key's 32 order bits above the
// element's position in its work item), else the key and its position (int64).
constexpr int64_t kRankBytes = 8;
// Rank slots a thread of a block sort takes: the network's steps between slots closer than that run in
// its registers, with no shared memory traffic and no barrier (16 ranks: 32 registers).
constexpr int64_t kRanksPerThread = 16;
int64_t sortSlotBytes(const ScanProblem& problem, int64_t length);  // of an item of `length` elements
// Bytes of shared memory a block sort of `slots` slots of `slot_bytes` each takes.
int64_t blockSortBytes(int64_t slots, int64_t slot_bytes);

// The bits of a rank that hold a position below `length` (at least one).
int64_t positionBits(int64_t length);
// A radix select of an item of `length` elements: the passes of 8 bits it takes, over the key's 32 bits
// and the position bits that break ties.
int64_t radixPasses(int64_t length);
// Bytes of shared memory it takes besides its sort slots: two histograms of 256 Int32 bins, 16 group
// sums, and the search's state (the prefix found and the rank still wanted, 2 Int64, and a counter).
constexpr int64_t kRadixSharedBytes = 2 * 256 * 4 + 16 * 4 + 2 * 8 + 4;

}  // namespace braze
