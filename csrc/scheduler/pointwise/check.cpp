// The pointwise scheduler's structural check. A pointwise kernel iterates over each output's index
// space and reads every tensor through the composed index maps of the meta ops between them, so
// meta ops, pad, cat, gathers, creation and per-tensor/channel/block (de)quantization all fit, and so
// do reductions over a few elements a result (reducedPerElement), each element computing the results it
// reads, where that costs few loads (perElementReductionLoads). Other reductions (a reduction
// scheduler's), matmul (the matmul scheduler's) and the line walks (cumsum, topk, argsort, scatter,
// index_put_accumulate: the scan scheduler's) do not.
#include "scheduler/pointwise/entry.h"

#include "scheduler/cat_pieces.h"
#include "scheduler/value_builder.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace braze {
namespace {

// The loads an output element may spend on the reductions it computes. They hit L1 where neighbouring
// elements read the same rows (an SM's L1 returns about nine times its share of HBM bandwidth), and an
// output element moves two or three elements through HBM (its share of the inputs, and itself), so about
// this many cost no more time than the kernel's HBM traffic. GQA's backward concatenates the query heads'
// gradient with two sums over the q query heads of each KV head (the keys' with RoPE's backward in it,
// about 6 loads a head in Thunder's fusion); each element computes only the input it falls in
// (cat_pieces.h), so each sum counts by its share of the cat, 1 / (q + 2): about 7 loads an element at
// any q. A bound on loads per input element instead would let an input read only through a slice pay
// for any number.
constexpr double kMaxReductionLoadsPerOutputElement = 32;

// The loads an element of each value of the candidate costs: one per element of a tensor it reads, those
// of every piece of a cat (it computes each and selects), r times its operand's for a reduction of r
// elements a result (recounting an input an op reads twice: an upper bound).
class LoadsPerElement {
 public:
  explicit LoadsPerElement(const BoundShapes& bound) : bound_(bound) {}
  void add(const Expr& e) {
    double loads = 0;
    for (const Val* in : e.inputs()) {
      if (in->isTensor()) loads += of(in);
    }
    if (opInfo(e.kind()).category == OpCategory::Reduction) {
      const int64_t results = bound_.numel(e.output(0));
      loads *= static_cast<double>(results == 0 ? 0 : bound_.numel(e.input(0)) / results);
    }
    for (const Val* out : e.outputs()) loads_[out] = loads;
  }
  double of(const Val* v) const {
    auto it = loads_.find(v);
    return it == loads_.end() ? 1.0 : it->second;  // a tensor the kernel reads: one load
  }

 private:
  const BoundShapes& bound_;
  std::unordered_map<const Val*, double> loads_;
};

// How often each element of a value computed from per-element reductions computes each of them: per
// reduction, the evaluations per element. An op computes each value it reads at each of its elements;
// values at the same index are computed once (the lowering memoizes them), so an elementwise op takes the
// most of its operands' counts, and a pad or cat, which computes every input at every element (at other
// indices of the same value, and selects), their sum.
using Evaluations = std::unordered_map<const Expr*, double>;

double loadsOf(const Evaluations& evaluations, const LoadsPerElement& loads) {
  double total = 0;
  for (const auto& [reduction, count] : evaluations) total += count * loads.of(reduction->output(0));
  return total;
}

// The loads per output element of the output group (the outputs of one shape, computed together) that
// computes the most, or nullopt with `why` where an op would read a reduction's result at several elements
// by broadcasting it (x - sum(x) over a few rows: each element would compute the sum again) or reduce it
// again (the loads multiply).
std::optional<double> perElementReductionLoads(const Candidate& candidate, const BoundShapes& bound, std::string* why) {
  std::unordered_map<const Val*, Evaluations> of;
  LoadsPerElement loads(bound);
  // The cats that the lowerings compute one input of per chunk (cat_pieces.h): an element computes the
  // input it falls in, so the group's elements spend, on average, each input's loads weighted by its
  // share of the cat.
  std::map<std::vector<int64_t>, std::vector<const Val*>> by_shape;
  for (const Val* out : candidate.outputs) by_shape[bound.sizesOf(out)].push_back(out);
  std::unordered_set<const Expr*> split;
  for (const auto& [shape, outputs] : by_shape) {
    if (const Expr* cat = scheduler::splittingCat(candidate.exprs, outputs, bound)) split.insert(cat);
  }
  for (const Expr* e : candidate.exprs) {
    loads.add(*e);
    const OpCategory category = opInfo(e->kind()).category;
    const bool reads = std::any_of(e->inputs().begin(), e->inputs().end(), [&](const Val* v) { return of.count(v) != 0; });
    if (category == OpCategory::Reduction) {
      if (reads) {
        *why = fmt::format("{} reduces a reduction's result (computed per element, the loads would multiply)", exprLabel(*e));
        return std::nullopt;
      }
      of[e->output(0)] = Evaluations{{e, 1.0}};
      continue;
    }
    if (!reads) continue;
    bool once = false;  // each element of a value read is read at one element of the op's output
    bool pieces = false;
    switch (category) {
      case OpCategory::Data:
        once = e->kind() == OpKind::Pad || e->kind() == OpKind::Cat || e->kind() == OpKind::StrideOrder;
        pieces = e->kind() != OpKind::StrideOrder;
        break;
      case OpCategory::Meta: once = bound.numel(e->output(0)) <= bound.numel(e->input(0)); break;
      case OpCategory::Unary:
      case OpCategory::Binary:
      case OpCategory::Ternary:
      case OpCategory::Cast:
        once = std::all_of(e->inputs().begin(), e->inputs().end(), [&](const Val* in) {
          return of.count(in) == 0 || !in->isTensor() || bound.numel(in) == bound.numel(e->output(0));
        });
        break;
      default: break;
    }
    if (!once) {
      *why = fmt::format("{} reads a reduction's result at several elements (each would compute it again)", exprLabel(*e));
      return std::nullopt;
    }
    Evaluations evaluations;
    const bool weighted = split.count(e) != 0;
    const int64_t cat_extent = weighted ? bound.sizesOf(e->output(0))[e->attrs().getInt("dim")] : 0;
    for (const Val* in : e->inputs()) {
      auto it = of.find(in);
      if (it == of.end()) continue;
      const double share = weighted && cat_extent > 0
                               ? static_cast<double>(bound.sizesOf(in)[e->attrs().getInt("dim")]) / cat_extent
                               : 1.0;
      for (const auto& [reduction, count] : it->second) {
        double& total = evaluations[reduction];
        total = pieces ? total + share * count : std::max(total, count);
      }
    }
    for (const Val* out : e->outputs()) of[out] = evaluations;
  }
  std::map<std::vector<int64_t>, Evaluations> groups;  // by output shape
  for (const Val* out : candidate.outputs) {
    auto it = of.find(out);
    if (it == of.end()) continue;
    Evaluations& group = groups[bound.sizesOf(out)];
    for (const auto& [reduction, count] : it->second) group[reduction] = std::max(group[reduction], count);
  }
  double most = 0;
  for (const auto& [shape, evaluations] : groups) most = std::max(most, loadsOf(evaluations, loads));
  return most;
}

}  // namespace

Verdict canSchedulePointwise(const Candidate& candidate, const CandidateFacts& facts, const BoundShapes& bound) {
  if (facts.unsupported != nullptr) return Verdict::no(unsupportedReason(*facts.unsupported));
  if (facts.reductions.empty()) return Verdict::yes();
  for (const Expr* reduction : facts.reductions) {
    if (!scheduler::reducedPerElement(*reduction, bound)) {
      return Verdict::no(fmt::format("{} is a reduction (of more than {} elements a result, or no plain one)",
                                     exprLabel(*reduction), scheduler::kMaxElementsReducedPerElement));
    }
  }
  std::string why;
  const std::optional<double> loads = perElementReductionLoads(candidate, bound, &why);
  if (!loads) return Verdict::no(why);
  if (*loads > kMaxReductionLoadsPerOutputElement) {
    return Verdict::no(fmt::format("its reductions computed per element would load {:g} elements for an output element, "
                                   "more than {:g}", *loads, kMaxReductionLoadsPerOutputElement));
  }
  return Verdict::yes();
}

}  // namespace braze
