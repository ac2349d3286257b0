// The pointwise scheduler's structural check. A pointwise kernel iterates over each output's index
// space and reads every tensor through the composed index maps of the meta ops between them, so
// meta ops, pad, cat, gathers, creation and per-tensor/channel/block (de)quantization all fit, and so
// do reductions over a few elements a result (reducedPerElement), each element computing the results it
// reads, where that costs few loads (perElementReductionCost). Other reductions (a reduction
// scheduler's), matmul (the matmul scheduler's) and the line walks (cumsum, topk, argsort, scatter,
// index_put_accumulate: the scan scheduler's) do not.
#include "scheduler/pointwise/entry.h"

#include "scheduler/value_builder.h"

#include <optional>
#include <string>
#include <unordered_map>

namespace braze {
namespace {

// The loads the per-element reductions may cost, as a multiple of the elements the kernel reads at least
// (its inputs'): loads of elements other threads of the block read too hit L1, which returns about ten
// times an SM's share of HBM bandwidth, so up to that many cost no more time than the kernel's HBM
// traffic. GQA's backward at q query heads a KV head loads 2 (q + 2) / 3 times its inputs: 12 at 16.
constexpr int64_t kMaxReductionLoadsPerInputElement = 12;

// Where a reduction computed per element is read: the loads it costs for each element of each value
// computed from it (loads per element), the ops between it and the outputs each computing every value
// they read at each of their own elements. A pad or cat computes each of its inputs at every element
// (and selects), so a reduction read by a cat is computed at all the cat's elements, not only its own.
// Nullopt, with `why`, where an op would read a result at several elements by broadcasting it (x - sum(x)
// over a few rows: each element would compute the sum again), or reduce it again (the loads multiply).
std::optional<int64_t> perElementReductionCost(const Candidate& candidate, const BoundShapes& bound, std::string* why) {
  std::unordered_map<const Val*, double> loads_per_element;
  auto cost = [&](const Val* v) {
    auto it = loads_per_element.find(v);
    return it == loads_per_element.end() ? 0.0 : it->second;
  };
  for (const Expr* e : candidate.exprs) {
    double loads = 0.0;
    bool reads = false;
    for (const Val* in : e->inputs()) {
      if (loads_per_element.count(in) == 0) continue;
      reads = true;
      loads += cost(in);
    }
    const OpCategory category = opInfo(e->kind()).category;
    if (category == OpCategory::Reduction) {
      if (reads) {
        *why = fmt::format("{} reduces a reduction's result (computed per element, the loads would multiply)", exprLabel(*e));
        return std::nullopt;
      }
      const int64_t results = bound.numel(e->output(0));
      const int64_t reduced = results == 0 ? 0 : bound.numel(e->input(0)) / results;
      loads_per_element[e->output(0)] = static_cast<double>(reduced);
      continue;
    }
    if (!reads) continue;
    bool once = false;  // each element of the value read is read at one element of the op's output
    switch (category) {
      case OpCategory::Data: once = e->kind() == OpKind::Pad || e->kind() == OpKind::Cat || e->kind() == OpKind::StrideOrder; break;
      case OpCategory::Meta: once = bound.numel(e->output(0)) <= bound.numel(e->input(0)); break;
      case OpCategory::Unary:
      case OpCategory::Binary:
      case OpCategory::Ternary:
      case OpCategory::Cast:
        once = std::all_of(e->inputs().begin(), e->inputs().end(), [&](const Val* in) {
          return loads_per_element.count(in) == 0 || !in->isTensor() || bound.numel(in) == bound.numel(e->output(0));
        });
        break;
      default: break;
    }
    if (!once) {
      *why = fmt::format("{} reads a reduction's result at several elements (each would compute it again)", exprLabel(*e));
      return std::nullopt;
    }
    for (const Val* out : e->outputs()) loads_per_element[out] = loads;
  }
  double total = 0.0;
  for (const Val* out : candidate.outputs) {
    if (out->isTensor()) total += cost(out) * static_cast<double>(bound.numel(out));
  }
  return static_cast<int64_t>(total);
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
  const std::optional<int64_t> loads = perElementReductionCost(candidate, bound, &why);
  if (!loads) return Verdict::no(why);
  int64_t read = 0;
  for (const Val* in : candidate.inputs) read += in->isTensor() ? bound.numel(in) : 0;
  if (*loads > kMaxReductionLoadsPerInputElement * std::max<int64_t>(read, 1)) {
    return Verdict::no(fmt::format("its reductions computed per element would load {} elements, more than {} times the {} "
                                   "it reads", *loads, kMaxReductionLoadsPerInputElement, read));
  }
  return Verdict::yes();
}

}  // namespace braze
