// How each tensor a kernel reads moves when the output index moves: the element stride of every
// input parameter along every output dim, measured by the load probe (load_probe.h) on a scratch
// kernel. The pointwise heuristics use it to see broadcasts (stride 0 along the leading dims)
// through any chain of ops.
#pragma once

#include "scheduler/lowering_context.h"

#include <optional>
#include <vector>

namespace braze::scheduler {

struct InputAccess {
  // Stride per output dim (0 along a dim of size 1); nullopt when the tensor is read at several or
  // data-dependent offsets per output element (a gather, a pad or cat reading it twice).
  std::optional<std::vector<int64_t>> strides;
};

// One entry per tensor parameter of ctx.kernel (outputs get nullopt), for the value of `out`.
std::vector<InputAccess> probeInputAccess(const LoweringContext& ctx, const Val* out);

}  // namespace braze::scheduler
