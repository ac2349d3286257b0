// The loads that computing some outputs at one point of their index space makes, and how each one
// moves through memory as the point moves. The transpose lowering stages in shared memory the loads
// that are strided along the output's inner dim and contiguous along another; the probe finds them.
//
// The point is symbolic (a variable per dim), so every load's offset is the very index expression the
// kernel will use. Strides are measured by evaluating it with the variables set to the centre of the
// index space and to unit steps from there: offsets are affine for permutes, slices and broadcasts,
// and piecewise affine where a reshape divides or a pad or cat selects, so these are local strides
// (those of the piece around the centre). They only decide what is staged: staging stays correct
// for any offset, because the staged value is loaded at the same expression it replaces.
#pragma once

#include "scheduler/value_builder.h"

#include <optional>
#include <vector>

namespace braze::scheduler {

// A symbolic point of an index space of `sizes`: dim d's index is vars[d], except b's, which is
// vars[b] * width + lane when vectorized (the lanes of a chunk); size-1 dims have no var (-1), index 0.
struct SymbolicPoint {
  std::vector<int64_t> sizes;
  std::vector<VarId> vars;
  int64_t dim_b = -1;
  int64_t width = 1;
  VarId lane = -1;

  std::vector<Idx> index(KernelBuilder& kb) const;
};

struct ProbedLoad {
  TensorId tensor = -1;
  ExprId offset = -1;  // an expression of the point's vars (and the lane), or of loaded data (a gather)
  // Element strides along each dim, measured at the centre (0 for size-1 dims); nullopt when the
  // offset depends on anything but the point, such as a gather's loaded index.
  std::optional<std::vector<int64_t>> strides;
};

// Every distinct load vb makes to compute `outputs` at `point`, in the order it makes them. The
// statements the evaluation emits go to a scratch list that is dropped: only the offsets matter (vb
// must begin a new chunk before it builds anything else, and its load interceptor is left unset).
std::vector<ProbedLoad> probeLoads(KernelBuilder& kb, ValueBuilder& vb, const SymbolicPoint& point,
                                   const std::vector<const Val*>& outputs);

}  // namespace braze::scheduler
