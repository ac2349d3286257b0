// A block sort's slots in shared memory and the bitonic network over them (block_sort.h).
#include "scheduler/scan/block_sort.h"

#include "scheduler/heuristics.h"
#include "support/error.h"

namespace braze::scheduler {

bool ranksKeys(const SortOp& sort, int64_t length) { return rankSlots(rankKeys(sort.x->dtype()), length); }

SortSlots declareSortSlots(KernelBuilder& kb, const SortOp& sort, int64_t slots, int64_t length, int64_t threads) {
  SortSlots s;
  s.length = length;
  s.position_bits = positionBits(length);
  if (ranksKeys(sort, length)) {
    BRAZE_ASSERT(s.position_bits <= 31 && kb.kernel().index64, "ranks of {} positions", length);
    if (slots % threads == 0 && slots / threads >= 4) s.per_thread = slots / threads;
    const int64_t padding = s.per_thread > 1 ? slots / s.per_thread : 0;
    s.ranks = kb.arrayVar("ranks", DataType::Int64, slots + padding, VarKind::SharedArray);
    kb.declare(s.ranks);
    return s;
  }
  s.keys = kb.arrayVar("keys", sort.compute, slots, VarKind::SharedArray);
  s.at = kb.arrayVar("at", DataType::Int64, slots, VarKind::SharedArray);
  kb.declare(s.keys);
  kb.declare(s.at);
  return s;
}

ExprId keyRank(KernelBuilder& kb, const SortOp& sort, int64_t position_bits, ExprId key, ExprId position) {
  // Floats by their order key; integers of 32 bits or fewer (held as Int64) offset to [0, 2^32).
  const ExprId order = sort.compute == DataType::Float ? kb.orderKey(key)
                                                       : kb.add(kb.valueToIndex(key), kb.index(int64_t{1} << 31));
  const ExprId key_rank = sort.descending ? order : kb.sub(kb.index((int64_t{1} << 32) - 1), order);
  const ExprId low = kb.index((int64_t{1} << position_bits) - 1);
  return kb.add(kb.mul(key_rank, kb.index(int64_t{1} << position_bits)), kb.sub(low, position));
}

namespace {

// Where rank slot s lies in the shared array.
ExprId rankAt(KernelBuilder& kb, const SortSlots& slots, ExprId s) {
  return slots.per_thread > 1 ? kb.add(s, kb.div(s, kb.index(slots.per_thread))) : s;
}

ExprId readRank(KernelBuilder& kb, const SortSlots& slots, ExprId s) {
  return kb.valueToIndex(kb.localRead(slots.ranks, rankAt(kb, slots, s)));
}

}  // namespace

void writeRank(KernelBuilder& kb, const SortSlots& slots, ExprId s, ExprId rank) {
  kb.localWrite(slots.ranks, rankAt(kb, slots, s), kb.indexToValue(rank, DataType::Int64));
}

void fillSlot(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, ExprId s, ExprId key, ExprId position) {
  if (slots.ranks >= 0) {
    writeRank(kb, slots, s, keyRank(kb, sort, slots.position_bits, key, position));
    return;
  }
  kb.localWrite(slots.keys, s, key);
  kb.localWrite(slots.at, s, kb.indexToValue(position, DataType::Int64));
}

void padSlot(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, ExprId s) {
  if (slots.ranks >= 0) {
    writeRank(kb, slots, s, kb.index(-1));
    return;
  }
  kb.localWrite(slots.keys, s, isFloating(sort.compute) ? kb.constant(0.0, sort.compute) : kb.constantInt(0, sort.compute));
  kb.localWrite(slots.at, s, kb.indexToValue(kb.index(slots.length), DataType::Int64));
}

ExprId slotPosition(KernelBuilder& kb, const SortSlots& slots, ExprId s) {
  if (slots.ranks < 0) return kb.valueToIndex(kb.localRead(slots.at, s));
  // Padding (-1) has every low bit set: its position comes out as 2^bits - 1 - (2^bits - 1) = 0, so it is
  // told apart by its sign.
  const ExprId rank = kb.letValue("rank", readRank(kb, slots, s));
  const ExprId low = kb.index((int64_t{1} << slots.position_bits) - 1);
  return kb.select(kb.lt(rank, kb.index(0)), kb.index(slots.length), kb.sub(low, kb.bitAnd(rank, low)));
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

namespace {

// Puts the pair (i, partner) in order (`in_order`: the better first) or reversed.
void compareAndSwap(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, ExprId i, ExprId partner,
                    ExprId in_order) {
  if (slots.ranks >= 0) {
    // Ranks are unique (but padding's): the larger is the better; both slots are written, no branch.
    const ExprId rank_i = kb.letValue("rank_i", readRank(kb, slots, i));
    const ExprId rank_p = kb.letValue("rank_p", readRank(kb, slots, partner));
    const ExprId i_lower = kb.lt(rank_i, rank_p);
    const ExprId high = kb.letValue("high", kb.select(i_lower, rank_p, rank_i));
    const ExprId low = kb.letValue("low", kb.select(i_lower, rank_i, rank_p));
    writeRank(kb, slots, i, kb.select(in_order, high, low));
    writeRank(kb, slots, partner, kb.select(in_order, low, high));
    return;
  }
  const ExprId length = kb.index(slots.length);
  // Whether slot a's element ranks before slot b's: a real element (its position below the length)
  // before a padding slot, else by key, equal keys by position.
  auto before = [&](ExprId key_a, ExprId at_a, ExprId key_b, ExprId at_b) {
    const ExprId by_key = kb.lor(sortBeats(kb, sort, key_a, key_b),
                                 kb.land(kb.lnot(sortBeats(kb, sort, key_b, key_a)), kb.lt(at_a, at_b)));
    return kb.land(kb.lt(at_a, length), kb.lor(kb.le(length, at_b), by_key));
  };
  const ExprId key_i = kb.letValue("key_i", kb.localRead(slots.keys, i));
  const ExprId key_p = kb.letValue("key_p", kb.localRead(slots.keys, partner));
  const ExprId at_i = kb.letValue("at_i", kb.valueToIndex(kb.localRead(slots.at, i)));
  const ExprId at_p = kb.letValue("at_p", kb.valueToIndex(kb.localRead(slots.at, partner)));
  kb.openIf(kb.select(in_order, before(key_p, at_p, key_i, at_i), before(key_i, at_i, key_p, at_p)));
  kb.localWrite(slots.keys, i, key_p);
  kb.localWrite(slots.keys, partner, key_i);
  kb.localWrite(slots.at, i, kb.indexToValue(at_p, DataType::Int64));
  kb.localWrite(slots.at, partner, kb.indexToValue(at_i, DataType::Int64));
  kb.close();
}

// The steps of stage `run` that pair slots `half` apart for half = run / 2 down to `last_half` (a power
// of two, at most run / 2), a thread per pair, each followed by a barrier.
void pairSteps(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, int64_t count, int64_t threads,
               int64_t run, int64_t last_half) {
  int64_t steps = 0;
  for (int64_t h = run / 2; h >= last_half; h /= 2) ++steps;
  const VarId half = kb.scalarVar("half", DataType::Int64, /*is_index=*/true);
  kb.let(half, kb.index(run / 2));
  const VarId step = kb.scalarVar("j", DataType::Int64, /*is_index=*/true);
  kb.openFor(step, kb.index(0), kb.index(steps), kb.index(1), /*unroll=*/false);
  // A thread per pair: pair p's lower slot i keeps p's bits below half's and moves the others up one
  // place (i = (p / half) * 2 half + p % half = 2 p - p % half, half a power of two); its partner is
  // i + half. Stage `run` puts runs of `run` in order where the slot's bit `run` is clear, else reversed.
  forEachSlot(kb, count / 2, threads, "p", [&](ExprId p) {
    const ExprId h = kb.ref(half);
    const ExprId i = kb.letValue("i", kb.sub(kb.mul(p, kb.index(2)), kb.bitAnd(p, kb.sub(h, kb.index(1)))));
    const ExprId partner = kb.letValue("partner", kb.add(i, h));
    const ExprId in_order_run = kb.eq(kb.bitAnd(i, kb.index(run)), kb.index(0));
    compareAndSwap(kb, sort, slots, i, partner, in_order_run);
  });
  kb.barrier();
  kb.assign(half, kb.div(kb.ref(half), kb.index(2)));
  kb.close();
}

// The steps of half below per_thread of the stages of runs `runs`, in registers: each thread loads its
// per_thread consecutive rank slots, runs the steps on them and stores them, then a barrier.
void registerSteps(KernelBuilder& kb, const SortSlots& slots, VarId reg, const std::vector<int64_t>& runs) {
  const int64_t n = slots.per_thread;
  const ExprId base = kb.letValue("base", kb.mul(kb.threadIdx(0), kb.index(n)));
  for (int64_t a = 0; a < n; ++a) kb.localWrite(reg, kb.index(a), kb.indexToValue(readRank(kb, slots, kb.add(base, kb.index(a))), DataType::Int64));
  for (int64_t run : runs) {
    // Slot base + a's bit `run`: a's own where run < n; the base's (the same for all of a thread's slots)
    // where run >= n, since a < n <= run adds no carry into it.
    const ExprId base_in_order = kb.letValue("in_order", kb.eq(kb.bitAnd(base, kb.index(run)), kb.index(0)));
    for (int64_t half = std::min(run, n) / 2; half >= 1; half /= 2) {
      for (int64_t a = 0; a < n; ++a) {
        if ((a & half) != 0) continue;
        const ExprId in_order = run < n ? kb.boolean((a & run) == 0) : base_in_order;
        const ExprId x = kb.letValue("x", kb.valueToIndex(kb.localRead(reg, kb.index(a))));
        const ExprId y = kb.letValue("y", kb.valueToIndex(kb.localRead(reg, kb.index(a + half))));
        const ExprId x_lower = kb.lt(x, y);
        const ExprId high = kb.letValue("high", kb.select(x_lower, y, x));
        const ExprId low = kb.letValue("low", kb.select(x_lower, x, y));
        kb.localWrite(reg, kb.index(a), kb.indexToValue(kb.select(in_order, high, low), DataType::Int64));
        kb.localWrite(reg, kb.index(a + half), kb.indexToValue(kb.select(in_order, low, high), DataType::Int64));
      }
    }
  }
  for (int64_t a = 0; a < n; ++a) writeRank(kb, slots, kb.add(base, kb.index(a)), kb.valueToIndex(kb.localRead(reg, kb.index(a))));
  kb.barrier();
}

}  // namespace

void sortSlotsNetwork(KernelBuilder& kb, const SortOp& sort, const SortSlots& slots, int64_t count, int64_t threads) {
  const int64_t n = slots.per_thread;
  if (n == 1) {
    for (int64_t run = 2; run <= count; run *= 2) pairSteps(kb, sort, slots, count, threads, run, 1);
    return;
  }
  BRAZE_ASSERT(count == n * threads, "{} rank slots sorted {} a thread by {} threads", count, n, threads);
  const VarId reg = kb.arrayVar("reg", DataType::Int64, n);
  kb.declare(reg);
  // Runs up to n: each thread's own slots, one round in registers.
  std::vector<int64_t> first;
  for (int64_t run = 2; run <= n; run *= 2) first.push_back(run);
  registerSteps(kb, slots, reg, first);
  for (int64_t run = 2 * n; run <= count; run *= 2) {
    pairSteps(kb, sort, slots, count, threads, run, n);
    registerSteps(kb, slots, reg, {run});
  }
}

}  // namespace braze::scheduler
