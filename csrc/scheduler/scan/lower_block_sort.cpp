// topk and argsort as block sorts: block b takes lines b, b + grid, ... For each line, its threads load
// `slots` elements (a power of two) into shared memory, each key with its index, and sort them with a
// bitonic network: log2(slots) stages, stage s of s steps, each step a compare-and-swap of every slot
// with its partner (its index xor a power of two) and a barrier. The order is a total one: key a
// ranks before key b as the line walk orders them (sortBeats), equal keys by index, so the result is
// the stable sort's; a slot past the line's end holds index `extent` and ranks after everything. After
// a pass the best `keep` elements seen lead the slots; each further pass loads the next slots - keep
// elements of the line behind them and sorts again, so a topk of any line length needs only keep <=
// slots / 2. The first `keep` slots are then the results.
#include "scheduler/scan/lower_sort.h"

#include "scheduler/scan/line_walk.h"

#include "scheduler/heuristics.h"
#include "support/error.h"

#include <functional>

namespace braze::scheduler {

void lowerBlockSortLines(LoweringContext& ctx, const ScanParams& params) {
  const SortOp sort = sortOpOf(ctx);
  const int64_t slots = params.sort_slots, threads = params.block;
  BRAZE_ASSERT(slots >= 2 && (slots & (slots - 1)) == 0 && sort.keep >= 1 &&
                   (sort.keep < sort.extent ? 2 * sort.keep <= slots : sort.extent <= slots),
               "a block sort of {} slots for lines of {} keeping {}", slots, sort.extent, sort.keep);
  Kernel& k = ctx.kernel;
  KernelBuilder kb(k);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  k.grid = {params.grid, 1};
  k.block = {threads, 1};
  k.summary = params.toString();

  const auto& sizes = ctx.bound.sizesOf(sort.x);
  LineWalk walk;
  walk.dim = sort.dim;
  walk.has_dim = !sizes.empty();
  std::vector<int64_t> line_sizes = sizes;
  if (walk.has_dim) line_sizes.erase(line_sizes.begin() + static_cast<int64_t>(sort.dim));
  for (int64_t s : line_sizes) walk.lines *= s;
  auto offsetIn = [&](TensorId tensor, ExprId at) {
    int64_t coefficient = 0;
    return vb.flatOffset(kb.kernel().tensors[tensor].layout, lineIndex(walk, at), &coefficient);
  };

  const VarId keys = kb.arrayVar("keys", sort.compute, slots, VarKind::SharedArray);
  const VarId at = kb.arrayVar("at", DataType::Int64, slots, VarKind::SharedArray);
  kb.declare(keys);
  kb.declare(at);
  const ExprId tid = kb.threadIdx(0);
  const ExprId extent = kb.index(sort.extent);
  // Whether slot a's element ranks before slot b's: a real element (its index inside the line) before a
  // padding slot, else by key, equal keys by index.
  auto before = [&](ExprId key_a, ExprId at_a, ExprId key_b, ExprId at_b) {
    const ExprId by_key = kb.lor(sortBeats(kb, sort, key_a, key_b),
                                 kb.land(kb.lnot(sortBeats(kb, sort, key_b, key_a)), kb.lt(at_a, at_b)));
    return kb.land(kb.lt(at_a, extent), kb.lor(kb.le(extent, at_b), by_key));
  };
  // for (r = 0; r < ceil(count / threads); ++r) body(tid + r * threads), where that is below `count`.
  auto forSlots = [&](int64_t count, const char* name, const std::function<void(ExprId)>& body) {
    const VarId r = kb.scalarVar("r", DataType::Int64, /*is_index=*/true);
    kb.openFor(r, kb.index(0), kb.index(ceilDiv(count, threads)), kb.index(1), /*unroll=*/false);
    const ExprId slot = kb.letValue(name, kb.add(tid, kb.mul(kb.ref(r), kb.index(threads))));
    kb.openIf(kb.lt(slot, kb.index(count)));
    body(slot);
    kb.close();
    kb.close();
  };

  const VarId line = kb.scalarVar("line", DataType::Int64, /*is_index=*/true);
  kb.openFor(line, kb.blockIdx(0), kb.index(walk.lines), kb.index(params.grid), /*unroll=*/false);
  walk.line = kb.ref(line);
  walk.position = vb.unflatten(walk.line, false, line_sizes);
  const VarId pass = kb.scalarVar("pass", DataType::Int64, /*is_index=*/true);
  kb.openFor(pass, kb.index(0), kb.index(params.sort_passes), kb.index(1), /*unroll=*/false);
  // Pass p fills slot s (the first pass every slot, the others those behind the kept ones) with
  // element s + p (slots - keep) of the line.
  forSlots(slots, "s", [&](ExprId s) {
    const bool refills = params.sort_passes > 1;
    if (refills) kb.openIf(kb.lor(kb.eq(kb.ref(pass), kb.index(0)), kb.le(kb.index(sort.keep), s)));
    const ExprId e = kb.letValue("e", kb.add(s, kb.mul(kb.ref(pass), kb.index(slots - sort.keep))));
    kb.openIf(kb.lt(e, extent));
    kb.localWrite(keys, s, sortKeyAt(kb, vb, sort, lineIndex(walk, e)));
    kb.localWrite(at, s, kb.indexToValue(e, DataType::Int64));
    kb.openElse();
    kb.localWrite(keys, s, isFloating(sort.compute) ? kb.constant(0.0, sort.compute) : kb.constantInt(0, sort.compute));
    kb.localWrite(at, s, kb.indexToValue(extent, DataType::Int64));
    kb.close();
    if (refills) kb.close();
  });
  kb.barrier();
  // The network: stage `log` merges runs of 2^(log-1) into runs of 2^log, in order where bit `log` of
  // the slot is clear and reversed where it is set (the whole array in order after the last stage);
  // its steps pair slots `half` apart, half = 2^(log-1) down to 1.
  const VarId half = kb.scalarVar("half", DataType::Int64, /*is_index=*/true);
  kb.let(half, kb.index(1));
  int64_t steps = 0;
  for (int64_t run = 2; run <= slots; run *= 2) {
    ++steps;
    kb.assign(half, kb.index(run / 2));
    const VarId step = kb.scalarVar("j", DataType::Int64, /*is_index=*/true);
    kb.openFor(step, kb.index(0), kb.index(steps), kb.index(1), /*unroll=*/false);
    forSlots(slots, "i", [&](ExprId i) {
      const ExprId partner = kb.letValue("partner", kb.bitXor(i, kb.ref(half)));
      kb.openIf(kb.lt(i, partner));  // the pair's lower slot swaps it
      const ExprId key_i = kb.letValue("key_i", kb.localRead(keys, i));
      const ExprId key_p = kb.letValue("key_p", kb.localRead(keys, partner));
      const ExprId at_i = kb.letValue("at_i", kb.valueToIndex(kb.localRead(at, i)));
      const ExprId at_p = kb.letValue("at_p", kb.valueToIndex(kb.localRead(at, partner)));
      const ExprId in_order_run = kb.eq(kb.mod(kb.div(i, kb.index(run)), kb.index(2)), kb.index(0));
      kb.openIf(kb.select(in_order_run, before(key_p, at_p, key_i, at_i), before(key_i, at_i, key_p, at_p)));
      kb.localWrite(keys, i, key_p);
      kb.localWrite(keys, partner, key_i);
      kb.localWrite(at, i, kb.indexToValue(at_p, DataType::Int64));
      kb.localWrite(at, partner, kb.indexToValue(at_i, DataType::Int64));
      kb.close();
      kb.close();
    });
    kb.barrier();
    kb.assign(half, kb.div(kb.ref(half), kb.index(2)));
    kb.close();
  }
  kb.close();  // pass
  // The kept elements lead the slots, in order.
  forSlots(sort.keep, "s", [&](ExprId s) {
    if (sort.values_param >= 0) {
      kb.store(sort.values_param, offsetIn(sort.values_param, s), kb.cast(kb.localRead(keys, s), sort.values->dtype()));
    }
    if (sort.indices_param >= 0) {
      const DataType index_type = kb.kernel().tensors[sort.indices_param].dtype;
      kb.store(sort.indices_param, offsetIn(sort.indices_param, s),
               kb.indexToValue(kb.valueToIndex(kb.localRead(at, s)), index_type));
    }
  });
  kb.barrier();  // the next line's loads overwrite the slots
  kb.close();  // line
}

}  // namespace braze::scheduler
