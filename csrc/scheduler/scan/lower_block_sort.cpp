// topk and argsort as block sorts. A block sort takes work items blockIdx.x, + grid, ...; for each, its
// threads load `slots` elements (a power of two) into shared memory, each key with its index in the
// line, and sort them with a bitonic network: log2(slots) stages, stage s of s steps, each step a
// compare-and-swap of every pair of slots a power of two apart (a thread per pair) and a barrier. The order
// is a total one: key a ranks before key b as the line walk orders them (sortBeats), equal keys by
// index, so the result is the stable sort's; a padding slot holds index `extent` and ranks last. After
// a pass the best `keep` elements seen lead the slots; each further pass loads the next slots - keep
// elements behind them and sorts again, so keeping k of any number of elements needs only 2k slots.
//
// A work item is a line, or (a topk of long lines split over blocks, ScanParams::sort_parts) a part of
// a line, whose block writes its best `keep` to a workspace; a follow-up kernel then block sorts each
// line's parts x keep candidates from there and writes the results.
#include "scheduler/scan/block_sort.h"

#include "scheduler/heuristics.h"
#include "support/error.h"

#include <fmt/format.h>

#include <functional>

namespace braze::scheduler {
namespace {

// One block sort per work item.
struct BlockSort {
  int64_t slots = 0, passes = 0, threads = 0, grid = 0;
  int64_t items = 0;   // work items
  int64_t length = 0;  // elements of an item
  int64_t keep = 0;    // the best of them kept
  std::function<void(ExprId item)> begin_item;
  // Fills slot `s` with element `e` (< length) of the item, or padding where there is none.
  std::function<void(const SortSlots&, ExprId e, ExprId s)> load;
  // Takes the item's s-th best (s < keep) from slot s.
  std::function<void(const SortSlots&, ExprId s)> store;
};

void emitBlockSort(KernelBuilder& kb, const SortOp& sort, const BlockSort& b) {
  BRAZE_ASSERT(b.slots >= 2 && (b.slots & (b.slots - 1)) == 0 && b.keep >= 1 &&
                   (b.length <= b.slots || 2 * b.keep <= b.slots),
               "a block sort of {} slots for {} elements keeping {}", b.slots, b.length, b.keep);
  const SortSlots slots = declareSortSlots(kb, sort, b.slots);
  const VarId item = kb.scalarVar("item", DataType::Int64, /*is_index=*/true);
  kb.openFor(item, kb.blockIdx(0), kb.index(b.items), kb.index(b.grid), /*unroll=*/false);
  b.begin_item(kb.ref(item));
  const VarId pass = kb.scalarVar("pass", DataType::Int64, /*is_index=*/true);
  kb.openFor(pass, kb.index(0), kb.index(b.passes), kb.index(1), /*unroll=*/false);
  // Pass p fills slot s (the first pass every slot, the others those behind the kept ones) with
  // element s + p (slots - keep) of the item.
  forEachSlot(kb, b.slots, b.threads, "s", [&](ExprId s) {
    const bool refills = b.passes > 1;
    if (refills) kb.openIf(kb.lor(kb.eq(kb.ref(pass), kb.index(0)), kb.le(kb.index(b.keep), s)));
    const ExprId e = kb.letValue("e", kb.add(s, kb.mul(kb.ref(pass), kb.index(b.slots - b.keep))));
    kb.openIf(kb.lt(e, kb.index(b.length)));
    b.load(slots, e, s);
    kb.openElse();
    padSlot(kb, sort, slots, s);
    kb.close();
    if (refills) kb.close();
  });
  kb.barrier();
  sortSlotsNetwork(kb, sort, slots, b.slots, b.threads);
  kb.close();  // pass
  // The kept elements lead the slots, in order.
  forEachSlot(kb, b.keep, b.threads, "s", [&](ExprId s) { b.store(slots, s); });
  kb.barrier();  // the next item's loads overwrite the slots
  kb.close();    // item
}

}  // namespace

SortSlots declareSortSlots(KernelBuilder& kb, const SortOp& sort, int64_t slots) {
  const SortSlots s{kb.arrayVar("keys", sort.compute, slots, VarKind::SharedArray),
                    kb.arrayVar("at", DataType::Int64, slots, VarKind::SharedArray)};
  kb.declare(s.keys);
  kb.declare(s.at);
  return s;
}

void padSlot(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, ExprId s) {
  kb.localWrite(slots.keys, s, isFloating(sort.compute) ? kb.constant(0.0, sort.compute) : kb.constantInt(0, sort.compute));
  kb.localWrite(slots.at, s, kb.indexToValue(kb.index(sort.extent), DataType::Int64));
}

void forEachSlot(KernelBuilder& kb, int64_t count, int64_t threads, const char* name,
                 const std::function<void(ExprId)>& body) {
  const VarId r = kb.scalarVar("r", DataType::Int64, /*is_index=*/true);
  kb.openFor(r, kb.index(0), kb.index(ceilDiv(count, threads)), kb.index(1), /*unroll=*/false);
  const ExprId slot = kb.letValue(name, kb.add(kb.threadIdx(0), kb.mul(kb.ref(r), kb.index(threads))));
  kb.openIf(kb.lt(slot, kb.index(count)));
  body(slot);
  kb.close();
  kb.close();
}

void sortSlotsNetwork(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, int64_t count, int64_t threads) {
  const ExprId extent = kb.index(sort.extent);
  // Whether slot a's element ranks before slot b's: a real element (its index inside the line) before a
  // padding slot, else by key, equal keys by index.
  auto before = [&](ExprId key_a, ExprId at_a, ExprId key_b, ExprId at_b) {
    const ExprId by_key = kb.lor(sortBeats(kb, sort, key_a, key_b),
                                 kb.land(kb.lnot(sortBeats(kb, sort, key_b, key_a)), kb.lt(at_a, at_b)));
    return kb.land(kb.lt(at_a, extent), kb.lor(kb.le(extent, at_b), by_key));
  };
  // Stage `run` merges runs of run / 2 into runs of `run`, in order where the slot's bit `run` is clear
  // and reversed where it is set (all in order after the last stage); its steps pair slots `half` apart,
  // half = run / 2 down to 1.
  const VarId half = kb.scalarVar("half", DataType::Int64, /*is_index=*/true);
  int64_t steps = 0;
  for (int64_t run = 2; run <= count; run *= 2) {
    ++steps;
    if (run == 2) {
      kb.let(half, kb.index(1));
    } else {
      kb.assign(half, kb.index(run / 2));
    }
    const VarId step = kb.scalarVar("j", DataType::Int64, /*is_index=*/true);
    kb.openFor(step, kb.index(0), kb.index(steps), kb.index(1), /*unroll=*/false);
    // A thread per pair: pair p's lower slot i keeps p's bits below half's and moves the others up one
    // place (i = (p / half) * 2 half + p % half = 2 p - p % half, half a power of two); its partner is
    // i + half.
    forEachSlot(kb, count / 2, threads, "p", [&](ExprId p) {
      const ExprId h = kb.ref(half);
      const ExprId i = kb.letValue("i", kb.sub(kb.mul(p, kb.index(2)), kb.bitAnd(p, kb.sub(h, kb.index(1)))));
      const ExprId partner = kb.letValue("partner", kb.add(i, h));
      const ExprId key_i = kb.letValue("key_i", kb.localRead(slots.keys, i));
      const ExprId key_p = kb.letValue("key_p", kb.localRead(slots.keys, partner));
      const ExprId at_i = kb.letValue("at_i", kb.valueToIndex(kb.localRead(slots.at, i)));
      const ExprId at_p = kb.letValue("at_p", kb.valueToIndex(kb.localRead(slots.at, partner)));
      const ExprId in_order_run = kb.eq(kb.mod(kb.div(i, kb.index(run)), kb.index(2)), kb.index(0));
      kb.openIf(kb.select(in_order_run, before(key_p, at_p, key_i, at_i), before(key_i, at_i, key_p, at_p)));
      kb.localWrite(slots.keys, i, key_p);
      kb.localWrite(slots.keys, partner, key_i);
      kb.localWrite(slots.at, i, kb.indexToValue(at_p, DataType::Int64));
      kb.localWrite(slots.at, partner, kb.indexToValue(at_i, DataType::Int64));
      kb.close();
    });
    kb.barrier();
    kb.assign(half, kb.div(kb.ref(half), kb.index(2)));
    kb.close();
  }
}

LineItem lineItemOf(const LoweringContext& ctx, const SortOp& sort, int64_t parts, int64_t part_length) {
  LineItem line;
  const auto& sizes = ctx.bound.sizesOf(sort.x);
  line.shape.walk.dim = sort.dim;
  line.shape.walk.has_dim = !sizes.empty();
  line.shape.line_sizes = lineSizesOf(sizes, sort.dim);
  for (int64_t s : line.shape.line_sizes) line.shape.walk.lines *= s;
  line.parts = parts;
  line.part_length = part_length;
  return line;
}

namespace {

void beginLine(ValueBuilder& vb, LineShape& shape, ExprId line) {
  shape.walk.line = line;
  shape.walk.position = vb.unflatten(line, false, shape.line_sizes);
}

}  // namespace

void beginItem(KernelBuilder& kb, ValueBuilder& vb, LineItem& line, ExprId item) {
  line.item = item;
  if (line.parts == 1) {
    line.first = kb.index(0);
    beginLine(vb, line.shape, item);
    return;
  }
  const ExprId parts = kb.index(line.parts);
  const ExprId line_index = kb.letValue("line", kb.div(item, parts));
  line.first = kb.letValue("first", kb.mul(kb.mod(item, parts), kb.index(line.part_length)));
  beginLine(vb, line.shape, line_index);
}

void storeResults(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort, const LineWalk& walk,
                  const SortSlots& slots, ExprId s) {
  auto offsetIn = [&](TensorId tensor) {
    int64_t coefficient = 0;
    return vb.flatOffset(kb.kernel().tensors[tensor].layout, lineIndex(walk, s), &coefficient);
  };
  if (sort.values_param >= 0) {
    kb.store(sort.values_param, offsetIn(sort.values_param), kb.cast(kb.localRead(slots.keys, s), sort.values->dtype()));
  }
  if (sort.indices_param >= 0) {
    const DataType index_type = kb.kernel().tensors[sort.indices_param].dtype;
    kb.store(sort.indices_param, offsetIn(sort.indices_param),
             kb.indexToValue(kb.valueToIndex(kb.localRead(slots.at, s)), index_type));
  }
}

std::function<void(const SortSlots&, ExprId)> itemStore(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort,
                                                        const LineItem& line, CandidateWorkspaces* ws) {
  if (line.parts == 1) {
    return [&kb, &vb, &sort, &line](const SortSlots& slots, ExprId s) { storeResults(kb, vb, sort, line.shape.walk, slots, s); };
  }
  const int64_t items = line.shape.walk.lines * line.parts;
  *ws = {workspaceParam("sort_keys", sort.compute, items * sort.keep, false),
         workspaceParam("sort_at", DataType::Int64, items * sort.keep, false)};
  ws->keys.shared = ws->at.shared = true;
  const TensorId keys = kb.addTensor(ws->keys);
  const TensorId at = kb.addTensor(ws->at);
  return [&kb, &sort, &line, keys, at](const SortSlots& slots, ExprId s) {
    const ExprId offset = kb.add(kb.mul(line.item, kb.index(sort.keep)), s);
    kb.store(keys, offset, kb.localRead(slots.keys, s));
    kb.store(at, offset, kb.localRead(slots.at, s));
  };
}

Kernel lowerMergeKernel(const LoweringContext& ctx, const SortOp& sort, const ScanParams& params,
                        const CandidateWorkspaces& ws, bool index64,
                        const std::function<std::string(KernelBuilder&, MergeLines&)>& emit) {
  Kernel k = followUpKernel(ctx, "_merge");
  k.index64 = index64;
  KernelBuilder kb(k);
  kb.fixBlock(params.merge_block, 1);  // each thread's slots and pairs are in range: no test
  MergeLines m;
  m.keys = kb.addTensor(ws.keys);
  m.at = kb.addTensor(ws.at);
  m.sort = sort;
  if (sort.values_param >= 0) m.sort.values_param = kb.addTensor(ctx.kernel.tensors[sort.values_param]);
  if (sort.indices_param >= 0) m.sort.indices_param = kb.addTensor(ctx.kernel.tensors[sort.indices_param]);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, {});
  LineItem line = lineItemOf(ctx, sort, 1, sort.extent);
  m.lines = line.shape.walk.lines;
  m.candidates = params.sort_parts * sort.keep;
  m.begin = [&](ExprId index) {
    beginItem(kb, vb, line, index);
    m.first = kb.letValue("first", kb.mul(index, kb.index(m.candidates)));
  };
  m.store = itemStore(kb, vb, m.sort, line, nullptr);
  k.summary = emit(kb, m);
  k.grid = {params.merge_grid, 1};
  return k;
}

void lowerBlockSortLines(LoweringContext& ctx, const ScanParams& params) {
  if (params.radix_per_thread > 0) {
    lowerRadixSelectLines(ctx, params);
    return;
  }
  const SortOp sort = sortOpOf(ctx);
  Kernel& k = ctx.kernel;
  KernelBuilder kb(k);
  kb.fixBlock(params.block, 1);  // each thread's slots and pairs are in range: no test
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  k.grid = {params.grid, 1};
  k.summary = params.toString();
  const int64_t parts = params.sort_parts;
  LineItem line = lineItemOf(ctx, sort, parts, parts > 1 ? params.sort_slots : sort.extent);
  BlockSort b;
  b.slots = params.sort_slots;
  b.passes = params.sort_passes;
  b.threads = params.block;
  b.grid = params.grid;
  b.items = line.shape.walk.lines * parts;
  b.length = line.part_length;
  b.keep = sort.keep;
  b.begin_item = [&](ExprId item) { beginItem(kb, vb, line, item); };
  b.load = [&](const SortSlots& slots, ExprId e, ExprId s) {
    const ExprId g = parts > 1 ? kb.letValue("g", kb.add(line.first, e)) : e;
    if (parts > 1) kb.openIf(kb.lt(g, kb.index(sort.extent)));  // the last part may end early
    kb.localWrite(slots.keys, s, sortKeyAt(kb, vb, sort, lineIndex(line.shape.walk, g)));
    kb.localWrite(slots.at, s, kb.indexToValue(g, DataType::Int64));
    if (parts > 1) {
      kb.openElse();
      padSlot(kb, sort, slots, s);
      kb.close();
    }
  };
  CandidateWorkspaces ws;
  b.store = itemStore(kb, vb, sort, line, &ws);
  emitBlockSort(kb, sort, b);
  if (parts == 1) return;
  // Each line's parts x keep candidates, block sorted again.
  ctx.follow_ups.push_back(lowerMergeKernel(ctx, sort, params, ws, false, [&](KernelBuilder& mkb, MergeLines& m) {
    BlockSort merge;
    merge.slots = params.merge_slots;
    merge.passes = params.merge_passes;
    merge.threads = params.merge_block;
    merge.grid = params.merge_grid;
    merge.items = m.lines;
    merge.length = m.candidates;
    merge.keep = sort.keep;
    merge.begin_item = m.begin;
    merge.load = [&](const SortSlots& slots, ExprId e, ExprId s) {
      mkb.localWrite(slots.keys, s, mkb.load(m.keys, mkb.add(m.first, e)));
      mkb.localWrite(slots.at, s, mkb.load(m.at, mkb.add(m.first, e)));
    };
    merge.store = m.store;
    emitBlockSort(mkb, m.sort, merge);
    return fmt::format("scan: merge of {} parts' best {} per line, block sort of {} slots, {} pass(es), block {}",
                       params.sort_parts, sort.keep, params.merge_slots, params.merge_passes, params.merge_block);
  }));
}

}  // namespace braze::scheduler
