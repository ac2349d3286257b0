// What the schedulers' heuristics share. Each scheduler's heuristics (scheduler/<name>/heuristics.h)
// are pure functions of a device description and a summary of the segment's shapes, strides, dtypes
// and alignment, so they are unit-tested with a described H100 or A100 and no GPU. The lowering turns
// their parameters into loops; explain and BRAZE_DUMP=heuristics print them.
#pragma once

#include "target/device_info.h"

#include <cstdint>
#include <string>
#include <vector>

namespace braze {

// Both stay within int64 for any count (the size rules bound counts by it): a / b rounded up without
// a + b - 1, and the next power of two capped at 2^62 (the largest int64 holds).
inline int64_t ceilDiv(int64_t a, int64_t b) { return a / b + (a % b > 0 ? 1 : 0); }
inline int64_t nextPow2(int64_t v) {
  int64_t p = 1;
  while (p < v && p < (int64_t{1} << 62)) p *= 2;
  return p;
}

// Vectorization of a whole kernel: the largest power of two that every tensor accessed along the
// vectorized dim allows (vectorizeFactor of each, in elements), capped at 16 bytes for the widest
// dtype the kernel moves, and dividing the vectorized extent.
struct VectorizeInput {
  int64_t widest_dtype_bytes = 4;
  int64_t inner_extent = 1;                // the extent the lanes walk along (output's last dim, or the row)
  std::vector<int64_t> tensor_factors;     // vectorizeFactor(...) of each tensor read or written
};
int64_t kernelVectorize(const VectorizeInput& input);

}  // namespace braze
