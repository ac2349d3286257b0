// topk and argsort as block sorts. A block sort takes work items blockIdx.x, + grid, ...; for each, its
// threads load `slots` elements (a power of two) into shared memory (block_sort.h: a rank, or a key and
// its position) and sort them with a bitonic network: log2(slots) stages, stage s of s steps, each step a
// compare-and-swap of every pair of slots a power of two apart (a thread per pair) and a barrier. The order
// is a total one: key a ranks before key b as the line walk orders them (sortBeats), equal keys by
// position, so the result is the stable sort's; padding ranks last. After a pass the best `keep` elements
// seen lead the slots; each further pass loads the next slots - keep elements behind them and sorts again,
// so keeping k of any number of elements needs only 2k slots.
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
struct BlockSort : ItemWork {
  int64_t passes = 0;
  int64_t keep = 0;  // the best of an item's elements kept
};

void emitBlockSort(KernelBuilder& kb, const SortOp& sort, const BlockSort& b) {
  BRAZE_ASSERT(b.slots >= 2 && (b.slots & (b.slots - 1)) == 0 && b.keep >= 1 &&
                   (b.length <= b.slots || 2 * b.keep <= b.slots),
               "a block sort of {} slots for {} elements keeping {}", b.slots, b.length, b.keep);
  const SortSlots slots = declareSortSlots(kb, sort, b.slots, b.length, b.threads);
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
    ExprId present = kb.lt(e, kb.index(b.length));
    if (b.elements.exists) present = kb.land(present, b.elements.exists(e));
    kb.openIf(present);
    fillSlot(kb, sort, slots, s, b.elements.key(e), e);
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

void beginLine(ValueBuilder& vb, LineShape& shape, ExprId line) {
  shape.walk.line = line;
  shape.walk.position = vb.unflatten(line, false, shape.line_sizes);
}

// Stores the s-th best of the line, the element at position p, into topk's values and indices, or
// argsort's indices.
void storeResults(KernelBuilder& kb, const SortOp& sort, const LineWalk& walk, const ItemElements& elements,
                  ValueBuilder& vb, ExprId s, ExprId p) {
  auto offsetIn = [&](TensorId tensor) {
    int64_t coefficient = 0;
    return vb.flatOffset(kb.kernel().tensors[tensor].layout, lineIndex(walk, s), &coefficient);
  };
  if (sort.values_param >= 0) {
    kb.store(sort.values_param, offsetIn(sort.values_param), kb.cast(elements.key(p), sort.values->dtype()));
  }
  if (sort.indices_param >= 0) {
    const DataType index_type = kb.kernel().tensors[sort.indices_param].dtype;
    kb.store(sort.indices_param, offsetIn(sort.indices_param), kb.indexToValue(elements.index(p), index_type));
  }
}

}  // namespace

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

ItemElements lineElements(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort, const LineItem& line) {
  ItemElements elements;
  if (line.parts > 1) {  // the last part may end early
    elements.exists = [&kb, &sort, &line](ExprId p) { return kb.lt(kb.add(line.first, p), kb.index(sort.extent)); };
  }
  elements.key = [&kb, &vb, &sort, &line](ExprId p) {
    return sortKeyAt(kb, vb, sort, lineIndex(line.shape.walk, kb.add(line.first, p)));
  };
  elements.index = [&kb, &line](ExprId p) { return kb.add(line.first, p); };
  return elements;
}

std::function<void(const SortSlots&, ExprId)> itemStore(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort,
                                                        const LineItem& line, const ItemElements& elements,
                                                        CandidateWorkspaces* ws) {
  if (line.parts == 1) {
    return [&kb, &vb, &sort, &line, elements](const SortSlots& slots, ExprId s) {
      // s < keep, and a line holds at least keep elements: the slot holds one.
      storeResults(kb, sort, line.shape.walk, elements, vb, s, kb.letValue("p", slotPosition(kb, slots, s)));
    };
  }
  const int64_t items = line.shape.walk.lines * line.parts;
  *ws = {workspaceParam("sort_keys", sort.compute, items * sort.keep, false),
         workspaceParam("sort_at", DataType::Int64, items * sort.keep, false)};
  ws->keys.shared = ws->at.shared = true;
  const TensorId keys = kb.addTensor(ws->keys);
  const TensorId at = kb.addTensor(ws->at);
  return [&kb, &sort, &line, elements, keys, at](const SortSlots& slots, ExprId s) {
    // A part shorter than keep (a line's last) stores padding candidates, index `extent`, which the
    // merge skips.
    const ExprId offset = kb.letValue("offset", kb.add(kb.mul(line.item, kb.index(sort.keep)), s));
    const ExprId p = kb.letValue("p", slotPosition(kb, slots, s));
    kb.openIf(kb.lt(p, kb.index(slots.length)));
    kb.store(keys, offset, elements.key(p));
    kb.store(at, offset, kb.indexToValue(elements.index(p), DataType::Int64));
    kb.openElse();
    kb.store(keys, offset, kb.constant(0.0, sort.compute));
    kb.store(at, offset, kb.indexToValue(kb.index(sort.extent), DataType::Int64));
    kb.close();
  };
}

ItemWork lineWork(KernelBuilder& kb, ValueBuilder& vb, const SortOp& sort, LineItem& line, CandidateWorkspaces* ws) {
  ItemWork w;
  w.items = line.shape.walk.lines * line.parts;
  w.length = line.part_length;
  w.begin_item = [&kb, &vb, &line](ExprId item) { beginItem(kb, vb, line, item); };
  w.elements = lineElements(kb, vb, sort, line);
  w.store = itemStore(kb, vb, sort, line, w.elements, ws);
  return w;
}

ItemWork MergeLines::work() const {
  ItemWork w;
  w.items = lines;
  w.length = candidates;
  w.begin_item = begin;
  w.elements = elements;
  w.store = store;
  return w;
}

Kernel lowerMergeKernel(const LoweringContext& ctx, const SortOp& sort, const ScanParams& params,
                        const CandidateWorkspaces& ws,
                        const std::function<std::string(KernelBuilder&, MergeLines&)>& emit) {
  Kernel k = followUpKernel(ctx, "_merge");
  k.index64 = k.index64 || ranksKeys(sort, params.sort_parts * sort.keep);  // ranks take up to 63 bits
  KernelBuilder kb(k);
  kb.fixBlock(params.merge_block, 1);  // each thread's slots and pairs are in range: no test
  const TensorId keys = kb.addTensor(ws.keys);
  const TensorId at = kb.addTensor(ws.at);
  MergeLines m;
  m.sort = sort;
  if (sort.values_param >= 0) m.sort.values_param = kb.addTensor(ctx.kernel.tensors[sort.values_param]);
  if (sort.indices_param >= 0) m.sort.indices_param = kb.addTensor(ctx.kernel.tensors[sort.indices_param]);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, {});
  LineItem line = lineItemOf(ctx, sort, 1, sort.extent);
  m.lines = line.shape.walk.lines;
  m.candidates = params.sort_parts * sort.keep;
  ExprId first = -1;  // the line's first candidate
  m.begin = [&](ExprId index) {
    beginItem(kb, vb, line, index);
    first = kb.letValue("first", kb.mul(index, kb.index(m.candidates)));
  };
  // Candidate p of the line: a part's padding holds index `extent`. Parts are in line order and each
  // part's candidates in sorted order, so equal keys' candidates are in index order.
  m.elements.exists = [&](ExprId p) {
    return kb.lt(kb.valueToIndex(kb.load(at, kb.add(first, p))), kb.index(sort.extent));
  };
  m.elements.key = [&](ExprId p) { return kb.load(keys, kb.add(first, p)); };
  m.elements.index = [&](ExprId p) { return kb.valueToIndex(kb.load(at, kb.add(first, p))); };
  m.store = itemStore(kb, vb, m.sort, line, m.elements, nullptr);
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
  BRAZE_ASSERT(sort.values_param >= 0 || sort.indices_param >= 0, "a block sort whose results are not written");
  const int64_t parts = params.sort_parts;
  const int64_t item_length = parts > 1 ? params.sort_slots : sort.extent;
  Kernel& k = ctx.kernel;
  k.index64 = k.index64 || ranksKeys(sort, item_length);  // ranks take up to 63 bits
  KernelBuilder kb(k);
  kb.fixBlock(params.block, 1);  // each thread's slots and pairs are in range: no test
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  k.grid = {params.grid, 1};
  k.summary = params.toString();
  LineItem line = lineItemOf(ctx, sort, parts, item_length);
  CandidateWorkspaces ws;
  BlockSort b{lineWork(kb, vb, sort, line, &ws)};
  b.threads = params.block;
  b.grid = params.grid;
  b.slots = params.sort_slots;
  b.passes = params.sort_passes;
  b.keep = sort.keep;
  emitBlockSort(kb, sort, b);
  if (parts == 1) return;
  // Each line's parts x keep candidates, block sorted again.
  ctx.follow_ups.push_back(lowerMergeKernel(ctx, sort, params, ws, [&](KernelBuilder& mkb, MergeLines& m) {
    BlockSort merge{m.work()};
    merge.threads = params.merge_block;
    merge.grid = params.merge_grid;
    merge.slots = params.merge_slots;
    merge.passes = params.merge_passes;
    merge.keep = sort.keep;
    emitBlockSort(mkb, m.sort, merge);
    return fmt::format("scan: merge of {} parts' best {} per line, block sort of {} slots, {} pass(es), block {}",
                       params.sort_parts, sort.keep, params.merge_slots, params.merge_passes, params.merge_block);
  }));
}

}  // namespace braze::scheduler
