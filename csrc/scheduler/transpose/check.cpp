// The transpose scheduler's structural check: a pointwise group in which some tensor is read or
// written with a different innermost dim than the others (a permute that moves the innermost dim,
// or an input whose stride-1 dim is not its last). Such a kernel needs shared-memory tiles so that
// both sides stay coalesced; a plain pointwise kernel would read one side with a stride.
#include "ir/fusion.h"
#include "scheduler/pointwise/entry.h"
#include "scheduler/transpose/entry.h"

namespace braze {
namespace {

// The last dim of size > 1 (-1 when none): the dim that should be innermost in memory.
int64_t lastNonTrivialDim(const std::vector<int64_t>& sizes) {
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] > 1) return d;
  }
  return -1;
}

}  // namespace

Verdict canScheduleTranspose(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  Verdict pointwise = canSchedulePointwise(candidate, facts, bound);
  if (!pointwise.ok) return pointwise;
  for (const Expr* expr : candidate.exprs) {
    if (expr->kind() != OpKind::Permute) continue;
    const auto& dims = expr->attrs().getInts("dims");
    const auto& in_sizes = bound.sizesOf(expr->input(0));
    const int64_t inner_out = lastNonTrivialDim(bound.sizesOf(expr->output(0)));
    const int64_t inner_in = lastNonTrivialDim(in_sizes);
    if (inner_out >= 0 && inner_in >= 0 && dims[inner_out] != inner_in) return Verdict::yes();
  }
  for (const Val* in : candidate.inputs) {
    if (!in->isTensor() || !in->fusion()->isInput(in)) continue;
    const StridedLayout& layout = bound.inputLayout(in).layout;
    const int64_t inner = lastNonTrivialDim(layout.sizes);
    if (inner >= 0 && layout.strides[inner] != 1 && layout.strides[inner] != 0) {
      for (size_t d = 0; d < layout.sizes.size(); ++d) {
        if (layout.sizes[d] > 1 && layout.strides[d] == 1) return Verdict::yes();
      }
    }
  }
  return Verdict::no("no tensor changes the innermost dim (no transposing permute or transposed input)");
}

}  // namespace braze
