// What the reduction lowerings share about one plain reduction's values: the type it accumulates
// in, its combining op and the value it starts from.
#pragma once

#include "kernel/kernel_ir.h"
#include "ir/op_kind.h"

namespace braze::scheduler {

using namespace kernel;  // the lowerings build kernel IR: its names are the scheduler folder's vocabulary

// Float for every floating type below double, the type itself otherwise.
DataType accumulatorType(DataType out);
ReduceOp reduceOpOf(OpKind kind);
// The value a reduction starts from: 0 for sums, 1 for products, -inf (or the type's least) for max...
ExprId identity(KernelBuilder& kb, ReduceOp op, DataType acc);
// An element of a reduction's operand as the reduction combines it: a floating element of a floating
// result rounded to the result's dtype first (sum(x, dtype=bf16) of float x adds bf16 values), then in
// the accumulator's type.
ExprId reducedElement(KernelBuilder& kb, ExprId element, DataType operand, DataType out);

}  // namespace braze::scheduler
