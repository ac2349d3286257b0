#include "scheduler/reduction/row_totals.h"

#include "scheduler/reduction/domain_alignment.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduce_values.h"
#include "scheduler/reduction/reduction_domain.h"

#include <algorithm>
#include <unordered_set>

namespace braze {

namespace {

// Values of one element made of one-element tensors (0-dim inputs: a loss's other terms, computed on the host
// or by another kernel) and scalars alone, where nothing outside `after` reads them: the last block computes
// them with what follows the totals, as it reads scalars, and writes those that are outputs.
void addOneElementTerms(const std::vector<const Expr*>& exprs, const BoundShapes& bound, ValSet& after) {
  std::unordered_set<const Val*> made, produced;
  std::vector<const Expr*> makers;
  for (const Expr* e : exprs) produced.insert(e->outputs().begin(), e->outputs().end());
  for (const Expr* e : exprs) {
    if (after.count(e->output(0)) != 0 || e->outputs().size() != 1 || bound.numel(e->output(0)) != 1) continue;
    if (!isElementwise(e->kind()) && !keepsRowPositions(*e, bound)) continue;
    const bool from_one_element = std::all_of(e->inputs().begin(), e->inputs().end(), [&](const Val* in) {
      return !in->isTensor() || made.count(in) != 0 || (produced.count(in) == 0 && bound.numel(in) == 1);
    });
    if (!from_one_element) continue;
    made.insert(e->output(0));
    makers.push_back(e);
  }
  // Those the rows read stay theirs, and so do the values they are made of (to a fixpoint).
  for (bool changed = true; changed;) {
    changed = false;
    for (const Expr* e : exprs) {
      if (after.count(e->output(0)) != 0 || made.count(e->output(0)) != 0) continue;
      for (const Val* in : e->inputs()) changed = made.erase(in) != 0 || changed;
    }
    for (const Expr* e : makers) {
      if (made.count(e->output(0)) != 0) continue;
      for (const Val* in : e->inputs()) changed = made.erase(in) != 0 || changed;
    }
  }
  for (const Val* v : made) after.insert(v);
}

}  // namespace

RowTotals splitRowTotals(const CandidateFacts& facts, const std::vector<const Expr*>& exprs, const BoundShapes& bound) {
  RowTotals split;
  if (facts.unsupported != nullptr || std::holds_alternative<ReductionDomain>(commonReductionDomain(facts, bound))) {
    return split;
  }
  // The reductions of the largest operands reduce the rows; the others are totals where they are plain
  // reductions to one element of operands with as many elements as there are rows. (A single row has one
  // element per row too: the operands' sizes tell the rows from their totals.)
  int64_t largest = 0;
  for (const Expr* r : facts.reductions) largest = std::max(largest, bound.numel(r->input(0)));
  std::vector<const Expr*> rows, totals;
  for (const Expr* r : facts.reductions) (bound.numel(r->input(0)) == largest ? rows : totals).push_back(r);
  if (totals.empty()) return split;
  auto domain_or = commonReductionDomain(rows, facts, bound);
  const auto* domain = std::get_if<ReductionDomain>(&domain_or);
  if (domain == nullptr || !domain->inner) return split;
  for (const Expr* r : totals) {
    // Bool totals (any, all) would need their own block combine.
    if (opInfo(r->kind()).category != OpCategory::Reduction || bound.numel(r->output(0)) != 1 ||
        bound.numel(r->input(0)) != domain->outer_numel ||
        scheduler::accumulatorType(r->output(0)->dtype()) == DataType::Bool) {
      return split;
    }
  }
  split.after = computedFrom(totals, exprs);
  split.totals = std::move(totals);
  addOneElementTerms(exprs, bound, split.after);
  return split;
}

namespace {

using RowsCheck = Verdict (*)(const Candidate&, const CandidateFacts&, const BoundShapes&);

Verdict withTotals(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound, RowsCheck check) {
  const RowTotals split = splitRowTotals(facts, candidate.exprs, bound);
  if (split.totals.empty()) return check(candidate, facts, bound);
  Candidate rows{{}, candidate.inputs, {}};
  for (const Expr* e : candidate.exprs) {
    const bool total = std::find(split.totals.begin(), split.totals.end(), e) != split.totals.end();
    if (total) {
      // Each row's value is computed where the rows' results are, not from another total.
      if (split.after.count(e->input(0)) != 0) {
        return Verdict::no(fmt::format("{} sums a value computed from another total over the rows", exprLabel(*e)));
      }
      continue;
    }
    if (split.after.count(e->output(0)) == 0) {
      rows.exprs.push_back(e);
      continue;
    }
    // After the totals: one element computed from their results and scalars, by the last block.
    const bool math = isElementwise(e->kind()) || keepsRowPositions(*e, bound);
    // (A one-element tensor the group reads, a 0-dim input, is read there as a scalar.)
    const bool reads_rows = std::any_of(e->inputs().begin(), e->inputs().end(), [&](const Val* in) {
      const bool group_input = std::find(candidate.inputs.begin(), candidate.inputs.end(), in) != candidate.inputs.end();
      return in->isTensor() && split.after.count(in) == 0 && !(group_input && bound.numel(in) == 1);
    });
    if (!math || reads_rows || bound.numel(e->output(0)) != 1) {
      return Verdict::no(fmt::format("{} uses a total over the rows other than elementwise with scalars",
                                     exprLabel(*e)));
    }
  }
  for (const Val* out : candidate.outputs) {
    if (split.after.count(out) == 0) rows.outputs.push_back(out);
  }
  // The totals' operands are per-row values of the rows.
  std::vector<const Val*> operands;
  for (const Expr* r : split.totals) operands.push_back(r->input(0));
  return canScheduleRowsWithout(std::move(rows), operands, facts, bound, "without its totals over the rows", check);
}

}  // namespace

Verdict canScheduleRowsWithTotals(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  return withTotals(candidate, facts, bound, canScheduleOneInnerPersistent);
}

Verdict canScheduleReductionWithTotals(const Candidate& candidate, const CandidateFacts& facts,
                                       const BoundShapes& bound) {
  return withTotals(candidate, facts, bound, canScheduleOneReductionDomain);
}

}  // namespace braze
