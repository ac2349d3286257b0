// Whether a reduction kernel can write what its group computes. The reduction, inner-persistent and
// inner-outer lowerings walk the reduction domain (the reductions' input) and write every output at the
// index of the domain element they are at: an output of a row's size at that element's index, one of a
// reduction result's size at its row's. Values before the reductions are read through index maps at any
// index, but a reduction result is known only for the row being walked. So the group is taken only where
//  - every output has the domain's sizes (size-1 dims included) or the kept dims' sizes (size-1 dims
//    aside) in the domain's order, not merely as many elements (a permuted copy of [3, 8, 16] is
//    [8, 3, 16]; a copy with a size-1 dim added is [3, 1, 8, 16]), and
//  - every value computed from a reduction result reads it at its own row: each dim that comes from a
//    kept dim of the domain stands where that dim stands (a row sum of a square matrix broadcast along
//    the rows, or permuted, is read at another row's index).
// Where the reduced dims are the innermost (rows walked whole), an output of the domain's element count is
// stored at the domain's linear position: one not computed from a reduction result may have any dims (it is
// computed at its own index there), and one computed from a result may be a reshape of values that lie as
// the domain does (a group norm's [b, g, c / g, h, w] viewed back as [b, c, h, w]): each element is still
// its row's.
#pragma once

#include "scheduler/reduction/reduction_domain.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace braze {

// Ops that keep every element in its row and position (up to broadcasting): elementwise ops, broadcasts,
// expands, squeezes, copies, and reshapes and permutes that only add, drop or move size-1 dims.
bool keepsRowPositions(const Expr& expr, const BoundShapes& bound);

// Per output stored at a permuted index: the domain dim each of its dims stands for (-1: a size-1 dim;
// kFlattened: the dims so marked hold, in order, the elements of the domain's dims that no other dim of the
// output stands for, in their order).
constexpr int64_t kFlattened = -3;
using PermutedOutputs = std::unordered_map<const Val*, std::vector<int64_t>>;

// The first output or value computed from a reduction result that the group's kernel could not write or
// read where it walks, as a refusal reason; empty when there is none.
// With `permuted` (the persistent row kernels', which store each output element from the thread holding
// its row): values computed from a reduction result that only other ops read may lie in any order or size
// (a normed head's halves sliced and joined again by RoPE's rotate-half), as long as each dim that names a
// row stays on the domain dim it names; an output may hold the domain's elements with its kept dims in
// another order (a QK-norm's heads normed as [b, t, h, d], written as [b, h, t, d]; OLMo-2's normed
// [b, t, h * d] written as [b, h, t, d]), and goes to `permuted` with its dims; reductions still read
// values that lie as the domain does.
std::string misalignedWithDomain(const Candidate& candidate, const CandidateFacts& facts,
                                 const ReductionDomain& domain, const BoundShapes& bound,
                                 PermutedOutputs* permuted = nullptr);

}  // namespace braze
