// Outputs made by one cat, each element computed from the cat input it falls in only. A cat selects
// between its inputs, so a kernel that computes it computes every input at every element and keeps one.
// Where the inputs are costly (GQA's backward concatenates the query heads' gradient with the keys' and
// values' gradients, each a sum over the query heads of a group, the keys' with RoPE's backward in it),
// that is most of the kernel's work. Where the cat makes every output of a group through meta ops, and a
// chunk's lanes fall in one input, the chunk is built once per input, each copy guarded by the chunk
// falling in that input and computing it alone: a warp then computes what it stores.
#pragma once

#include "scheduler/lowering_context.h"

#include <functional>
#include <vector>

namespace braze::scheduler {

// Vectors of up to this many lanes stay within one input of a cat that splittingCat returns.
constexpr int64_t kPieceVectorLanes = 8;

// The cat that makes each of `outputs` through meta ops that keep its elements (reshapes, permutes that
// keep the last dim last, squeezes), when one of its inputs computes reductions per element (and is worth
// not computing elsewhere), and the chunks of the lowerings' lanes fall in one input: the cat is along
// another dim than the last, and every value from it to the outputs has a last dim of whole vectors of
// kPieceVectorLanes. Null when there is none. The pointwise check counts the inputs' loads by their
// shares of such a cat; the lowerings build its chunks by input.
const Expr* splittingCat(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs,
                         const BoundShapes& bound);

// Builds, into `chunk` (being built, at `index` of `out`), one guarded sub-chunk per non-empty input of
// `cat`: `store(sub, input)` builds it with vb computing that input alone. False, building nothing,
// where a chunk's lanes may fall in different inputs.
bool buildByPiece(KernelBuilder& kb, ValueBuilder& vb, Chunk& chunk, const Expr& cat, const Val* out,
                  const std::vector<Idx>& index, int64_t width, VarId lane_var,
                  const std::function<void(Chunk& sub, size_t input)>& store);

}  // namespace braze::scheduler
