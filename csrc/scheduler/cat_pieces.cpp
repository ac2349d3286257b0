#include "scheduler/cat_pieces.h"

#include "ir/op_kind.h"

#include <unordered_map>
#include <unordered_set>

namespace braze::scheduler {
namespace {

// Whether any of `vals` is computed, within the exprs `made_by` holds, by a reduction.
bool computesReductions(const std::vector<const Val*>& vals,
                        const std::unordered_map<const Val*, const Expr*>& made_by) {
  std::vector<const Val*> todo(vals.begin(), vals.end());
  std::unordered_set<const Val*> seen;
  while (!todo.empty()) {
    const Val* v = todo.back();
    todo.pop_back();
    if (!seen.insert(v).second) continue;
    auto it = made_by.find(v);
    if (it == made_by.end()) continue;
    if (opInfo(it->second->kind()).category == OpCategory::Reduction) return true;
    for (const Val* in : it->second->inputs()) todo.push_back(in);
  }
  return false;
}

// Whether `v`'s innermost dim holds whole vectors of up to 8 lanes: a chunk of lanes then stays in one row
// of it.
bool lastDimHoldsVectors(const Val* v, const BoundShapes& bound) {
  const std::vector<int64_t>& sizes = bound.sizesOf(v);
  return !sizes.empty() && sizes.back() % kPieceVectorLanes == 0;
}

}  // namespace

const Expr* splittingCat(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs,
                         const BoundShapes& bound) {
  std::unordered_map<const Val*, const Expr*> made_by;
  for (const Expr* e : exprs) {
    for (const Val* out : e->outputs()) made_by[out] = e;
  }
  const Expr* cat = nullptr;
  for (const Val* out : outputs) {
    const Val* v = out;
    const Expr* e = nullptr;
    for (;;) {
      auto it = made_by.find(v);
      if (it == made_by.end()) return nullptr;
      e = it->second;
      if (opInfo(e->kind()).category != OpCategory::Meta || bound.numel(e->input(0)) != bound.numel(v)) break;
      // Each value between keeps rows of whole vectors innermost: a permute keeps the last dim last.
      if (!lastDimHoldsVectors(v, bound)) return nullptr;
      if (e->kind() == OpKind::Permute) {
        const auto& dims = e->attrs().getInts("dims");
        if (dims.back() != static_cast<int64_t>(dims.size()) - 1) return nullptr;
      }
      v = e->input(0);
    }
    if (e->kind() != OpKind::Cat || (cat != nullptr && cat != e)) return nullptr;
    cat = e;
  }
  if (cat == nullptr) return nullptr;
  const int64_t dim = cat->attrs().getInt("dim");
  const int64_t rank = static_cast<int64_t>(bound.sizesOf(cat->output(0)).size());
  // Inputs that end inside a row of the innermost dim would split a chunk's lanes.
  if (dim == rank - 1 || !lastDimHoldsVectors(cat->output(0), bound)) return nullptr;
  int64_t non_empty = 0;
  for (const Val* in : cat->inputs()) non_empty += bound.sizesOf(in)[dim] > 0 ? 1 : 0;
  if (non_empty < 2 || !computesReductions({cat->inputs().begin(), cat->inputs().end()}, made_by)) return nullptr;
  return cat;
}

bool buildByPiece(KernelBuilder& kb, ValueBuilder& vb, Chunk& chunk, const Expr& cat, const Val* out,
                  const std::vector<Idx>& index, int64_t width, VarId lane_var,
                  const std::function<void(Chunk& sub, size_t input)>& store) {
  const std::optional<std::vector<ExprId>> conditions = vb.pieceConditions(cat, out, index);
  if (!conditions) return false;
  // The sub-chunks go where the chunk's lane-invariant statements go, after what the chunk computed so
  // far (its index). Each begins a chunk of vb's: nothing one computes is read by another.
  kb.pushTarget(&chunk.pre);
  for (size_t input = 0; input < conditions->size(); ++input) {
    if (kb.constValue((*conditions)[input]) == std::optional<int64_t>(0)) continue;  // an empty input
    emitChunk(kb, vb, (*conditions)[input], width, lane_var, [&](Chunk& sub) {
      vb.choosePiece(&cat, input);
      store(sub, input);
    });
    vb.clearPiece();
  }
  kb.popTarget();
  return true;
}

}  // namespace braze::scheduler
