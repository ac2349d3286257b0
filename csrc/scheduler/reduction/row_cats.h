// Outputs of a reduction kernel that concatenate per-row results: a GQA backward's k and v grads, each
// summed over the repeated heads, permuted and joined into the kv linear's grad, as Thunder writes a cat
// (zero pads and an add) or as fd.ops.cat. Each output element is one part's value at one row, so the
// kernel stores each part where the cat puts it, from the thread that holds the row, instead of a second
// kernel reading the results back to join them.
//
// The output O is C through permutes and reshapes; C is a cat of parts, or an add of zero pads of them
// along one dim whose ranges are disjoint and cover it; each part is a per-row value R (one element per
// kept element of the reduction domain) through permutes and reshapes. Every value between an R and O
// is read by the next op alone. The kernel evaluates O at the index where part p puts R's element (the
// ValueBuilder reads a reduction result at the thread's own row whatever the index): with pads, that is
// R + 0 from the one pad in range, as the reference adds it.
#pragma once

#include "ir/fusion.h"
#include "scheduler/lowering_context.h"

#include <functional>
#include <vector>

namespace braze {

struct RowCatPart {
  const Val* row_value = nullptr;    // R
  std::vector<const Expr*> to_cat;   // R's permutes and reshapes to the cat's operand, in order
  int64_t offset = 0;                // where the part starts along the cat dim
};

struct RowCat {
  const Val* output = nullptr;       // O
  int64_t dim = 0;                   // the cat dim of C
  std::vector<const Expr*> from_cat; // C's permutes and reshapes to O, in order
  std::vector<RowCatPart> parts;
  std::vector<const Expr*> exprs;    // every expr from the parts' R to O
};

// What else a cat may hold, beyond permutes and reshapes between its parts and its output.
struct RowCatForms {
  // Casts too, and values that are outputs of their own on the way (Thunder's bf16 cat: each part padded
  // in bf16 and cast to float, the adds in float, the cat cast back to bf16 as an output, and its
  // transpose another): what the inner-outer finish writes (inner_outer/entry.h's finishCats).
  bool casts = false;
};

// The row cats among `outputs` of a group of `exprs`; `per_row` tells a per-row value.
std::vector<RowCat> findRowCats(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs,
                                const std::function<bool(const Val*)>& per_row, const BoundShapes& bound,
                                RowCatForms forms = {});

namespace scheduler {

// Stores every part of `cat` for the row value's element at its flat index `kept` (in the chunk `c`):
// O's element where the part puts it, as vb computes O there, into O's tensor `out` of kb's kernel.
void storeRowCat(KernelBuilder& kb, ValueBuilder& vb, Chunk& c, const BoundShapes& bound, const RowCat& cat,
                 TensorId out, ExprId kept);

}  // namespace scheduler
}  // namespace braze
