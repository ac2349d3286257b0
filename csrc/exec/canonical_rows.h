// Another batch size lowers no kernel: a FusionCache lowers the kernels of row schedulers (inner
// reductions, inner-outer) once per shape class and heuristics, for inputs whose leading extent (the row
// count's) is the class's largest value of its power of two and divisor, and gives them each signature's
// tensor layouts and launch values (SchedulerEntry::relaunch). Every signature of the class runs that
// canonical kernel, the first one included, so what a signature runs does not depend on which ran
// before it, and the tests of any size exercise the same path. The row kernels read the row count only
// as a launch argument (row_launch.h); each use checks that the segment's sizes differ from the
// canonical ones only in their leading dims, by the same factor, and that its scalars are equal.
#pragma once

#include "exec/input_signature.h"
#include "exec/pipeline.h"
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

// The inputs with their row count made canonical: every input tensor that leads with `extent` (that of
// the first input tensor whose leading extent is 128 or more and left open by the definition) leads
// with `canonical` instead, the largest extent of the same shape-class word.
struct CanonicalRows {
  std::vector<DeviceValue> inputs;
  int64_t extent = 0;
  int64_t canonical = 0;
};
// None where no input leads with such an extent, or where it also stands elsewhere (a later dim, a
// stride, an integer scalar: changing the leading ones alone would not change the one size), or where the
// canonical inputs are of another shape class.
std::optional<CanonicalRows> canonicalRowsOf(const std::vector<DeviceValue>& inputs,
                                             const std::vector<std::vector<int64_t>>& static_shapes);

// The kernels lowered at canonical inputs, per (their signature, segment, heuristics, device), kept for
// the cache's life (at most FusionCache::kMaxPlans of them).
class CanonicalKernelCache {
 public:
  // What one segment's lowering at the canonical inputs made.
  struct Entry {
    std::shared_ptr<const SegmentedFusion> segmentation;  // the class's, whose vals the kernels name
    std::vector<kernel::Kernel> kernels;  // the segment's, then its follow-ups; empty: none to reuse
    std::vector<kernel::CodeDigest> digests;  // theirs, which relaunching leaves as they are
    std::string why_none;                 // when empty
    SegmentHeuristics lowered_at;         // the heuristics the canonical inputs themselves get
    std::vector<std::pair<const Val*, std::vector<int64_t>>> sizes;  // the segment's tensors there
    std::vector<std::pair<const Val*, ScalarValue>> scalars;         // and the scalars it reads
  };
  struct Key {
    InputSignature inputs;
    int64_t segment = 0;
    std::string heuristics;
    int device = 0;
    bool operator==(const Key&) const = default;
  };
  std::shared_ptr<const Entry> find(const Key& key) const;
  void keep(Key key, std::shared_ptr<const Entry> entry, size_t at_most);

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  mutable std::shared_mutex mutex_;
  std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash> entries_;
};

// lowerPlan's kernel source for one signature whose plan is its class's segmentation (`segmentation`,
// bound to the signature's inputs), over `cache`.
class CanonicalRowKernels : public SegmentKernelSource {
 public:
  // `launch_arguments`: the scalar inputs whose values are not in a signature (FusionCache's).
  CanonicalRowKernels(CanonicalRows rows, const std::vector<bool>& launch_arguments,
                      std::shared_ptr<const SegmentedFusion> segmentation, const DeviceInfo& device, int device_ordinal,
                      CanonicalKernelCache& cache, bool remember, size_t at_most);
  std::optional<Given> kernelsFor(const Segment& segment, const scheduler::LoweringContext& actual,
                                  const SegmentHeuristics& heuristics) override;

 private:
  // The segment lowered at the canonical inputs with `heuristics` (an entry without kernels where that
  // cannot be reused).
  std::shared_ptr<const CanonicalKernelCache::Entry> lowerCanonical(const Segment& segment,
                                                                    const SegmentHeuristics& heuristics);
  // Why `entry`'s sizes and scalars differ from the signature's (`actual`) in more than the leading row
  // count, or nothing.
  std::optional<std::string> moreThanRows(const CanonicalKernelCache::Entry& entry,
                                          const scheduler::LoweringContext& actual) const;
  // The kernels of `entry` with the signature's tensor layouts and launch values, or why not.
  std::variant<std::vector<kernel::Kernel>, std::string> relaunched(const CanonicalKernelCache::Entry& entry,
                                                                    const scheduler::LoweringContext& actual,
                                                                    const SegmentHeuristics& heuristics) const;

  CanonicalRows rows_;
  InputSignature signature_;  // of the canonical inputs
  std::shared_ptr<const SegmentedFusion> segmentation_;
  std::optional<std::optional<SegmentedFusion>> canonical_plan_;  // bound to the canonical inputs, once needed
  const DeviceInfo& device_;
  int device_ordinal_;
  CanonicalKernelCache& cache_;
  bool remember_;
  size_t at_most_;
};

}  // namespace braze::exec
