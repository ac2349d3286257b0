#include "passes/mark_aliases_prepare.h"

#include "support/error.h"
#include "ir/ops.h"
#include "ir/shape_rules.h"
#include "passes/alias_analysis.h"
#include "passes/bookend_cost.h"
#include "ir/strided_layout.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace braze {
namespace {

bool isViewOp(const Expr* expr) { return isMetaOp(expr->kind()) && expr->kind() != OpKind::SegmentSet; }

std::string chainText(const std::vector<const Expr*>& chain) {
  if (chain.empty()) return "";
  std::string text = chain.front()->input(0)->name();
  for (const Expr* e : chain) text += fmt::format(" -> {} -> {}", e->name(), e->output(0)->name());
  return text;
}

// Views of `from` through the exprs of `chain` (in order, each reading an earlier result or `from`).
// Returns the layouts of every tensor reached, or the first reason one is not a view.
struct ChainViews {
  std::unordered_map<const Val*, StridedLayout> layouts;
  std::string not_a_view;
};
ChainViews viewsThrough(const Val* from, const StridedLayout& layout, const std::vector<const Expr*>& chain,
                        const BoundShapes& bound) {
  ChainViews views;
  views.layouts[from] = layout;
  for (const Expr* e : chain) {
    ViewResult r = viewThrough(*e, views.layouts.at(e->input(0)), bound.intOperands(*e));
    if (!r.is_view) {
      views.not_a_view = r.reason;
      return views;
    }
    views.layouts[e->output(0)] = std::move(r.layout);
  }
  return views;
}

Val* insertSegmentSet(Fusion& fusion, BoundShapes& bound, Val* tensor, const std::vector<const Expr*>& readers) {
  FusionGuard guard(&fusion);
  TensorView* cut = segmentSet(tensor->asTensor());
  bound.bindSameAs(cut, tensor);
  for (const Expr* reader : readers) fusion.replaceInput(const_cast<Expr*>(reader), tensor, cut);
  return cut;
}

std::unordered_set<const Expr*> evaluated(const Fusion& fusion) {
  const auto exprs = fusion.exprsToEvaluate();
  return {exprs.begin(), exprs.end()};
}

// ---- output chains ----------------------------------------------------------------------------

// Tensors all of whose (evaluated) readers are view ops leading only to more such tensors: nothing
// downstream computes, so the chain can be views of the tensor it starts from.
std::unordered_set<const Val*> viewOnlyTensors(const std::vector<Expr*>& exprs, const std::unordered_set<const Expr*>& live) {
  std::unordered_set<const Val*> view_only;
  for (auto it = exprs.rbegin(); it != exprs.rend(); ++it) {
    if (!isViewOp(*it)) continue;
    const Val* out = (*it)->output(0);
    bool only = true;
    for (const Expr* use : out->uses()) {
      if (live.count(use) == 0) continue;
      only = only && isViewOp(use) && view_only.count(use->output(0)) != 0;
    }
    if (only) view_only.insert(out);
  }
  return view_only;
}

void decideOutputChain(Fusion& fusion, BoundShapes& bound, BookendPolicy policy, Val* root,
                       const std::vector<const Expr*>& starts, const std::unordered_set<const Expr*>& live,
                       BookendReport& report) {
  // The chain tree below root: its starts, then every live view op downstream of them.
  std::vector<const Expr*> tree;
  std::vector<const Expr*> frontier = starts;
  while (!frontier.empty()) {
    const Expr* e = frontier.front();
    frontier.erase(frontier.begin());
    tree.push_back(e);
    for (const Expr* use : e->output(0)->uses()) {
      if (live.count(use) != 0) frontier.push_back(use);
    }
  }
  std::sort(tree.begin(), tree.end(), [](const Expr* a, const Expr* b) { return a->id() < b->id(); });
  BookendDecision decision;
  decision.side = BookendDecision::Side::Output;
  decision.chain = chainText(tree);
  const ChainViews views = viewsThrough(root, bound.allocatedLayout(root), tree, bound);
  if (!views.not_a_view.empty()) {
    decision.reason = "not a view: " + views.not_a_view;
  } else if (policy == BookendPolicy::None) {
    decision.reason = "policy none";
  } else if (policy != BookendPolicy::Auto) {
    decision.bookended = true;
    decision.reason = fmt::format("policy {}", toString(policy));
  } else {
    // Without bookending the kernel writes each output through the chain's index map: every output's
    // elements (an expanded output in full), and one element at a time when the chain moves the
    // innermost dim. With it, the kernel writes root once (unless root is written anyway) in order.
    const int64_t item = sizeOf(root->dtype());
    double without_ns = 0;
    int64_t without_bytes = 0;
    for (const Expr* e : tree) {
      const Val* out = e->output(0);
      if (!out->isFusionOutput()) continue;
      const StridedLayout& view = views.layouts.at(out);
      int64_t inner_stride = 1;
      for (int64_t d = static_cast<int64_t>(view.sizes.size()) - 1; d >= 0; --d) {
        if (view.sizes[d] > 1) {
          inner_stride = view.strides[d];
          break;
        }
      }
      const int64_t factor = (inner_stride == 1 || inner_stride == 0)
                                 ? vectorizeFactor(out->dtype(), bound.allocatedLayout(out), 16)
                                 : 1;
      const int64_t bytes = bound.numel(out) * item;
      without_bytes += bytes;
      without_ns += trafficNs(bytes, factor * item);
    }
    bool root_written_anyway = root->isFusionOutput();
    for (const Expr* use : root->uses()) {
      const bool in_chain = std::find(starts.begin(), starts.end(), use) != starts.end();
      root_written_anyway = root_written_anyway || (live.count(use) != 0 && !in_chain);
    }
    const int64_t root_factor = vectorizeFactor(root->dtype(), bound.allocatedLayout(root), 16);
    const int64_t with_bytes = root_written_anyway ? 0 : bound.numel(root) * item;
    const double with_ns = trafficNs(with_bytes, root_factor * item) + kAliasSegmentHostNs;
    decision.bookended = with_ns < without_ns;
    decision.reason = fmt::format(
        "cost model: kernel writes through the chain {} B ({:.0f} ns); as views {} B{} + {:.0f} ns host ({:.0f} ns)",
        without_bytes, without_ns, with_bytes, root_written_anyway ? " (root is written anyway)" : "",
        kAliasSegmentHostNs, with_ns);
  }
  if (decision.bookended) insertSegmentSet(fusion, bound, root, starts);
  report.decisions.push_back(std::move(decision));
}

// ---- input chains -----------------------------------------------------------------------------

// Two views of one input read disjoint memory when their chains part at slices of one tensor with
// disjoint ranges along some dim (the q, k and v splits of a qkv projection).
bool disjointSlices(const std::vector<const Expr*>& a, const std::vector<const Expr*>& b, const BoundShapes& bound) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  if (k == a.size() || k == b.size()) return false;  // one view is a view of the other
  const Expr* sa = a[k];
  const Expr* sb = b[k];
  if (sa->kind() != OpKind::Slice || sb->kind() != OpKind::Slice || sa->input(0) != sb->input(0)) return false;
  const auto& sizes = bound.sizesOf(sa->input(0));
  const auto da = sliceDims(*sa, sizes, bound.intOperands(*sa));
  const auto db = sliceDims(*sb, sizes, bound.intOperands(*sb));
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t a_end = da[d].start + std::max<int64_t>(da[d].size - 1, 0) * da[d].step;
    const int64_t b_end = db[d].start + std::max<int64_t>(db[d].size - 1, 0) * db[d].step;
    if (da[d].size == 0 || db[d].size == 0 || a_end < db[d].start || b_end < da[d].start) return true;
  }
  return false;
}

struct InputChain {
  Val* end = nullptr;                     // the view that compute reads
  std::vector<const Expr*> chain;         // from the input to end
  std::vector<const Expr*> compute_readers;
  StridedLayout layout;
  std::string not_eligible;               // why it cannot be bookended, if it cannot
};

}  // namespace

std::string_view toString(BookendPolicy policy) {
  switch (policy) {
    case BookendPolicy::Auto: return "auto";
    case BookendPolicy::None: return "none";
    case BookendPolicy::Outputs: return "outputs";
    case BookendPolicy::Both: return "both";
  }
  BRAZE_UNREACHABLE("BookendPolicy {}", static_cast<int>(policy));
}

BookendPolicy bookendPolicyFromString(std::string_view name) {
  for (BookendPolicy p : {BookendPolicy::Auto, BookendPolicy::None, BookendPolicy::Outputs, BookendPolicy::Both}) {
    if (toString(p) == name) return p;
  }
  BRAZE_CHECK(false, "bookend policy '{}' is not one of auto, none, outputs, both", name);
  BRAZE_UNREACHABLE("bookendPolicyFromString");
}

std::string BookendReport::toString() const {
  std::string text = fmt::format("bookending (policy {}):\n", braze::toString(policy));
  if (decisions.empty()) text += "  no meta-op chain starts at an input or ends at an output\n";
  for (const BookendDecision& d : decisions) {
    text += fmt::format("  {} {}: {} ({})\n", d.side == BookendDecision::Side::Input ? "input " : "output",
                        d.chain, d.bookended ? "bookended" : "kept in the kernel", d.reason);
  }
  return text;
}

namespace {

// Roots of output chains: computed tensors (not input views, not themselves view-only) read by view-only
// chains, each with the view ops its chains start with.
std::vector<std::pair<Val*, std::vector<const Expr*>>> outputChainRoots(const std::vector<Expr*>& exprs,
                                                                        const std::unordered_set<const Expr*>& live) {
  const auto view_only = viewOnlyTensors(exprs, live);
  std::vector<std::pair<Val*, std::vector<const Expr*>>> roots;
  std::unordered_set<const Val*> seen;
  for (Expr* expr : exprs) {
    for (Val* out : expr->outputs()) {
      if (!out->isTensor() || view_only.count(out) != 0 || inputViewRoot(out) != nullptr) continue;
      if (expr->kind() == OpKind::SegmentSet) continue;  // already cut there
      std::vector<const Expr*> starts;
      for (const Expr* use : out->uses()) {
        if (live.count(use) != 0 && isViewOp(use) && view_only.count(use->output(0)) != 0) starts.push_back(use);
      }
      if (!starts.empty() && seen.insert(out).second) roots.emplace_back(out, std::move(starts));
    }
  }
  return roots;
}

}  // namespace

void markOutputChains(Fusion& fusion, BoundShapes& bound, BookendPolicy policy, BookendReport& report) {
  const std::vector<Expr*> exprs = fusion.exprsToEvaluate();
  const std::unordered_set<const Expr*> live(exprs.begin(), exprs.end());
  for (auto& [root, starts] : outputChainRoots(exprs, live)) {
    decideOutputChain(fusion, bound, policy, root, starts, live, report);
  }
}

bool bookendingMayEdit(const Fusion& fusion, BookendPolicy policy) {
  if (policy == BookendPolicy::None) return false;
  const std::vector<Expr*> exprs = fusion.exprsToEvaluate();
  const std::unordered_set<const Expr*> live(exprs.begin(), exprs.end());
  if (!outputChainRoots(exprs, live).empty()) return true;
  if (policy != BookendPolicy::Both) return false;  // only policy both cuts input chains (decideInputChains)
  return std::any_of(exprs.begin(), exprs.end(), [](const Expr* e) {
    return isViewOp(e) && e->input(0)->isTensor() && e->input(0)->isFusionInput();
  });
}

void insertSegmentCuts(Fusion& fusion, BoundShapes& bound, const std::vector<SegmentCut>& cuts) {
  for (const SegmentCut& cut : cuts) insertSegmentSet(fusion, bound, cut.tensor, cut.readers);
}

std::vector<SegmentCut> decideInputChains(const Fusion& fusion, const BoundShapes& bound, BookendPolicy policy,
                                          const KernelOfExpr& kernel_of, BookendReport& report) {
  const auto live = evaluated(fusion);
  std::vector<SegmentCut> cuts;
  for (Val* input : fusion.inputs()) {
    if (!input->isTensor()) continue;
    // The input's views that compute reads, in definition order (a breadth-first walk of view ops).
    std::vector<InputChain> chains;
    std::vector<Val*> frontier{input};
    while (!frontier.empty()) {
      Val* v = frontier.front();
      frontier.erase(frontier.begin());
      InputChain c;
      c.end = v;
      for (const Expr* use : v->uses()) {
        if (live.count(use) == 0) continue;
        if (isViewOp(use)) {
          frontier.push_back(use->output(0));
        } else if (!isMetaOp(use->kind())) {
          c.compute_readers.push_back(use);
        }
      }
      // No segment_set right after an input, nor where no compute reads the view.
      if (v == input || c.compute_readers.empty()) continue;
      c.chain = inputViewChain(v);
      const ChainViews views = viewsThrough(input, bound.inputLayout(input).layout, c.chain, bound);
      if (!views.not_a_view.empty()) {
        c.not_eligible = "not a view: " + views.not_a_view;
      } else {
        c.layout = views.layouts.at(v);
      }
      chains.push_back(std::move(c));
    }
    // Two views of one input feeding one kernel would make it read the input twice.
    for (size_t i = 0; i < chains.size(); ++i) {
      for (size_t j = i + 1; j < chains.size(); ++j) {
        if (kernel_of(chains[i].compute_readers.front()) != kernel_of(chains[j].compute_readers.front())) continue;
        if (disjointSlices(chains[i].chain, chains[j].chain, bound)) continue;
        const std::string why = fmt::format("{} and {} are overlapping views of {} read by one kernel (it would read "
                                            "{} twice)", chains[i].end->name(), chains[j].end->name(), input->name(),
                                            input->name());
        if (chains[i].not_eligible.empty()) chains[i].not_eligible = why;
        if (chains[j].not_eligible.empty()) chains[j].not_eligible = why;
      }
    }
    for (InputChain& c : chains) {
      BookendDecision decision;
      decision.side = BookendDecision::Side::Input;
      decision.chain = chainText(c.chain);
      if (!c.not_eligible.empty()) {
        decision.reason = c.not_eligible;
      } else if (policy == BookendPolicy::None || policy == BookendPolicy::Outputs) {
        decision.reason = fmt::format("policy {}", toString(policy));
      } else if (policy == BookendPolicy::Both) {
        decision.bookended = true;
        decision.reason = "policy both";
      } else {
        // The rule under auto: an input chain stays in its kernels. A kernel reads an input view through
        // the chain's composed index map, so it moves the same bytes at the same vector width as it would
        // reading the bookended view (the width below is the view's own); a view would only add an
        // alias segment's host time. (Output chains differ: there a view saves the kernel's writes.)
        const int64_t width = vectorizeFactor(c.end->dtype(), c.layout, bound.inputLayout(input).alignment_bytes) *
                              sizeOf(c.end->dtype());
        decision.bookended = false;
        decision.reason = fmt::format("kept in the kernel: it reads the view's {} B through the chain's index map at "
                                      "{} B per access, as it would read a bookended view, without the {:.0f} ns of "
                                      "host time an alias segment adds",
                                      bound.uniqueBytes(c.end), width, kAliasSegmentHostNs);
      }
      if (decision.bookended) cuts.push_back({c.end, c.compute_readers});
      report.decisions.push_back(std::move(decision));
    }
  }
  return cuts;
}

}  // namespace braze
