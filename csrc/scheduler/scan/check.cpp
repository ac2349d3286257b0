// The scan scheduler takes a segment built around one cumsum, topk, argsort, scatter or index_put_accumulate:
// each thread walks one line along the op's dim (carrying a running sum, or applying the index's entries
// in order), or a block sorts it.
// - Its operands may be computed in the segment by any ops a kernel computes per element (casts, math, a
//   temperature's division, meta ops): the lowerings read them through the ValueBuilder at each element
//   they walk. A scatter's and an index_put_accumulate's operands only through meta ops.
// - A cumsum's result may go on through elementwise ops of its own shape (a cast back to bf16, position
//   ids' `where(mask, cumsum - 1, 1)`): each is computed at the element the walk has just summed.
// - A topk's or argsort's results are written as they are (the lowerings sort in the output buffers).
// - Before a cumsum, topk or argsort of lines of at most kMaxReducedLine elements, reductions along the
//   line (a router's softmax before its topk): each thread walks its line once per reduction first.
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

bool elementwise(const Expr& e) {
  switch (opInfo(e.kind()).category) {
    case OpCategory::Unary: case OpCategory::Binary: case OpCategory::Ternary: case OpCategory::Cast: return true;
    default: return false;
  }
}

// Why the ops after the cumsum `op` cannot be computed at the element its walk reaches, or "".
std::string cumsumEpilogueProblem(const Candidate& candidate, const Expr& op, const BoundShapes& bound) {
  const std::vector<int64_t>& sizes = bound.sizesOf(op.output(0));
  std::unordered_set<const Val*> after{op.output(0)};
  for (const Expr* e : candidate.exprs) {
    if (e == &op || std::none_of(e->inputs().begin(), e->inputs().end(), [&](const Val* v) { return after.count(v) != 0; })) {
      continue;
    }
    // The walk binds the cumsum's value at its element only: an op that read it elsewhere (a slice, a
    // permute) or over more elements (a broadcast) would see the wrong one.
    if (!elementwise(*e) || bound.sizesOf(e->output(0)) != sizes) {
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

// Why the segment's reductions cannot be computed by walking the lines of `op` first, or "".
std::string lineReductionProblem(const Candidate& candidate, const CandidateFacts& facts, const Expr& op,
                                 const BoundShapes& bound) {
  if (opInfo(op.kind()).category != OpCategory::Scan) return fmt::format("a {} reads its operands only", opName(op.kind()));
  for (const Expr* r : facts.reductions) {
    if (opInfo(r->kind()).category != OpCategory::Reduction) return fmt::format("{} is not a plain reduction", exprLabel(*r));
  }
  CandidateFacts without_scan = facts;
  without_scan.unsupported = nullptr;
  auto domain = commonReductionDomain(without_scan, bound);
  if (auto* why = std::get_if<std::string>(&domain)) return *why;
  const ReductionDomain& d = std::get<ReductionDomain>(domain);
  const std::vector<int64_t>& sizes = bound.sizesOf(op.input(0));
  const int64_t dim = op.attrs().getInt("dim");
  const std::vector<int64_t> reduced = dimsBeyondOnes(d.dims, d.input_sizes);
  if (d.input_sizes != sizes || reduced.size() > 1 || (reduced.size() == 1 && reduced[0] != dim)) {
    return fmt::format("{} does not reduce the {}'s lines", exprLabel(*facts.reductions[0]), opName(op.kind()));
  }
  if (!sizes.empty() && sizes[static_cast<size_t>(dim)] > kMaxReducedLine) {
    return fmt::format("lines of {} elements: a thread walks at most {} once per reduction",
                       sizes[static_cast<size_t>(dim)], kMaxReducedLine);
  }
  // Each thread knows its own line's results only: every value computed from them must read them there.
  Candidate before_scan;
  std::copy_if(candidate.exprs.begin(), candidate.exprs.end(), std::back_inserter(before_scan.exprs),
               [&](const Expr* e) { return e != &op; });
  return misalignedWithDomain(before_scan, facts, d, bound);
}

}  // namespace

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
    if (scatter && category != OpCategory::Meta) {
      return Verdict::no(facts.reasons ? fmt::format("{} computes an operand of the {}, which a scatter kernel reads only "
                                                     "through meta ops", exprLabel(*e), opName(kind))
                                       : std::string());
    }
    if (category == OpCategory::Matmul) {
      return Verdict::no(facts.reasons ? fmt::format("{} is a matmul", exprLabel(*e)) : std::string());
    }
  }
  if (!facts.reductions.empty()) {
    std::string problem = lineReductionProblem(candidate, facts, op, bound);
    if (!problem.empty()) return Verdict::no(facts.reasons ? std::move(problem) : std::string());
  }
  if (kind == OpKind::Cumsum) {
    std::string problem = cumsumEpilogueProblem(candidate, op, bound);
    if (!problem.empty()) return Verdict::no(facts.reasons ? std::move(problem) : std::string());
    return Verdict::yes();
  }
  // The lowerings write the op's outputs and nothing else: a value the segment must also write (a
  // permuted copy of the operand, an op of the results) belongs to another segment.
  for (const Val* out : candidate.outputs) {
    if (std::find(op.outputs().begin(), op.outputs().end(), out) == op.outputs().end()) {
      return Verdict::no(facts.reasons ? fmt::format("{} is written beside the {}, which is all a scan kernel writes",
                                                     out->name(), opName(kind))
                                       : std::string());
    }
  }
  return Verdict::yes();
}

}  // namespace braze
