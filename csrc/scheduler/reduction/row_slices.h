// Outputs of a row kernel that keep some of a full value's rows: a ViT's grad_in without the class token's
// row (and its patches' rows reshaped for the patch linear's weight grad), the class token's row alone, a
// language model's last token after the final norm. The output O is a value V with the domain's sizes
// through slices of its kept (row) dims, step 1, the reduced dims whole, and reshapes that keep the
// innermost dim; every value between is read only by such ops. The thread that computes V's element stores
// it at its place in O where the slices keep its row, instead of writing V whole for another kernel (or a
// view) to slice.
#pragma once

#include "ir/fusion.h"
#include "scheduler/lowering_context.h"

#include <functional>
#include <vector>

namespace braze {

struct RowSlice {
  const Val* output = nullptr;       // O
  const Val* value = nullptr;        // V
  std::vector<const Expr*> chain;    // V's slices and reshapes to O, in order
};

// The row slices among `outputs` of a group of `exprs`, V of sizes `domain_sizes`, `reduced` its reduced
// dims; `full` tells a value the kernel computes per domain element (the group's own, not an input).
std::vector<RowSlice> findRowSlices(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs,
                                    const std::vector<int64_t>& domain_sizes, const std::vector<int64_t>& reduced,
                                    const std::function<bool(const Val*)>& full, const BoundShapes& bound);

namespace scheduler {

// Stores O's element for V's element at the domain `index` (in the chunk `c`), where the slices keep it,
// into O's tensor `out` of kb's kernel.
void storeRowSlice(KernelBuilder& kb, ValueBuilder& vb, Chunk& c, const BoundShapes& bound, const RowSlice& slice,
                   TensorId out, const std::vector<Idx>& index);

}  // namespace scheduler
}  // namespace braze
