#include "exec/canonical_rows.h"

#include "exec/prepared_plan.h"
#include "ir/verifier.h"
#include "scheduler/value_builder.h"
#include "segmenter/reuse_segments.h"
#include "segmenter/segment_views.h"
#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <numeric>

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

// Why the relaunch refused kernels lowered at the canonical sizes with `heuristics`.
std::string moreThanTheRowCount(const SegmentHeuristics& heuristics, const CanonicalKernelCache::Segment& canonical) {
  return fmt::format("its code depends on more than the row count (an outer reduction, a grid split, the row "
                     "length): {} here, {} at the canonical sizes", heuristics.toString(),
                     canonical.lowered_at.toString());
}

// `plan`'s segment of `segment`'s id, if it is the same segment (the same ops, inputs and outputs).
const braze::Segment* sameSegmentIn(const SegmentedFusion& plan, const braze::Segment& segment) {
  const auto same = std::find_if(plan.segments.begin(), plan.segments.end(), [&](const braze::Segment& s) {
    return s.id == segment.id && s.scheduler == segment.scheduler && s.exprs == segment.exprs &&
           s.inputs == segment.inputs && s.outputs == segment.outputs;
  });
  return same == plan.segments.end() ? nullptr : &*same;
}

// `segmentation` bound to `inputs` where it holds there; none where it does not, or where the definition
// refuses those sizes or strides (a full([130]) beside rows of another count, a contiguity a permuted
// layout keeps only at its own sizes): the inputs' own sizes are planned then, as they would be alone.
std::optional<SegmentedFusion> reusedAt(const SegmentedFusion& segmentation, const std::vector<DeviceValue>& inputs) {
  try {
    return reuseSegments(segmentation, planningValues(inputs)).plan;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Internal) throw;
    return std::nullopt;
  }
}

// Whether dims [0, d) of `t` and dim d are indexed as one: each of those dims of size above 1 has the
// stride of the next such dim (up to d) times its size. A kernel's offsets into `t` then name only the
// product of their sizes (ValueBuilder::flatOffset merges them), never dim d's extent alone.
bool mergedIntoDim(const DeviceTensor& t, size_t d) {
  int64_t stride = t.strides[d], size = t.sizes[d];
  for (size_t i = d; i-- > 0;) {
    if (t.sizes[i] == 1) continue;
    if (t.strides[i] != stride * size) return false;
    stride = t.strides[i];
    size = t.sizes[i];
  }
  return true;
}

// Input i's value where it is an integer scalar that may stand for a size: not a launch argument's (a
// seed, an offset), whose values only launch kernels.
std::optional<int64_t> sizeScalar(const DeviceValue& input, size_t i, const std::vector<bool>& launch_arguments) {
  const auto* scalar = std::get_if<ScalarValue>(&input);
  const auto* value = scalar == nullptr ? nullptr : std::get_if<int64_t>(scalar);
  if (value == nullptr || (i < launch_arguments.size() && launch_arguments[i])) return std::nullopt;
  return *value;
}

// Whether the definition fixes dim d of input i.
bool fixedBy(const std::vector<std::vector<int64_t>>& static_shapes, size_t i, size_t d) {
  return i < static_shapes.size() && d < static_shapes[i].size() && static_shapes[i][d] >= 0;
}

// Gives the dims before `d` of `t`, merged into it at `old_sizes` (mergedIntoDim), the strides that merge
// them at its sizes now. A size-1 dim's stride addresses nothing; where it followed (a DLPack producer's
// row-major [1, seq, hidden]), it keeps following, so that the tensor stays row-major in its class.
void followMergedStrides(DeviceTensor& t, size_t d, const std::vector<int64_t>& old_sizes) {
  int64_t stride = t.strides[d], size = t.sizes[d], was = stride * old_sizes[d];
  for (size_t i = d; i-- > 0;) {
    if (t.sizes[i] == 1) {
      if (t.strides[i] == was) t.strides[i] = stride * size;
      continue;
    }
    t.strides[i] = stride * size;
    stride = t.strides[i];
    size = t.sizes[i];
    was *= old_sizes[i];
  }
}

// The first open extent of 128 or more among the input tensors' dims, and the dim it is in: the row
// count, or the row extent of a row count spread over leading dims ([batch, seq, hidden]'s seq). Not an
// innermost dim, which holds a row length (or a weight's columns) where row kernels run.
std::optional<std::pair<int64_t, size_t>> rowExtentOf(const std::vector<DeviceValue>& inputs,
                                                      const std::vector<std::vector<int64_t>>& static_shapes) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* t = std::get_if<DeviceTensor>(&inputs[i]);
    if (t == nullptr) continue;
    for (size_t d = 0; d < t->sizes.size(); ++d) {
      if (t->sizes[d] < kRowExtentAtLeast || fixedBy(static_shapes, i, d)) continue;
      if (d + 1 == t->sizes.size()) break;
      return std::make_pair(t->sizes[d], d);
    }
  }
  return std::nullopt;
}

// `inputs` with the dims before `dim` of each tensor that has the row extent `extent` there made their
// `canonical` sizes from their `actual` ones (`batch`, per dim), their strides following; none where
// foldedBatchOf's conditions do not hold.
std::optional<std::vector<DeviceValue>> withBatch(const std::vector<DeviceValue>& inputs,
                                                  const std::vector<std::vector<int64_t>>& static_shapes,
                                                  int64_t extent, size_t dim, const std::vector<BatchDim>& batch,
                                                  const std::vector<bool>& launch_arguments) {
  std::vector<int64_t> sizes;  // every folded dim's, before and after: no other size may be one of them
  for (size_t p = 0; p < batch.size(); ++p) {
    if (!batch[p].folded) continue;
    sizes.push_back(batch[p].actual);
    sizes.push_back(batch[p].canonical);
    for (size_t q = 0; q < batch.size(); ++q) {
      if (q != p && (batch[p].actual == batch[q].actual) != (batch[p].canonical == batch[q].canonical)) {
        return std::nullopt;
      }
    }
  }
  const auto isBatchSize = [&](int64_t size) { return std::find(sizes.begin(), sizes.end(), size) != sizes.end(); };
  std::vector<DeviceValue> changed = inputs;
  for (size_t i = 0; i < changed.size(); ++i) {
    auto* t = std::get_if<DeviceTensor>(&changed[i]);
    if (t == nullptr) {
      const std::optional<int64_t> value = sizeScalar(changed[i], i, launch_arguments);
      if (value && isBatchSize(*value)) return std::nullopt;
      continue;
    }
    const bool has_rows = t->sizes.size() > dim && t->sizes[dim] == extent;
    for (size_t d = has_rows ? dim : 0; d < t->sizes.size(); ++d) {
      if (isBatchSize(t->sizes[d]) || (t->sizes[d] == extent && !(has_rows && d == dim))) return std::nullopt;
    }
    if (!has_rows) continue;
    for (size_t p = 0; p < dim; ++p) {
      if (t->sizes[p] != batch[p].actual || (batch[p].folded && fixedBy(static_shapes, i, p))) return std::nullopt;
    }
    if (!mergedIntoDim(*t, dim)) return std::nullopt;
    const std::vector<int64_t> old_sizes = t->sizes;
    for (size_t p = 0; p < dim; ++p) t->sizes[p] = batch[p].canonical;
    followMergedStrides(*t, dim, old_sizes);
  }
  return changed;
}

}  // namespace

std::optional<FoldedBatch> foldedBatchOf(const std::vector<DeviceValue>& inputs,
                                         const std::vector<std::vector<int64_t>>& static_shapes,
                                         const std::vector<bool>& launch_arguments) {
  const std::optional<std::pair<int64_t, size_t>> found = rowExtentOf(inputs, static_shapes);
  if (!found || found->second == 0) return std::nullopt;
  const auto [extent, dim] = *found;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* t = std::get_if<DeviceTensor>(&inputs[i]);
    if (t == nullptr || t->sizes.size() <= dim || t->sizes[dim] != extent) continue;
    // The first input with the row extent there: its dims before it are under 128 or fixed.
    FoldedBatch folded;
    bool any = false;
    for (size_t p = 0; p < dim; ++p) {
      const int64_t size = t->sizes[p];
      const bool fold = size >= 2 && !fixedBy(static_shapes, i, p);
      folded.batch.push_back({fold ? static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(size))) : size, size,
                              fold});
      any = any || fold;
    }
    if (!any) return std::nullopt;
    std::optional<std::vector<DeviceValue>> changed =
        withBatch(inputs, static_shapes, extent, dim, folded.batch, launch_arguments);
    if (!changed) return std::nullopt;
    folded.inputs = std::move(*changed);
    return folded;
  }
  return std::nullopt;
}

int64_t CanonicalRows::canonicalRows() const {
  int64_t rows = canonical;
  for (const BatchDim& b : batch) rows *= b.canonical;
  return rows;
}

int64_t CanonicalRows::rows() const {
  int64_t rows = extent;
  for (const BatchDim& b : batch) rows *= b.actual;
  return rows;
}

std::optional<RowExtentInputs> withRowExtent(const std::vector<DeviceValue>& inputs,
                                             const std::vector<std::vector<int64_t>>& static_shapes, int64_t extent,
                                             int64_t to, const std::vector<bool>& launch_arguments) {
  RowExtentInputs changed{inputs, true};
  for (size_t i = 0; i < changed.inputs.size(); ++i) {
    auto* t = std::get_if<DeviceTensor>(&changed.inputs[i]);
    if (t == nullptr) {
      if (sizeScalar(changed.inputs[i], i, launch_arguments) == extent) return std::nullopt;
      continue;
    }
    std::optional<size_t> row_dim;
    for (size_t d = 0; d < t->sizes.size(); ++d) {
      if (t->sizes[d] != extent) continue;
      if (row_dim || fixedBy(static_shapes, i, d) || !mergedIntoDim(*t, d)) return std::nullopt;
      row_dim = d;
    }
    // The strides of the dims merged into the row dim follow its new extent; any other that equals the
    // extent would keep the old value.
    const size_t merged = row_dim.value_or(0);
    for (size_t d = merged; d < t->strides.size(); ++d) {
      if (t->strides[d] == extent || t->strides[d] == -extent) return std::nullopt;
    }
    if (!row_dim) continue;
    changed.leading_only = changed.leading_only && *row_dim == 0;
    const std::vector<int64_t> old_sizes = t->sizes;
    t->sizes[*row_dim] = to;
    followMergedStrides(*t, *row_dim, old_sizes);
  }
  // Equal extents stay equal and unequal ones unequal, strides row-major or not as they were.
  if (InputSignature::shapeClassOf(changed.inputs) != InputSignature::shapeClassOf(inputs)) return std::nullopt;
  return changed;
}

std::optional<CanonicalRows> canonicalRowsOf(const std::vector<DeviceValue>& inputs,
                                             const std::vector<std::vector<int64_t>>& static_shapes,
                                             const std::vector<bool>& launch_arguments) {
  std::optional<FoldedBatch> folded = foldedBatchOf(inputs, static_shapes, launch_arguments);
  const std::vector<DeviceValue>& batched = folded ? folded->inputs : inputs;
  const std::optional<std::pair<int64_t, size_t>> found = rowExtentOf(batched, static_shapes);
  if (!found) return std::nullopt;
  const auto [extent, dim] = *found;
  const int64_t canonical = largestOfShapeClass(extent);
  std::optional<RowExtentInputs> changed = withRowExtent(batched, static_shapes, extent, canonical, launch_arguments);
  if (!changed) return std::nullopt;
  CanonicalRows rows{std::move(changed->inputs), extent, canonical, dim, changed->leading_only, {}};
  if (folded) rows.batch = std::move(folded->batch);
  return rows;
}

size_t CanonicalKernelCache::KeyHash::operator()(const Key& k) const {
  return k.inputs.hash() ^ (std::hash<std::string>()(k.heuristics) << 1) ^ static_cast<size_t>(k.segment) * 31 ^
         static_cast<size_t>(k.device) * 1009;
}

namespace {

template <typename Map>
typename Map::mapped_type findIn(const Map& map, const CanonicalKernelCache::Key& key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : it->second;
}

template <typename Map>
void keepIn(Map& map, CanonicalKernelCache::Key key, typename Map::mapped_type value, size_t at_most) {
  if (map.size() < at_most || map.count(key) != 0) map.insert_or_assign(std::move(key), std::move(value));
}

}  // namespace

std::shared_ptr<const CanonicalKernelCache::Segment> CanonicalKernelCache::findSegment(const Key& key) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return findIn(segments_, key);
}

std::shared_ptr<const CanonicalKernelCache::Kernels> CanonicalKernelCache::findKernels(const Key& key) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return findIn(kernels_, key);
}

void CanonicalKernelCache::keep(Key key, std::shared_ptr<const Segment> segment, size_t at_most) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  keepIn(segments_, std::move(key), std::move(segment), at_most);
}

void CanonicalKernelCache::keep(Key key, std::shared_ptr<const Kernels> kernels, size_t at_most) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  keepIn(kernels_, std::move(key), std::move(kernels), at_most);
}

bool CanonicalKernelCache::namesNoRowExtent(const std::vector<kernel::CodeDigest>& digests, bool batch_too) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return std::any_of(names_no_row_extent_.begin(), names_no_row_extent_.end(), [&](const NamesNoRowExtent& n) {
    return n.digests == digests && (n.batch_too || !batch_too);
  });
}

void CanonicalKernelCache::keepNamesNoRowExtent(std::vector<kernel::CodeDigest> digests, bool batch_too,
                                                size_t at_most) {
  if (namesNoRowExtent(digests, batch_too)) return;
  std::unique_lock<std::shared_mutex> lock(mutex_);
  if (names_no_row_extent_.size() < at_most) names_no_row_extent_.push_back({std::move(digests), batch_too});
}

CanonicalRowKernels::CanonicalRowKernels(CanonicalRows rows, const std::vector<bool>& launch_arguments,
                                         std::shared_ptr<const SegmentedFusion> segmentation, const DeviceInfo& device,
                                         int device_ordinal, CanonicalKernelCache& cache, bool remember, size_t at_most)
    : rows_(std::move(rows)),
      launch_arguments_(launch_arguments),
      signature_(InputSignature::of(rows_.inputs, launch_arguments)),
      segmentation_(std::move(segmentation)),
      device_(device),
      device_ordinal_(device_ordinal),
      cache_(cache),
      remember_(remember),
      at_most_(at_most) {}

std::optional<SegmentKernelSource::Given> CanonicalRowKernels::kernelsFor(const braze::Segment& segment,
                                                                           scheduler::SegmentLowering& lowering) {
  if (schedulerFor(*segment.scheduler).relaunch == nullptr) return std::nullopt;
  const auto ownSizes = [&](const std::string& why) {
    dumpAfter("reuse-kernels", [&] { return fmt::format("segment {}: lowered for its own sizes: {}", segment.id, why); });
    return std::nullopt;
  };
  CanonicalKernelCache::Key key{signature_, segment.id, "", device_ordinal_};
  std::shared_ptr<const CanonicalSegment> canonical = cache_.findSegment(key);
  if (canonical == nullptr || canonical->segmentation != segmentation_) {
    canonical = canonicalSegment(segment);
    if (remember_) cache_.keep(key, canonical, at_most_);
  }
  if (!canonical->why_none.empty()) return ownSizes(canonical->why_none);
  if (std::optional<std::string> why = moreThanRows(*canonical, lowering.context())) return ownSizes(*why);
  SegmentHeuristics heuristics = heuristicsHere(*canonical, lowering);
  if (heuristics.lowering->relaunch == nullptr) {
    return ownSizes(fmt::format("{} kernels have every size in their code", heuristics.lowering->name));
  }
  key.heuristics = heuristics.toString();
  std::shared_ptr<const CanonicalKernelCache::Kernels> kernels = cache_.findKernels(key);
  if (kernels == nullptr || kernels->segmentation != segmentation_) {
    kernels = lowerCanonical(segment, *canonical, heuristics);
    if (remember_) cache_.keep(std::move(key), kernels, at_most_);
  }
  std::variant<std::vector<kernel::Kernel>, std::string> launched =
      kernels->kernels.empty() ? std::variant<std::vector<kernel::Kernel>, std::string>(kernels->why_none)
                               : relaunched(*kernels, *canonical, lowering.context(), heuristics);
  if (const auto* why = std::get_if<std::string>(&launched)) return ownSizes(*why);
  if (verifiersEnabled()) {
    // The scaled heuristics are the segment's own: the same code, launched the same.
    const SegmentHeuristics own = lowering.heuristics();
    BRAZE_ASSERT(own.toString() == heuristics.toString(),
                 "segment {}: the canonical heuristics at {} rows are '{}', its own '{}'", segment.id, rows_.extent,
                 heuristics.toString(), own.toString());
    const auto with_own = relaunched(*kernels, *canonical, lowering.context(), own);
    BRAZE_ASSERT(std::holds_alternative<std::vector<kernel::Kernel>>(with_own) &&
                     sameLaunchValues(std::get<std::vector<kernel::Kernel>>(with_own),
                                      std::get<std::vector<kernel::Kernel>>(launched)),
                 "segment {}: the canonical heuristics at {} rows launch its kernels otherwise than its own",
                 segment.id, rows_.extent);
  }
  Given given{std::move(heuristics), std::move(std::get<std::vector<kernel::Kernel>>(launched)), kernels->digests,
              loweredFor()};
  dumpAfter("reuse-kernels", [&] {
    return fmt::format("segment {}: canonical kernels{}", segment.id,
                       given.lowered_for.empty() ? std::string(", these sizes' own") : ", " + given.lowered_for);
  });
  return given;
}

std::string CanonicalRowKernels::loweredFor() const {
  const bool batch_differs = std::any_of(rows_.batch.begin(), rows_.batch.end(),
                                         [](const BatchDim& b) { return b.canonical != b.actual; });
  // At the canonical sizes themselves, the kernels are these inputs' own: nothing to say.
  if (rows_.extent == rows_.canonical && !batch_differs) return "";
  if (rows_.leading_only) {
    return fmt::format("lowered for {} leading rows (the shape class's canonical row count), launched for {}",
                       rows_.canonical, rows_.extent);
  }
  if (!batch_differs) {
    return fmt::format("lowered for a row extent of {} in dim {} (the shape class's canonical one), launched for {}",
                       rows_.canonical, rows_.dim, rows_.extent);
  }
  std::vector<int64_t> canonical, actual;
  for (const BatchDim& b : rows_.batch) {
    canonical.push_back(b.canonical);
    actual.push_back(b.actual);
  }
  canonical.push_back(rows_.canonical);
  actual.push_back(rows_.extent);
  return fmt::format("lowered for rows {} in dims 0 to {} (the shape class's canonical sizes), launched for {}",
                     fmt::join(canonical, "x"), rows_.dim, fmt::join(actual, "x"));
}

SegmentHeuristics CanonicalRowKernels::heuristicsHere(const CanonicalSegment& canonical,
                                                      scheduler::SegmentLowering& lowering) const {
  const auto at_rows = canonical.lowered_at.lowering->heuristics_at_rows;
  const std::optional<std::pair<int64_t, int64_t>> scaling = rowScaling(canonical, lowering.context());
  std::optional<SegmentHeuristics> scaled = at_rows == nullptr || !scaling
                                                ? std::nullopt
                                                : at_rows(device_, canonical.lowered_at, scaling->first, scaling->second);
  return scaled ? std::move(*scaled) : lowering.heuristics();
}

std::optional<std::pair<int64_t, int64_t>> CanonicalRowKernels::rowScaling(
    const CanonicalSegment& canonical, const scheduler::LoweringContext& actual) const {
  // A segment's rows need not hold every row dim (a sum over the batch leaves rows of seq alone): its
  // tensors say by what factor its sizes scale, one factor for all of them or none.
  std::optional<std::pair<int64_t, int64_t>> scaling;
  for (const auto& [val, sizes] : canonical.sizes) {
    const std::vector<int64_t>& own = actual.bound.sizesOf(val);
    int64_t from = 1, to = 1;
    for (const int64_t size : sizes) from *= size;
    for (const int64_t size : own) to *= size;
    if (from == to) continue;
    if (from == 0 || to == 0) return std::nullopt;
    const int64_t common = std::gcd(from, to);
    const std::pair<int64_t, int64_t> here{from / common, to / common};
    if (scaling && *scaling != here) return std::nullopt;
    scaling = here;
  }
  return scaling.value_or(std::pair<int64_t, int64_t>{1, 1});
}

std::variant<std::vector<kernel::Kernel>, std::string> CanonicalRowKernels::relaunched(
    const CanonicalKernelCache::Kernels& lowered, const CanonicalSegment& canonical,
    const scheduler::LoweringContext& actual, const SegmentHeuristics& heuristics) const {
  // Where the canonical sizes need 64-bit indices and these do not, or the reverse, these get their own.
  if (lowered.kernels.front().index64 != actual.kernel.index64) return std::string("its index width differs");
  std::vector<kernel::Kernel> kernels = lowered.kernels;
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
  if (!heuristics.lowering->relaunch(canonical.lowered_at, heuristics, kernels)) {
    return moreThanTheRowCount(heuristics, canonical);
  }
  return kernels;
}

const std::optional<SegmentedFusion>& CanonicalRowKernels::canonicalPlan() {
  if (!canonical_plan_) canonical_plan_ = reusedAt(*segmentation_, rows_.inputs);
  return *canonical_plan_;
}

const braze::Segment* CanonicalRowKernels::canonicalSegmentOf(const braze::Segment& segment) {
  return canonicalPlan() ? sameSegmentIn(*canonicalPlan(), segment) : nullptr;
}

std::shared_ptr<const CanonicalKernelCache::Segment> CanonicalRowKernels::canonicalSegment(
    const braze::Segment& segment) {
  auto canonical = std::make_shared<CanonicalSegment>();
  canonical->segmentation = segmentation_;
  const braze::Segment* same = canonicalSegmentOf(segment);
  if (same == nullptr) {
    canonical->why_none = canonicalPlan() ? "the segment is another at the canonical row count"
                                          : "the class's segmentation does not hold at the canonical row count";
    return canonical;
  }
  const SegmentedFusion& plan = *canonicalPlan();
  const scheduler::SegmentToLower to_lower = segmentToLower(plan, *same);  // the lowering refers to it
  scheduler::SegmentLowering lowering(to_lower, device_);
  if (std::optional<std::string> refused = lowering.refusal()) {
    canonical->why_none = *refused;
    return canonical;
  }
  canonical->lowered_at = lowering.heuristics();
  const auto keepSizes = [&](const Val* v) {
    if (v->isTensor()) canonical->sizes.emplace_back(v, plan.bound.sizesOf(v));
  };
  for (const Val* v : same->inputs) keepSizes(v);
  for (const Expr* e : same->exprs) {
    const OpCategory category = opInfo(e->kind()).category;
    if (category != OpCategory::Reduction && category != OpCategory::Normalization && !e->outputs().empty() &&
        e->output(0)->isTensor()) {
      canonical->ops_besides_reductions.push_back(e);
    }
    for (const Val* v : e->outputs()) keepSizes(v);
    for (const Val* v : e->inputs()) {
      // A scalar the kernel reads as a launch argument (a cast of a scalar input) is not in its code.
      if (!v->isTensor() && !v->isFusionInput() && plan.bound.hasScalar(v) &&
          scheduler::launchArgumentSource(v) == nullptr) {
        canonical->scalars.emplace_back(v, plan.bound.scalarOf(v));
      }
    }
  }
  return canonical;
}

std::shared_ptr<const CanonicalKernelCache::Kernels> CanonicalRowKernels::lowerCanonical(
    const braze::Segment& segment, const CanonicalSegment& canonical, const SegmentHeuristics& heuristics) {
  auto entry = std::make_shared<CanonicalKernelCache::Kernels>();
  entry->segmentation = segmentation_;
  const braze::Segment* same = canonicalSegmentOf(segment);
  BRAZE_ASSERT(same != nullptr, "segment {} had a canonical segment and has none now", segment.id);
  const scheduler::SegmentToLower to_lower = segmentToLower(*canonicalPlan(), *same);
  scheduler::SegmentLowering lowering(to_lower, device_);
  std::vector<kernel::Kernel> kernels = lowering.lowerAll(heuristics);
  std::vector<kernel::Kernel> relaunched = kernels;
  if (!heuristics.lowering->relaunch(canonical.lowered_at, heuristics, relaunched)) {
    entry->why_none = moreThanTheRowCount(heuristics, canonical);
    return entry;
  }
  // The relaunch gives back every launch value this lowering gave, or it does not know them all.
  if (!sameLaunchValues(relaunched, kernels)) {
    BRAZE_ASSERT(!verifiersEnabled(), "segment {}: the relaunch of {} gives other launch values than its lowering",
                 segment.id, heuristics.lowering->name);
    entry->why_none = "its relaunch does not give the launch values its lowering does";
    return entry;
  }
  for (const kernel::Kernel& k : kernels) entry->digests.push_back(kernel::codeDigest(k));
  // A row kernel's code may name the row extent even where it leads every tensor: the boundary of a
  // concatenation along the rows, the bound an index into a [rows, ...] table is checked against, an
  // output's stride in a column-major order. It is relaunched only where lowering at another extent of
  // the class (and another batch of its powers) gives the same code. Where the class has no other inputs,
  // the code is not taken as shown by another class either: what a signature runs does not depend on
  // which classes ran before it.
  std::optional<std::string> why;
  const bool batch_too = !rows_.batch.empty();
  if (!otherInputs()) {
    why = fmt::format("its code may name the row extent (dim {} of the first tensor): the shape class has no "
                      "other inputs to lower it at (its first other extents{} equal other sizes)", rows_.dim,
                      rows_.batch.empty() ? "" : " or batches");
  } else if (!cache_.namesNoRowExtent(entry->digests, batch_too)) {
    why = codeAtOtherInputs(segment, heuristics, entry->digests);
    if (!why && remember_) cache_.keepNamesNoRowExtent(entry->digests, batch_too, at_most_);
  }
  if (why) {
    entry->why_none = std::move(*why);
    entry->digests.clear();
    return entry;
  }
  entry->kernels = std::move(kernels);
  return entry;
}

const std::optional<std::vector<DeviceValue>>& CanonicalRowKernels::otherInputs() {
  if (other_inputs_) return *other_inputs_;
  other_inputs_.emplace();
  // A few first values of each: enough where another size happens to equal one, few enough to stay cheap.
  constexpr int64_t kExtentsTried = 8, kBatchesTried = 4;
  for (int64_t k = 0; k < kExtentsTried; ++k) {
    const std::optional<int64_t> other = nthOfShapeClass(rows_.canonical, k);
    if (!other) break;
    if (*other == rows_.canonical) continue;
    std::optional<RowExtentInputs> inputs =
        withRowExtent(rows_.inputs, {}, rows_.canonical, *other, launch_arguments_);
    if (!inputs) continue;
    if (rows_.batch.empty()) {
      *other_inputs_ = std::move(inputs->inputs);
      return *other_inputs_;
    }
    // Another batch of each folded dim's power of two: canonical + j, below twice the canonical (withBatch
    // makes each dim's `actual` size, here the canonical one, its `canonical` one, here canonical + j).
    for (int64_t j = 1; j <= kBatchesTried; ++j) {
      std::vector<BatchDim> another;
      bool in_power = true;
      for (const BatchDim& b : rows_.batch) {
        in_power = in_power && (!b.folded || b.canonical + j < 2 * b.canonical);
        another.push_back({b.folded ? b.canonical + j : b.canonical, b.canonical, b.folded});
      }
      if (!in_power) break;
      std::optional<std::vector<DeviceValue>> batched =
          withBatch(inputs->inputs, {}, *other, rows_.dim, another, launch_arguments_);
      if (batched) {
        *other_inputs_ = std::move(*batched);
        return *other_inputs_;
      }
    }
  }
  return *other_inputs_;
}

std::optional<std::string> CanonicalRowKernels::codeAtOtherInputs(const braze::Segment& segment,
                                                                  const SegmentHeuristics& heuristics,
                                                                  const std::vector<kernel::CodeDigest>& digests) {
  const auto mayNameIt = [&](const std::string& why) {
    return fmt::format("its code may name the row extent (dim {} of the first tensor){}: {}", rows_.dim,
                       rows_.batch.empty() ? "" : " or the batch", why);
  };
  const std::optional<SegmentedFusion> plan = reusedAt(*segmentation_, *otherInputs());
  const braze::Segment* same = plan ? sameSegmentIn(*plan, segment) : nullptr;
  if (same == nullptr) return mayNameIt("the segment is another at other sizes of the class");
  const scheduler::SegmentToLower to_lower = segmentToLower(*plan, *same);
  scheduler::SegmentLowering lowering(to_lower, device_);
  const std::vector<kernel::Kernel> kernels = lowering.lowerAll(heuristics);
  bool same_code = kernels.size() == digests.size();
  for (size_t k = 0; same_code && k < kernels.size(); ++k) same_code = kernel::codeDigest(kernels[k]) == digests[k];
  if (!same_code) return mayNameIt("lowered at other sizes of the class, it differs");
  return std::nullopt;
}

std::optional<std::string> CanonicalRowKernels::moreThanRows(const CanonicalSegment& canonical,
                                                              const scheduler::LoweringContext& actual) const {
  // What a dim that differs may be: k times the row extent at the canonical sizes and k times it here, or
  // the same of a folded batch dim or of the rows.
  std::vector<std::pair<int64_t, int64_t>> scalings{{rows_.canonical, rows_.extent}};
  for (const BatchDim& b : rows_.batch) {
    if (b.folded) scalings.emplace_back(b.canonical, b.actual);
  }
  if (!rows_.batch.empty()) scalings.emplace_back(rows_.canonicalRows(), rows_.rows());
  const auto scaled = [&](int64_t at_canonical, int64_t here) {
    return std::any_of(scalings.begin(), scalings.end(), [&](const std::pair<int64_t, int64_t>& s) {
      return at_canonical % s.first == 0 && here == at_canonical / s.first * s.second;
    });
  };
  std::vector<const Val*> changed;
  for (const auto& [val, sizes] : canonical.sizes) {
    const std::vector<int64_t>& own = actual.bound.sizesOf(val);
    if (own != sizes) changed.push_back(val);
    bool same = own.size() == sizes.size();
    for (size_t d = 0; same && d < own.size(); ++d) {
      if (own[d] == sizes[d]) continue;
      // Where only leading dims have the row extent, the leading one alone; the code was lowered at two
      // extents and found the same.
      same = rows_.leading_only ? d == 0 && scaled(sizes[d], own[d]) : scaled(sizes[d], own[d]);
    }
    if (!same) {
      return fmt::format("{} is {} here and {} at the canonical row count", val->name(), fmt::join(own, "x"),
                         fmt::join(sizes, "x"));
    }
  }
  const auto changes = [&](const Val* v) { return std::find(changed.begin(), changed.end(), v) != changed.end(); };
  for (const Expr* e : canonical.ops_besides_reductions) {
    if (changes(e->output(0))) continue;
    for (const Val* in : e->inputs()) {
      if (in->isTensor() && changes(in)) {
        return fmt::format("{} of {} cuts the rows: {} changes with them, {} does not", e->name(), in->name(),
                           in->name(), e->output(0)->name());
      }
    }
  }
  for (const auto& [val, value] : canonical.scalars) {
    if (!actual.bound.hasScalar(val) || !(actual.bound.scalarOf(val) == value)) {
      return fmt::format("scalar {} differs at the canonical row count", val->name());
    }
  }
  return std::nullopt;
}

}  // namespace braze::exec
