// Outputs of a matmul segment reached from the result through meta ops (permute, reshape, slice,
// squeeze, size-1 broadcasts): the epilogue computes each result element's place in such an output
// (the index maps run forward, result to output) and stores it there, so `permute(linear(x)) * 2` or a
// slice of a horizontally fused GEMM's result is one kernel. Each result element lands in at most one
// place of an output; a map that would write one element to several places (an expand) is refused. An
// output of the result's shape computed without it (a dropout's mask) is computed and stored at the
// result's own index.
#pragma once

#include "passes/bind_shapes.h"
#include "scheduler/value_builder.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace braze {

// For each value of `exprs` computed from the result of `mm`, the meta ops between the result and it, in
// order (none, too, for a value of the result's shape computed without it, which the epilogue computes at
// the result's index); or why the epilogue cannot compute one of them per result element (an op that is neither
// elementwise nor such an index map, an index map that repeats elements, an elementwise op that combines
// the result's elements at different places or broadcasts them).
struct ResultChains {
  std::unordered_map<const Val*, std::vector<const Expr*>> chains;
  std::string refusal;
};
ResultChains resultChains(const std::vector<const Expr*>& exprs, const Expr& mm, const BoundShapes& bound);

}  // namespace braze

namespace braze::scheduler {

// Where a result element goes in an output: its index there, and whether it is stored at all (-1:
// always; a slice keeps only the elements inside it).
struct OutputPlace {
  std::vector<Idx> index;
  ExprId inside = -1;
};

// The place of the result element at `index` (the result's coordinates) after `chain`, the meta ops
// from the result to the output in order (elementwise ops between them keep the index).
OutputPlace placeThrough(KernelBuilder& kb, ValueBuilder& vb, const BoundShapes& bound, const std::vector<const Expr*>& chain,
                         std::vector<ExprId> index);

}  // namespace braze::scheduler
