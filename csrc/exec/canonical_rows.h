// Another batch size lowers no kernel: a FusionCache lowers the kernels of row schedulers (inner
// reductions, inner-outer) once per shape class and heuristics, for inputs whose leading extent (the row
// count's) is the class's largest value of its power of two and divisor, and gives them each signature's
// tensor layouts, heuristics (the canonical inputs' with the row count scaled) and launch values
// (SchedulerEntry::heuristics_at_rows and relaunch). Every signature of the class runs that
// canonical kernel, the first one included, so what a signature runs does not depend on which ran
// before it, and the tests of any size exercise the same path. The row kernels read the row count as a
// launch argument (row_launch.h), and their code is relaunched only where lowering it at another extent
// of the class gives the same code; each use checks that the segment's sizes differ from the
// canonical ones only in the row dims (the leading one, or the row extent and a batch before it, each by
// its own factor), and that its scalars are equal.
#pragma once

#include "exec/input_signature.h"
#include "exec/segment_kernel_source.h"
#include "scheduler/scheduler.h"

#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace braze::exec {

// A dim before the row extent ([batch, seq, hidden]'s batch), by its size in the canonical inputs and in
// the inputs; `folded`: known to the shape class by its power of two (a size of 2 or more, not fixed).
struct BatchDim {
  int64_t canonical = 0;
  int64_t actual = 0;
  bool folded = false;
};

// The inputs with their row count made canonical: every input tensor dim of `extent` (the first open
// extent of 128 or more among the inputs' dims that is not a tensor's innermost: [rows, hidden]'s rows,
// [8, seq, hidden]'s seq) is `canonical` instead, the largest extent of the same shape-class word.
struct CanonicalRows {
  std::vector<DeviceValue> inputs;
  int64_t extent = 0;
  int64_t canonical = 0;
  size_t dim = 0;  // where the first tensor has it
  // Every tensor has it as its leading dim. Otherwise dims before it are merged with it in every input
  // (their strides follow). Either way the code's independence of it is checked by lowering at a second
  // extent of the class.
  bool leading_only = true;
  // The dims before the row extent, where the shape class knows them by their power of two (a batch):
  // their canonical sizes (see foldedBatchOf) and the inputs' own. Empty where they are exact.
  std::vector<BatchDim> batch;
  // The rows the canonical inputs and these have in dims [0, dim].
  int64_t canonicalRows() const;
  int64_t rows() const;
};
// None where no input has such an extent, or where it also stands elsewhere (another dim of a tensor, a
// stride that does not follow it, an integer scalar: changing the row dims alone would not change the one
// size), or where the canonical inputs are of another shape class.
// `launch_arguments[i]`: input i is a scalar whose value only launches kernels (InputSignature::of), which
// may equal any size.
std::optional<CanonicalRows> canonicalRowsOf(const std::vector<DeviceValue>& inputs,
                                             const std::vector<std::vector<int64_t>>& static_shapes,
                                             const std::vector<bool>& launch_arguments = {});

// Inputs whose row extent follows small dims merged into it in every input that has it ([batch, seq,
// hidden], the batch under 128) with each of those dims of size 2 or more made the smallest of its power
// of two (4 to 7 are 4) and their strides following: what FusionCache takes the shape class of, so that a
// new batch size of a known power of two is a known class, whose segmentation and row kernels it keeps
// (their code names only the merged rows: canonicalRowsOf's inputs have these sizes, and the code is
// lowered at another batch of the power too). None where a batch size, or what it becomes, is also another
// size (another dim, an integer scalar), where equal batch sizes would become unequal or the reverse, where
// an input has the row extent in another dim, or where no dim before it has a size of 2 or more.
struct FoldedBatch {
  std::vector<DeviceValue> inputs;
  std::vector<BatchDim> batch;  // per dim before the row extent
};
std::optional<FoldedBatch> foldedBatchOf(const std::vector<DeviceValue>& inputs,
                                         const std::vector<std::vector<int64_t>>& static_shapes,
                                         const std::vector<bool>& launch_arguments = {});

// `inputs` with every tensor dim of `extent` made `to`, and the strides of the dims merged into it
// following (canonicalRowsOf's rules), or none where they refuse.
struct RowExtentInputs {
  std::vector<DeviceValue> inputs;
  bool leading_only = true;
};
std::optional<RowExtentInputs> withRowExtent(const std::vector<DeviceValue>& inputs,
                                             const std::vector<std::vector<int64_t>>& static_shapes, int64_t extent,
                                             int64_t to, const std::vector<bool>& launch_arguments = {});

// What a FusionCache keeps of its classes' canonical inputs, kept for the cache's life (at most
// FusionCache::kMaxPlans of each kind): per (their signature, segment, device), the segment there; per
// heuristics too, the kernels lowered there with them.
class CanonicalKernelCache {
 public:
  // One segment of the class's segmentation at the canonical inputs.
  struct Segment {
    std::shared_ptr<const SegmentedFusion> segmentation;  // the class's, whose vals the kernels name
    std::string why_none;          // non-empty: its kernels are not reused, for this reason
    SegmentHeuristics lowered_at;  // its heuristics there, from which another row count's follow
    std::vector<std::pair<const Val*, std::vector<int64_t>>> sizes;  // its tensors' sizes there
    std::vector<std::pair<const Val*, ScalarValue>> scalars;         // and the scalars it reads
    // Its ops other than reductions that make a tensor: where one's operand changes with the rows and
    // its result does not (x[:150] of [rows, 8]), the rows its kernels count are not the row extent.
    std::vector<const Expr*> ops_besides_reductions;
  };
  // The segment's kernels lowered at the canonical inputs with one row count's heuristics.
  struct Kernels {
    std::shared_ptr<const SegmentedFusion> segmentation;
    std::vector<kernel::Kernel> kernels;  // the segment's, then its follow-ups; empty: none to reuse
    std::vector<kernel::CodeDigest> digests;  // theirs, which relaunching leaves as they are
    std::string why_none;                 // when empty
  };
  struct Key {
    InputSignature inputs;
    int64_t segment = 0;
    std::string heuristics;  // empty for a Segment
    int device = 0;
    bool operator==(const Key&) const = default;
  };
  std::shared_ptr<const Segment> findSegment(const Key& key) const;
  std::shared_ptr<const Kernels> findKernels(const Key& key) const;
  void keep(Key key, std::shared_ptr<const Segment> segment, size_t at_most);
  void keep(Key key, std::shared_ptr<const Kernels> kernels, size_t at_most);
  // Code shown not to name the row extent (lowered at two extents of a class, the same), and with
  // `batch_too` not to name a folded batch either (lowered at two batches too): digests are of the source,
  // so the same kernels lowered for another class are that code too.
  bool namesNoRowExtent(const std::vector<kernel::CodeDigest>& digests, bool batch_too) const;
  void keepNamesNoRowExtent(std::vector<kernel::CodeDigest> digests, bool batch_too, size_t at_most);

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  template <typename T>
  using Map = std::unordered_map<Key, std::shared_ptr<const T>, KeyHash>;
  mutable std::shared_mutex mutex_;
  Map<Segment> segments_;
  Map<Kernels> kernels_;
  struct NamesNoRowExtent {
    std::vector<kernel::CodeDigest> digests;
    bool batch_too = false;
  };
  std::vector<NamesNoRowExtent> names_no_row_extent_;
};

// lowerPlan's kernel source for one signature whose plan is its class's segmentation (`segmentation`,
// bound to the signature's inputs), over `cache`. A row kernel's heuristics there are those of the
// canonical inputs with the row count scaled (SchedulerEntry::heuristics_at_rows): the segment is not
// read again for them.
class CanonicalRowKernels : public SegmentKernelSource {
 public:
  // `launch_arguments`: the scalar inputs whose values are not in a signature (FusionCache's).
  CanonicalRowKernels(CanonicalRows rows, const std::vector<bool>& launch_arguments,
                      std::shared_ptr<const SegmentedFusion> segmentation, const DeviceInfo& device, int device_ordinal,
                      CanonicalKernelCache& cache, bool remember, size_t at_most);
  std::optional<Given> kernelsFor(const braze::Segment& segment, scheduler::SegmentLowering& lowering) override;

 private:
  using CanonicalSegment = CanonicalKernelCache::Segment;
  // The class's segmentation bound to the canonical inputs, or none where it does not hold there.
  const std::optional<SegmentedFusion>& canonicalPlan();
  // The canonical plan's segment of `segment`'s id, if it is the same segment.
  const braze::Segment* canonicalSegmentOf(const braze::Segment& segment);
  std::shared_ptr<const CanonicalSegment> canonicalSegment(const braze::Segment& segment);
  // The segment lowered at the canonical inputs with `heuristics` (an entry without kernels where that
  // cannot be reused).
  std::shared_ptr<const CanonicalKernelCache::Kernels> lowerCanonical(const braze::Segment& segment,
                                                                      const CanonicalSegment& canonical,
                                                                      const SegmentHeuristics& heuristics);
  // Inputs of the class at another row extent (and, where the batch is folded, another batch of each
  // folded dim's power of two), the first such values that keep the class (equal no other size); none
  // where no few first ones do. Where not every input has the row extent leading, the code is lowered
  // there too, and must be the same: what shows that it names neither.
  const std::optional<std::vector<DeviceValue>>& otherInputs();
  // Why the segment's code, lowered with `heuristics` at otherInputs(), is not the code of `digests`
  // (lowered at the canonical inputs), or nothing.
  std::optional<std::string> codeAtOtherInputs(const braze::Segment& segment, const SegmentHeuristics& heuristics,
                                               const std::vector<kernel::CodeDigest>& digests);
  // Why the segment's sizes and scalars differ from those at the canonical inputs in more than the
  // row extent, or nothing.
  std::optional<std::string> moreThanRows(const CanonicalSegment& canonical,
                                          const scheduler::LoweringContext& actual) const;
  // What the plan says of the kernels given: the canonical sizes they were lowered for and those they are
  // launched for, or nothing where these are the canonical ones.
  std::string loweredFor() const;
  // The factor (from, to) by which every tensor of the segment whose element count differs at the
  // canonical inputs and here scales, or none where they scale by different factors.
  std::optional<std::pair<int64_t, int64_t>> rowScaling(const CanonicalSegment& canonical,
                                                        const scheduler::LoweringContext& actual) const;
  // The heuristics of the signature's segment: the canonical ones with the row count scaled by
  // rowScaling, or its own.
  SegmentHeuristics heuristicsHere(const CanonicalSegment& canonical, scheduler::SegmentLowering& lowering) const;
  // The kernels of `kernels` with the signature's tensor layouts and launch values, or why not.
  std::variant<std::vector<kernel::Kernel>, std::string> relaunched(const CanonicalKernelCache::Kernels& kernels,
                                                                    const CanonicalSegment& canonical,
                                                                    const scheduler::LoweringContext& actual,
                                                                    const SegmentHeuristics& heuristics) const;

  CanonicalRows rows_;
  std::vector<bool> launch_arguments_;
  InputSignature signature_;  // of the canonical inputs
  std::shared_ptr<const SegmentedFusion> segmentation_;
  std::optional<std::optional<SegmentedFusion>> canonical_plan_;  // bound to the canonical inputs, once needed
  std::optional<std::optional<std::vector<DeviceValue>>> other_inputs_;  // once needed
  const DeviceInfo& device_;
  int device_ordinal_;
  CanonicalKernelCache& cache_;
  bool remember_;
  size_t at_most_;
};

}  // namespace braze::exec
