#include "scheduler/matmul/output_maps.h"

#include "ir/shape_rules.h"
#include "scheduler/registry.h"
#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace braze {
namespace {

// Ops computed per element of their index space: quantize (per tensor, channel or block) is one.
bool elementwise(OpCategory c) {
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary || c == OpCategory::Cast ||
         c == OpCategory::Quantize;
}

// Why the epilogue cannot write through `meta` (a Meta-category op after the matmul's result), or "".
std::string outputMapRefusal(const Expr& meta, const BoundShapes& bound) {
  const auto& in_sizes = bound.sizesOf(meta.input(0));
  const auto& out_sizes = bound.sizesOf(meta.output(0));
  switch (meta.kind()) {
    case OpKind::Set:
    case OpKind::SegmentSet:
    case OpKind::Permute:
    case OpKind::Squeeze:
    case OpKind::Broadcast:
    case OpKind::Reshape: return "";
    case OpKind::Expand:
      return in_sizes == out_sizes ? "" : fmt::format("{} repeats the result's elements (an expand)", exprLabel(meta));
    case OpKind::BroadcastInDim: {
      // Each operand dim keeps its size, and the new dims have size 1.
      const auto& bdims = meta.attrs().getInts("broadcast_dims");
      std::vector<bool> mapped(out_sizes.size(), false);
      for (size_t i = 0; i < bdims.size(); ++i) {
        mapped[bdims[i]] = true;
        if (in_sizes[i] != out_sizes[bdims[i]]) {
          return fmt::format("{} repeats the result's elements (dim {} grows)", exprLabel(meta), i);
        }
      }
      for (size_t d = 0; d < out_sizes.size(); ++d) {
        if (!mapped[d] && out_sizes[d] != 1) {
          return fmt::format("{} repeats the result's elements (new dim {} of size {})", exprLabel(meta), d, out_sizes[d]);
        }
      }
      return "";
    }
    case OpKind::Slice:
      for (const SliceDim& d : sliceDims(meta, in_sizes, bound.intOperands(meta))) {
        if (d.step != 1) return fmt::format("{} has a step of {} (the epilogue writes slices of step 1)", exprLabel(meta), d.step);
      }
      return "";
    default: return fmt::format("{} is not an index map the epilogue writes through", exprLabel(meta));
  }
}

}  // namespace

ResultChains resultChains(const std::vector<const Expr*>& exprs, const Expr& mm, const BoundShapes& bound) {
  ResultChains out;
  auto refuse = [&](std::string why) {
    out.refusal = "after the matmul, " + why;
    return out;
  };
  out.chains[mm.output(0)] = {};
  for (const Expr* e : exprs) {
    if (e == &mm) continue;
    const OpCategory category = opInfo(e->kind()).category;
    const std::vector<const Expr*>* from = nullptr;
    for (const Val* in : e->inputs()) {
      auto it = out.chains.find(in);
      if (it == out.chains.end()) continue;
      // Operands from the result must be the same element of it, and an elementwise op keeps its shape.
      if (from != nullptr && *from != it->second) return refuse(exprLabel(*e) + " combines the result's elements at different places");
      from = &it->second;
      if (category != OpCategory::Meta && bound.sizesOf(in) != bound.sizesOf(e->output(0))) {
        return refuse(exprLabel(*e) + " broadcasts the result");
      }
    }
    if (from == nullptr) continue;
    std::vector<const Expr*> through = *from;
    if (category == OpCategory::Meta) {
      if (std::string why = outputMapRefusal(*e, bound); !why.empty()) return refuse(std::move(why));
      through.push_back(e);
    } else if (!elementwise(category)) {
      return refuse(exprLabel(*e) + " is not elementwise");
    }
    for (const Val* o : e->outputs()) out.chains[o] = through;
  }
  // A value of the result's shape computed without it (a dropout's mask, drawn beside the linear it
  // masks) is computed per element at the result's index as well, and stored where the result would be.
  const auto& sizes = bound.sizesOf(mm.output(0));
  for (const Expr* e : exprs) {
    for (const Val* o : e->outputs()) {
      if (out.chains.count(o) == 0 && bound.sizesOf(o) == sizes) out.chains[o] = {};
    }
  }
  return out;
}

}  // namespace braze

namespace braze::scheduler {

OutputPlace placeThrough(KernelBuilder& kb, ValueBuilder& vb, const BoundShapes& bound, const std::vector<const Expr*>& chain,
                         std::vector<ExprId> index) {
  ExprId inside = -1;
  auto also = [&](ExprId condition) { inside = inside < 0 ? condition : kb.land(inside, condition); };
  for (const Expr* meta : chain) {
    const auto& in_sizes = bound.sizesOf(meta->input(0));
    const auto& out_sizes = bound.sizesOf(meta->output(0));
    std::vector<ExprId> out;
    switch (meta->kind()) {
      case OpKind::Set:
      case OpKind::SegmentSet:
      case OpKind::Expand: out = index; break;  // an expand that changes no size
      case OpKind::Permute: {
        const auto& dims = meta->attrs().getInts("dims");  // output dim i is input dim dims[i]
        for (int64_t d : dims) out.push_back(index[d]);
        break;
      }
      case OpKind::Squeeze: {
        const auto& dims = meta->attrs().getInts("dims");
        for (int64_t d = 0; d < static_cast<int64_t>(index.size()); ++d) {
          if (std::find(dims.begin(), dims.end(), d) == dims.end()) out.push_back(index[d]);
        }
        break;
      }
      case OpKind::Broadcast: {
        const auto& flags = meta->attrs().getInts("is_broadcast_dim");
        size_t next = 0;
        for (int64_t flag : flags) out.push_back(flag ? kb.index(0) : index[next++]);
        break;
      }
      case OpKind::BroadcastInDim: {
        const auto& bdims = meta->attrs().getInts("broadcast_dims");
        out.assign(out_sizes.size(), kb.index(0));
        for (size_t i = 0; i < bdims.size(); ++i) out[bdims[i]] = index[i];
        break;
      }
      case OpKind::Slice: {
        const auto dims = sliceDims(*meta, in_sizes, bound.intOperands(*meta));
        for (size_t d = 0; d < dims.size(); ++d) {
          const ExprId rel = kb.sub(index[d], kb.index(dims[d].start));
          if (dims[d].start != 0 || dims[d].size != in_sizes[d]) {
            also(kb.land(kb.le(kb.index(0), rel), kb.lt(rel, kb.index(dims[d].size))));
          }
          out.push_back(rel);
        }
        break;
      }
      case OpKind::Reshape: {
        std::vector<Idx> in;
        for (ExprId i : index) in.push_back({i, false});
        int64_t coefficient = 0;
        const ExprId linear = vb.flatOffset(StridedLayout::rowMajor(in_sizes), in, &coefficient);
        for (const Idx& i : vb.unflatten(linear, false, out_sizes)) out.push_back(i.base);
        break;
      }
      default: BRAZE_UNREACHABLE("matmul epilogue: {} is not an index map it writes through", meta->name());
    }
    index = std::move(out);
  }
  OutputPlace place;
  for (ExprId i : index) place.index.push_back({i, false});
  place.inside = inside;
  return place;
}

}  // namespace braze::scheduler
