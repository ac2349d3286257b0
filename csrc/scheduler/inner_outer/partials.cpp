// The inner-outer kernel's last step: each thread's partial sums of the outer reductions (the columns of
// every row it walked) stored to the shared workspaces the finish reads; and the same for each item of
// the grouped reductions, at the item's end. Where the heuristics combine in
// the block, the thread rows first add up their sums in shared memory and the block stores one partial
// row, every thread taking its own columns; either way whole vectors are stored where the row length
// allows (16 bytes per access).
#include "scheduler/inner_outer/entry.h"
#include "support/error.h"

#include <algorithm>

namespace braze::scheduler {
namespace {

// The widest access of `acc` values (a power of two, at most 16 bytes) that both the vectorize factor and
// the row length divide: then a thread's chunk is whole accesses, and one that starts inside a row ends
// inside it.
int storeWidth(DataType acc, int64_t vectorize, int64_t row_length) {
  int64_t width = 16 / sizeOf(acc);
  while (width > 1 && (vectorize % width != 0 || row_length % width != 0)) width /= 2;
  return static_cast<int>(std::max<int64_t>(width, 1));
}

// Stores `values[at .. at + count)` to `ws[offset ..]`, whole vectors of `width` (count is a multiple).
void storeRun(KernelBuilder& kb, TensorId ws, ExprId offset, VarId values, ExprId at, int64_t count, int width) {
  for (int64_t l = 0; l < count; l += width) {
    const ExprId to = kb.add(offset, kb.index(l));
    const ExprId from = kb.add(at, kb.index(l));
    if (width == 1) {
      kb.store(ws, to, kb.localRead(values, from));
    } else {
      kb.vecStore(ws, to, values, from, width);
    }
  }
}

// Each thread row stores its own partial row, `partial_row`.
void storePerThreadRow(KernelBuilder& kb, const std::vector<ThreadPartials>& partials, const ReductionParams& rows,
                       int64_t row_length, VarId chunk, ExprId partial_row) {
  const int64_t vec = rows.vectorize;
  for (const ThreadPartials& p : partials) {
    kb.openFor(chunk, kb.index(0), kb.index(rows.chunks), kb.index(1), true);
    const ExprId step = kb.add(kb.mul(kb.ref(chunk), kb.index(rows.threads_x)), kb.threadIdx(0));
    storeChunkOfSums(kb, p.workspace, p.acc, p.sums, kb.mul(kb.ref(chunk), kb.index(vec)),
                     kb.mul(partial_row, kb.index(row_length)), kb.mul(step, kb.index(vec)), vec, row_length);
    kb.close();
  }
}

// The thread rows' sums added in `shared` (an array of threads_y x row_length per partial sum); the block
// stores them as one partial row, `partial_row`.
void storeCombined(KernelBuilder& kb, const std::vector<ThreadPartials>& partials, const std::vector<VarId>& shared,
                   const ReductionParams& rows, int64_t row_length, VarId chunk, ExprId partial_row) {
  const int64_t vec = rows.vectorize;
  shareThreadRowSums(kb, partials, shared, rows, row_length, chunk);
  // Every thread of the block takes `width` consecutive columns at a time, the block's columns in order.
  const int64_t threads = rows.threads_x * rows.threads_y;
  const ExprId thread = kb.letValue("thread", kb.add(kb.mul(kb.threadIdx(1), kb.index(rows.threads_x)),
                                                     kb.threadIdx(0)));
  for (size_t o = 0; o < partials.size(); ++o) {
    const ThreadPartials& p = partials[o];
    const int width = storeWidth(p.acc, vec, row_length);
    const VarId sum = kb.arrayVar("sum", p.acc, width);
    kb.openFor(chunk, kb.index(0), kb.index(ceilDiv(row_length, threads * width)), kb.index(1), false);
    const ExprId col = kb.mul(kb.add(kb.mul(kb.ref(chunk), kb.index(threads)), thread), kb.index(width));
    kb.openIf(kb.lt(col, kb.index(row_length)));
    kb.declare(sum);
    for (int64_t l = 0; l < width; ++l) {
      ExprId total = kb.localRead(shared[o], kb.add(col, kb.index(l)));
      for (int64_t r = 1; r < rows.threads_y; ++r) {
        const ExprId part = kb.localRead(shared[o], kb.add(kb.index(r * row_length), kb.add(col, kb.index(l))));
        total = kb.elementwise(combineOf(p.op), p.acc, {total, part});
      }
      kb.localWrite(sum, kb.index(l), total);
    }
    storeRun(kb, p.workspace, kb.add(kb.mul(partial_row, kb.index(row_length)), col), sum, kb.index(0), width, width);
    kb.close();
    kb.close();
  }
}

}  // namespace

void storeChunkOfSums(KernelBuilder& kb, TensorId ws, DataType acc, VarId sums, ExprId slot, ExprId row_start,
                      ExprId first, int64_t vectorize, int64_t columns) {
  if (columns % vectorize == 0) {
    // A chunk's columns are all in the row or all past it.
    kb.openIf(kb.lt(first, kb.index(columns)));
    storeRun(kb, ws, kb.add(row_start, first), sums, slot, vectorize, storeWidth(acc, vectorize, columns));
    kb.close();
    return;
  }
  for (int64_t l = 0; l < vectorize; ++l) {
    const ExprId col = kb.add(first, kb.index(l));
    kb.openIf(kb.lt(col, kb.index(columns)));
    kb.store(ws, kb.add(row_start, col), kb.localRead(sums, kb.add(slot, kb.index(l))));
    kb.close();
  }
}

void shareThreadRowSums(KernelBuilder& kb, const std::vector<ThreadPartials>& partials, const std::vector<VarId>& shared,
                        const ReductionParams& rows, int64_t row_length, VarId chunk) {
  const int64_t vec = rows.vectorize;
  for (size_t o = 0; o < partials.size(); ++o) {
    kb.openFor(chunk, kb.index(0), kb.index(rows.chunks), kb.index(1), true);
    const ExprId first = kb.mul(kb.add(kb.mul(kb.ref(chunk), kb.index(rows.threads_x)), kb.threadIdx(0)), kb.index(vec));
    const bool whole_vectors = row_length % vec == 0;  // a vector's elements all in the row or all past it
    if (whole_vectors) kb.openIf(kb.lt(first, kb.index(row_length)));
    for (int64_t l = 0; l < vec; ++l) {
      const ExprId col = kb.add(first, kb.index(l));
      if (!whole_vectors) kb.openIf(kb.lt(col, kb.index(row_length)));
      kb.localWrite(shared[o], kb.add(kb.mul(kb.threadIdx(1), kb.index(row_length)), col),
                    kb.localRead(partials[o].sums, kb.add(kb.mul(kb.ref(chunk), kb.index(vec)), kb.index(l))));
      if (!whole_vectors) kb.close();
    }
    if (whole_vectors) kb.close();
    kb.close();
  }
  kb.barrier();
}

std::vector<VarId> declareCombineArrays(KernelBuilder& kb, const std::vector<ThreadPartials>& partials,
                                       const ReductionParams& rows, int64_t row_length) {
  std::vector<VarId> shared;
  for (const ThreadPartials& p : partials) {
    shared.push_back(kb.arrayVar("combine", p.acc, rows.threads_y * row_length, VarKind::SharedArray));
    kb.declare(shared.back());
  }
  return shared;
}

void storePartialRows(KernelBuilder& kb, const std::vector<ThreadPartials>& partials, const InnerOuterParams& io,
                      int64_t row_length, VarId chunk) {
  const ReductionParams& rows = io.inner;
  if (io.combine_in_block) {
    storeCombined(kb, partials, declareCombineArrays(kb, partials, rows, row_length), rows, row_length, chunk,
                  kb.blockIdx(0));
  } else {
    storePerThreadRow(kb, partials, rows, row_length, chunk,
                      kb.add(kb.mul(kb.blockIdx(0), kb.index(rows.threads_y)), kb.threadIdx(1)));
  }
}

void storeGroupItem(KernelBuilder& kb, const std::vector<ThreadPartials>& partials, const std::vector<VarId>& shared,
                    const ReductionParams& rows, int64_t row_length, VarId chunk, ExprId partial_row) {
  if (rows.threads_y == 1) {
    storePerThreadRow(kb, partials, rows, row_length, chunk, partial_row);
    return;
  }
  BRAZE_ASSERT(shared.size() == partials.size(), "a grouped item of {} thread rows has {} shared arrays for {} sums",
               rows.threads_y, shared.size(), partials.size());
  storeCombined(kb, partials, shared, rows, row_length, chunk, partial_row);
  kb.barrier();  // the next item's thread rows write the arrays again
}

}  // namespace braze::scheduler
