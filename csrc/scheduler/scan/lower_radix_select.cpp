// topk of rank keys (floats but double, integers of 32 bits or fewer) by radix select
// (ScanParams::radix_per_thread). A block takes work items
// blockIdx.x, + grid, ...; it holds an item's elements in registers, `per_thread` per thread, each as its
// rank (block_sort.h, keyRank): a non-negative integer, larger for a better element, unique in the item,
//
//   rank = order(key) * 2^b + (2^b - 1 - position)    (b: the bits of a position in the item)
//
// order(key) is a float's order key (EKind::OrderKey: larger for larger floats, NaN above all, -0 as
// +0) or an integer plus 2^31, or 2^32 - 1 minus that for the smallest; the position part puts the earlier of equal keys first, as
// the stable sort does (sortBeats). The k-th best rank is found 8 bits at a time, top digit first:
// each pass counts, in a 256-bin histogram in shared memory (atomic adds), the digits of the ranks that
// match the digits found so far, and the bin where the count from the top reaches the rank still wanted
// gives the next digit. After the last pass the k-th best rank is known exactly and every element
// whose rank is at least it is one of the k best: their ranks are gathered into slots (an atomic counter
// hands out slots in no particular order), sorted by the bitonic network, and stored.
//
// Work items are lines or parts of lines (ScanParams::sort_parts); the parts write their best k (fewer,
// padded, where the line's last part is shorter than k) to workspaces, and a follow-up kernel selects
// each line's best k among its parts' candidates the same way.
#include "scheduler/scan/block_sort.h"

#include "scheduler/heuristics.h"
#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

namespace braze::scheduler {
namespace {

constexpr int64_t kBins = 256;
constexpr int64_t kGroups = 16;  // of kBins / kGroups bins each: the digit search sums bins in two levels

// An item's length is at most threads x per_thread.
struct RadixSelect : ItemWork {
  int64_t per_thread = 0;
  // How many of the item's elements exist (an index expression): at least keep where the item is a line
  // or a merge's line, possibly fewer for a part.
  std::function<ExprId()> existing;
};

void emitRadixSelect(KernelBuilder& kb, const SortOp& sort, const RadixSelect& r) {
  BRAZE_ASSERT(ranksKeys(sort, r.length) && r.slots >= sort.keep && (r.slots & (r.slots - 1)) == 0 &&
                   r.length <= r.threads * r.per_thread && sort.extent < (int64_t{1} << 31),
               "a radix select of {} elements keeping {} in {} slots", r.length, sort.keep, r.slots);
  const SortSlots slots = declareSortSlots(kb, sort, r.slots, r.length, r.threads);
  const int64_t bits = slots.position_bits;
  const int64_t passes = radixPasses(r.length);
  // The counts are 32-bit ints as the atomic adds take them (shared arrays held as stored).
  const VarId hist[2] = {kb.sharedStorageArray("hist", DataType::Int32, kBins),
                         kb.sharedStorageArray("hist", DataType::Int32, kBins)};
  const VarId groups = kb.sharedStorageArray("groups", DataType::Int32, kGroups);
  // The search's state: the rank's digits found so far (the rest zero) and the rank still wanted among the
  // elements that match them.
  const VarId state = kb.arrayVar("state", DataType::Int64, 2, VarKind::SharedArray);
  const VarId taken = kb.sharedStorageArray("taken", DataType::Int32, 1);
  for (VarId v : {hist[0], hist[1], groups, state, taken}) kb.declare(v);
  const ExprId tid = kb.threadIdx(0);
  const ExprId zero = kb.index(0);
  auto readIndex = [&](VarId array, ExprId at) { return kb.valueToIndex(kb.localRead(array, at)); };
  auto writeIndex = [&](VarId array, ExprId at, ExprId value) {
    kb.localWrite(array, at, kb.indexToValue(value, kb.kernel().vars[array].dtype));
  };
  auto clearBins = [&](VarId h) { forEachSlot(kb, kBins, r.threads, "bin", [&](ExprId b) { writeIndex(h, b, zero); }); };

  const VarId item = kb.scalarVar("item", DataType::Int64, /*is_index=*/true);
  kb.openFor(item, kb.blockIdx(0), kb.index(r.items), kb.index(r.grid), /*unroll=*/false);
  r.begin_item(kb.ref(item));
  // This thread's elements tid + j * threads and their ranks, -1 where there is no element: a rank is all
  // a thread keeps of an element through the passes (two registers), the rest is recomputed or reloaded.
  std::vector<ExprId> element(r.per_thread), rank(r.per_thread);
  for (int64_t j = 0; j < r.per_thread; ++j) {
    element[j] = kb.add(tid, kb.index(j * r.threads));
    const VarId rank_var = kb.scalarVar("rank", DataType::Int64, /*is_index=*/true);
    kb.let(rank_var, kb.index(-1));
    ExprId present = kb.lt(element[j], kb.index(r.length));
    if (r.elements.exists) present = kb.land(present, r.elements.exists(element[j]));
    kb.openIf(present);
    kb.assign(rank_var, keyRank(kb, sort, bits, r.elements.key(element[j]), element[j]));
    kb.close();
    rank[j] = kb.ref(rank_var);
  }
  clearBins(hist[0]);
  kb.openIf(kb.eq(tid, zero));
  writeIndex(state, kb.index(0), zero);
  writeIndex(state, kb.index(1), kb.min(kb.index(sort.keep), r.existing()));
  writeIndex(taken, zero, zero);
  kb.close();
  kb.barrier();

  for (int64_t pass = 0; pass < passes; ++pass) {
    // The digit: bits [shift, top) of the rank (the last one narrower where 8 does not divide 32 + bits).
    const int64_t top = 32 + bits - 8 * pass;
    const int64_t shift = std::max<int64_t>(top - 8, 0);
    const VarId counts = hist[pass % 2];
    const ExprId prefix = kb.letValue("prefix", readIndex(state, kb.index(0)));
    const ExprId want = kb.letValue("want", readIndex(state, kb.index(1)));
    // Count the digits of the ranks whose higher digits are the ones found (all of them, first).
    for (int64_t j = 0; j < r.per_thread; ++j) {
      ExprId counted = kb.le(zero, rank[j]);
      if (pass > 0) {
        const ExprId above = kb.index(int64_t{1} << top);
        counted = kb.land(counted, kb.eq(kb.div(rank[j], above), kb.div(prefix, above)));
      }
      kb.openIf(counted);
      const ExprId digit = kb.mod(kb.div(rank[j], kb.index(int64_t{1} << shift)), kb.index(int64_t{1} << (top - shift)));
      kb.sharedAtomicAdd(-1, counts, digit, kb.index(1));
      kb.close();
    }
    if (pass + 1 < passes) clearBins(hist[(pass + 1) % 2]);  // the next pass's bins (last read two passes ago)
    kb.barrier();
    // Sums of groups of 16 bins, then for each bin the count above it: the groups above its own and the
    // bins above it in its group.
    const int64_t per_group = kBins / kGroups;
    forEachSlot(kb, kGroups, r.threads, "g", [&](ExprId g) {
      ExprId sum = zero;
      for (int64_t i = 0; i < per_group; ++i) sum = kb.add(sum, readIndex(counts, kb.add(kb.mul(g, kb.index(per_group)), kb.index(i))));
      writeIndex(groups, g, sum);
    });
    kb.barrier();
    forEachSlot(kb, kBins, r.threads, "bin", [&](ExprId b) {
      const ExprId group = kb.letValue("group", kb.div(b, kb.index(per_group)));
      ExprId above = zero;
      for (int64_t i = 0; i < kGroups; ++i) {
        above = kb.add(above, kb.select(kb.lt(group, kb.index(i)), readIndex(groups, kb.index(i)), zero));
      }
      for (int64_t i = 1; i < per_group; ++i) {
        const ExprId other = kb.letValue("other", kb.add(b, kb.index(i)));
        const ExprId in_group = kb.lt(other, kb.mul(kb.add(group, kb.index(1)), kb.index(per_group)));
        above = kb.add(above, kb.select(in_group, readIndex(counts, kb.min(other, kb.index(kBins - 1))), zero));
      }
      const ExprId before = kb.letValue("above", above);
      const ExprId count = readIndex(counts, b);
      kb.openIf(kb.land(kb.lt(before, want), kb.le(want, kb.add(before, count))));
      writeIndex(state, kb.index(0), kb.add(prefix, kb.mul(b, kb.index(int64_t{1} << shift))));
      writeIndex(state, kb.index(1), kb.sub(want, before));
      kb.close();
    });
    kb.barrier();
  }

  // Every element ranked at least the k-th best's rank (which is not negative) is one of the best k.
  const ExprId kth = kb.letValue("kth", readIndex(state, kb.index(0)));
  forEachSlot(kb, r.slots, r.threads, "s", [&](ExprId s) {
    kb.openIf(kb.le(kb.min(kb.index(sort.keep), r.existing()), s));
    padSlot(kb, sort, slots, s);
    kb.close();
  });
  for (int64_t j = 0; j < r.per_thread; ++j) {
    kb.openIf(kb.le(kth, rank[j]));
    const VarId slot = kb.scalarVar("slot", DataType::Int64, /*is_index=*/true);
    kb.sharedAtomicAdd(slot, taken, zero, kb.index(1));
    writeRank(kb, slots, kb.ref(slot), rank[j]);
    kb.close();
  }
  kb.barrier();
  sortSlotsNetwork(kb, sort, slots, r.slots, r.threads);
  forEachSlot(kb, sort.keep, r.threads, "s", [&](ExprId s) { r.store(slots, s); });
  kb.barrier();  // the next item's gather overwrites the slots
  kb.close();    // item
}

}  // namespace

void lowerRadixSelectLines(LoweringContext& ctx, const ScanParams& params) {
  const SortOp sort = sortOpOf(ctx);
  Kernel& k = ctx.kernel;
  k.index64 = true;  // the ranks take up to 63 bits
  KernelBuilder kb(k);
  kb.fixBlock(params.block, 1);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  k.grid = {params.grid, 1};
  k.summary = params.toString();
  const int64_t parts = params.sort_parts;
  LineItem line = lineItemOf(ctx, sort, parts, parts > 1 ? params.block * params.radix_per_thread : sort.extent);
  CandidateWorkspaces ws;
  RadixSelect r{lineWork(kb, vb, sort, line, &ws), 0, {}};
  r.threads = params.block;
  r.grid = params.grid;
  r.slots = params.sort_slots;
  r.per_thread = params.radix_per_thread;
  r.existing = [&] {
    const ExprId extent = kb.index(sort.extent);
    return parts > 1 ? kb.min(kb.index(line.part_length), kb.sub(extent, line.first)) : extent;
  };
  emitRadixSelect(kb, sort, r);
  if (parts == 1) return;
  // Each line's parts x keep candidates, radix selected again.
  ctx.follow_ups.push_back(lowerMergeKernel(ctx, sort, params, ws, [&](KernelBuilder& mkb, MergeLines& m) {
    RadixSelect merge{m.work(), 0, {}};
    merge.threads = params.merge_block;
    merge.grid = params.merge_grid;
    merge.slots = params.merge_slots;
    merge.per_thread = params.merge_per_thread;
    merge.existing = [&] { return mkb.index(sort.keep); };
    emitRadixSelect(mkb, m.sort, merge);
    return fmt::format("scan: merge of {} parts' best {} per line, radix select of {} per thread, block {}",
                       params.sort_parts, sort.keep, params.merge_per_thread, params.merge_block);
  }));
}

}  // namespace braze::scheduler
