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
#pragma once

#include "scheduler/reduction/reduction_domain.h"

#include <string>

namespace braze {

// Ops that keep every element in its row and position (up to broadcasting): elementwise ops, broadcasts,
// expands, squeezes, copies and reshapes that only add or drop size-1 dims.
bool keepsRowPositions(const Expr& expr, const BoundShapes& bound);

// The first output or value computed from a reduction result that the group's kernel could not write or
// read where it walks, as a refusal reason; empty when there is none.
std::string misalignedWithDomain(const Candidate& candidate, const CandidateFacts& facts,
                                 const ReductionDomain& domain, const BoundShapes& bound);

}  // namespace braze
