// The inner persistent scheduler's structural check (layer_norm, rms_norm, softmax, var_mean): the
// reductions reduce the innermost dims; each row stays on chip, so results may be broadcast back
// over the row and reduced again, and outputs are rows or per-row results. After a reduction, elementwise
// math and broadcasts, and moves that keep each element with its row's statistics: slices, pads and cats
// along the row (RoPE's rotate-half of a normed head reads the row at another column, computed again
// there), and permutes of the row dims (a QK-norm's heads written heads first: each output element is
// stored from the thread holding its row, at its permuted place). A move that would read another row's
// statistic is refused (domain_alignment.h). Whether a row fits in registers or
// shared memory is a size question for the heuristic (schedulers issue). Outputs may keep some of a computed
// value's rows (row_slices.h). Totals over the rows of
// per-row values finish in the same kernel (row_totals.h). Outputs made from scalars alone that the
// rows do not hold run beside them, in blocks of their own (reduction_parts.h).
#include "scheduler/reduction/domain_alignment.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduction_domain.h"
#include "scheduler/reduction/reduction_parts.h"
#include "scheduler/reduction/row_slices.h"
#include "scheduler/reduction/row_totals.h"

#include <algorithm>
#include <unordered_set>

namespace braze {
namespace {

// One element picked per row along the row's one reduced (innermost) dim: take_along_axis or gather of a
// [rows..., 1] index, or index_select of one index (a cross entropy's target logit). The picked element
// is the row's, at a column the index names; the kernel computes it there once the row's statistics are
// known (its inputs read again at that column).
bool picksOnePerRow(const Expr& expr, const ReductionDomain& domain, const BoundShapes& bound) {
  if (opInfo(expr.kind()).category != OpCategory::Indexing) return false;
  const auto& in = bound.sizesOf(expr.input(0));
  const auto& out = bound.sizesOf(expr.output(0));
  const int64_t dim = expr.attrs().getInt("dim");
  if (domain.dims.size() != 1 || domain.dims[0] != dim || dim + 1 != static_cast<int64_t>(in.size())) return false;
  if (out.size() != in.size() || out[dim] != 1) return false;
  for (int64_t d = 0; d < dim; ++d) {
    if (out[d] != in[d]) return false;
  }
  return true;
}

// Moves the ValueBuilder computes through index maps, which misalignedWithDomain follows: each element
// still reads the results of the row its kept dims name (a slice or cat along the row, a permute of the
// row dims), or the move is refused there.
bool movesByIndexMap(const Expr& expr) {
  switch (expr.kind()) {
    case OpKind::Permute:
    case OpKind::Slice:
    case OpKind::Pad:
    case OpKind::Cat:
    case OpKind::Reshape: return true;
    default: return false;
  }
}

}  // namespace

Verdict canScheduleInnerPersistent(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  // Totals over the rows (a cross entropy's mean) finish in the last block; outputs made from scalars alone
  // (an iota returned beside the gather it indexes) run in blocks of their own.
  return wholeOrParts(candidate, facts, bound, canScheduleRowsWithTotals, canScheduleRowsWithScalarParts);
}

Verdict canScheduleOneInnerPersistent(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  auto domain_or = commonReductionDomain(facts, bound);
  if (auto* why = std::get_if<std::string>(&domain_or)) return Verdict::no(*why);
  const auto& domain = std::get<ReductionDomain>(domain_or);
  if (!domain.inner) {
    return Verdict::no(fmt::format("the reduced dims [{}] of [{}] are not the innermost (an outer reduction)",
                                   fmt::join(domain.dims, ", "), fmt::join(domain.input_sizes, ", ")));
  }
  // Outputs that keep some of a computed value's rows (row_slices.h): their slices and reshapes are the
  // stores', checked by findRowSlices; the rest as any group's.
  std::unordered_set<const Val*> produced;
  for (const Expr* expr : candidate.exprs) produced.insert(expr->outputs().begin(), expr->outputs().end());
  const std::vector<RowSlice> slices =
      findRowSlices(candidate.exprs, candidate.outputs, domain.input_sizes, domain.dims,
                    [&](const Val* v) { return produced.count(v) != 0; }, bound);
  Candidate rest = candidate;
  for (const RowSlice& slice : slices) {
    std::erase_if(rest.exprs, [&](const Expr* e) {
      return std::find(slice.chain.begin(), slice.chain.end(), e) != slice.chain.end();
    });
    std::erase(rest.outputs, slice.output);
  }
  bool keeps_row = false;
  for (const Expr* expr : rest.exprs) {
    const OpCategory category = opInfo(expr->kind()).category;
    if (category == OpCategory::Reduction || category == OpCategory::Normalization) {
      keeps_row = keeps_row || facts.after_reduction.count(expr->input(0)) != 0;
      continue;
    }
    const Val* out = expr->output(0);
    if (facts.after_reduction.count(out) == 0) continue;
    if (!keepsRowPositions(*expr, bound) && !picksOnePerRow(*expr, domain, bound) && !movesByIndexMap(*expr)) {
      return Verdict::no(fmt::format("{} moves elements of a value computed from a row statistic", exprLabel(*expr)));
    }
    const int64_t n = bound.numel(out);
    keeps_row = keeps_row || (n == domain.full_numel && domain.full_numel != domain.outer_numel);
  }
  if (!keeps_row) return Verdict::no("no reduction result is broadcast back over the row (a plain reduction)");
  if (std::string why = outputOutsideDomain(rest, domain, bound); !why.empty()) return Verdict::no(why);
  PermutedOutputs permuted;
  if (std::string why = misalignedWithDomain(rest, facts, domain, bound, &permuted); !why.empty()) {
    return Verdict::no(why);
  }
  return Verdict::yes();
}

Verdict canScheduleRowsWithout(Candidate rows, const std::vector<const Val*>& operands, const CandidateFacts& facts,
                               const BoundShapes& bound, const std::string& without,
                               Verdict (*check)(const Candidate&, const CandidateFacts&, const BoundShapes&)) {
  for (const Val* in : operands) {
    if (std::find(rows.outputs.begin(), rows.outputs.end(), in) == rows.outputs.end() &&
        std::find(rows.inputs.begin(), rows.inputs.end(), in) == rows.inputs.end()) {
      rows.outputs.push_back(in);
    }
  }
  CandidateFacts rows_facts = analyzeCandidate(rows);
  rows_facts.reasons = facts.reasons;
  const Verdict v = check(rows, rows_facts, bound);
  return v.ok ? v : Verdict::no(without + ", " + v.reason);
}

}  // namespace braze
