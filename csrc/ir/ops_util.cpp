#include "ir/ops_util.h"

#include "support/error.h"

namespace braze::detail {

int64_t broadcastExtent(int64_t a, int64_t b) {
  // A dim of extent 1 that is no broadcast dim still broadcasts against a longer one at execute time:
  // its static 1 says nothing about the result's extent unless both are 1.
  if (a == b) return a;
  if (a == 1) return b;
  if (b == 1) return a;
  return a == IterDomain::kSymbolic ? b : a;
}

Fusion* fusionOf(const std::vector<Val*>& operands) {
  Fusion* fusion = nullptr;
  for (Val* v : operands) {
    BRAZE_CHECK(v != nullptr, "an operand is None");
    BRAZE_CHECK(fusion == nullptr || fusion == v->fusion(), "operands {} come from different fusions", v->name());
    fusion = v->fusion();
  }
  return fusion != nullptr ? fusion : FusionGuard::current();
}

TensorLayout defaultLayout(const std::vector<IterDomain>& dims) {
  TensorLayout layout;
  for (const IterDomain& id : dims) {
    if (id.isReduction()) continue;
    layout.contiguity.push_back(id.isBroadcast() ? std::nullopt : std::optional<bool>(true));
  }
  return layout;
}

TensorView* newTensorLike(Fusion* fusion, DataType dtype, std::vector<IterDomain> dims) {
  TensorLayout layout = defaultLayout(dims);
  return fusion->newTensor(dtype, std::move(dims), std::move(layout));
}

int64_t staticValueOr(Val* scalar, int64_t otherwise) {
  if (scalar->isScalar() && scalar->asScalar()->isConstant()) return toInt(*scalar->asScalar()->value());
  return otherwise;
}

void checkShapeScalar(Val* v, std::string_view op, std::string_view what) {
  BRAZE_CHECK(v != nullptr, "{}: {} entry is None", op, what);
  BRAZE_TYPE_CHECK(v->isScalar() && (isIntegral(v->dtype())),
                   "{}: {} entries must be integer scalars, got {} of dtype {}", op, what,
                   v->isTensor() ? "tensor " + v->name() : v->name(), toString(v->dtype()));
}

std::string shapeString(const TensorView* tv) {
  std::vector<std::string> parts;
  for (const IterDomain& id : tv->logical()) {
    std::string extent = id.extent == IterDomain::kSymbolic ? "?" : fmt::format("{}", id.extent);
    if (id.type == IterType::Broadcast) extent = "1(b)";
    if (id.type == IterType::Expanded) extent += "(expanded)";
    parts.push_back(extent);
  }
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::vector<IterDomain> broadcastDims(std::string_view op, const std::vector<Val*>& operands) {
  const TensorView* first = nullptr;
  std::vector<IterDomain> dims;
  for (Val* v : operands) {
    if (!v->isTensor()) continue;
    const TensorView* tv = v->asTensor();
    std::vector<IterDomain> these = tv->logical();
    if (first == nullptr) {
      first = tv;
      dims = these;
      continue;
    }
    BRAZE_CHECK(these.size() == dims.size(),
                "{}: operands must have the same rank, but {} has rank {} and {} has rank {} (use broadcast_in_dim "
                "to add dims)",
                op, first->name(), dims.size(), tv->name(), these.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      IterDomain& out = dims[d];
      const IterDomain& in = these[d];
      if (in.isBroadcast()) {
        // An expanded operand makes the result expanded when nothing else gives the dim a real extent.
        if (out.type == IterType::Broadcast && in.type == IterType::Expanded) out = in;
        continue;
      }
      if (out.isBroadcast()) {
        out = in;
        continue;
      }
      BRAZE_CHECK(out.extent == IterDomain::kSymbolic || in.extent == IterDomain::kSymbolic || out.extent == in.extent ||
                      out.extent == 1 || in.extent == 1,
                  "{}: dim {} has extent {} in {} {} but {} in {} {}", op, d, out.extent, first->name(),
                  shapeString(first), in.extent, tv->name(), shapeString(tv));
      out.extent = broadcastExtent(out.extent, in.extent);
    }
  }
  return dims;
}

}  // namespace braze::detail
