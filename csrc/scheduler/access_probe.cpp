#include "scheduler/access_probe.h"

#include "scheduler/load_probe.h"

namespace braze::scheduler {

std::vector<InputAccess> probeInputAccess(const LoweringContext& ctx, const Val* out) {
  // A scratch kernel with the same parameters: the probe's statements are thrown away with it.
  Kernel scratch;
  scratch.tensors = ctx.kernel.tensors;
  scratch.index64 = true;
  KernelBuilder kb(scratch);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  const auto& sizes = ctx.bound.sizesOf(out);
  SymbolicPoint point{sizes, std::vector<VarId>(sizes.size(), -1), -1, 1, -1};
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1) point.vars[d] = kb.scalarVar("p", DataType::Int64, true);
  }
  std::vector<InputAccess> access(ctx.kernel.tensors.size());
  std::vector<int> loads(ctx.kernel.tensors.size(), 0);
  for (const ProbedLoad& load : probeLoads(kb, vb, point, {out})) {
    if (++loads[load.tensor] == 1) access[load.tensor].strides = load.strides;
  }
  // A tensor loaded at several offsets per element (a pad or cat reading it twice) has no one stride.
  for (size_t t = 0; t < access.size(); ++t) {
    if (loads[t] > 1) access[t].strides.reset();
  }
  return access;
}

}  // namespace braze::scheduler
