// The scan scheduler takes a segment built around one cumsum, topk, argsort, scatter or index_put_accumulate:
// each thread walks one line along the op's dim (carrying a running sum, or applying the index's entries
// in order), or a block sorts it.
// - Its operands may be computed in the segment by any ops a kernel computes per element (casts, math, a
//   temperature's division, meta ops): the lowerings read them through the ValueBuilder at each element
//   they walk. A scatter's and an index_put_accumulate's too (a repetition penalty's entries, computed from
//   the logits gathered at the index), with no reduction.
// - A cumsum's result may go on through elementwise ops of its own shape (a cast back to bf16, position
//   ids' `where(mask, cumsum - 1, 1)`): each is computed at the element the walk has just summed.
// - Before a cumsum, topk or argsort of lines of at most kMaxReducedLine elements, reductions along the
//   line (a router's softmax before its topk): each thread walks its line once per reduction first.
// - A topk of such lines may go on through elementwise ops of its results' shape and reductions over
//   its k kept elements (a router's renormalization, values / sum(values)): once the line is sorted, its
//   thread walks the kept slots once per reduction, then once to compute and store those ops' outputs.
//   An argsort's indices are written as they are.
// - A topk or argsort of such lines may write values of its operand's shape computed before it (a
//   router's softmax probabilities, which Thunder returns for the backward): its thread walks the line
//   once more to store them, after the reductions they read.
#include "scheduler/scan/entry.h"

#include "scheduler/reduction/domain_alignment.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

namespace braze {

namespace {

bool walksLines(const Expr& e) {
  const OpCategory category = opInfo(e.kind()).category;
  return category == OpCategory::Scan || category == OpCategory::Scatter;
}

bool reads(const Expr& e, const std::unordered_set<const Val*>& values) {
  return std::any_of(e.inputs().begin(), e.inputs().end(), [&](const Val* v) { return values.count(v) != 0; });
}

// Why the ops after the cumsum `op` cannot be computed at the element its walk reaches, or "".
std::string cumsumEpilogueProblem(const Candidate& candidate, const Expr& op, const std::vector<const Expr*>& later,
                                  const BoundShapes& bound) {
  const std::vector<int64_t>& sizes = bound.sizesOf(op.output(0));
  std::unordered_set<const Val*> after{op.output(0)};
  for (const Expr* e : later) {
    // The walk binds the cumsum's value at its element only: an op that read it elsewhere (a slice, a
    // permute) or over more elements (a broadcast) would see the wrong one.
    if (!isElementwise(e->kind()) || bound.sizesOf(e->output(0)) != sizes) {
      return fmt::format("{} reads the cumsum other than elementwise at its shape", exprLabel(*e));
    }
    for (const Val* out : e->outputs()) after.insert(out);
  }
  for (const Val* out : candidate.outputs) {
    if (after.count(out) == 0) {
      return fmt::format("{} is written beside the cumsum without reading it, which a scan kernel does not write",
                         out->name());
    }
  }
  return "";
}

// Why `reductions`, all along dim `dim` of values of `sizes` (the lines a thread walks), cannot be computed
// by walking the lines, with `exprs` reading their results, or "".
std::string lineReductionProblem(const std::vector<const Expr*>& exprs, const std::vector<const Expr*>& reductions,
                                 const CandidateFacts& facts, const std::vector<int64_t>& sizes, int64_t dim,
                                 const BoundShapes& bound) {
  for (const Expr* r : reductions) {
    if (opInfo(r->kind()).category != OpCategory::Reduction) return fmt::format("{} is not a plain reduction", exprLabel(*r));
  }
  CandidateFacts these = facts;
  these.unsupported = nullptr;
  these.reductions = reductions;
  auto domain = commonReductionDomain(these, bound);
  if (auto* why = std::get_if<std::string>(&domain)) return *why;
  const ReductionDomain& d = std::get<ReductionDomain>(domain);
  // The line, and nothing else: a reduction over size-1 dims alone has a result per element (unless the
  // line is one element long).
  const std::vector<int64_t> reduced = dimsBeyondOnes(d.dims, d.input_sizes);
  const bool along_line = reduced.size() == 1 ? reduced[0] == dim : reduced.empty() && sizes[static_cast<size_t>(dim)] == 1;
  if (d.input_sizes != sizes || !along_line) {
    return fmt::format("{} does not reduce the lines a scan kernel walks", exprLabel(*reductions[0]));
  }
  // Each thread knows its own line's results only: every value computed from them must read them there,
  // through ops that keep each element at its line and position, as a line or one value per line.
  for (const Expr* e : exprs) {
    const OpCategory category = opInfo(e->kind()).category;
    if (category == OpCategory::Reduction || category == OpCategory::Normalization) continue;
    const Val* out = e->output(0);
    if (facts.after_reduction.count(out) == 0) continue;
    const int64_t n = bound.numel(out);
    if ((n != d.full_numel && n != d.outer_numel) || !keepsRowPositions(*e, bound)) {
      return fmt::format("{} moves elements of a value computed from a line's reduction", exprLabel(*e));
    }
  }
  Candidate reading;
  reading.exprs = exprs;
  return misalignedWithDomain(reading, facts, d, bound);
}

// Why the ops after the topk `op` (`later`) cannot be computed by its line's thread over the kept slots
// once the line is sorted, or "": per kept slot, elementwise ops of the results' shape, and values of that
// shape computed from the line's reductions alone (a sum broadcast over the slots); over them, reductions
// along the line, read back at their own line (or written, once per line). Outputs computed before the
// sort (linePrologueOutputs) are not its to judge.
std::string sortEpilogueProblem(const Candidate& candidate, const CandidateFacts& facts, const Expr& op,
                                const std::vector<const Expr*>& later, const BoundShapes& bound) {
  const std::vector<const Val*> prologue = linePrologueOutputs(candidate.outputs, op, later);
  const auto in_prologue = [&](const Val* out) { return std::find(prologue.begin(), prologue.end(), out) != prologue.end(); };
  const bool written_as_they_are = later.empty() && std::all_of(candidate.outputs.begin(), candidate.outputs.end(), [&](const Val* out) {
    return in_prologue(out) || std::find(op.outputs().begin(), op.outputs().end(), out) != op.outputs().end();
  });
  if (written_as_they_are) return "";
  if (op.kind() != OpKind::TopK) return "an argsort's indices are written as they are";
  const std::vector<int64_t>& sizes = bound.sizesOf(op.output(0));
  std::unordered_set<const Val*> per_slot(op.outputs().begin(), op.outputs().end());
  std::unordered_set<const Val*> computed_after;
  std::vector<const Expr*> reductions;
  for (const Expr* e : later) {
    for (const Val* in : e->inputs()) {
      // A value computed from the line's reductions before the sort is known at the line alone, and no
      // check here proves the kept slots read it there.
      if (per_slot.count(in) == 0 && computed_after.count(in) == 0 && facts.after_reduction.count(in) != 0) {
        return fmt::format("{} reads {}, computed from the line's reductions before the sort", exprLabel(*e), in->name());
      }
    }
    computed_after.insert(e->outputs().begin(), e->outputs().end());
    const OpCategory category = opInfo(e->kind()).category;
    if (category == OpCategory::Reduction || category == OpCategory::Normalization) {
      reductions.push_back(e);
    } else if (reads(*e, per_slot)) {
      // The walk binds the results at the slot it is at: an op reading them elsewhere would see the wrong one.
      if (!isElementwise(e->kind()) || bound.sizesOf(e->output(0)) != sizes) {
        return fmt::format("{} reads the topk's results other than elementwise at their shape", exprLabel(*e));
      }
      for (const Val* out : e->outputs()) per_slot.insert(out);
    } else if (!isElementwise(e->kind()) && opInfo(e->kind()).category != OpCategory::Meta) {
      return fmt::format("{} is computed from the kept slots' reductions other than by elementwise and meta ops",
                         exprLabel(*e));
    }
  }
  for (const Val* out : candidate.outputs) {
    const bool line_result = std::any_of(reductions.begin(), reductions.end(), [&](const Expr* r) { return r->output(0) == out; });
    // A kept-slot-shaped value of the line's reductions alone (a router's sum of its k weights broadcast
    // to them, which Thunder returns for the backward): computed at each slot like the others.
    const bool of_reductions_per_slot = computed_after.count(out) != 0 && bound.sizesOf(out) == sizes;
    if (per_slot.count(out) == 0 && !line_result && !of_reductions_per_slot && !in_prologue(out)) {
      return fmt::format("{} is neither written per kept element of the {} nor a reduction over them", out->name(),
                         opName(op.kind()));
    }
  }
  if (reductions.empty()) return "";
  return lineReductionProblem(later, reductions, facts, sizes, op.attrs().getInt("dim"), bound);
}

// Whether `v` is a reshape (or a chain of them) of a value of `sizes` that `exprs` compute: stored at the
// linear position of the operand's element the walk is at, it holds that element.
bool reshapedFrom(const Val* v, const std::vector<int64_t>& sizes, const std::vector<const Expr*>& exprs,
                  const BoundShapes& bound) {
  while (bound.sizesOf(v) != sizes) {
    const auto producer = std::find_if(exprs.begin(), exprs.end(), [&](const Expr* e) { return e->output(0) == v; });
    if (producer == exprs.end() || (*producer)->kind() != OpKind::Reshape) return false;
    v = (*producer)->input(0);
  }
  return true;
}

}  // namespace

std::vector<const Val*> linePrologueOutputs(const std::vector<const Val*>& outputs, const Expr& op,
                                            const std::vector<const Expr*>& later) {
  std::vector<const Val*> prologue;
  for (const Val* out : outputs) {
    const bool of_op = std::find(op.outputs().begin(), op.outputs().end(), out) != op.outputs().end();
    const bool after = std::any_of(later.begin(), later.end(), [&](const Expr* e) {
      return std::find(e->outputs().begin(), e->outputs().end(), out) != e->outputs().end();
    });
    if (!of_op && !after) prologue.push_back(out);
  }
  return prologue;
}

std::vector<const Expr*> exprsAfter(const std::vector<const Expr*>& exprs, const Expr& op) {
  std::unordered_set<const Val*> after(op.outputs().begin(), op.outputs().end());
  std::vector<const Expr*> later;
  for (const Expr* e : exprs) {
    if (e == &op || !reads(*e, after)) continue;
    later.push_back(e);
    after.insert(e->outputs().begin(), e->outputs().end());
  }
  return later;
}

const Expr& scanOpOf(const std::vector<const Expr*>& exprs) {
  auto it = std::find_if(exprs.begin(), exprs.end(), [](const Expr* e) { return walksLines(*e); });
  BRAZE_ASSERT(it != exprs.end(), "a scan segment without a cumsum, topk, argsort, scatter or index_put_accumulate");
  return **it;
}

Verdict canScheduleScan(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  const auto walkers = std::count_if(candidate.exprs.begin(), candidate.exprs.end(), [](const Expr* e) { return walksLines(*e); });
  if (walkers != 1) {
    return Verdict::no(walkers == 0 ? "no cumsum, topk, argsort, scatter or index_put_accumulate"
                                    : "more than one cumsum, topk, argsort, scatter or index_put_accumulate");
  }
  const Expr& op = scanOpOf(candidate.exprs);
  const OpKind kind = op.kind();
  const bool scatter = opInfo(kind).category == OpCategory::Scatter;
  for (const Expr* e : candidate.exprs) {
    if (e == &op) continue;
    const OpCategory category = opInfo(e->kind()).category;
    if (scatter && (category == OpCategory::Reduction || category == OpCategory::Normalization)) {
      return Verdict::no(facts.reasons ? fmt::format("{} is a reduction, which a scatter kernel does not compute",
                                                     exprLabel(*e))
                                       : std::string());
    }
    if (category == OpCategory::Matmul) {
      return Verdict::no(facts.reasons ? fmt::format("{} is a matmul", exprLabel(*e)) : std::string());
    }
  }
  const auto no = [&](std::string why) { return Verdict::no(facts.reasons ? std::move(why) : std::string()); };
  const std::vector<const Expr*> later = exprsAfter(candidate.exprs, op);
  if (scatter) {
    // Its lowering writes the op's output and nothing else.
    for (const Val* out : candidate.outputs) {
      if (out != op.output(0)) return no(fmt::format("{} is written beside the {}, which is all a scatter kernel writes",
                                                     out->name(), opName(kind)));
    }
    return Verdict::yes();
  }
  const std::vector<int64_t>& sizes = bound.sizesOf(op.input(0));
  const int64_t dim = op.attrs().getInt("dim");
  const int64_t extent = sizes.empty() ? 1 : sizes[static_cast<size_t>(dim)];
  std::vector<const Expr*> before;
  std::vector<const Expr*> reductions_before;
  for (const Expr* e : candidate.exprs) {
    if (e == &op || std::find(later.begin(), later.end(), e) != later.end()) continue;
    before.push_back(e);
    const OpCategory category = opInfo(e->kind()).category;
    if (category == OpCategory::Reduction || category == OpCategory::Normalization) reductions_before.push_back(e);
  }
  const bool sort_epilogue = kind != OpKind::Cumsum &&
      std::any_of(candidate.outputs.begin(), candidate.outputs.end(),
                  [&](const Val* out) { return std::find(op.outputs().begin(), op.outputs().end(), out) == op.outputs().end(); });
  if ((!reductions_before.empty() || sort_epilogue) && extent > kMaxReducedLine) {
    return no(fmt::format("lines of {} elements: a thread walks at most {} once per reduction and sorts them by insertion",
                          extent, kMaxReducedLine));
  }
  // Values of the line's elements computed before the sort (a router's softmax probabilities): a walk of
  // the line writes them, once its reductions are known.
  for (const Val* out : linePrologueOutputs(candidate.outputs, op, later)) {
    if (kind == OpKind::Cumsum) break;  // cumsumEpilogueProblem names it
    if (bound.sizesOf(out) != sizes && !reshapedFrom(out, sizes, before, bound)) {
      return no(fmt::format("{} is computed before the {} but is neither of its operand's shape nor a reshape of a "
                            "value of it, which a line walk writes", out->name(), opName(kind)));
    }
  }
  if (!reductions_before.empty()) {
    // A cumsum's epilogue reads them at the elements it walks too: every value but the cumsum's own is checked.
    std::vector<const Expr*> reading = before;
    if (kind == OpKind::Cumsum) reading.insert(reading.end(), later.begin(), later.end());
    // Reshapes read by nothing but other such reshapes, ending in outputs, are stored at the element's
    // linear position (writeLinePrologue): they read the line's results where they are.
    const std::vector<const Val*> prologue = linePrologueOutputs(candidate.outputs, op, later);
    std::unordered_set<const Expr*> written;
    for (auto e = candidate.exprs.rbegin(); e != candidate.exprs.rend(); ++e) {
      const Val* out = (*e)->output(0);
      bool read = false, by_written = true;
      for (const Expr* r : candidate.exprs) {
        if (std::find(r->inputs().begin(), r->inputs().end(), out) == r->inputs().end()) continue;
        read = true;
        by_written = by_written && written.count(r) != 0;
      }
      const bool output = std::find(prologue.begin(), prologue.end(), out) != prologue.end();
      if ((*e)->kind() == OpKind::Reshape && (output || read) && by_written) written.insert(*e);
    }
    std::erase_if(reading, [&](const Expr* e) { return written.count(e) != 0; });
    std::string problem = lineReductionProblem(reading, reductions_before, facts, sizes, dim, bound);
    if (!problem.empty()) return no(std::move(problem));
  }
  std::string problem = kind == OpKind::Cumsum ? cumsumEpilogueProblem(candidate, op, later, bound)
                                               : sortEpilogueProblem(candidate, facts, op, later, bound);
  return problem.empty() ? Verdict::yes() : no(std::move(problem));
}

}  // namespace braze
