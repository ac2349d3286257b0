#include "scheduler/reduction/row_slices.h"

#include "ir/shape_rules.h"
#include "ir/strided_layout.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace braze {
namespace {

// Whether `e` is a slice of kept dims only (step 1, the reduced dims whole) or a reshape that keeps the
// innermost dim, of a value of `in` sizes.
bool keepsRowsWhole(const Expr& e, const std::vector<int64_t>& reduced, const std::vector<int64_t>& domain_sizes,
                    const BoundShapes& bound) {
  const auto& in = bound.sizesOf(e.input(0));
  const auto& out = bound.sizesOf(e.output(0));
  if (in.empty() || out.empty()) return false;
  if (e.kind() == OpKind::Reshape) return in.back() == out.back();
  if (e.kind() != OpKind::Slice || in != domain_sizes) return false;  // slices of V itself, in its dims
  const std::vector<SliceDim> dims = sliceDims(e, in, bound.intOperands(e));
  for (size_t d = 0; d < dims.size(); ++d) {
    const bool is_reduced = std::find(reduced.begin(), reduced.end(), static_cast<int64_t>(d)) != reduced.end();
    if (dims[d].step != 1 || (is_reduced && (dims[d].start != 0 || dims[d].size != in[d]))) return false;
  }
  return true;
}

}  // namespace

std::vector<RowSlice> findRowSlices(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs,
                                    const std::vector<int64_t>& domain_sizes, const std::vector<int64_t>& reduced,
                                    const std::function<bool(const Val*)>& full, const BoundShapes& bound) {
  // Every merge attempt of a row group asks: most groups slice nothing.
  if (std::none_of(exprs.begin(), exprs.end(), [](const Expr* e) { return e->kind() == OpKind::Slice; })) return {};
  std::unordered_map<const Val*, const Expr*> def;
  for (const Expr* e : exprs) {
    for (const Val* out : e->outputs()) def[out] = e;
  }
  std::vector<RowSlice> slices;
  std::unordered_set<const Expr*> chained;
  for (const Val* out : outputs) {
    if (!out->isTensor()) continue;
    RowSlice s;
    s.output = out;
    const Val* v = out;
    bool sliced = false;
    for (auto d = def.find(v); d != def.end() && (d->second->kind() == OpKind::Slice ||
                                                 d->second->kind() == OpKind::Reshape);
         d = def.find(v)) {
      s.chain.insert(s.chain.begin(), d->second);
      sliced = sliced || d->second->kind() == OpKind::Slice;
      v = d->second->input(0);
      if (bound.sizesOf(v) == domain_sizes) break;
    }
    s.value = v;
    const bool whole = std::all_of(s.chain.begin(), s.chain.end(), [&](const Expr* e) {
      return keepsRowsWhole(*e, reduced, domain_sizes, bound);
    });
    if (!sliced || !whole || bound.sizesOf(v) != domain_sizes || !full(v)) continue;
    chained.insert(s.chain.begin(), s.chain.end());
    slices.push_back(std::move(s));
  }
  // Every value between a V and its O is read by the chains alone (they compute nothing else).
  std::unordered_set<const Val*> between;
  for (const RowSlice& s : slices) {
    for (const Expr* e : s.chain) {
      if (e->output(0) != s.output) between.insert(e->output(0));
    }
  }
  for (const Expr* e : exprs) {
    if (chained.count(e) != 0) continue;
    for (const Val* in : e->inputs()) {
      if (between.count(in) != 0) return {};
    }
  }
  return slices;
}

namespace scheduler {

void storeRowSlice(KernelBuilder& kb, ValueBuilder& vb, Chunk& c, const BoundShapes& bound, const RowSlice& slice,
                   TensorId out, const std::vector<Idx>& index) {
  const ExprId value = vb.valueAt(slice.value, index);
  std::vector<Idx> at = index;
  ExprId guard = -1;
  for (const Expr* e : slice.chain) {
    const auto& in = bound.sizesOf(e->input(0));
    if (e->kind() == OpKind::Slice) {
      const std::vector<SliceDim> dims = sliceDims(*e, in, bound.intOperands(*e));
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d].start == 0 && dims[d].size == in[d]) continue;
        // The row's coordinate (no lane: lanes walk the innermost, reduced dim) within the slice.
        const ExprId kept = kb.land(kb.le(kb.index(dims[d].start), at[d].base),
                                    kb.lt(at[d].base, kb.index(dims[d].start + dims[d].size)));
        guard = guard < 0 ? kept : kb.land(guard, kept);
        at[d].base = kb.sub(at[d].base, kb.index(dims[d].start));
      }
      continue;
    }
    // A reshape keeping the innermost dim: the chunk's first element unflattened, its lanes on the innermost.
    const bool lane = at.back().lane;
    int64_t lane_coefficient = 0;
    std::vector<Idx> first = at;
    for (Idx& i : first) i.lane = false;
    const ExprId flat = vb.flatOffset(StridedLayout::rowMajor(in), first, &lane_coefficient);
    at = vb.unflatten(flat, false, bound.sizesOf(e->output(0)));
    at.back().lane = lane;
  }
  // A row outside the slices stores nothing: its coordinates would index before or past the output.
  storeOutput(kb, vb, c, out, at, value, guard);
}

}  // namespace scheduler
}  // namespace braze
