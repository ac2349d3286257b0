#include "kernel/access_probe.h"

#include <map>
#include <set>

namespace braze::kernel {
namespace {

// Offsets each parameter is loaded at when `out` is computed at the constant `point`; a non-constant
// offset is recorded as nullopt.
std::map<TensorId, std::set<std::optional<int64_t>>> loadsAt(const LoweringContext& ctx, const Val* out,
                                                               const std::vector<int64_t>& point) {
  Kernel scratch;
  scratch.tensors = ctx.kernel.tensors;
  scratch.index64 = true;
  KernelBuilder kb(scratch);
  ValueBuilder vb(kb, ctx.plan.bound, ctx.segment.exprs, ctx.inputs);
  std::vector<Stmt> statements;
  vb.beginChunk(&statements, &statements, 1, -1);
  std::vector<Idx> index;
  for (int64_t i : point) index.push_back({kb.index(i), false});
  vb.valueAt(out, index);
  std::map<TensorId, std::set<std::optional<int64_t>>> loads;
  for (const KExpr& e : scratch.exprs) {
    if (e.kind == EKind::Load) loads[e.ref].insert(kb.constValue(e.args[0]));
  }
  return loads;
}

}  // namespace

std::vector<InputAccess> probeInputAccess(const LoweringContext& ctx, const Val* out) {
  const auto& sizes = ctx.plan.bound.sizesOf(out);
  std::vector<InputAccess> access(ctx.kernel.tensors.size());
  const std::vector<int64_t> origin(sizes.size(), 0);
  const auto at_origin = loadsAt(ctx, out, origin);
  auto single = [](const std::set<std::optional<int64_t>>& offsets) -> std::optional<int64_t> {
    if (offsets.size() != 1 || !offsets.begin()->has_value()) return std::nullopt;
    return **offsets.begin();
  };
  for (const auto& [tensor, offsets] : at_origin) {
    if (single(offsets)) access[tensor].strides = std::vector<int64_t>(sizes.size(), 0);
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 2) continue;
    std::vector<int64_t> step = origin;
    step[d] = 1;
    const auto stepped = loadsAt(ctx, out, step);
    for (size_t t = 0; t < access.size(); ++t) {
      if (!access[t].strides) continue;
      auto it = stepped.find(static_cast<TensorId>(t));
      const auto moved = it == stepped.end() ? std::nullopt : single(it->second);
      if (!moved) {
        access[t].strides.reset();
        continue;
      }
      (*access[t].strides)[d] = *moved - *single(at_origin.at(static_cast<TensorId>(t)));
    }
  }
  return access;
}

}  // namespace braze::kernel
