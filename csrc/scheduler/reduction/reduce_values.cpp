#include "scheduler/reduction/reduce_values.h"

#include "ir/data_type.h"
#include "support/error.h"

#include <limits>

namespace braze::scheduler {

DataType accumulatorType(DataType out) {
  if (isFloating(out)) return out == DataType::Double ? DataType::Double : DataType::Float;
  return out;
}

ReduceOp reduceOpOf(OpKind kind) {
  switch (kind) {
    case OpKind::Sum: return ReduceOp::Sum;
    case OpKind::Prod: return ReduceOp::Prod;
    case OpKind::Max: return ReduceOp::Max;
    case OpKind::Min: return ReduceOp::Min;
    case OpKind::Any: return ReduceOp::Any;
    case OpKind::All: return ReduceOp::All;
    default: BRAZE_UNREACHABLE("reduceOpOf({})", opName(kind));
  }
}

ExprId identity(KernelBuilder& kb, ReduceOp op, DataType acc) {
  const double inf = std::numeric_limits<double>::infinity();
  const bool f = isFloating(acc);
  switch (op) {
    case ReduceOp::Sum: return kb.constantInt(0, acc);
    case ReduceOp::Prod: return kb.constantInt(1, acc);
    case ReduceOp::Max: return f ? kb.constant(-inf, acc) : kb.constantInt(integerMin(acc), acc);
    case ReduceOp::Min: return f ? kb.constant(inf, acc) : kb.constantInt(integerMax(acc), acc);
    // In the accumulator's type: all(x, dtype=Float) accumulates 1.0 and 0.0.
    case ReduceOp::Any: return kb.constantInt(0, acc);
    case ReduceOp::All: return kb.constantInt(1, acc);
  }
  return -1;
}

ExprId reducedElement(KernelBuilder& kb, ExprId element, DataType operand, DataType out) {
  const bool round_first = isFloating(out) && isFloating(operand);
  return kb.cast(round_first ? kb.cast(element, out) : element, accumulatorType(out));
}

}  // namespace braze::scheduler
