// The row lowering's totals over the rows (row_totals.h): a sum per thread of its rows' values (the blocks
// walk the row groups, as many as the SMs hold: lowerRowGroupWalk), a partial per block, and the last
// block's combine. The blocks' partials go to a workspace and each block counts itself in with an atomic
// after a fence; the block that counts last reads them all (from L2), combines them in a fixed order (so a
// launch gives the same bits every time), writes what is computed from the totals, and sets the count
// back to 0 (the executor also zeroes the count's workspace before each launch).
#include "scheduler/reduction/row_lowering.h"
#include "support/error.h"

namespace braze::scheduler {

void RowLowering::declareTotals() {
  for (const Expr* r : totals_) {
    const Plain p = plainOf(*r);
    const VarId acc = kb_.scalarVar("total", p.acc);
    kb_.let(acc, identity(kb_, p.op, p.acc));
    total_acc_.push_back(acc);
  }
}

void RowLowering::accumulateTotals(Chunk& c) {
  // In the chunk of the row's leader: every row adds its value once.
  for (size_t t = 0; t < totals_.size(); ++t) {
    const Expr& r = *totals_[t];
    const Plain p = plainOf(r);
    const Val* in = r.input(0);
    const auto at = vb_.unflatten(kept_base_, false, bound_.sizesOf(in));
    const ExprId value = reducedElement(kb_, vb_.valueAt(in, at), in->dtype(), p.out);
    kb_.pushTarget(&c.pre);
    kb_.assign(total_acc_[t], kb_.elementwise(combineOf(p.op), p.acc, {kb_.ref(total_acc_[t]), value}));
    kb_.popTarget();
  }
}

void RowLowering::finishTotals() {
  if (totals_.empty()) return;
  BRAZE_ASSERT(params_.inner && lanes_ == 1, "segment {}: totals over the rows of an outer reduction", ctx_.segment.id);
  const int64_t rows_per_block = params_.threads_y;
  const ExprId x0 = kb_.eq(kb_.threadIdx(0), kb_.index(0));
  const ExprId first_thread = kb_.land(x0, kb_.eq(kb_.threadIdx(1), kb_.index(0)));
  // Blocks of this launch: a launch argument, so the kernel runs at other row counts too.
  const ExprId blocks = kb_.extent("blocks", params_.grid);
  // The block's partials: only the rows' leaders (x = 0) hold values, so the rows of the block combine
  // through a shared array of one value per row, in order.
  std::vector<VarId> shared;
  for (size_t t = 0; t < totals_.size() && rows_per_block > 1; ++t) {
    const VarId rows = kb_.arrayVar("rows_total", plainOf(*totals_[t]).acc, rows_per_block, VarKind::SharedArray);
    kb_.declare(rows);
    kb_.openIf(x0);
    kb_.localWrite(rows, kb_.threadIdx(1), kb_.ref(total_acc_[t]));
    kb_.close();
    shared.push_back(rows);
  }
  if (!shared.empty()) kb_.barrier();
  // Thread (0, 0) adds the other rows' values of total t (in the shared array, after a barrier) to `acc`.
  const auto addOtherRows = [&](size_t t, VarId acc) {
    if (shared.empty()) return;
    const Plain p = plainOf(*totals_[t]);
    const VarId y = kb_.scalarVar("y", DataType::Int64, true);
    kb_.openFor(y, kb_.index(1), kb_.index(rows_per_block), kb_.index(1), false);
    kb_.assign(acc, kb_.elementwise(combineOf(p.op), p.acc, {kb_.ref(acc), kb_.localRead(shared[t], kb_.ref(y))}));
    kb_.close();
  };
  std::vector<TensorId> partials;
  kb_.openIf(first_thread);
  for (size_t t = 0; t < totals_.size(); ++t) {
    const Plain p = plainOf(*totals_[t]);
    addOtherRows(t, total_acc_[t]);
    const TensorId ws = addWorkspace(fmt::format("row_totals{}", t), p.acc, params_.grid, false);
    kb_.store(ws, kb_.blockIdx(0), kb_.ref(total_acc_[t]));
    partials.push_back(ws);
  }
  kb_.close();
  // Publish the partials, then count this block in; thread 0 learns whether it came last.
  const TensorId arrived = addWorkspace("totals_arrived", DataType::Int32, 1, true);
  kb_.fence();
  kb_.barrier();
  const VarId last = kb_.arrayVar("last_block", DataType::Bool, 1, VarKind::SharedArray);
  kb_.declare(last);
  kb_.openIf(first_thread);
  const VarId before = kb_.scalarVar("arrived_before", DataType::Int64, true);
  kb_.atomicAdd(before, arrived, kb_.index(0), kb_.index(1));
  kb_.localWrite(last, kb_.index(0), kb_.eq(kb_.ref(before), kb_.sub(blocks, kb_.index(1))));
  kb_.close();
  kb_.barrier();
  kb_.openIf(kb_.letValue("is_last", kb_.localRead(last, kb_.index(0))));
  // Every thread reads every threads-th partial; a block reduction along x, then the rows' shared array,
  // combine them into thread (0, 0)'s.
  const ExprId thread = kb_.add(kb_.mul(kb_.threadIdx(1), kb_.index(params_.threads_x)), kb_.threadIdx(0));
  std::vector<VarId> combined;
  for (size_t t = 0; t < totals_.size(); ++t) {
    const Plain p = plainOf(*totals_[t]);
    const VarId total = kb_.scalarVar("total", p.acc);
    kb_.let(total, identity(kb_, p.op, p.acc));
    const VarId j = kb_.scalarVar("j", DataType::Int64, true);
    kb_.openFor(j, thread, blocks, kb_.index(params_.threads_x * rows_per_block), false);
    kb_.assign(total, kb_.elementwise(combineOf(p.op), p.acc, {kb_.ref(total), kb_.load(partials[t], kb_.ref(j))}));
    kb_.close();
    kb_.blockReduce(total, p.op, 0);
    if (!shared.empty()) {
      kb_.openIf(x0);
      kb_.localWrite(shared[t], kb_.threadIdx(1), kb_.ref(total));
      kb_.close();
    }
    combined.push_back(total);
  }
  if (!shared.empty()) kb_.barrier();
  kb_.openIf(first_thread);
  for (size_t t = 0; t < totals_.size(); ++t) addOtherRows(t, combined[t]);
  kb_.close();
  for (size_t t = 0; t < totals_.size(); ++t) {
    const Expr& r = *totals_[t];
    vb_.setResult(r.output(0), kb_.letValue("r", kb_.cast(kb_.ref(combined[t]), plainOf(r).out)));
  }
  emitChunk(kb_, vb_, first_thread, 1, lane_, [&](Chunk& c) {
    for (const Val* out : ctx_.segment.outputs) {
      if (after_totals_.count(out) == 0) continue;
      const auto at = vb_.unflatten(kb_.index(0), false, bound_.sizesOf(out));
      storeOutput(kb_, vb_, c, ctx_.outputs.at(out), at, vb_.valueAt(out, at));
    }
  });
  kb_.openIf(first_thread);
  kb_.store(arrived, kb_.index(0), kb_.constantInt(0, DataType::Int32));
  kb_.close();
  kb_.close();
}

}  // namespace braze::scheduler
