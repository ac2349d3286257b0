#include "scheduler/independent_parts.h"

#include "kernel/joined_kernel.h"
#include "passes/alias_analysis.h"
#include "support/error.h"
#include "scheduler/registry.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace braze {

bool reduces(const std::vector<const Expr*>& exprs) {
  return std::any_of(exprs.begin(), exprs.end(), [](const Expr* e) {
    const OpCategory category = opInfo(e->kind()).category;
    return category == OpCategory::Reduction || category == OpCategory::Normalization;
  });
}

namespace {

int64_t findRoot(std::vector<int64_t>& parent, int64_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

// Whether each expr of `exprs` computes from scalars alone: it reads no tensor from outside `exprs` but 0-dim
// ones (read as scalars: a loss term computed on the host) and none computed from one, and reduces nothing
// (an iota, a full, the casts and meta ops after them).
std::vector<bool> madeFromScalars(const std::vector<const Expr*>& exprs) {
  std::unordered_set<const Val*> made, produced;
  for (const Expr* e : exprs) produced.insert(e->outputs().begin(), e->outputs().end());
  std::vector<bool> scalar(exprs.size(), false);
  for (size_t i = 0; i < exprs.size(); ++i) {
    const OpCategory category = opInfo(exprs[i]->kind()).category;
    const bool computes = category != OpCategory::Reduction && category != OpCategory::Normalization &&
                          category != OpCategory::Matmul && category != OpCategory::Scan &&
                          category != OpCategory::Scatter;
    scalar[i] = computes && std::all_of(exprs[i]->inputs().begin(), exprs[i]->inputs().end(),
                                        [&](const Val* v) {
                                          return made.count(v) != 0 || (produced.count(v) == 0 && readsAsScalar(v));
                                        });
    if (scalar[i]) made.insert(exprs[i]->outputs().begin(), exprs[i]->outputs().end());
  }
  return scalar;
}

// A part of a group: its exprs in the group's order, and those of them whose outputs it writes.
struct PartExprs {
  std::vector<const Expr*> exprs;
  std::unordered_set<const Expr*> writers;
};

// The group's exprs in parts that read nothing another part computes. A value made from scalars alone
// (madeFromScalars) links none of its readers: each part computes it again where it reads it, and writes
// none of it; where such a value writes an output of the group, a part of its own writes it (nanoGPT's
// positions, an iota returned for the backward and read by the position embedding's gather in a norm).
std::vector<PartExprs> partExprs(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs) {
  const std::vector<bool> scalar = madeFromScalars(exprs);
  std::vector<int64_t> parent(exprs.size());
  std::iota(parent.begin(), parent.end(), 0);
  std::unordered_map<const Val*, int64_t> producer;
  for (size_t i = 0; i < exprs.size(); ++i) {
    for (const Val* out : exprs[i]->outputs()) producer[out] = static_cast<int64_t>(i);
  }
  for (size_t i = 0; i < exprs.size(); ++i) {
    for (const Val* in : exprs[i]->inputs()) {
      auto it = producer.find(in);
      if (it == producer.end() || scalar[static_cast<size_t>(it->second)] != scalar[i]) continue;
      const int64_t a = findRoot(parent, static_cast<int64_t>(i)), b = findRoot(parent, it->second);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);  // the earlier expr stays the root
    }
  }
  const std::unordered_set<const Val*> written(outputs.begin(), outputs.end());
  std::unordered_map<int64_t, std::unordered_set<size_t>> members;  // root -> its exprs' positions
  std::unordered_set<int64_t> writing;  // roots of values made from scalars that write an output
  for (size_t i = 0; i < exprs.size(); ++i) {
    const int64_t root = findRoot(parent, static_cast<int64_t>(i));
    members[root].insert(i);
    if (scalar[i] && std::any_of(exprs[i]->outputs().begin(), exprs[i]->outputs().end(),
                                 [&](const Val* v) { return written.count(v) != 0; })) {
      writing.insert(root);
    }
  }
  std::vector<PartExprs> parts;
  for (size_t i = 0; i < exprs.size(); ++i) {
    const int64_t root = findRoot(parent, static_cast<int64_t>(i));
    if (root != static_cast<int64_t>(i) || (scalar[i] && writing.count(root) == 0)) continue;
    std::unordered_set<size_t>& own = members[root];
    if (!scalar[i]) {
      // The values made from scalars it reads, computed again in it (walked backwards: producers come first).
      for (size_t j = exprs.size(); j-- > 0;) {
        if (own.count(j) == 0) continue;
        for (const Val* in : exprs[j]->inputs()) {
          auto it = producer.find(in);
          if (it != producer.end() && scalar[static_cast<size_t>(it->second)]) own.insert(static_cast<size_t>(it->second));
        }
      }
    }
    PartExprs part;
    for (size_t j = 0; j < exprs.size(); ++j) {
      if (own.count(j) == 0) continue;
      part.exprs.push_back(exprs[j]);
      if (scalar[j] == scalar[i]) part.writers.insert(exprs[j]);
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

// The part of a group (or segment) that `part` is: the inputs its exprs read and the outputs its writers write.
template <typename Group>
Group partOf(const Group& whole, PartExprs part) {
  std::unordered_set<const Val*> read, written;
  for (const Expr* e : part.exprs) read.insert(e->inputs().begin(), e->inputs().end());
  for (const Expr* e : part.writers) written.insert(e->outputs().begin(), e->outputs().end());
  Group own = whole;
  own.exprs = std::move(part.exprs);
  std::erase_if(own.inputs, [&](const Val* v) { return read.count(v) == 0; });
  std::erase_if(own.outputs, [&](const Val* v) { return written.count(v) == 0; });
  return own;
}

template <typename Group>
std::vector<Group> partsOf(const Group& whole) {
  std::vector<PartExprs> exprs = partExprs(whole.exprs, whole.outputs);
  if (exprs.size() <= 1) return {whole};
  std::vector<Group> parts;
  for (PartExprs& part : exprs) parts.push_back(partOf(whole, std::move(part)));
  return parts;
}

}  // namespace

std::vector<Candidate> independentParts(const Candidate& candidate) { return partsOf(candidate); }

Candidate withInputViews(const Candidate& group) {
  Candidate whole;
  std::unordered_set<const Expr*> added;
  for (const Val* in : group.inputs) {
    const Val* root = in->isTensor() && !in->isFusionInput() ? inputViewRoot(in) : nullptr;
    if (root == nullptr) {
      whole.inputs.push_back(in);
      continue;
    }
    if (std::find(whole.inputs.begin(), whole.inputs.end(), root) == whole.inputs.end()) whole.inputs.push_back(root);
    for (const Expr* e : inputViewChain(in)) {
      if (added.insert(e).second) whole.exprs.push_back(e);
    }
  }
  whole.exprs.insert(whole.exprs.end(), group.exprs.begin(), group.exprs.end());
  whole.outputs = group.outputs;
  return whole;
}

std::vector<scheduler::SegmentToLower> independentParts(const scheduler::SegmentToLower& segment) {
  return partsOf(segment);
}

namespace {

// `whole` with only the exprs, inputs and outputs of `parts` (Candidates or segments), in whole's order.
template <typename Group>
Group together(const Group& whole, const std::vector<const Group*>& parts) {
  std::unordered_set<const Expr*> exprs;
  std::unordered_set<const Val*> inputs, outputs;
  for (const Group* part : parts) {
    exprs.insert(part->exprs.begin(), part->exprs.end());
    inputs.insert(part->inputs.begin(), part->inputs.end());
    outputs.insert(part->outputs.begin(), part->outputs.end());
  }
  Group result = whole;
  std::erase_if(result.exprs, [&](const Expr* e) { return exprs.count(e) == 0; });
  std::erase_if(result.inputs, [&](const Val* v) { return inputs.count(v) == 0; });
  std::erase_if(result.outputs, [&](const Val* v) { return outputs.count(v) == 0; });
  return result;
}

}  // namespace

scheduler::SegmentToLower partsTogether(const scheduler::SegmentToLower& segment,
                                        const std::vector<const scheduler::SegmentToLower*>& parts) {
  return together(segment, parts);
}

Candidate partsTogether(const Candidate& candidate, const std::vector<const Candidate*>& parts) {
  return together(candidate, parts);
}

namespace scheduler {

void lowerSideBySide(LoweringContext& ctx, const std::vector<SegmentToLower>& parts,
                     const std::function<void(LoweringContext&, size_t)>& lower) {
  std::vector<Kernel> kernels;
  for (size_t i = 0; i < parts.size(); ++i) {
    LoweringContext part_ctx = makeLoweringContext(parts[i], ctx.device);
    lower(part_ctx, i);
    BRAZE_ASSERT(i == 0 || part_ctx.follow_ups.empty(), "segment {}: a part side by side but the first has a second "
                 "kernel", ctx.segment.id);
    for (Kernel& k : part_ctx.follow_ups) ctx.follow_ups.push_back(std::move(k));
    kernels.push_back(std::move(part_ctx.kernel));
  }
  kernel::joinKernels(ctx.kernel, kernels);
}

}  // namespace scheduler
}  // namespace braze
