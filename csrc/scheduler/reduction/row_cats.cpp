#include "scheduler/reduction/row_cats.h"

#include "ir/strided_layout.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace braze {
namespace {

bool isIndexMap(const Expr& e) {
  return e.kind() == OpKind::Permute || e.kind() == OpKind::Reshape || e.kind() == OpKind::Set ||
         e.kind() == OpKind::SegmentSet;
}

bool isZero(const ScalarValue& v) {
  return std::visit([](auto x) { return x == decltype(x){}; }, v);
}

class Matcher {
 public:
  Matcher(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs,
          const std::function<bool(const Val*)>& per_row, const BoundShapes& bound, RowCatForms forms)
      : per_row_(per_row), bound_(bound), forms_(forms), outputs_(outputs.begin(), outputs.end()) {
    for (const Expr* e : exprs) {
      for (const Val* out : e->outputs()) def_[out] = e;
      for (const Val* in : e->inputs()) ++uses_[in];
    }
  }

  std::optional<RowCat> match(const Val* out) {
    RowCat cat;
    cat.output = out;
    const Val* c = back(out, cat.from_cat, /*shared_start=*/true);
    auto d = def_.find(c);
    if (c == nullptr || d == def_.end() || (c != out && !single(c))) return std::nullopt;
    const Expr& joined = *d->second;
    const auto& sizes = bound_.sizesOf(c);
    std::vector<std::pair<const Val*, int64_t>> operands;  // each part's cat operand and its offset
    std::vector<const Expr*> joins{&joined};
    if (joined.kind() == OpKind::Cat) {
      cat.dim = joined.attrs().getInt("dim");
      int64_t begin = 0;
      for (const Val* in : joined.inputs()) {
        operands.push_back({in, begin});
        begin += bound_.sizesOf(in)[cat.dim];
      }
    } else if (joined.kind() == OpKind::Add) {
      std::vector<const Val*> leaves;
      if (!addLeaves(joined, leaves, joins)) return std::nullopt;
      cat.dim = -1;
      for (const Val* leaf : leaves) {
        const Expr* pad = def_.count(leaf) != 0 ? def_.at(leaf) : nullptr;
        if (pad != nullptr && pad->kind() == OpKind::CastOp && forms_.casts && single(leaf)) {
          joins.push_back(pad);  // a part padded, then cast: the pad's zeros stay zeros
          leaf = pad->input(0);
          pad = def_.count(leaf) != 0 ? def_.at(leaf) : nullptr;
        }
        if (pad == nullptr || pad->kind() != OpKind::Pad || !single(leaf)) return std::nullopt;
        const auto [dim, low] = padDim(*pad);
        if (dim < 0 || (cat.dim >= 0 && dim != cat.dim)) return std::nullopt;
        cat.dim = dim;
        operands.push_back({pad->input(0), low});
        joins.push_back(pad);
      }
      // Disjoint ranges that cover the dim: each element is one part's (the others' pads add zeros).
      std::vector<std::pair<int64_t, int64_t>> ranges;
      for (const auto& [in, low] : operands) ranges.push_back({low, bound_.sizesOf(in)[cat.dim]});
      std::sort(ranges.begin(), ranges.end());
      int64_t end = 0;
      for (const auto& [low, size] : ranges) {
        if (low != end) return std::nullopt;
        end += size;
      }
      if (cat.dim < 0 || end != sizes[cat.dim]) return std::nullopt;
    } else {
      return std::nullopt;
    }
    for (const auto& [in, offset] : operands) {
      RowCatPart part;
      part.offset = offset;
      part.row_value = back(in, part.to_cat, /*shared_start=*/false);
      if (part.row_value == nullptr || !per_row_(part.row_value)) return std::nullopt;
      cat.exprs.insert(cat.exprs.end(), part.to_cat.begin(), part.to_cat.end());
      cat.parts.push_back(std::move(part));
    }
    cat.exprs.insert(cat.exprs.end(), joins.begin(), joins.end());
    cat.exprs.insert(cat.exprs.end(), cat.from_cat.begin(), cat.from_cat.end());
    return cat;
  }

 private:
  bool single(const Val* v) const {
    auto u = uses_.find(v);
    return u != uses_.end() && u->second == 1 && (forms_.casts || outputs_.count(v) == 0);
  }

  // Walks back from v through index maps (and casts, where the forms allow them), each value passed
  // through read by the next op alone (v itself may be read elsewhere where `shared_start`): their exprs
  // in order, and the value they start from; null where a value between is read elsewhere (a cast read
  // elsewhere is where the walk stops).
  const Val* back(const Val* v, std::vector<const Expr*>& chain, bool shared_start) {
    const Val* start = v;
    while (true) {
      auto d = def_.find(v);
      const bool cast = forms_.casts && d != def_.end() && d->second->kind() == OpKind::CastOp;
      if (d == def_.end() || !(isIndexMap(*d->second) || cast)) return v;
      if (!(v == start && shared_start) && !single(v)) return cast ? v : nullptr;
      chain.insert(chain.begin(), d->second);
      v = d->second->input(0);
    }
  }

  // The leaves of an add tree whose inner adds only their parent reads.
  bool addLeaves(const Expr& add, std::vector<const Val*>& leaves, std::vector<const Expr*>& joins) {
    for (const Val* in : add.inputs()) {
      if (!in->isTensor() || bound_.sizesOf(in) != bound_.sizesOf(add.output(0))) return false;
      auto d = def_.find(in);
      if (d != def_.end() && d->second->kind() == OpKind::Add && single(in)) {
        joins.push_back(d->second);
        if (!addLeaves(*d->second, leaves, joins)) return false;
      } else {
        leaves.push_back(in);
      }
    }
    return true;
  }

  // A zero pad along one dim with no negative width: that dim and its low width ({-1, 0} otherwise).
  std::pair<int64_t, int64_t> padDim(const Expr& pad) const {
    // A constant zero: a scalar input's value may differ at the next execute of the same plan.
    const Scalar* value = pad.input(1)->isScalar() ? pad.input(1)->asScalar() : nullptr;
    if (value == nullptr || !value->isConstant() || !isZero(*value->value())) return {-1, 0};
    const std::vector<int64_t> operands = bound_.intOperands(pad);  // [value, low, high per dim from the last]
    const int64_t rank = static_cast<int64_t>(bound_.sizesOf(pad.input(0)).size());
    int64_t dim = -1, low = 0;
    for (size_t pair = 0; pair < (operands.size() - 1) / 2; ++pair) {
      const int64_t lo = operands[1 + 2 * pair], hi = operands[2 + 2 * pair];
      if (lo < 0 || hi < 0) return {-1, 0};
      if (lo == 0 && hi == 0) continue;
      if (dim >= 0) return {-1, 0};
      dim = rank - 1 - static_cast<int64_t>(pair);
      low = lo;
    }
    return {dim, low};
  }

  const std::function<bool(const Val*)>& per_row_;
  const BoundShapes& bound_;
  RowCatForms forms_;
  std::unordered_set<const Val*> outputs_;
  std::unordered_map<const Val*, const Expr*> def_;
  std::unordered_map<const Val*, int> uses_;
};

}  // namespace

std::vector<RowCat> findRowCats(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs,
                                const std::function<bool(const Val*)>& per_row, const BoundShapes& bound,
                                RowCatForms forms) {
  Matcher matcher(exprs, outputs, per_row, bound, forms);
  std::vector<RowCat> cats;
  for (const Val* out : outputs) {
    if (!out->isTensor() || per_row(out)) continue;
    if (std::optional<RowCat> cat = matcher.match(out)) cats.push_back(std::move(*cat));
  }
  return cats;
}

namespace scheduler {
namespace {

// The index of `e`'s output holding its input's element at `index` (a permute, reshape or copy).
std::vector<Idx> forward(ValueBuilder& vb, const BoundShapes& bound, const Expr& e,
                         const std::vector<Idx>& index) {
  if (e.kind() == OpKind::Permute) {
    const auto& dims = e.attrs().getInts("dims");
    std::vector<Idx> out;
    for (int64_t d : dims) out.push_back(index[static_cast<size_t>(d)]);
    return out;
  }
  if (e.kind() == OpKind::Reshape) {
    int64_t lane_coefficient = 0;  // the indices carry no lane
    const ExprId flat = vb.flatOffset(StridedLayout::rowMajor(bound.sizesOf(e.input(0))), index, &lane_coefficient);
    return vb.unflatten(flat, false, bound.sizesOf(e.output(0)));
  }
  return index;  // a copy or a cast
}

}  // namespace

void storeRowCat(KernelBuilder& kb, ValueBuilder& vb, Chunk& c, const BoundShapes& bound, const RowCat& cat,
                 TensorId out, ExprId kept) {
  for (const RowCatPart& part : cat.parts) {
    std::vector<Idx> index = vb.unflatten(kept, false, bound.sizesOf(part.row_value));
    for (const Expr* e : part.to_cat) index = forward(vb, bound, *e, index);
    index[static_cast<size_t>(cat.dim)].base = kb.add(index[static_cast<size_t>(cat.dim)].base, kb.index(part.offset));
    for (const Expr* e : cat.from_cat) index = forward(vb, bound, *e, index);
    storeOutput(kb, vb, c, out, index, vb.valueAt(cat.output, index));
  }
}

}  // namespace scheduler
}  // namespace braze
