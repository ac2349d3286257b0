// Reductions over a few elements computed where their results are read (reducedPerElement): each
// result combines its elements in index order, each element cast as the reduction kernels cast it, in
// the accumulator's type, and the total cast to the result's type.
#include "scheduler/value_builder.h"

#include "scheduler/reduction/reduce_values.h"

namespace braze::scheduler {

bool reducedPerElement(const Expr& reduction, const BoundShapes& bound) {
  if (opInfo(reduction.kind()).category != OpCategory::Reduction) return false;
  const std::vector<int64_t>& sizes = bound.sizesOf(reduction.input(0));
  int64_t elements = 1;
  for (int64_t d : reduction.attrs().getInts("dims")) {
    elements *= sizes.at(static_cast<size_t>(d));
    if (elements > kMaxElementsReducedPerElement) return false;
  }
  return true;
}

ExprId ValueBuilder::reductionPerElement(const Expr& expr, const Val* out, const std::vector<Idx>& index) {
  const Val* in = expr.input(0);
  const std::vector<int64_t>& in_sizes = bound_.sizesOf(in);
  const std::vector<int64_t>& dims = expr.attrs().getInts("dims");
  const bool keepdim = expr.attrs().getBool("keepdim");
  const DataType out_type = out->dtype(), acc_type = accumulatorType(out_type);
  const ReduceOp op = reduceOpOf(expr.kind());
  // The operand's index: the result's at the dims kept, each reduced dim walked below.
  std::vector<bool> reduced(in_sizes.size(), false);
  for (int64_t d : dims) reduced.at(static_cast<size_t>(d)) = true;
  std::vector<Idx> at(in_sizes.size());
  size_t next = 0;  // the result's dim that the operand's next kept dim is
  int64_t elements = 1;
  for (size_t d = 0; d < in_sizes.size(); ++d) {
    if (reduced[d]) {
      elements *= in_sizes[d];
      next += keepdim ? 1 : 0;  // kept as a dim of size 1, indexed 0
      continue;
    }
    at[d] = index.at(next++);
  }
  ExprId acc = identity(kb_, op, acc_type);
  bool invariant = true;
  for (int64_t flat = 0; flat < elements; ++flat) {
    int64_t rest = flat;  // row-major over the reduced dims: the last one fastest
    for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
      const int64_t size = in_sizes[static_cast<size_t>(*d)];
      at[static_cast<size_t>(*d)] = Idx{kb_.index(rest % size), false};
      rest /= size;
    }
    const ExprId v = valueAt(in, at);
    invariant = invariant && isInvariant(v);
    acc = kb_.elementwise(combineOf(op), acc_type, {acc, reducedElement(kb_, v, in->dtype(), out_type)});
  }
  const ExprId result = bind("t", kb_.cast(acc, out_type));
  if (invariant) markInvariant(result);
  return result;
}

}  // namespace braze::scheduler
