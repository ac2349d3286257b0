#include "exec/canonical_rows.h"

#include "exec/prepared_plan.h"
#include "ir/verifier.h"
#include "segmenter/reuse_segments.h"
#include "segmenter/segment_views.h"
#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>

namespace braze::exec {
namespace {

constexpr int64_t kRowExtentAtLeast = 128;  // smaller extents are exact in a shape class

// The launch values a relaunch sets, compared: what lowering gave and what the relaunch gives must agree.
bool sameLaunchValues(const std::vector<kernel::Kernel>& a, const std::vector<kernel::Kernel>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].grid != b[i].grid || a[i].arguments.size() != b[i].arguments.size() ||
        a[i].tensors.size() != b[i].tensors.size()) {
      return false;
    }
    for (size_t j = 0; j < a[i].arguments.size(); ++j) {
      if (a[i].arguments[j].index && a[i].arguments[j].value != b[i].arguments[j].value) return false;
    }
    for (size_t j = 0; j < a[i].tensors.size(); ++j) {
      if (!(a[i].tensors[j].layout == b[i].tensors[j].layout)) return false;
    }
  }
  return true;
}

}  // namespace

std::optional<CanonicalRows> canonicalRowsOf(const std::vector<DeviceValue>& inputs,
                                             const std::vector<std::vector<int64_t>>& static_shapes) {
  const auto fixed = [&](size_t i, size_t d) {
    return i < static_shapes.size() && d < static_shapes[i].size() && static_shapes[i][d] >= 0;
  };
  int64_t extent = -1;
  for (size_t i = 0; i < inputs.size() && extent < 0; ++i) {
    const auto* t = std::get_if<DeviceTensor>(&inputs[i]);
    if (t != nullptr && !t->sizes.empty() && t->sizes[0] >= kRowExtentAtLeast && !fixed(i, 0)) extent = t->sizes[0];
  }
  if (extent < 0) return std::nullopt;
  CanonicalRows rows{inputs, extent, largestOfShapeClass(extent)};
  for (size_t i = 0; i < rows.inputs.size(); ++i) {
    auto* t = std::get_if<DeviceTensor>(&rows.inputs[i]);
    if (t == nullptr) {
      const auto* value = std::get_if<int64_t>(&std::get<ScalarValue>(rows.inputs[i]));
      if (value != nullptr && *value == extent) return std::nullopt;
      continue;
    }
    for (const int64_t stride : t->strides) {
      if (stride == extent || stride == -extent) return std::nullopt;
    }
    for (size_t d = 0; d < t->sizes.size(); ++d) {
      if (t->sizes[d] != extent) continue;
      if (d != 0 || fixed(i, d)) return std::nullopt;
      t->sizes[d] = rows.canonical;
    }
  }
  // Equal extents stay equal and unequal ones unequal, strides row-major or not as they were.
  if (InputSignature::shapeClassOf(rows.inputs) != InputSignature::shapeClassOf(inputs)) return std::nullopt;
  return rows;
}

size_t CanonicalKernelCache::KeyHash::operator()(const Key& k) const {
  return k.inputs.hash() ^ (std::hash<std::string>()(k.heuristics) << 1) ^ static_cast<size_t>(k.segment) * 31 ^
         static_cast<size_t>(k.device) * 1009;
}

std::shared_ptr<const CanonicalKernelCache::Entry> CanonicalKernelCache::find(const Key& key) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

void CanonicalKernelCache::keep(Key key, std::shared_ptr<const Entry> entry, size_t at_most) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  if (entries_.size() < at_most || entries_.count(key) != 0) entries_.insert_or_assign(std::move(key), std::move(entry));
}

CanonicalRowKernels::CanonicalRowKernels(CanonicalRows rows, const std::vector<bool>& launch_arguments,
                                         std::shared_ptr<const SegmentedFusion> segmentation, const DeviceInfo& device,
                                         int device_ordinal, CanonicalKernelCache& cache, bool remember, size_t at_most)
    : rows_(std::move(rows)),
      signature_(InputSignature::of(rows_.inputs, launch_arguments)),
      segmentation_(std::move(segmentation)),
      device_(device),
      device_ordinal_(device_ordinal),
      cache_(cache),
      remember_(remember),
      at_most_(at_most) {}

std::optional<SegmentKernelSource::Given> CanonicalRowKernels::kernelsFor(const Segment& segment,
                                                                           const scheduler::LoweringContext& actual,
                                                                           const SegmentHeuristics& heuristics) {
  if (heuristics.lowering == nullptr || heuristics.lowering->relaunch == nullptr) return std::nullopt;
  CanonicalKernelCache::Key key{signature_, segment.id, heuristics.toString(), device_ordinal_};
  std::shared_ptr<const CanonicalKernelCache::Entry> entry = cache_.find(key);
  if (entry == nullptr || entry->segmentation != segmentation_) {
    entry = lowerCanonical(segment, heuristics);
    if (remember_) cache_.keep(std::move(key), entry, at_most_);
  }
  std::variant<std::vector<kernel::Kernel>, std::string> kernels =
      entry->kernels.empty() ? std::variant<std::vector<kernel::Kernel>, std::string>(entry->why_none)
                             : relaunched(*entry, actual, heuristics);
  if (const auto* why = std::get_if<std::string>(&kernels)) {
    dumpAfter("reuse-kernels", [&] { return fmt::format("segment {}: lowered for its own sizes: {}", segment.id, *why); });
    return std::nullopt;
  }
  Given given{std::move(std::get<std::vector<kernel::Kernel>>(kernels)), entry->digests, ""};
  // At the canonical row count itself, the kernels are these inputs' own: nothing to say.
  if (rows_.extent != rows_.canonical) {
    given.lowered_for = fmt::format("lowered for {} leading rows (the shape class's canonical row count), launched "
                                    "for {}", rows_.canonical, rows_.extent);
  }
  dumpAfter("reuse-kernels", [&] {
    return fmt::format("segment {}: canonical kernels, lowered for {} leading rows, launched for {}", segment.id,
                       rows_.canonical, rows_.extent);
  });
  return given;
}

std::variant<std::vector<kernel::Kernel>, std::string> CanonicalRowKernels::relaunched(
    const CanonicalKernelCache::Entry& entry, const scheduler::LoweringContext& actual,
    const SegmentHeuristics& heuristics) const {
  if (std::optional<std::string> why = moreThanRows(entry, actual)) return *why;
  // The canonical sizes are the larger: where they need 64-bit indices and these do not, these get their own.
  if (entry.kernels.front().index64 != actual.kernel.index64) return std::string("its index width differs");
  std::vector<kernel::Kernel> kernels = entry.kernels;
  for (kernel::Kernel& k : kernels) {
    for (kernel::TensorParam& t : k.tensors) {
      if (t.val == nullptr) continue;  // a workspace or the index-error record: the relaunch sizes it
      if (t.tma) return std::string("it reads a tensor through a tensor map");
      const auto own = std::find_if(actual.kernel.tensors.begin(), actual.kernel.tensors.end(),
                                    [&](const kernel::TensorParam& p) { return p.val == t.val && p.output == t.output; });
      if (own == actual.kernel.tensors.end()) return fmt::format("it has no parameter for {}", t.val->name());
      t.layout = own->layout;
      t.alignment_bytes = own->alignment_bytes;
    }
  }
  if (!heuristics.lowering->relaunch(entry.lowered_at, heuristics, kernels)) {
    return fmt::format("its code depends on more than the row count (an outer reduction, a grid split, the row "
                       "length): {} here, {} at the canonical sizes", heuristics.toString(),
                       entry.lowered_at.toString());
  }
  return kernels;
}

std::shared_ptr<const CanonicalKernelCache::Entry> CanonicalRowKernels::lowerCanonical(
    const Segment& segment, const SegmentHeuristics& heuristics) {
  auto entry = std::make_shared<CanonicalKernelCache::Entry>();
  entry->segmentation = segmentation_;
  if (!canonical_plan_) canonical_plan_ = reuseSegments(*segmentation_, planningValues(rows_.inputs)).plan;
  if (!*canonical_plan_) {
    entry->why_none = "the class's segmentation does not hold at the canonical row count";
    return entry;
  }
  const SegmentedFusion& plan = **canonical_plan_;
  const auto same = std::find_if(plan.segments.begin(), plan.segments.end(), [&](const Segment& s) {
    return s.id == segment.id && s.scheduler == segment.scheduler && s.exprs == segment.exprs &&
           s.inputs == segment.inputs && s.outputs == segment.outputs;
  });
  if (same == plan.segments.end()) {
    entry->why_none = "the segment is another at the canonical row count";
    return entry;
  }
  const scheduler::SegmentToLower to_lower = segmentToLower(plan, *same);
  scheduler::SegmentLowering lowering(to_lower, device_);
  if (std::optional<std::string> refused = lowering.refusal()) {
    entry->why_none = *refused;
    return entry;
  }
  entry->lowered_at = lowering.heuristics();
  std::vector<kernel::Kernel> kernels{lowering.lower(heuristics)};
  for (kernel::Kernel& next : lowering.takeFollowUps()) kernels.push_back(std::move(next));
  std::vector<kernel::Kernel> relaunched = kernels;
  if (!heuristics.lowering->relaunch(entry->lowered_at, heuristics, relaunched)) {
    entry->why_none = fmt::format("its code depends on more than the row count (an outer reduction, a grid split, "
                                  "the row length): {} here, {} at the canonical sizes",
                                  heuristics.toString(), entry->lowered_at.toString());
    return entry;
  }
  // The relaunch gives back every launch value this lowering gave, or it does not know them all.
  if (!sameLaunchValues(relaunched, kernels)) {
    BRAZE_ASSERT(!verifiersEnabled(), "segment {}: the relaunch of {} gives other launch values than its lowering",
                 segment.id, heuristics.lowering->name);
    entry->why_none = "its relaunch does not give the launch values its lowering does";
    return entry;
  }
  const auto keepSizes = [&](const Val* v) {
    if (v->isTensor()) entry->sizes.emplace_back(v, plan.bound.sizesOf(v));
  };
  for (const Val* v : same->inputs) keepSizes(v);
  for (const Expr* e : same->exprs) {
    for (const Val* v : e->outputs()) keepSizes(v);
    for (const Val* v : e->inputs()) {
      if (!v->isTensor() && !v->isFusionInput() && plan.bound.hasScalar(v)) {
        entry->scalars.emplace_back(v, plan.bound.scalarOf(v));
      }
    }
  }
  for (const kernel::Kernel& k : kernels) entry->digests.push_back(kernel::codeDigest(k));
  entry->kernels = std::move(kernels);
  return entry;
}

std::optional<std::string> CanonicalRowKernels::moreThanRows(const CanonicalKernelCache::Entry& entry,
                                                              const scheduler::LoweringContext& actual) const {
  for (const auto& [val, canonical] : entry.sizes) {
    const std::vector<int64_t>& own = actual.bound.sizesOf(val);
    bool same = own.size() == canonical.size();
    for (size_t d = 1; same && d < own.size(); ++d) same = own[d] == canonical[d];
    // A leading dim of the row count, or of a multiple k of it: k is the same here.
    if (same && !own.empty() && own[0] != canonical[0]) {
      same = canonical[0] % rows_.canonical == 0 && own[0] == canonical[0] / rows_.canonical * rows_.extent;
    }
    if (!same) {
      return fmt::format("{} is {} here and {} at the canonical row count", val->name(), fmt::join(own, "x"),
                         fmt::join(canonical, "x"));
    }
  }
  for (const auto& [val, value] : entry.scalars) {
    if (!actual.bound.hasScalar(val) || !(actual.bound.scalarOf(val) == value)) {
      return fmt::format("scalar {} differs at the canonical row count", val->name());
    }
  }
  return std::nullopt;
}

}  // namespace braze::exec
