// The inner-outer persistent scheduler's structural check. The reductions split into inner ones (over
// the innermost dims: the rows) and outer ones (over every other dim of the same tensor: down the
// columns). Without the outer reductions and what follows them, the group must be one the inner
// persistent scheduler takes (a row statistic broadcast back over the row). The outer reductions are
// plain ones; what is computed from their results is elementwise math on those results and scalars
// only, and meta ops that add or drop size-1 dims, ending in outputs of a row's size: the finishing
// kernel computes it per column. Reductions over the same rows of other tensors (a bias grad next to
// the norm's) join as extra reductions when their operands are elementwise math on tensors of their own
// shape. Reductions of the rows' tensor over some of the row dims (grouped: a position embedding's grad,
// summed over the batch) join when they all sum the same dims; what follows them is the same math, at
// their results' size. Cats of the outer results with inputs of their widths are the finish's too.
#include "scheduler/inner_outer/entry.h"
#include "scheduler/reduction/domain_alignment.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduction_domain.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace braze {
namespace {

// Threads per row at most (a block's), times the partial sums a thread keeps per outer reduction.
constexpr int64_t kMaxRowLength = 1024 * 32;
// Columns of an extra reduction at most: a 128-thread block keeps 64 partial sums per thread at most.
constexpr int64_t kMaxExtraColumns = 8192;
// Rows of an extra reduction at most, per row of the norm: the blocks sized for the norm's rows walk them
// (a ViT's head bias grad sums a row per image beside a norm over each image's tokens; MLP-Mixer's token
// MLP bias grad sums a row per channel beside a norm over each token's channels).
constexpr int64_t kMaxExtraRowsPerRow = 4;

// The values the extra reductions read that are computed (elementwise, before any reduction) only from
// tensors of their shapes: what the kernel's walk over those tensors computes. Only the extras' own operands
// and what they are computed from: another value of that shape (a norm's [rows, 1] statistics beside a
// one-column bias grad) belongs to the rows.
std::unordered_set<const Val*> extraOperandValues(const std::vector<const Expr*>& exprs,
                                                  const std::vector<const Expr*>& extras, const BoundShapes& bound) {
  std::unordered_set<const Val*> values;
  if (extras.empty()) return values;
  auto extra_shape = [&](const Val* v) {
    return std::any_of(extras.begin(), extras.end(),
                       [&](const Expr* r) { return bound.sizesOf(r->input(0)) == bound.sizesOf(v); });
  };
  std::unordered_set<const Val*> produced;
  for (const Expr* e : exprs) {
    for (const Val* out : e->outputs()) produced.insert(out);
  }
  std::unordered_map<const Val*, const Expr*> own;  // each such value and the op computing it
  for (const Expr* e : exprs) {
    if (!isElementwise(e->kind()) || !extra_shape(e->output(0))) continue;
    bool only_extra_shaped = true;
    for (const Val* in : e->inputs()) {
      only_extra_shaped = only_extra_shaped && (!in->isTensor() || own.count(in) != 0 ||
                                                (produced.count(in) == 0 && extra_shape(in)));
    }
    if (only_extra_shaped) own.emplace(e->output(0), e);
  }
  // Back from the extras' operands through those ops.
  std::vector<const Val*> pending;
  for (const Expr* r : extras) pending.push_back(r->input(0));
  while (!pending.empty()) {
    const Val* v = pending.back();
    pending.pop_back();
    auto found = own.find(v);
    if (found == own.end() || !values.insert(v).second) continue;
    for (const Val* in : found->second->inputs()) pending.push_back(in);
  }
  return values;
}

}  // namespace

Verdict canScheduleInnerOuter(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  if (facts.unsupported != nullptr) return Verdict::no(unsupportedReason(*facts.unsupported));
  const InnerOuterSplit split = splitInnerOuter(facts, candidate.exprs, bound);
  if (split.inner.empty() || split.outer.empty()) {
    return Verdict::no("the group does not reduce one tensor both over its rows and along them");
  }
  auto domain_or = commonReductionDomain(split.inner, facts, bound);
  if (auto* why = std::get_if<std::string>(&domain_or)) return Verdict::no(*why);
  const auto& domain = std::get<ReductionDomain>(domain_or);
  const int64_t row_length = domain.outer_numel == 0 ? 0 : domain.full_numel / domain.outer_numel;
  std::vector<int64_t> over_rows;  // the dims an outer reduction of the domain reduces
  for (int64_t d = 0; d < static_cast<int64_t>(domain.input_sizes.size()); ++d) {
    if (!std::binary_search(domain.dims.begin(), domain.dims.end(), d)) over_rows.push_back(d);
  }
  std::vector<const Expr*> extras;
  std::optional<RowGrouping> grouping;  // of the grouped reductions, one for all
  for (const Expr* r : split.outer) {
    if (opInfo(r->kind()).category != OpCategory::Reduction) {
      return Verdict::no(fmt::format("{} is a statistic over the rows (two passes), not a plain reduction",
                                     exprLabel(*r)));
    }
    std::vector<int64_t> storage;
    if (bound.sizesOf(r->input(0)) == domain.input_sizes &&
        sameDimsBeyondOnes(ascendingDims(*r, storage), domain.input_sizes, over_rows, domain.input_sizes)) {
      continue;
    }
    if (std::optional<RowGrouping> g = rowGroupingOf(*r, domain, bound)) {
      if (grouping && grouping->summed != g->summed) {
        return Verdict::no(fmt::format("{} sums other dims of the rows of [{}] than another grouped reduction",
                                       exprLabel(*r), fmt::join(domain.input_sizes, ", ")));
      }
      grouping = g;
      continue;
    }
    if (const std::optional<ExtraOuterShape> shape = extraOuterShape(*r, bound);
        shape && domain.outer_numel > 1 && shape->columns <= kMaxExtraColumns && shape->rows >= 1 &&
        shape->rows <= kMaxExtraRowsPerRow * domain.outer_numel) {
      extras.push_back(r);
      continue;
    }
    return Verdict::no(fmt::format("{} reduces neither the rows of [{}] (or some of their dims) that {} reduces along, "
                                   "nor the leading dims of another tensor, at most {} rows of at most {} columns",
                                   exprLabel(*r), fmt::join(domain.input_sizes, ", "), exprLabel(*split.inner.front()),
                                   kMaxExtraRowsPerRow * domain.outer_numel, kMaxExtraColumns));
  }
  if (row_length > kMaxRowLength) {
    return Verdict::no(fmt::format("rows of {} elements: more than the {} whose partial sums a block keeps",
                                   row_length, kMaxRowLength));
  }
  // The extra reductions' operands: computed from inputs of their own shape, apart from the rows.
  const std::unordered_set<const Val*> extra_values = extraOperandValues(candidate.exprs, extras, bound);
  for (const Expr* r : extras) {
    const auto& ins = candidate.inputs;
    if (std::find(ins.begin(), ins.end(), r->input(0)) == ins.end() && extra_values.count(r->input(0)) == 0) {
      return Verdict::no(fmt::format("{} reduces a value computed from the rows of [{}]", exprLabel(*r),
                                     fmt::join(domain.input_sizes, ", ")));
    }
  }
  // Cats of the outer results at their widths with inputs of those widths (finishCats): the finish writes
  // them; their exprs are neither the rows' nor checked below.
  std::vector<int64_t> widths{row_length};
  if (grouping) widths.push_back(grouping->groups * row_length);
  for (const Expr* r : extras) widths.push_back(bound.numel(r->output(0)));
  std::unordered_set<const Expr*> cat_exprs;
  std::unordered_set<const Val*> cat_outputs;
  for (const RowCat& cat : finishCats(candidate.exprs, candidate.outputs, candidate.inputs, split.after_outer, widths,
                                      bound)) {
    cat_exprs.insert(cat.exprs.begin(), cat.exprs.end());
    cat_outputs.insert(cat.output);
  }
  // The finish writes a column per thread, and the cats: a value on a cat's way (a part padded) is none.
  for (const Val* out : candidate.outputs) {
    const bool column = std::find(widths.begin(), widths.end(), bound.numel(out)) != widths.end();
    if (out->isTensor() && split.after_outer.count(out) != 0 && !column && cat_outputs.count(out) == 0) {
      return Verdict::no(fmt::format("output {} is computed from an outer reduction's result but is neither a "
                                     "column of its results nor a cat of them", out->name()));
    }
  }
  // What follows the outer reductions: elementwise on their results, at a row's size, read by nothing else.
  Candidate rows{{}, candidate.inputs, {}};
  for (const Expr* e : candidate.exprs) {
    if (cat_exprs.count(e) != 0) continue;
    const bool outer = std::find(split.outer.begin(), split.outer.end(), e) != split.outer.end();
    bool reads_outer = false, reads_other = false;
    for (const Val* in : e->inputs()) {
      const bool from_outer = split.after_outer.count(in) != 0;
      reads_outer = reads_outer || from_outer;
      reads_other = reads_other || (in->isTensor() && !from_outer);
    }
    const bool extra_operand = std::any_of(e->outputs().begin(), e->outputs().end(),
                                           [&](const Val* v) { return extra_values.count(v) != 0; });
    if (extra_operand) continue;
    bool reads_extra = false;
    for (const Val* in : e->inputs()) reads_extra = reads_extra || extra_values.count(in) != 0;
    if (reads_extra && !outer) {
      return Verdict::no(fmt::format("{} reads an extra reduction's operand", exprLabel(*e)));
    }
    if (!outer && !reads_outer) {
      rows.exprs.push_back(e);
      continue;
    }
    if (outer) continue;
    const int64_t n = bound.numel(e->output(0));
    const bool column_sized = n == row_length || (grouping && n == grouping->groups * row_length) ||
                              std::any_of(extras.begin(), extras.end(),
                                          [&](const Expr* r) { return bound.numel(r->output(0)) == n; });
    // The finish computes a value per column of its width: results of another width (one column broadcast
    // against many) are not there.
    const bool same_width = std::all_of(e->inputs().begin(), e->inputs().end(), [&](const Val* in) {
      return !in->isTensor() || bound.numel(in) == n;
    });
    // (Meta ops of as many elements only add or drop size-1 dims: a column stays at its position. The
    // finish and the grouped items compute each output at its column from the column's totals.)
    if (!keepsRowPositions(*e, bound) || reads_other || !column_sized || !same_width) {
      return Verdict::no(fmt::format("{} uses an outer reduction's result other than elementwise with scalars",
                                     exprLabel(*e)));
    }
  }
  for (const Val* out : candidate.outputs) {
    if (split.after_outer.count(out) == 0) rows.outputs.push_back(out);
  }
  // The outer reductions' operands are read per row element: values of the row part.
  std::vector<const Val*> operands;
  for (const Expr* r : split.outer) {
    if (std::find(extras.begin(), extras.end(), r) == extras.end()) operands.push_back(r->input(0));
  }
  return canScheduleRowsWithout(std::move(rows), operands, facts, bound, "without its outer reductions");
}

}  // namespace braze
