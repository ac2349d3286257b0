// The execute path of one fusion, on any device (a GPU through its driver, CUDA or HIP, or the simulated device for
// host inputs and the tests): input signature -> prepared plan, thread-safe. The first call with a
// signature plans, lowers and loads (on a GPU, NVRTC through the kernel caches); every later call
// computes the signature, finds the plan under a shared lock and runs it. Signatures hold exact sizes,
// but kernels leave their row or element counts to launch arguments: a new batch size or sequence
// length is planned again (a few hundred microseconds; its shape class's segmentation kept where it
// holds, segmenter/reuse_segments.h) and usually lowers to kernels this cache has loaded already, which
// it then runs without emitting or compiling them (known by their code digest).
//
// Checked on a miss only (a hit has the signature of inputs that passed): the inputs' count, kinds,
// dtypes and ranks against the definition (explain's own checks), and that every tensor is on one
// device. Errors name the input and what was expected.
#pragma once

#include "exec/canonical_rows.h"
#include "exec/input_signature.h"
#include "exec/prepared_plan.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace braze::exec {

using namespace device;  // exec runs plans through the device layer: its names are exec's vocabulary

// What running these inputs would cost, and why (explain's answer).
enum class CacheLookup : uint8_t {
  Hit,        // a prepared plan has this input signature: it runs at once
  NewLaunch,  // a new signature whose kernels are all compiled already: planned, then launched with new
              // arguments (grid, row counts, scalars), no compile
  NewKernel,  // at least one kernel source not compiled for this fusion yet: NVRTC (or the disk cache)
};
std::string_view toString(CacheLookup lookup);

struct CacheExplanation {
  CacheLookup lookup = CacheLookup::Hit;
  std::string why;
  SegmentedFusion plan;  // what would run: segments, heuristics (launchSummary) and bookending
};

class FusionCache {
 public:
  // `ops`: how kernels are loaded and launched (the driver unless given: host inputs and the tests pass
  // the simulated device, the host benchmarks a no-op); `device`: what to plan for (the driver's description of the inputs' GPU unless given).
  // `platform`: whose GPUs the inputs are on when `ops` is not given: NVIDIA's (the CUDA driver, NVRTC) or
  // AMD's (the HIP runtime, hiprtc).
  explicit FusionCache(std::shared_ptr<const Fusion> fusion, PlanOptions options = {}, DeviceOps* ops = nullptr,
                       std::optional<DeviceInfo> device = std::nullopt, GpuVendor platform = GpuVendor::Nvidia);

  // Runs the fusion on the inputs' device, on `stream` (nullptr: the legacy default stream); with
  // `wait`, returns only once the outputs are written (for consumers that ignore the stream). With an
  // allocator, outputs that are buffers of their own are written into its memory (torch's caching
  // allocator, so that torch accounts for them and a CUDA graph capture records them in its pool).
  std::vector<DeviceOutput> run(const std::vector<DeviceValue>& inputs, StreamHandle stream = nullptr, bool wait = false,
                                const OutputAllocator* allocator = nullptr);
  // run() when the plan for these inputs is prepared already, its outputs written over `outputs` (whose
  // vectors a caller running again and again reuses); false, having done nothing, otherwise: a caller
  // that holds a lock planning should not keep (Python's GIL) then calls run() without it.
  bool runIfPrepared(const std::vector<DeviceValue>& inputs, std::vector<DeviceOutput>& outputs,
                     StreamHandle stream = nullptr, bool wait = false, const OutputAllocator* allocator = nullptr);
  // The plan for these inputs, prepared if it was not.
  std::shared_ptr<const PreparedPlan> prepare(const std::vector<DeviceValue>& inputs);
  // Whether these inputs hit a prepared plan, need only new launch arguments, or a new kernel, and
  // why; plans them to find out (no compile, no load) but keeps nothing.
  CacheExplanation explain(const std::vector<DeviceValue>& inputs);
  size_t size() const;
  size_t outputCount() const { return fusion_->outputs().size(); }
  size_t inputCount() const { return fusion_->inputs().size(); }
  // The device the cache was made for (null: the driver's GPU of the inputs).
  DeviceOps* deviceOps() const { return ops_; }
  GpuVendor platform() const { return platform_; }
  // Loads and launches nothing (NoOpDeviceOps): a host benchmark or a test of the bindings.
  bool launchesNothing() const { return dynamic_cast<const NoOpDeviceOps*>(ops_) != nullptr; }
  // The GPU that runs whose inputs name none go to (only numbers and CPU scalars: a fusion of full, iota
  // or random ops, run with device=n); 0 unless set, before the first run.
  void setTensorlessDevice(int device) { tensorless_device_ = device; }
  // Whether input i is a CPU scalar (a 0-d define_tensor(is_cpu=True)): a host tensor next to the GPU's,
  // passed to kernels by value (DeviceTensor::device -1).
  bool cpuScalarInput(size_t i) const { return i < cpu_scalar_inputs_.size() && cpu_scalar_inputs_[i]; }
  // Prepared plans kept at most: past it, the least recently run is dropped (a later run of its
  // signature plans again, which costs a few hundred microseconds when its kernels are compiled).
  // A plan holds about 25 KiB of heap for a one-kernel layer_norm.
  static constexpr size_t kMaxPlans = 256;
  // Distinct kernels (source, options, device) this cache has loaded, dropped plans' included: shapes
  // that share a kernel count once.
  size_t kernelCount() const;
  // After this many distinct kernels the cache warns once (stderr) that new shapes keep compiling.
  static constexpr size_t kManyKernels = 16;
  // The kernel sources of the plan the last run used, in `dialect` (empty before the first run).
  std::vector<std::string> lastSourceCode(codegen::SourceDialect dialect) const;
  // The plan the last run used (null before the first run).
  std::shared_ptr<const PreparedPlan> lastPlan() const;
  // Plans of several kernels launch them as one CUDA graph (PreparedPlan::run's `as_graph`): one
  // launch call instead of one per kernel. Off unless BRAZE_CUDA_GRAPHS=1 was set when the cache was made.
  void useCudaGraphs(bool on) { cuda_graphs_.store(on, std::memory_order_relaxed); }
  bool usesCudaGraphs() const { return cuda_graphs_.load(std::memory_order_relaxed); }

 private:
  void runPlan(const std::shared_ptr<const PreparedPlan>& plan, const std::vector<DeviceValue>& inputs,
               std::vector<DeviceOutput>& outputs, StreamHandle stream, bool wait, const OutputAllocator* allocator);
  std::shared_ptr<const PreparedPlan> find(const InputSignature& signature);
  std::shared_ptr<const PreparedPlan> prepareMiss(const std::vector<DeviceValue>& inputs,
                                                  const InputSignature& signature);
  struct Entry;
  // Steps bind .. lower for these inputs: their shape class's segmentation where it holds for them
  // (segmenter/reuse_segments.h), else planned afresh. A class's segmentation is planned for its
  // representative inputs (InputSignature::representativeOf), never for whichever signature of it came
  // first, so a signature's plan does not depend on what ran before it; with `remember` it is kept. A
  // batch before the row extent counts in the class by its power of two (exec/canonical_rows.h's
  // foldedBatchOf).
  // BRAZE_DUMP=after:reuse-segments says why a class's segmentation did not hold.
  LoweredPlan planFor(const std::vector<DeviceValue>& inputs, const DeviceInfo& info, int device, bool remember);
  // Steps heuristics and lower for `plan`, the class's `segmentation` bound to these inputs: the row
  // kernels lowered for the class's canonical row count where they can be (exec/canonical_rows.h).
  LoweredPlan lowerClassPlan(SegmentedFusion plan, const std::shared_ptr<const SegmentedFusion>& segmentation,
                             const std::vector<DeviceValue>& inputs, const DeviceInfo& info, int device, bool remember);
  // The segmentation of a shape class: planned for its representative inputs; null when it has none or
  // they are refused (sizes the definition fixes).
  std::shared_ptr<const SegmentedFusion> classSegmentation(
      const std::optional<std::vector<DeviceValue>>& representative) const;
  void keepSegmentation(const InputSignature& shape_class, std::shared_ptr<const SegmentedFusion> plan);
  // Removes the least recently run plan (with the unique lock held); the caller destroys it after unlocking.
  std::shared_ptr<const PreparedPlan> evictLeastRecentlyUsed();
  DeviceInfo deviceInfo(int device) const;
  DeviceOps& opsFor(int device);
  int deviceOf(const std::vector<DeviceValue>& inputs) const;

  std::shared_ptr<const Fusion> fusion_;
  std::vector<bool> launch_arguments_;  // scalar inputs whose values are not in the signature
  std::vector<size_t> bool_arguments_;  // the Bool ones among them: their values are checked on every run
  std::vector<bool> cpu_scalar_inputs_;
  std::vector<std::vector<int64_t>> static_shapes_;  // per input, the extents its definition fixes (-1: open)
  int tensorless_device_ = 0;
  PlanOptions options_;
  DeviceOps* ops_;
  std::optional<DeviceInfo> device_;
  GpuVendor platform_;
  mutable std::shared_mutex mutex_;
  struct Entry {
    std::shared_ptr<const PreparedPlan> plan;  // shared: a run in flight keeps an evicted plan alive
    size_t slot = 0;                           // its stamp in last_use_
  };
  std::unordered_map<InputSignature, Entry, InputSignature::Hash> plans_;
  // Per slot (one per plan kept, and the one being added), when its plan last ran (stamped on every hit,
  // relaxed) and whose it is: the eviction scans these few KiB, not the map's nodes.
  static constexpr size_t kSlots = kMaxPlans + 1;
  std::array<std::atomic<uint64_t>, kSlots> last_use_{};
  std::array<const InputSignature*, kSlots> slot_owner_{};  // null: free
  std::vector<size_t> free_slots_;
  std::atomic<uint64_t> clock_{0};
  // Per shape class (InputSignature::shapeClassOf), its segmentation (before lowering), or null where it
  // has none: kept for as many classes as plans (kMaxPlans), the first ones.
  std::unordered_map<InputSignature, std::shared_ptr<const SegmentedFusion>, InputSignature::Hash> segmentations_;
  CanonicalKernelCache canonical_kernels_;
  // Every kernel this cache has loaded, dropped plans' included: a new signature whose kernels are all
  // here runs their functions, neither emitted nor compiled again.
  struct KernelKey {
    kernel::CodeDigest digest;
    int device = 0;
    bool operator==(const KernelKey&) const = default;
  };
  struct KernelKeyHash {
    size_t operator()(const KernelKey& k) const {
      return k.digest.low ^ (k.digest.high << 1) ^ static_cast<size_t>(k.device);
    }
  };
  struct KnownKernel {
    KernelHandle function = nullptr;
    std::string summary;  // the heuristics', for explain
  };
  std::unordered_map<KernelKey, KnownKernel, KernelKeyHash> kernels_;
  // The loaded function of every kernel `plan` launches, where this cache knows them all.
  std::optional<std::vector<std::optional<LoadedKernel>>> knownKernels(const LoweredPlan& plan, int device) const;
  // The plan of the last run, for lastSourceCode: compared by address on every run, replaced (under
  // last_mutex_) only when it changes.
  std::atomic<const PreparedPlan*> last_address_{nullptr};
  mutable std::mutex last_mutex_;
  std::shared_ptr<const PreparedPlan> last_;
  std::array<std::atomic<DeviceOps*>, 16> device_ops_{};
  std::atomic<bool> cuda_graphs_{false};
};

}  // namespace braze::exec
