// Vectorization of one tensor's accesses: the widest power-of-two vector (at most 16 bytes) a kernel
// can load or store it with along its last dim. A kernel's factor is the minimum over the tensors
// it accesses along the vectorized dim; the heuristics (schedulers issue) combine them.
#pragma once

#include "ir/data_type.h"
#include "passes/alias_analysis.h"

#include <cstdint>

namespace braze {

// Stride-0 dims (broadcast or expanded) never limit the factor: an expanded broadcast must not look
// discontiguous (that is what dropped nvFuser's vectorize factor to 1). Otherwise the factor divides
// the last non-trivial dim's extent (which must have stride 1), every other stride, the offset, and
// the data pointer's alignment.
int64_t vectorizeFactor(DataType dtype, const StridedLayout& layout, int64_t alignment_bytes);

}  // namespace braze
