// Pads and cats as index arithmetic (ValueBuilder's Data ops): an index is shifted into each piece and
// clamped inside it, the piece's value read there, and the pieces' values selected by where the element
// falls. A cat whose pieces all read one kernel input through meta and unary ops (RoPE's rotate-half)
// reads it once, where each piece's load is one of whole vectors. A cat whose piece a lowering chose
// (choosePiece) is that piece alone.
#include "scheduler/value_builder.h"

#include "ir/op_kind.h"
#include "support/error.h"

#include <algorithm>

namespace braze::scheduler {

std::pair<Idx, ExprId> ValueBuilder::shifted(const Idx& i, int64_t offset, int64_t size) {
  // With a lane, the bounds test on the base alone is exact when base, offset and size are all
  // multiples of the width: the whole vector is inside or outside together.
  if (i.lane && (offset % width_ != 0 || size % width_ != 0 || kb_.divisibility(i.base) % width_ != 0)) {
    return shifted(Idx{materialize(i), false}, offset, size);
  }
  const ExprId rel = kb_.sub(i.base, kb_.index(offset));
  const ExprId inside = kb_.land(kb_.le(kb_.index(0), rel), kb_.lt(rel, kb_.index(size)));
  return {Idx{kb_.select(inside, rel, kb_.index(0)), i.lane}, inside};
}

ExprId ValueBuilder::pad(const Expr& expr, const std::vector<Idx>& index) {
  const Val* in = expr.input(0);
  const auto& in_sizes = bound_.sizesOf(in);
  const auto widths = bound_.intOperands(expr);  // [value, widths...]: intOperands skips the tensor
  const int64_t rank = static_cast<int64_t>(in_sizes.size());
  const DataType dtype = expr.output(0)->dtype();
  const ExprId fill = kb_.cast(scalar(expr.input(1)), dtype);
  for (int64_t s : in_sizes) {
    if (s == 0) return fill;
  }
  std::vector<Idx> mapped = index;
  ExprId inside = kb_.boolean(true);
  const size_t pairs = (widths.size() - 1) / 2;
  for (size_t pair = 0; pair < pairs; ++pair) {
    const int64_t d = rank - 1 - static_cast<int64_t>(pair);
    auto [idx, ok] = shifted(index[d], widths[1 + 2 * pair], in_sizes[d]);
    mapped[d] = idx;
    inside = kb_.land(inside, ok);
  }
  const ExprId value = valueAt(in, mapped);
  return bind("pad", kb_.select(inside, value, fill));
}

ExprId ValueBuilder::cat(const Expr& expr, const std::vector<Idx>& index) {
  const int64_t dim = expr.attrs().getInt("dim");
  int64_t begin = 0;
  if (piece_.cat == &expr) {
    for (size_t i = 0; i < piece_.input; ++i) begin += bound_.sizesOf(expr.input(i))[dim];
    const Val* in = expr.input(piece_.input);
    std::vector<Idx> mapped = index;
    mapped[dim] = shifted(index[dim], begin, bound_.sizesOf(in)[dim]).first;
    return bind("cat", valueAt(in, mapped));
  }
  CatPieces branches;
  for (const Val* in : expr.inputs()) {
    const int64_t size = bound_.sizesOf(in)[dim];
    if (size == 0) continue;
    auto [idx, inside] = shifted(index[dim], begin, size);
    std::vector<Idx> mapped = index;
    mapped[dim] = idx;
    branches.push_back({in, {std::move(mapped), inside}});
    begin += size;
  }
  if (auto shared = catOfOneSource(branches)) return bind("cat", *shared);
  ExprId result = -1;
  for (const auto& [in, at] : branches) {
    const ExprId value = valueAt(in, at.first);
    result = result < 0 ? value : kb_.select(at.second, value, result);
  }
  if (result < 0) {
    // Every input is empty along dim, so is the result: no element is ever read (a sum over it is 0).
    const DataType dtype = expr.output(0)->dtype();
    return isFloating(dtype) ? kb_.constant(0.0, dtype) : kb_.constantInt(0, dtype);
  }
  return bind("cat", result);
}

std::optional<std::vector<ExprId>> ValueBuilder::pieceConditions(const Expr& cat, const Val* out,
                                                                  const std::vector<Idx>& index) {
  std::vector<Idx> at = index;
  for (const Val* v = out; v != cat.output(0);) {
    const Expr& e = *defined_.at(v);
    BRAZE_ASSERT(opInfo(e.kind()).category == OpCategory::Meta, "{} is made from the cat by {}, not a meta op",
                 out->name(), e.name());
    at = mapMeta(e, at);
    v = e.input(0);
  }
  const int64_t dim = cat.attrs().getInt("dim");
  std::vector<ExprId> conditions;
  int64_t begin = 0;
  for (const Val* in : cat.inputs()) {
    const int64_t size = bound_.sizesOf(in)[dim];
    if (size == 0) {
      conditions.push_back(kb_.boolean(false));
      continue;
    }
    const ExprId inside = shifted(at[dim], begin, size).second;
    if (laneDependent(inside)) return std::nullopt;
    conditions.push_back(inside);
    begin += size;
  }
  return conditions;
}

const Val* ValueBuilder::soleSource(const Val* val) const {
  while (params_.count(val) == 0) {
    if (results_.count(val) != 0) return nullptr;
    auto d = defined_.find(val);
    if (d == defined_.end() || d->second->inputs().empty()) return nullptr;
    const Expr& expr = *d->second;
    const OpCategory category = opInfo(expr.kind()).category;
    const bool unary = (category == OpCategory::Unary || category == OpCategory::Cast) && expr.inputs().size() == 1;
    if (!unary && category != OpCategory::Meta) return nullptr;
    val = expr.input(0);
    if (!val->isTensor()) return nullptr;
  }
  return val;
}

std::vector<Idx> ValueBuilder::sourceIndex(const Val* val, const std::vector<Idx>& index) {
  if (params_.count(val) != 0) return index;
  const Expr& expr = *defined_.at(val);
  return sourceIndex(expr.input(0), opInfo(expr.kind()).category == OpCategory::Meta ? mapMeta(expr, index) : index);
}

ExprId ValueBuilder::fromSource(const Val* val, ExprId source) {
  if (params_.count(val) != 0) return source;
  const Expr& expr = *defined_.at(val);
  const ExprId operand = fromSource(expr.input(0), source);
  if (opInfo(expr.kind()).category == OpCategory::Meta) return operand;  // moves elements, changes none
  // Not memoized: the value is `val`'s only where the element falls in this cat input.
  return elementwiseOp(expr, val, {operand});
}

std::optional<ExprId> ValueBuilder::catOfOneSource(const CatPieces& branches) {
  // Cached or intercepted loads (persistent rows, staged tiles) keep a load per cat input: their caches
  // and interceptors look loads up by their index.
  if (branches.size() < 2 || cache_.declarations != nullptr || interceptor_) return std::nullopt;
  const Val* source = soleSource(branches[0].first);
  if (source == nullptr) return std::nullopt;
  for (const auto& branch : branches) {
    if (soleSource(branch.first) != source) return std::nullopt;
  }
  // Only where every piece's load is one of whole vectors (the lane contiguous in its offset, a base of
  // whole vectors and a piece chosen alike for every lane): the one load is then a load of whole vectors
  // too, at a base one of them has. With a load per lane (pieces that split the vectors, or no vectors),
  // selecting each lane's index costs more instructions than the second load saves (NVRTC sm_90: the
  // kernel corpus's small odd-sized RoPEs grew by 50 SASS instructions each).
  const TensorParam& param = kb_.kernel().tensors[params_.at(source)];
  std::vector<std::vector<Idx>> indices;
  for (const auto& [in, at] : branches) {
    indices.push_back(sourceIndex(in, at.first));
    int64_t coefficient = 0;
    const ExprId base = flatOffset(param.layout, indices.back(), &coefficient);
    if (!wholeVectors(param, base, coefficient) || laneDependent(at.second)) return std::nullopt;
  }
  // The source's index: the first input's where the element falls in no later one (the conditions of
  // the selects between the pieces' values, in the same order, so that each is computed once).
  std::vector<Idx> index = indices.front();
  for (size_t b = 1; b < branches.size(); ++b) {
    for (size_t d = 0; d < index.size(); ++d) {
      // A vector load needs the lane in the same place in every input's index.
      if (indices[b][d].lane != index[d].lane) return std::nullopt;
      if (indices[b][d].base != index[d].base) {
        index[d].base = kb_.select(branches[b].second.second, indices[b][d].base, index[d].base);
      }
    }
  }
  const ExprId loaded = valueAt(source, index);
  ExprId result = -1;
  for (const auto& [in, at] : branches) {
    const ExprId value = fromSource(in, loaded);
    result = result < 0 ? value : kb_.select(at.second, value, result);
  }
  return result;
}

}  // namespace braze::scheduler
