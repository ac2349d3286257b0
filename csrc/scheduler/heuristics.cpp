#include "scheduler/heuristics.h"

#include <algorithm>

namespace braze {

int64_t kernelVectorize(const VectorizeInput& input) {
  int64_t factor = std::max<int64_t>(16 / std::max<int64_t>(input.widest_dtype_bytes, 1), 1);
  for (int64_t f : input.tensor_factors) factor = std::min(factor, f);
  while (factor > 1 && input.inner_extent % factor != 0) factor /= 2;
  return std::max<int64_t>(factor, 1);
}

}  // namespace braze
