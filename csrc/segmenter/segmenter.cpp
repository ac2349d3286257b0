#include "segmenter/segmenter.h"

#include "support/error.h"
#include "support/by_id.h"
#include "passes/alias_analysis.h"
#include "scheduler/independent_parts.h"
#include "segmenter/group_reductions.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace braze {
namespace {

struct Group {
  std::vector<int64_t> nodes;  // node indices, ascending (= evaluation order)
  int64_t min_pos = 0;
  int64_t max_pos = 0;
  bool has_segment_set = false;
  bool all_meta = true;
  int64_t bytes = 0;  // what a kernel for the group reads and writes
  // A topological level of the group graph: every edge goes from a lower level to a higher one.
  // Node positions cannot serve: a sibling merge makes a group span positions other groups sit in.
  int64_t level = 0;
};

struct MergeVerdict {
  bool ok = false;
  CutReason reason = CutReason::SchedulerRefused;
  std::string detail;
  int64_t bytes = 0;  // what the union moves, when ok
};

// A segment for `candidate`, with whichever scheduler accepts it (an alias segment if the alias
// scheduler does).
Segment segmentFor(Candidate candidate, const BoundShapes& bound) {
  SchedulerChoice choice = chooseScheduler(candidate, bound);
  Segment s;
  s.kind = choice.kind == SchedulerKind::Alias ? SegmentKind::Alias : SegmentKind::Kernel;
  s.scheduler = choice.kind;
  s.exprs = std::move(candidate.exprs);
  s.inputs = std::move(candidate.inputs);
  s.outputs = std::move(candidate.outputs);
  s.refusals = std::move(choice.refusals);
  return s;
}

class Segmenter {
 public:
  Segmenter(std::shared_ptr<const Fusion> fusion, BoundShapes bound) : fusion_(std::move(fusion)), bound_(std::move(bound)) {
    const std::vector<Expr*> evaluated = fusion_->exprsToEvaluate();
    int64_t expr_ids = 0, val_ids = 0;
    for (const Expr* e : evaluated) expr_ids = std::max(expr_ids, e->id() + 1);
    for (const auto& v : fusion_->vals()) val_ids = std::max(val_ids, v->id() + 1);
    eval_pos_.assign(static_cast<size_t>(expr_ids), -1);
    node_of_.assign(static_cast<size_t>(expr_ids), -1);
    producer_.assign(static_cast<size_t>(val_ids), -1);
    input_stamp_.assign(static_cast<size_t>(val_ids), 0);
    const std::vector<char> computes = fusion_->computesNeededValues(evaluated);
    int64_t position = 0;
    for (const Expr* e : evaluated) {
      eval_pos_[e->id()] = position++;
      if (e->outputs().empty() || !e->output(0)->isTensor()) continue;   // scalar math: folded on the host
      if (computes[e->id()] == 0) continue;  // only its shape is read: no kernel computes it
      if (isMetaOp(e->kind()) && e->kind() != OpKind::SegmentSet && inputViewRoot(e->output(0)) != nullptr &&
          !isCopiedOutput(e->output(0))) {
        continue;  // an input view: inlined into each reader
      }
      node_of_[e->id()] = static_cast<int64_t>(nodes_.size());
      nodes_.push_back(e);
    }
    parent_.resize(nodes_.size());
    std::iota(parent_.begin(), parent_.end(), 0);
    groups_.resize(nodes_.size());
    stamp_.assign(nodes_.size(), 0);
    version_.assign(nodes_.size(), 0);
    for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) {
      const Expr* e = nodes_[i];
      for (const Val* out : e->outputs()) producer_[out->id()] = i;
      Group& g = groups_[i];
      g.nodes = {i};
      g.min_pos = g.max_pos = g.level = i;
      g.has_segment_set = e->kind() == OpKind::SegmentSet;
      g.all_meta = isMetaOp(e->kind());
    }
    consumer_nodes_.resize(nodes_.size());
    for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) {
      for (const Val* out : nodes_[i]->outputs()) {
        for (const Expr* use : out->uses()) {
          const int64_t u = nodeOf(use);
          if (u >= 0) consumer_nodes_[i].push_back(u);
        }
      }
    }
    for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) groups_[i].bytes = bytesOf(candidateOf({i}));
    // Nodes made from scalars alone (no fusion input upstream: an iota and the meta ops and casts after it),
    // found in evaluation order.
    made_from_scalars_.assign(nodes_.size(), 0);
    for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) {
      const Expr* e = nodes_[i];
      made_from_scalars_[i] = std::all_of(e->inputs().begin(), e->inputs().end(), [&](const Val* v) {
        const int64_t p = v->isTensor() ? producerOf(v) : -1;
        return !v->isTensor() || (p >= 0 && made_from_scalars_[p] != 0);
      });
    }
    // Such nodes connected to one another form a value made from scalars; it is held back whole where one
    // of its nodes writes a fusion output (an unsqueeze of the positions returned, a reshape of them read).
    std::vector<int64_t> chain(nodes_.size());
    std::iota(chain.begin(), chain.end(), 0);
    const auto chainOf = [&](int64_t n) {
      while (chain[n] != n) n = chain[n] = chain[chain[n]];
      return n;
    };
    for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) {
      if (made_from_scalars_[i] == 0) continue;
      for (int64_t c : consumer_nodes_[i]) {
        if (made_from_scalars_[c] != 0) chain[chainOf(c)] = chainOf(i);
      }
    }
    std::vector<char> returned(nodes_.size(), 0);
    for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) {
      const auto& outs = nodes_[i]->outputs();
      if (made_from_scalars_[i] != 0 && std::any_of(outs.begin(), outs.end(), [](const Val* v) { return v->isFusionOutput(); })) {
        returned[chainOf(i)] = 1;
      }
    }
    held_back_.assign(nodes_.size(), 0);
    for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) {
      held_back_[i] = made_from_scalars_[i] != 0 && returned[chainOf(i)] != 0;
      // The first pass matters only where a held node has a reader it is held back from.
      for (int64_t c : consumer_nodes_[i]) {
        any_held_back_ = any_held_back_ || (held_back_[i] != 0 && made_from_scalars_[c] == 0);
      }
    }
  }

  // An output that is an input view but not a strided view of the input's actual layout (a reshape
  // of an expanded or transposed input): a kernel must write it, so its last op becomes a node that
  // can join other kernels (litGPT's GQA v, which is expanded and then reshaped).
  bool isCopiedOutput(const Val* tensor) const {
    if (!tensor->isFusionOutput() || tensor->isFusionInput()) return false;
    const Val* root = inputViewRoot(tensor);
    if (root == nullptr) return false;  // computed: no input view
    StridedLayout layout = bound_.inputLayout(root).layout;
    for (const Expr* e : inputViewChain(tensor)) {
      ViewResult view = viewThrough(*e, layout, bound_.intOperands(*e));
      if (!view.is_view) return true;
      layout = std::move(view.layout);
    }
    return false;
  }

  SegmentedFusion run() {
    mergeToFixpoint();
    return buildResult();
  }

 private:
  int64_t find(int64_t i) {
    while (parent_[i] != i) {
      parent_[i] = parent_[parent_[i]];
      i = parent_[i];
    }
    return i;
  }

  // The node of an expr, or -1 (an input view, scalar math, or an expr no output needs).
  int64_t nodeOf(const Expr* e) const {
    return e == nullptr ? -1 : entryOr(node_of_, static_cast<size_t>(e->id()), int64_t{-1});
  }
  // The node writing a tensor, or -1 (a fusion input, an input view).
  int64_t producerOf(const Val* v) const {
    return entryOr(producer_, static_cast<size_t>(v->id()), int64_t{-1});
  }

  // The candidate for a set of nodes (given as the group roots they belong to).
  Candidate candidateOf(const std::vector<int64_t>& roots) {
    std::vector<int64_t> members;
    for (int64_t r : roots) members.insert(members.end(), groups_[r].nodes.begin(), groups_[r].nodes.end());
    std::sort(members.begin(), members.end());
    auto inside = [&](int64_t node) {
      const int64_t r = find(node);
      return std::find(roots.begin(), roots.end(), r) != roots.end();
    };
    Candidate c;
    ++input_stamp_now_;  // marks the inputs taken so far
    for (int64_t n : members) {
      const Expr* e = nodes_[n];
      c.exprs.push_back(e);
      for (const Val* in : e->inputs()) {
        if (!in->isTensor()) continue;
        const int64_t p = producerOf(in);
        if ((p < 0 || !inside(p)) && input_stamp_[in->id()] != input_stamp_now_) {
          input_stamp_[in->id()] = input_stamp_now_;
          c.inputs.push_back(in);
        }
      }
      // A node none of whose tensors anything reads runs only for its index checks (computesNeededValues):
      // it writes them, so that its kernel has elements to run over.
      bool read_at_all = false;
      for (const Val* out : e->outputs()) {
        read_at_all = read_at_all || out->isFusionOutput();
        for (const Expr* use : out->uses()) read_at_all = read_at_all || nodeOf(use) >= 0;
      }
      for (const Val* out : e->outputs()) {
        bool read_outside = out->isFusionOutput() || !read_at_all;
        for (const Expr* use : out->uses()) {
          const int64_t u = nodeOf(use);
          read_outside = read_outside || (u >= 0 && !inside(u));
        }
        if (read_outside) c.outputs.push_back(out);
      }
    }
    return c;
  }

  // Saturated at INT64_MAX: counts past it (expanded inputs of 2^60 elements) compare as the largest, not
  // as wrapped small or negative ones.
  int64_t bytesOf(const Candidate& c) const {
    int64_t bytes = 0;
    const auto add = [&](int64_t n, int64_t item) {
      int64_t b = 0;
      if (__builtin_mul_overflow(n, item, &b) || __builtin_add_overflow(bytes, b, &bytes)) bytes = INT64_MAX;
    };
    for (const Val* in : c.inputs) add(bound_.uniqueBytes(in), 1);
    for (const Val* out : c.outputs) add(bound_.numel(out), sizeOf(out->dtype()));
    return bytes;
  }

  // Groups reading a tensor that `g` writes.
  template <typename Fn>
  void forEachConsumer(int64_t g, Fn&& fn) {
    for (int64_t n : groups_[g].nodes) {
      for (int64_t u : consumer_nodes_[n]) {
        const int64_t c = find(u);
        if (c != g) fn(c);
      }
    }
  }

  // Whether some path leads from group `from` to group `to` through a third group. Levels rise
  // along every path, so groups at or above `to`'s level cannot lead to it: the search stays local.
  bool reachesIndirectly(int64_t from, int64_t to) {
    const int64_t limit = groups_[to].level;
    if (groups_[from].level >= limit) return false;
    ++current_stamp_;
    std::vector<int64_t> stack;
    forEachConsumer(from, [&](int64_t c) {
      if (c != to && stamp_[c] != current_stamp_ && groups_[c].level < limit) {
        stamp_[c] = current_stamp_;
        stack.push_back(c);
      }
    });
    while (!stack.empty()) {
      const int64_t g = stack.back();
      stack.pop_back();
      bool found = false;
      forEachConsumer(g, [&](int64_t c) {
        if (c == to) found = true;
        if (c != from && stamp_[c] != current_stamp_ && groups_[c].level < limit) {
          stamp_[c] = current_stamp_;
          stack.push_back(c);
        }
      });
      if (found) return true;
    }
    return false;
  }

  // After a merge the group takes the higher of the two levels; consumers that no longer sit above
  // it are pushed up, transitively (the graph is acyclic, so this ends).
  void restoreLevels(int64_t merged) {
    std::vector<int64_t> stack{merged};
    while (!stack.empty()) {
      const int64_t g = stack.back();
      stack.pop_back();
      forEachConsumer(g, [&](int64_t c) {
        if (groups_[c].level <= groups_[g].level) {
          groups_[c].level = groups_[g].level + 1;
          stack.push_back(c);
        }
      });
    }
  }

  // `reasons` false (merge attempts, which keep only the verdict): a refusal's detail may be a placeholder.
  MergeVerdict verdict(int64_t a, int64_t b, bool reasons, Candidate* union_out = nullptr) {
    const Group& ga = groups_[a];
    const Group& gb = groups_[b];
    if ((ga.has_segment_set || gb.has_segment_set) && !(ga.all_meta && gb.all_meta)) {
      const Group& g = ga.has_segment_set ? ga : gb;
      const Expr* cut = nullptr;
      for (int64_t n : g.nodes) {
        if (nodes_[n]->kind() == OpKind::SegmentSet) cut = nodes_[n];
      }
      return {false, CutReason::SegmentSet,
              fmt::format("{} is a segment_set (a hard cut, from the user or from bookending)", cut->output(0)->name())};
    }
    if (reachesIndirectly(a, b) || reachesIndirectly(b, a)) {
      return {false, CutReason::WouldCreateCycle, "another segment lies on a path between them"};
    }
    Candidate c = candidateOf({a, b});
    const int64_t bytes = bytesOf(c);
    const int64_t apart = ga.bytes > INT64_MAX - gb.bytes ? INT64_MAX : ga.bytes + gb.bytes;
    if (bytes > apart) {
      return {false, CutReason::MoreTraffic,
              fmt::format("one kernel would move {} B, two move {} B", bytes, apart)};
    }
    const SchedulerChoice choice = chooseScheduler(c, bound_, reasons);
    if (!choice.kind) {
      std::vector<std::string> why;
      for (const auto& [kind, reason] : choice.refusals) why.push_back(fmt::format("{}: {}", toString(kind), reason));
      return {false, CutReason::SchedulerRefused, fmt::format("{}", fmt::join(why, "; "))};
    }
    if (union_out != nullptr) *union_out = std::move(c);
    return {true, CutReason::SchedulerRefused, "", bytes};
  }

  bool tryMerge(int64_t a, int64_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return false;
    // A refusal stands until one of the two groups changes: the fixpoint's last pass re-asks them all.
    const auto key = std::minmax(a, b);
    const auto versions = std::make_pair(version_[key.first], version_[key.second]);
    auto refused = refused_.find(key);
    if (refused != refused_.end() && refused->second == versions) return false;
    Candidate c;
    const MergeVerdict v = verdict(a, b, /*reasons=*/false, &c);
    if (!v.ok) {
      refused_[key] = versions;
      return false;
    }
    const int64_t bytes = v.bytes;
    if (groups_[b].min_pos < groups_[a].min_pos) std::swap(a, b);  // the earlier group stays the root
    Group& root = groups_[a];
    Group& other = groups_[b];
    std::vector<int64_t> merged;
    std::merge(root.nodes.begin(), root.nodes.end(), other.nodes.begin(), other.nodes.end(), std::back_inserter(merged));
    root.nodes = std::move(merged);
    root.min_pos = std::min(root.min_pos, other.min_pos);
    root.max_pos = std::max(root.max_pos, other.max_pos);
    root.has_segment_set = root.has_segment_set || other.has_segment_set;
    root.all_meta = root.all_meta && other.all_meta;
    root.bytes = bytes;
    root.level = std::max(root.level, other.level);
    other.nodes.clear();
    parent_[b] = a;
    ++version_[a];
    restoreLevels(a);
    return true;
  }

  // Merges to a fixpoint twice where some output is made from scalars alone: first without merging such
  // values into the nodes that read them (nanoGPT's positions, torch.arange(T), maybe unsqueezed, an output
  // for the backward and the index of the position embedding's gather), then with them. Merged first, such
  // a value ties its readers' group to an output of its own shape, which a norm's persistent kernel does
  // not write: the gather and the norm were cut apart, a [B, T, C] float tensor written and read back
  // between them. Its readers' group reads it as an input instead, and it joins them last where a
  // scheduler takes it (an output of their own shape).
  void mergeToFixpoint() {
    if (any_held_back_) {
      holding_back_scalar_made_ = true;
      mergeUntilNoChange();
      holding_back_scalar_made_ = false;
    }
    mergeUntilNoChange();
  }

  void mergeUntilNoChange() {
    // Siblings: the node readers of each fusion input (through its views) and of each node output.
    std::map<int64_t, std::vector<int64_t>> readers;  // source val id -> reader nodes, ascending
    for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) {
      for (const Val* in : nodes_[i]->inputs()) {
        if (!in->isTensor()) continue;
        const Val* root = inputViewRoot(in);
        auto& list = readers[(root != nullptr ? root : in)->id()];
        if (list.empty() || list.back() != i) list.push_back(i);
      }
    }
    bool changed = true;
    while (changed) {
      changed = false;
      for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) {  // producer into consumer
        for (const Val* in : nodes_[i]->inputs()) {
          const int64_t p = producerOf(in);
          if (p < 0) continue;
          const bool held = holding_back_scalar_made_ && held_back_[p] != 0 && made_from_scalars_[i] == 0;
          if (!held) changed = tryMerge(p, i) || changed;
        }
      }
      for (const auto& [source, list] : readers) changed = mergeReaders(list) || changed;  // siblings of one source
      // Cousins: the readers of one group's outputs, outside it (a backward's weight and bias
      // gradients, both summing over the rows what one kernel computed): one pass over the rows.
      std::map<int64_t, std::vector<int64_t>> cousins;  // producer group -> reader nodes, ascending
      for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) {
        for (const Val* in : nodes_[i]->inputs()) {
          const int64_t p = producerOf(in);
          if (p < 0 || find(p) == find(i)) continue;
          auto& list = cousins[find(p)];
          if (list.empty() || list.back() != i) list.push_back(i);
        }
      }
      for (const auto& [producer, list] : cousins) changed = mergeReaders(list) || changed;
      // Once the merges along tensors settle, the horizontal ones (then those again, if it made any).
      if (!changed) changed = mergeOverSameRows();
      if (!changed && !holding_back_scalar_made_) changed = mergeReadingNoTensor();
      if (!changed && !holding_back_scalar_made_) changed = mergeIndependent();
    }
  }

  // Horizontal, last: a pointwise group (or a copy of an input through meta ops) that shares no tensor with
  // the kernels around it (Thunder's fusions hold a region's unrelated ops: a scaling beside a norm, two ops
  // of unrelated shapes) joins the earliest kernel, before or after it, whose scheduler takes it beside its
  // own work (a query's scaling beside the transpose of the keys that follows it), in blocks
  // of its own (independent_parts.h): one launch less. The host keeps its scheduler (a transpose never
  // becomes a pointwise kernel by it); the hosts tried are pointwise, transpose, inner persistent,
  // inner-outer persistent and reduction kernels, each of which gives such a part its own vectors. Neither a group that updates an
  // input in place nor its host joins: another part could read the input it writes.
  bool mergeIndependent() {
    std::vector<int64_t> hosts, joining;
    std::unordered_map<int64_t, SchedulerKind> kinds;
    for (int64_t g = 0; g < static_cast<int64_t>(groups_.size()); ++g) {
      if (find(g) != g || groups_[g].nodes.empty() || updatesAnInput(g)) continue;
      const bool copy = groups_[g].all_meta && writesCopiedOutput(g);
      if (groups_[g].all_meta && !copy) continue;
      const std::optional<SchedulerKind> kind = chooseScheduler(withInputViews(candidateOf({g})), bound_, false).kind;
      if (!kind) continue;
      if (copy || kind == SchedulerKind::Pointwise) joining.push_back(g);
      if (kind == SchedulerKind::Pointwise || kind == SchedulerKind::Transpose || kind == SchedulerKind::InnerPersistent ||
          kind == SchedulerKind::Reduction || kind == SchedulerKind::InnerOuterPersistent) {
        hosts.push_back(g);
        kinds[g] = *kind;
      }
    }
    bool changed = false;
    for (int64_t g : joining) {
      if (find(g) != g) continue;
      std::vector<int64_t> tried;
      for (int64_t h : hosts) {
        const int64_t root = find(h);
        if (tried.size() >= kReaderGroupsTried) break;
        if (root == find(g) || std::find(tried.begin(), tried.end(), root) != tried.end()) continue;
        tried.push_back(root);
        auto kind = kinds.find(root);
        const Candidate joined = withInputViews(candidateOf({root, g}));
        if (kind == kinds.end() || chooseScheduler(joined, bound_, false).kind != kind->second) continue;
        if (tryMerge(root, g)) {
          changed = true;
          break;
        }
      }
    }
    return changed;
  }

  // Whether group g writes an output into an input (added with alias_input=).
  bool updatesAnInput(int64_t g) const {
    return std::any_of(groups_[g].nodes.begin(), groups_[g].nodes.end(), [&](int64_t node) {
      const std::vector<Val*>& outs = nodes_[node]->outputs();
      return std::any_of(outs.begin(), outs.end(), [&](Val* out) { return out->fusion()->outputAliases().count(out) != 0; });
    });
  }

  // Horizontal: a group that reads no tensor but 0-dim ones (a zeros_like for the backward, a constant mask,
  // a loss term scaled) joins the earliest group that writes an output of one of its outputs' shapes and
  // takes it (one reading tensors first, else an earlier one reading none): that kernel already walks the
  // shape, where a kernel of its own would cost a launch. Else it joins the earliest inner persistent group
  // that takes it beside its rows, in blocks of its own (a softmax backward beside a router backward's
  // zeros): the rows keep the heuristics they have alone, where a pointwise kernel would choose its vectors
  // for both shapes together.
  bool mergeReadingNoTensor() {
    // By output shape: the groups writing one, those reading tensors first (ascending), then the others.
    std::map<std::vector<int64_t>, std::pair<std::vector<int64_t>, std::vector<int64_t>>> writers;
    std::vector<std::pair<int64_t, std::vector<std::vector<int64_t>>>> loose;  // reading no tensor: its shapes
    std::vector<int64_t> rows;  // the groups reading tensors, then the inner persistent ones of them, ascending
    for (int64_t g = 0; g < static_cast<int64_t>(groups_.size()); ++g) {
      if (find(g) != g || groups_[g].nodes.empty() || groups_[g].all_meta) continue;
      const Candidate c = candidateOf({g});
      std::vector<std::vector<int64_t>> shapes;
      for (const Val* out : c.outputs) {
        std::vector<int64_t> sizes = bound_.sizesOf(out);
        if (std::find(shapes.begin(), shapes.end(), sizes) == shapes.end()) shapes.push_back(std::move(sizes));
      }
      const bool reads_none = std::all_of(c.inputs.begin(), c.inputs.end(), readsAsScalar);
      for (const auto& sizes : shapes) (reads_none ? writers[sizes].second : writers[sizes].first).push_back(g);
      if (reads_none) loose.emplace_back(g, std::move(shapes));
      if (!reads_none) rows.push_back(g);
    }
    if (loose.empty()) return false;
    std::erase_if(rows, [&](int64_t g) {
      return chooseScheduler(candidateOf({g}), bound_, false).kind != SchedulerKind::InnerPersistent;
    });
    bool changed = false;
    for (const auto& [g, shapes] : loose) {
      std::vector<int64_t> tried;
      bool joined = false;
      for (const auto& sizes : shapes) {
        const auto& [reading, not_reading] = writers.at(sizes);
        // Another group reading no tensor, only an earlier one: two such outputs in one kernel.
        for (const std::vector<int64_t>* list : {&reading, &not_reading}) {
          for (int64_t h : *list) {
            const int64_t root = find(h);
            if (joined || tried.size() >= kReaderGroupsTried || (list == &not_reading && h >= g)) break;
            if (root == find(g) || std::find(tried.begin(), tried.end(), root) != tried.end()) continue;
            tried.push_back(root);
            joined = tryMerge(root, g);
          }
        }
      }
      for (int64_t h : rows) {
        const int64_t root = find(h);
        if (joined || tried.size() >= kReaderGroupsTried) break;
        if (root == find(g) || std::find(tried.begin(), tried.end(), root) != tried.end()) continue;
        tried.push_back(root);
        joined = tryMerge(root, g);
      }
      changed = changed || joined;
    }
    return changed;
  }

  // Nodes that may share a kernel (ascending: the readers of one tensor, or groups reducing one domain):
  // each joins the group of the first earlier one that takes it, of up to kReaderGroupsTried distinct
  // groups. Two readers that the first's group refuses may still share a kernel: a group norm backward's
  // weight and bias grads, both sums over [0, 2, 3] of what its grad_in kernel reads, whose rows are the
  // groups' instead.
  bool mergeReaders(const std::vector<int64_t>& list) {
    bool changed = false;
    for (size_t k = 1; k < list.size(); ++k) {
      std::vector<int64_t> tried;
      for (size_t j = 0; j < k && tried.size() < kReaderGroupsTried; ++j) {
        const int64_t g = find(list[j]);
        if (g == find(list[k])) break;  // already together
        if (std::find(tried.begin(), tried.end(), g) != tried.end()) continue;
        tried.push_back(g);
        if (tryMerge(g, list[k])) {
          changed = true;
          break;
        }
      }
    }
    return changed;
  }
  static constexpr size_t kReaderGroupsTried = 4;

  // Horizontal: a group with a reduction joins an inner-outer persistent group that reduces as many
  // rows (a norm backward and the bias grad of the linear next to it, which reads other tensors and
  // shares no tensor with it): one walk over the rows instead of a kernel of its own.
  bool mergeOverSameRows() {
    auto reductions = [&](int64_t g) {
      int64_t n = 0;
      for (int64_t node : groups_[g].nodes) {
        const OpCategory category = opInfo(nodes_[node]->kind()).category;
        n += category == OpCategory::Reduction || category == OpCategory::Normalization ? 1 : 0;
      }
      return n;
    };
    std::vector<int64_t> inner_outer, reducing;
    for (int64_t g = 0; g < static_cast<int64_t>(groups_.size()); ++g) {
      if (find(g) != g || groups_[g].nodes.empty()) continue;
      const int64_t n = reductions(g);
      if (n == 0) continue;
      reducing.push_back(g);
      if (n >= 2 && chooseScheduler(candidateOf({g}), bound_, false).kind == SchedulerKind::InnerOuterPersistent) {
        inner_outer.push_back(g);
      }
    }
    bool changed = false;
    for (int64_t a : inner_outer) {
      for (int64_t b : reducing) {
        const int64_t root = find(a);
        if (find(b) != b || b == root) continue;
        const SchedulerChoice joined = chooseScheduler(candidateOf({root, b}), bound_, false);
        if (joined.kind != SchedulerKind::InnerOuterPersistent) continue;
        changed = tryMerge(root, b) || changed;
      }
    }
    // Groups whose reductions all reduce the same dims of the same sizes, and those of one another (a GQA
    // backward's k and v grads, each summed over the repeated heads; two norms of one shape side by
    // side): one kernel walks both, where a scheduler takes them together.
    // A group with reductions of several domains (a cross entropy's rows and its totals over them) is listed
    // under each: a softmax of other rows of the same shape may join it.
    std::map<std::string, std::vector<int64_t>> by_domain;
    for (int64_t g : reducing) {
      if (find(g) != g) continue;
      for (const std::string& key : reductionDomainKeys(exprsOf(g), bound_)) by_domain[key].push_back(g);
    }
    for (const auto& [key, list] : by_domain) changed = mergeReaders(list) || changed;
    // Reductions over as many rows of tensors of other widths (a GELU backward's bias grad and the next
    // linear's): one kernel, each in its own blocks, where the reduction scheduler takes them side by side.
    std::map<int64_t, std::vector<int64_t>> by_rows;
    for (int64_t g : reducing) {
      if (find(g) != g) continue;
      if (auto rows = reducedPerResult(exprsOf(g), bound_)) by_rows[*rows].push_back(g);
    }
    for (const auto& [rows, list] : by_rows) changed = mergeReaders(list) || changed;
    // Reductions over outer dims of rows of their own (a ViT's bias grad over its tokens beside the class
    // token's): one kernel too, each part with its own split of its rows.
    std::vector<int64_t> outer_only;
    for (int64_t g : reducing) {
      if (find(g) == g && reducesOuterDimsOnly(exprsOf(g), bound_)) outer_only.push_back(g);
    }
    changed = mergeReaders(outer_only) || changed;
    // A group without reductions joins one whose reductions are all over outer dims, where its tensors'
    // leading dims hold as many rows (a GELU backward's grad_in beside the next linear's bias grad); never
    // another such group (each keeps its own kernel's vectors). Meta ops alone join only where they copy an
    // input to an output that is no view of it (Swin's windows put back in place beside a bias grad).
    for (int64_t g = 0; g < static_cast<int64_t>(groups_.size()); ++g) {
      if (find(g) != g || groups_[g].nodes.empty() || reductions(g) != 0) continue;
      if (groups_[g].all_meta && !writesCopiedOutput(g)) continue;
      bool joined = false;
      for (int64_t rows : leadingRowCounts(exprsOf(g), bound_)) {
        auto it = by_rows.find(rows);
        if (it == by_rows.end()) continue;
        std::vector<int64_t> tried;
        for (int64_t member : it->second) {
          const int64_t root = find(member);
          if (tried.size() >= kReaderGroupsTried || joined) break;
          if (std::find(tried.begin(), tried.end(), root) != tried.end()) continue;
          if (!reducesOuterDimsOnly(exprsOf(root), bound_)) continue;
          tried.push_back(root);
          joined = tryMerge(root, g);
        }
        if (joined) break;
      }
      changed = joined || changed;
    }
    return changed;
  }

  // Whether group g writes an output that is an input view a kernel must copy (isCopiedOutput).
  bool writesCopiedOutput(int64_t g) const {
    return std::any_of(groups_[g].nodes.begin(), groups_[g].nodes.end(), [&](int64_t node) {
      const std::vector<Val*>& outs = nodes_[node]->outputs();
      return std::any_of(outs.begin(), outs.end(), [&](const Val* out) { return isCopiedOutput(out); });
    });
  }

  // Group g's exprs, in evaluation order.
  std::vector<const Expr*> exprsOf(int64_t g) const {
    std::vector<const Expr*> exprs;
    for (int64_t node : groups_[g].nodes) exprs.push_back(nodes_[node]);
    return exprs;
  }

  SegmentedFusion buildResult();

  std::shared_ptr<const Fusion> fusion_;
  BoundShapes bound_;
  // By expr id and by val id (dense within a fusion): -1 where none. Segmentation reads these for every
  // merge it weighs.
  std::vector<int64_t> eval_pos_;  // the expr's position in evaluation order
  std::vector<const Expr*> nodes_;
  std::vector<int64_t> node_of_;
  std::vector<int64_t> producer_;
  std::vector<int64_t> input_stamp_;  // by val id: the candidateOf call that took it as an input
  int64_t input_stamp_now_ = 0;
  std::vector<int64_t> parent_;
  std::vector<Group> groups_;
  std::vector<std::vector<int64_t>> consumer_nodes_;  // per node: the nodes reading its outputs
  std::vector<int64_t> stamp_;
  int64_t current_stamp_ = 0;
  std::vector<int64_t> version_;  // per group root: bumped on every merge into it
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> refused_;
  // Per node: every tensor it reads is made from scalars alone (none, for an iota); and whether, so made,
  // it is connected through such nodes to one that writes a fusion output (mergeToFixpoint holds those
  // back first).
  std::vector<char> made_from_scalars_;
  std::vector<char> held_back_;
  bool any_held_back_ = false;
  bool holding_back_scalar_made_ = false;
};

SegmentedFusion Segmenter::buildResult() {
  SegmentedFusion result;
  // Outputs that are input views: alias segments reading only the input.
  std::unordered_set<const Val*> done;
  for (const Val* out : fusion_->outputs()) {
    if (!out->isTensor() || out->isFusionInput() || inputViewRoot(out) == nullptr || nodeOf(out->definition()) >= 0 ||
        !done.insert(out).second) {
      continue;
    }
    // A view, unless a reshape cannot be one: then a kernel copies it.
    result.segments.push_back(segmentFor({inputViewChain(out), {inputViewRoot(out)}, {out}}, bound_));
  }
  // Groups in dependency order (Kahn's algorithm, earliest first among the ready ones).
  std::vector<int64_t> roots;
  for (int64_t i = 0; i < static_cast<int64_t>(nodes_.size()); ++i) {
    if (find(i) == i) roots.push_back(i);
  }
  std::map<int64_t, int64_t> pending;  // root -> producer groups not yet placed
  std::map<int64_t, std::set<int64_t>> consumers;
  for (int64_t r : roots) {
    pending[r];
    forEachConsumer(r, [&](int64_t c) { consumers[r].insert(c); });
  }
  for (auto& [r, cs] : consumers) {
    for (int64_t c : cs) ++pending[c];
  }
  std::set<std::pair<int64_t, int64_t>> ready;  // (min_pos, root)
  for (int64_t r : roots) {
    if (pending[r] == 0) ready.insert({groups_[r].min_pos, r});
  }
  std::unordered_map<int64_t, int64_t> segment_of_root;
  while (!ready.empty()) {
    const int64_t r = ready.begin()->second;
    ready.erase(ready.begin());
    for (int64_t c : consumers[r]) {
      if (--pending[c] == 0) ready.insert({groups_[c].min_pos, c});
    }
    // The group's exprs plus the input-view chains it reads, in evaluation order.
    std::vector<const Expr*> exprs;
    std::unordered_set<const Expr*> added;
    for (int64_t n : groups_[r].nodes) {
      for (const Val* in : nodes_[n]->inputs()) {
        if (!in->isTensor() || in->isFusionInput() || inputViewRoot(in) == nullptr) continue;
        for (const Expr* e : inputViewChain(in)) {
          if (added.insert(e).second) exprs.push_back(e);
        }
      }
      if (added.insert(nodes_[n]).second) exprs.push_back(nodes_[n]);
    }
    std::sort(exprs.begin(), exprs.end(),
              [&](const Expr* a, const Expr* b) { return eval_pos_[a->id()] < eval_pos_[b->id()]; });
    const Candidate checked = candidateOf({r});  // as the merges saw it: the views it reads as inputs
    Candidate c = checked;
    c.exprs = exprs;
    std::vector<const Val*> inputs;  // what the kernel reads: views replaced by the inputs they view
    for (const Val* in : c.inputs) {
      const Val* root = inputViewRoot(in);
      const Val* source = root != nullptr ? root : in;
      if (std::find(inputs.begin(), inputs.end(), source) == inputs.end()) inputs.push_back(source);
    }
    c.inputs = inputs;
    Segment segment = segmentFor(std::move(c), bound_);
    if (!segment.scheduler && exprs.size() != checked.exprs.size()) {
      // Its scheduler takes the group but not the input views it reads kept in its kernel (an extra bias
      // grad of the inner-outer scheduler summing a reshaped input): each view is made by an alias segment
      // of its own, and the kernel reads the views, as the group was checked.
      for (const Val* in : checked.inputs) {
        if (in->isFusionInput() || inputViewRoot(in) == nullptr || !done.insert(in).second) continue;
        result.segments.push_back(segmentFor({inputViewChain(in), {inputViewRoot(in)}, {in}}, bound_));
      }
      segment = segmentFor(checked, bound_);
    }
    segment_of_root[r] = static_cast<int64_t>(result.segments.size());
    result.segments.push_back(std::move(segment));
  }
  BRAZE_ASSERT(segment_of_root.size() == roots.size(), "the segment graph has a cycle");
  for (size_t i = 0; i < result.segments.size(); ++i) result.segments[i].id = static_cast<int64_t>(i);
  // Every cut between two groups, with the reason they stayed apart.
  for (int64_t r : roots) {
    const std::vector<const Val*> written = candidateOf({r}).outputs;
    for (int64_t c : consumers[r]) {
      const MergeVerdict v = verdict(r, c, /*reasons=*/true);
      for (const Val* t : written) {
        bool read = false;
        for (const Expr* use : t->uses()) {
          const int64_t u = nodeOf(use);
          read = read || (u >= 0 && find(u) == c);
        }
        if (!read) continue;
        result.edges.push_back({segment_of_root.at(r), segment_of_root.at(c), t,
                                v.ok ? CutReason::NotReached : v.reason,
                                v.ok ? "merging them is allowed but was not reached" : v.detail});
      }
    }
  }
  result.fusion = fusion_;
  result.bound = std::move(bound_);
  return result;
}

}  // namespace

SegmentedFusion segmentFusion(std::shared_ptr<const Fusion> fusion, BoundShapes bound) {
  return Segmenter(std::move(fusion), std::move(bound)).run();
}

}  // namespace braze
