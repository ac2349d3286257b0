// What the segmenter's horizontal merges ask of a group's reductions and tensors: pure functions of the
// group's exprs and the shapes bound for this plan.
#pragma once

#include "ir/fusion.h"
#include "passes/bind_shapes.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace braze {

// Whether every reduction of `exprs` keeps its input's innermost dim (of size > 1): sums over rows.
bool reducesOuterDimsOnly(const std::vector<const Expr*>& exprs, const BoundShapes& bound);

// The products of the leading dims (all but the last) of the tensors `exprs` compute.
std::set<int64_t> leadingRowCounts(const std::vector<const Expr*>& exprs, const BoundShapes& bound);

// The elements every reduction of `exprs` reduces into each result, where they are one count.
std::optional<int64_t> reducedPerResult(const std::vector<const Expr*>& exprs, const BoundShapes& bound);

// The input sizes and reduced dims of the reductions of `exprs`, as keys: each distinct one once, in the
// order of the reductions.
std::vector<std::string> reductionDomainKeys(const std::vector<const Expr*>& exprs, const BoundShapes& bound);

}  // namespace braze
