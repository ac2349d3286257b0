#include "scheduler/copy_kernel.h"

#include "ir/fusion.h"
#include "ir/ops.h"
#include "passes/bind_shapes.h"
#include "scheduler/scheduler.h"
#include "support/error.h"

namespace braze::scheduler {

Kernel lowerCopyKernel(const std::string& name, DataType dtype, const InputLayout& from, const InputLayout& to,
                       const DeviceInfo& device) {
  BRAZE_ASSERT(from.layout.sizes == to.layout.sizes, "a copy between layouts of different sizes [{}] and [{}]",
               fmt::join(from.layout.sizes, ", "), fmt::join(to.layout.sizes, ", "));
  // The copy as a fusion of one `set`, bound to a stand-in of the source: binding reads sizes and
  // strides, never the data, and the views below say where the kernel really reads and writes.
  Fusion fusion;
  FusionGuard guard(&fusion);
  const auto rank = static_cast<int64_t>(from.layout.sizes.size());
  std::vector<std::optional<bool>> contiguity(static_cast<size_t>(rank), false);
  for (size_t d = 0; d < contiguity.size(); ++d) {
    if (from.layout.strides[d] == 0) contiguity[d] = std::nullopt;  // an expanded dim (a broadcast value)
  }
  TensorView* in = defineTensor(std::vector<int64_t>(static_cast<size_t>(rank), -1), contiguity, dtype);
  TensorView* out = set(in);
  fusion.addOutput(out);
  const HostTensor stand_in = HostTensor::wrap(reinterpret_cast<void*>(static_cast<uintptr_t>(from.alignment_bytes)),
                                               dtype, from.layout.sizes, from.layout.strides);
  const BoundShapes bound = bindShapes(fusion, {stand_in});
  SegmentToLower segment;
  segment.scheduler = SchedulerKind::Pointwise;
  segment.exprs = {out->definition()};
  segment.inputs = {in};
  segment.outputs = {out};
  segment.bound = &bound;
  segment.input_views[in] = {from, in};
  segment.output_views[out] = {to, out};
  SegmentLowering lowering(segment, device);
  Kernel k = lowering.lower(lowering.heuristics());
  k.name = name;
  for (TensorParam& p : k.tensors) p.val = p.storage = nullptr;
  return k;
}

}  // namespace braze::scheduler
