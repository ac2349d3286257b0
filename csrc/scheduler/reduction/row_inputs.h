// How the passes of a row kernel read its inputs: what a persistent kernel may load once, before its
// passes, and find loaded in each of them.
#pragma once

#include "scheduler/reduction/reduction_domain.h"

#include <vector>

namespace braze::scheduler {

// Whether every value `exprs` (a segment's) compute from `val`, up to `reductions` (the kernel's), is
// elementwise of the domain's shape: then every pass reads `val` at the domain index of the element it
// computes (a permute or reshape in between would read it elsewhere, a matching square one included).
bool readAtDomainIndex(const Val* val, const std::vector<const Expr*>& exprs, const std::vector<const Expr*>& reductions,
                       const ReductionDomain& domain, const BoundShapes& bound);

// Whether `val` has a value per row: the domain's rank, its kept dims' sizes and 1 in the reduced ones
// (a norm backward's mean and rstd).
bool isPerRowInput(const Val* val, const ReductionDomain& domain, const BoundShapes& bound);

}  // namespace braze::scheduler
