// The row lowering's passes (row_lowering.h): accumulations over a row's elements and across its
// threads, plain reductions and statistics, and the grid reduction of rows split among blocks.
#include "scheduler/reduction/row_lowering.h"

namespace braze::scheduler {

RowVar RowLowering::newRowVar(DataType dtype, ExprId init) {
  RowVar v{-1, lanes_};
  if (lanes_ == 1) {
    v.var = kb_.scalarVar("acc", dtype);
    kb_.let(v.var, init);
    return v;
  }
  v.var = kb_.arrayVar("acc", dtype, lanes_);
  kb_.declare(v.var);
  for (int64_t l = 0; l < lanes_; ++l) kb_.localWrite(v.var, kb_.index(l), init);
  return v;
}

void RowLowering::blockReduce(const RowVar& v, DataType dtype, ReduceOp op) {
  const int axis = params_.inner ? 0 : 1;
  if (v.lanes == 1) {
    kb_.blockReduce(v.var, op, axis);
    return;
  }
  for (int64_t l = 0; l < v.lanes; ++l) {
    const VarId t = kb_.scalarVar("part", dtype);
    kb_.let(t, kb_.localRead(v.var, kb_.index(l)));
    kb_.blockReduce(t, op, axis);
    kb_.localWrite(v.var, kb_.index(l), kb_.ref(t));
  }
}

std::vector<RowVar> RowLowering::accumulateAll(DataType acc_type, ReduceOp op, const std::vector<ValueAt>& values) {
  std::vector<RowVar> accs;
  for (size_t i = 0; i < values.size(); ++i) accs.push_back(newRowVar(acc_type, identity(kb_, op, acc_type)));
  // The first pass over the elements also writes the outputs that need no reduction result.
  const std::vector<const Val*> prologue = prologue_written_ ? std::vector<const Val*>{} : prologueOutputs();
  prologue_written_ = true;
  forEachElement([&](Chunk& c, const std::vector<Idx>& index) {
    if (!prologue.empty()) storeFullOutputs(c, index, prologue);
    for (size_t i = 0; i < values.size(); ++i) {
      const RowVar& acc = accs[i];
      const ExprId v = kb_.cast(values[i](index), acc_type);
      kb_.pushTarget(params_.vectorize > 1 ? &c.body : &c.pre);
      const ExprId combined = kb_.elementwise(combineOf(op), acc_type, {rowValue(acc), v});
      if (acc.lanes == 1) {
        kb_.assign(acc.var, combined);
      } else {
        kb_.localWrite(acc.var, kb_.ref(lane_), combined);
      }
      kb_.popTarget();
    }
  });
  for (const RowVar& acc : accs) blockReduce(acc, acc_type, op);
  return accs;
}

RowVar RowLowering::accumulatePlain(const Expr& e) {
  const Val* in = e.input(0);
  const Plain p = plainOf(e);
  // accumulate casts to the accumulator's type again: a cast to the type an expression has folds away.
  return accumulate(p.acc, p.op, [&](const std::vector<Idx>& index) {
    return reducedElement(kb_, vb_.valueAt(in, index), in->dtype(), p.out);
  });
}

void RowLowering::reduce(const Expr& e) {
  const Val* in = e.input(0);
  if (opInfo(e.kind()).category == OpCategory::Reduction) {
    const RowVar total = accumulatePlain(e);
    vb_.setResult(e.output(0), rowLet("r", kb_.cast(rowValue(total), plainOf(e).out)));
    return;
  }
  // Statistics: a first mean (the sum of x / n, which stays finite where the sum of x would not), then
  // the deviations from it and their squares, accumulated in float (double for double outputs); n is
  // the reduced element count.
  const DataType acc = e.output(0)->dtype() == DataType::Double ? DataType::Double : DataType::Float;
  const ExprId n = params_.inner ? kb_.constant(static_cast<double>(row_length_), acc)
                                 : kb_.indexToValue(reducedCount(), acc);
  const ExprId zero = kb_.constant(0.0, acc);
  const ExprId inverse_n =
      params_.inner ? kb_.constant(row_length_ > 0 ? 1.0 / static_cast<double>(row_length_) : 0.0, acc)
                    : rowLet("inverse_n", kb_.elementwise(OpKind::TrueDiv, acc, {kb_.constant(1.0, acc), n}));
  const RowVar sum = accumulate(acc, ReduceOp::Sum, [&](const std::vector<Idx>& index) {
    return kb_.elementwise(OpKind::Mul, acc, {kb_.cast(vb_.valueAt(in, index), acc), inverse_n});
  });
  const ExprId first_mean = rowLet("mean", rowValue(sum));
  const ValueAt deviation = [&](const std::vector<Idx>& index) {
    return kb_.elementwise(OpKind::Sub, acc, {kb_.cast(vb_.valueAt(in, index), acc), first_mean});
  };
  const std::vector<RowVar> deviations = accumulateAll(acc, ReduceOp::Sum, {deviation, [&](const std::vector<Idx>& index) {
    const ExprId d = deviation(index);
    return vb_.bind("d2", kb_.elementwise(OpKind::Mul, acc, {d, d}));
  }});
  // The sum of the deviations corrects the rounding of the first mean (a row of equal values sums to
  // another value, leaving that mean an ulp or so off them): with shift = sum(d)/n, mean + shift and
  // sum(d^2) - sum(d) shift give such a row its value back and a variance of 0, exactly while those
  // sums are (short of some 2^24 elements), as torch's Welford does. shift is NaN where n is 0 (the
  // mean too, the squares' sum 0).
  const ExprId d_sum = rowValue(deviations[0]);
  const ExprId shift = rowLet("shift", kb_.elementwise(OpKind::TrueDiv, acc, {d_sum, n}));
  // Where the deviations overflowed (values near the float limit) or the first mean is not finite, the
  // first mean stands; where n is 0, the NaN shift.
  const ExprId nonempty = kb_.elementwise(OpKind::Gt, DataType::Bool, {n, zero});
  const ExprId corrected = kb_.elementwise(OpKind::Add, acc, {first_mean, shift});
  const ExprId fallback = params_.inner ? (row_length_ > 0 ? first_mean : shift) : kb_.select(nonempty, first_mean, shift);
  const ExprId mean =
      rowLet("mean", kb_.select(kb_.elementwise(OpKind::IsFinite, DataType::Bool, {corrected}), corrected, fallback));
  const ExprId shifted = kb_.elementwise(OpKind::Mul, acc, {d_sum, shift});
  const ExprId removed = params_.inner ? (row_length_ > 0 ? shifted : zero) : kb_.select(nonempty, shifted, zero);
  // (sum d)^2 / n is at most sum(d^2): where that is infinite, so is the result, whatever the other rounds to.
  const ExprId square_sum = rowValue(deviations[1]);
  const ExprId squares =
      kb_.select(kb_.elementwise(OpKind::IsFinite, DataType::Bool, {square_sum}),
                 kb_.elementwise(OpKind::Sub, acc, {square_sum, removed}), square_sum);
  // Rounding may leave a variance of 0 a little below it; NaN stays NaN.
  const ExprId m2 = rowLet("m2", kb_.elementwise(OpKind::Maximum, acc, {squares, zero}));
  auto result = [&](size_t i, ExprId value) {
    vb_.setResult(e.output(i), rowLet("stat", kb_.cast(value, e.output(i)->dtype())));
  };
  if (e.kind() == OpKind::Welford) {
    result(0, mean);
    result(1, m2);
    result(2, n);
    return;
  }
  // n - correction, at least 0 (a variance of fewer elements than the correction divides by 0); an
  // outer reduction's n comes at launch.
  const double correction = e.attrs().getDouble("correction");
  const ExprId divisor =
      params_.inner ? kb_.constant(std::max(static_cast<double>(row_length_) - correction, 0.0), acc)
                    : kb_.elementwise(OpKind::Maximum, acc,
                                      {kb_.elementwise(OpKind::Sub, acc, {n, kb_.constant(correction, acc)}), zero});
  const ExprId var = kb_.elementwise(OpKind::TrueDiv, acc, {m2, divisor});
  result(0, var);
  if (e.kind() == OpKind::VarMean) result(1, mean);
}

void RowLowering::gridReduce() {
  const int64_t splits = params_.splits;
  const ExprId leader = kb_.eq(member_, kb_.index(0));
  std::vector<std::pair<RowVar, TensorId>> partials;
  for (const Expr* e : facts_.reductions) {
    const Plain p = plainOf(*e);
    const RowVar acc = accumulatePlain(*e);
    // Bool partials (any/all) travel as int32: the workspace loads go through L2 (__ldcg).
    const DataType stored = p.acc == DataType::Bool ? DataType::Int32 : p.acc;
    const std::string name = partials.empty() ? "partials" : fmt::format("partials{}", partials.size());
    const TensorId ws = addWorkspace(name, stored, rows_ * splits, false);
    kb_.openIf(kb_.land(leader, row_ok_));
    for (int64_t l = 0; l < lanes_; ++l) {
      const ExprId slot = kb_.add(kb_.mul(kb_.add(kept_base_, kb_.index(l)), kb_.index(splits)), split_);
      kb_.store(ws, slot, kb_.cast(laneValue(acc, l), stored));
    }
    kb_.close();
    partials.emplace_back(acc, ws);
  }
  // Publish the partials, then count this block in; thread 0 learns whether it came last.
  const TensorId semaphore = addWorkspace("arrived", DataType::Int32, params_.grid, true);
  kb_.fence();
  kb_.barrier();
  const VarId flag = kb_.arrayVar("last_block", DataType::Bool, 1, VarKind::SharedArray);
  kb_.declare(flag);
  const ExprId first_thread = kb_.land(kb_.eq(kb_.threadIdx(0), kb_.index(0)), kb_.eq(kb_.threadIdx(1), kb_.index(0)));
  kb_.openIf(first_thread);
  const VarId before = kb_.scalarVar("arrived_before", DataType::Int64, true);
  kb_.atomicAdd(before, semaphore, kb_.blockIdx(0), kb_.index(1));
  kb_.localWrite(flag, kb_.index(0), kb_.eq(kb_.ref(before), kb_.index(splits - 1)));
  kb_.close();
  kb_.barrier();
  kb_.openIf(kb_.letValue("is_last", kb_.localRead(flag, kb_.index(0))));
  for (size_t r = 0; r < partials.size(); ++r) {
    const Expr& e = *facts_.reductions[r];
    const Plain p = plainOf(e);
    const TensorId ws = partials[r].second;
    const RowVar total = newRowVar(p.acc, identity(kb_, p.op, p.acc));
    for (int64_t l = 0; l < lanes_; ++l) {
      const VarId j = kb_.scalarVar("j", DataType::Int64, true);
      kb_.openFor(j, member_, kb_.index(splits), kb_.index(params_.inner ? params_.threads_x : params_.threads_y),
                  false);
      kb_.openIf(row_ok_);
      const ExprId slot = kb_.add(kb_.mul(kb_.add(kept_base_, kb_.index(l)), kb_.index(splits)), kb_.ref(j));
      const ExprId part = kb_.cast(kb_.load(ws, slot), p.acc);
      const ExprId combined = kb_.elementwise(combineOf(p.op), p.acc, {laneValue(total, l), part});
      if (lanes_ == 1) {
        kb_.assign(total.var, combined);
      } else {
        kb_.localWrite(total.var, kb_.index(l), combined);
      }
      kb_.close();
      kb_.close();
    }
    blockReduce(total, p.acc, p.op);
    vb_.setResult(e.output(0), rowLet("r", kb_.cast(rowValue(total), p.out)));
  }
  kb_.openIf(first_thread);
  kb_.store(semaphore, kb_.blockIdx(0), kb_.constantInt(0, DataType::Int32));
  kb_.close();
  epilogue();
  kb_.close();
}

}  // namespace braze::scheduler
