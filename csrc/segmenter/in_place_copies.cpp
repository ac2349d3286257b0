#include "segmenter/in_place_copies.h"

#include "segmenter/segment_views.h"
#include "support/error.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace braze {

std::vector<InPlaceCopy> inPlaceCopies(const SegmentedFusion& plan) {
  const Fusion& fusion = *plan.fusion;
  std::vector<InPlaceCopy> copies;
  if (fusion.outputAliases().empty()) return copies;
  std::vector<const Val*> updated;
  for (const auto& [out, in] : fusion.outputAliases()) updated.push_back(in);
  const auto isUpdated = [&](const Val* storage) {
    return std::find(updated.begin(), updated.end(), storage) != updated.end();
  };
  const auto buffer = [](const std::vector<int64_t>& sizes) { return InputLayout{StridedLayout::rowMajor(sizes), 16}; };
  for (size_t i = 0; i < fusion.outputs().size(); ++i) {
    const Val* out = fusion.outputs()[i];
    if (!out->isTensor() || fusion.outputUse(i) != Fusion::OutputUse::Returned) continue;
    const scheduler::SegmentInputView view = segmentInputView(plan, out);
    if (!isUpdated(view.storage)) continue;
    const bool already = std::any_of(copies.begin(), copies.end(), [&](const InPlaceCopy& c) { return c.value == out; });
    if (!already) copies.push_back({InPlaceCopy::Target::SavedOutput, out, -1, nullptr, view.layout, buffer(view.layout.layout.sizes)});
  }
  std::vector<InPlaceCopy> writes;
  for (const auto& [out, in] : fusion.outputAliases()) {
    const scheduler::SegmentInputView from = segmentInputView(plan, out);
    const InputLayout to = plan.bound.inputLayout(in);
    BRAZE_CHECK(from.layout.layout.sizes == to.layout.sizes, "output {} has shape [{}] but aliases input {} of shape [{}]",
                out->name(), fmt::join(from.layout.layout.sizes, ", "), in->name(), fmt::join(to.layout.sizes, ", "));
    for (size_t d = 0; d < to.layout.sizes.size(); ++d) {
      BRAZE_CHECK(to.layout.sizes[d] <= 1 || to.layout.strides[d] != 0,
                  "input {} is updated in place (add_output({}, alias_input={})) but its dim {} is expanded (size {}, "
                  "stride 0): its elements share memory, so they cannot hold different values",
                  in->name(), out->name(), in->name(), d, to.layout.sizes[d]);
    }
    InPlaceCopy write{InPlaceCopy::Target::Input, out, -1, in, from.layout, to};
    if (fusion.isInput(from.storage)) {
      write.staged = static_cast<int32_t>(copies.size());
      copies.push_back({InPlaceCopy::Target::Staged, out, -1, nullptr, from.layout, buffer(from.layout.layout.sizes)});
      write.from = copies.back().to;
    }
    writes.push_back(write);
  }
  copies.insert(copies.end(), writes.begin(), writes.end());
  return copies;
}

}  // namespace braze
