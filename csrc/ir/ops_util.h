// Helpers shared by the builders in ops_*.cpp (not part of the public API).
#pragma once

#include "ir/ops.h"

#include <string_view>

namespace braze::detail {

Fusion* fusionOf(const std::vector<Val*>& operands);
// A row-major contiguous layout for a new tensor with these dims (nullopt for broadcast dims).
TensorLayout defaultLayout(const std::vector<IterDomain>& dims);
// A new intermediate tensor (row-major, contiguous) in the fusion.
TensorView* newTensorLike(Fusion* fusion, DataType dtype, std::vector<IterDomain> dims);
// A constant or symbolic extent from a scalar: its value if constant, else kSymbolic.
int64_t staticValueOr(Val* scalar, int64_t otherwise);
// Checks that a shape argument is an integer scalar.
void checkShapeScalar(Val* v, std::string_view op, std::string_view what);
std::string shapeString(const TensorView* tv);
// nvFuser's stride_order (stride_order[d]: dim d's place counted from the innermost, so [1, 0] is
// row-major) with negative entries counted from the end, checked to be a permutation; empty stays empty.
std::vector<int64_t> normalizedStrideOrder(const std::vector<int64_t>& given, size_t rank, std::string_view op);
// The static extent of two non-broadcast dims combined elementwise (kSymbolic where unknown): a static 1
// broadcasts at execute time, so it fixes nothing unless both are 1.
int64_t broadcastExtent(int64_t a, int64_t b);
// The dims of several operands combined elementwise (all ranks equal), or a clear error.
std::vector<IterDomain> broadcastDims(std::string_view op, const std::vector<Val*>& operands);

}  // namespace braze::detail
