#include "exec/fusion_cache.h"

#include "scheduler/launch_arguments.h"
#include "device/cuda/query_device.h"
#include "device/hip/query_hip_device.h"

#include "support/error.h"
#include "support/thread_scratch.h"
#include "codegen/source_emitter.h"
#include "kernel/index_errors.h"
#include "reference/input_check.h"
#include "segmenter/reuse_segments.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>

namespace braze::exec {

FusionCache::FusionCache(std::shared_ptr<const Fusion> fusion, PlanOptions options, DeviceOps* ops,
                         std::optional<DeviceInfo> device, GpuVendor platform)
    : fusion_(std::move(fusion)), options_(options), ops_(ops), device_(std::move(device)), platform_(platform) {
  BRAZE_ASSERT(fusion_ != nullptr, "FusionCache of no fusion");
  for (size_t slot = kSlots; slot-- > 0;) free_slots_.push_back(slot);
  launch_arguments_ = scheduler::launchArgumentInputs(*fusion_);
  for (size_t i = 0; i < launch_arguments_.size(); ++i) {
    if (launch_arguments_[i] && isBool(fusion_->inputs()[i]->dtype())) bool_arguments_.push_back(i);
  }
  for (const Val* in : fusion_->inputs()) {
    cpu_scalar_inputs_.push_back(in->isTensor() && in->asTensor()->isCpu());
    static_shapes_.push_back(in->isTensor() ? in->asTensor()->staticShape() : std::vector<int64_t>{});
  }
  const char* graphs = std::getenv("BRAZE_CUDA_GRAPHS");
  cuda_graphs_ = graphs != nullptr && std::string_view(graphs) == "1";
}

std::shared_ptr<const PreparedPlan> FusionCache::find(const InputSignature& signature) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  auto it = plans_.find(signature);
  if (it == plans_.end()) return nullptr;
  last_use_[it->second.slot].store(clock_.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
  return it->second.plan;
}

std::vector<DeviceOutput> FusionCache::run(const std::vector<DeviceValue>& inputs, StreamHandle stream, bool wait,
                                           const OutputAllocator* allocator) {
  const InputSignature signature = InputSignature::of(inputs, launch_arguments_);
  std::shared_ptr<const PreparedPlan> plan = find(signature);
  if (!plan) plan = prepareMiss(inputs, signature);
  std::vector<DeviceOutput> outputs;
  runPlan(plan, inputs, outputs, stream, wait, allocator);
  return outputs;
}

bool FusionCache::runIfPrepared(const std::vector<DeviceValue>& inputs, std::vector<DeviceOutput>& outputs,
                                StreamHandle stream, bool wait, const OutputAllocator* allocator) {
  std::shared_ptr<const PreparedPlan> plan;
  {
    ThreadScratch<InputSignature> signature;  // its words' capacity kept from call to call
    signature.get().assign(inputs, launch_arguments_);
    plan = find(signature.get());
  }
  if (!plan) return false;
  runPlan(plan, inputs, outputs, stream, wait, allocator);
  return true;
}

void FusionCache::runPlan(const std::shared_ptr<const PreparedPlan>& plan, const std::vector<DeviceValue>& inputs,
                          std::vector<DeviceOutput>& outputs, StreamHandle stream, bool wait,
                          const OutputAllocator* allocator) {
  // A Bool launch argument's value is not in the signature, so not checked where a plan is made.
  for (size_t i : bool_arguments_) {
    if (const auto* v = std::get_if<ScalarValue>(&inputs[i])) checkBoolScalarInput(i, fusion_->inputs()[i], *v);
  }
  DeviceOps& ops = opsFor(deviceOf(inputs));
  DeviceScope scope(ops);
  // An index a kernel found out of range, in an earlier execute on this device: raised before this one runs.
  const IndexErrorRecord record = ops.indexErrorRecord();
  kernel::raiseRecordedIndexError(record.host);
  if (last_address_.load(std::memory_order_relaxed) != plan.get()) {
    std::lock_guard<std::mutex> lock(last_mutex_);
    last_ = plan;
    last_address_.store(plan.get(), std::memory_order_relaxed);
  }
  try {
    plan->run(inputs, outputs, stream, ops, allocator, cuda_graphs_.load(std::memory_order_relaxed));
    if (wait) ops.synchronize(stream);
  } catch (...) {
    if (wait) {
      // Drain what this run queued (its own errors are the first one's consequences). A kernel of this run
      // may have found an index out of range before the run failed otherwise (an integer division by
      // zero): that error is this execute's, as the reference raises it first, and is not left for the
      // next execute to raise.
      try {
        ops.synchronize(stream);
      } catch (...) {
      }
      kernel::raiseRecordedIndexError(record.host);
    }
    throw;
  }
  if (wait) kernel::raiseRecordedIndexError(record.host);  // this execute's own
}

std::shared_ptr<const PreparedPlan> FusionCache::prepare(const std::vector<DeviceValue>& inputs) {
  const InputSignature signature = InputSignature::of(inputs, launch_arguments_);
  if (std::shared_ptr<const PreparedPlan> plan = find(signature)) return plan;
  return prepareMiss(inputs, signature);
}

size_t FusionCache::size() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return plans_.size();
}

std::shared_ptr<const PreparedPlan> FusionCache::lastPlan() const {
  std::lock_guard<std::mutex> lock(last_mutex_);
  return last_;
}

std::vector<std::string> FusionCache::lastSourceCode(codegen::SourceDialect dialect) const {
  const std::shared_ptr<const PreparedPlan> plan = lastPlan();
  return plan == nullptr ? std::vector<std::string>{} : plan->sourceCode(dialect);
}

int FusionCache::deviceOf(const std::vector<DeviceValue>& inputs) const {
  int device = -1;
  size_t first = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* t = std::get_if<DeviceTensor>(&inputs[i]);
    if (t == nullptr || t->device < 0) continue;  // a CPU scalar, next to the GPU's tensors
    if (device < 0) {
      device = t->device;
      first = i;
    }
    BRAZE_CHECK(t->device == device, "input {} is on cuda:{} but input {} is on cuda:{}: all tensor inputs of a fusion "
                "must be on one GPU", i, t->device, first, device);
  }
  return device < 0 ? tensorless_device_ : device;
}

DeviceOps& FusionCache::opsFor(int device) {
  if (ops_ != nullptr) return *ops_;
  auto driver = [&]() -> DeviceOps& {
    return platform_ == GpuVendor::Amd ? hipDeviceOps(device) : cudaDeviceOps(device);
  };
  // Remembered per device: cudaDeviceOps() takes a global lock, which the cached path should not.
  if (device >= 0 && device < static_cast<int>(device_ops_.size())) {
    DeviceOps* known = device_ops_[device].load(std::memory_order_acquire);
    if (known == nullptr) {
      known = &driver();
      device_ops_[device].store(known, std::memory_order_release);
    }
    return *known;
  }
  return driver();
}

DeviceInfo FusionCache::deviceInfo(int device) const {
  if (device_) return *device_;
  const bool amd = platform_ == GpuVendor::Amd;
  const std::optional<DeviceInfo> queried = amd ? queryHipDevice(device) : queryDevice(device);
  BRAZE_CHECK_KIND(ErrorKind::Runtime, queried.has_value(), "{} device {} cannot be queried", amd ? "HIP" : "CUDA",
                   device);
  return *queried;
}

std::shared_ptr<const PreparedPlan> FusionCache::prepareMiss(const std::vector<DeviceValue>& inputs,
                                                             const InputSignature& signature) {
  const int device = deviceOf(inputs);
  DeviceOps& ops = opsFor(device);
  DeviceScope scope(ops);
  const DeviceInfo info = deviceInfo(device);
  // Prepared outside the lock (NVRTC takes tens of milliseconds); a racing thread's duplicate is dropped.
  LoweredPlan lowered = planFor(inputs, info, device, /*remember=*/true);
  std::optional<std::vector<std::optional<LoadedKernel>>> loaded = knownKernels(lowered, device);
  CompiledPlan compiled = loaded ? CompiledPlan{std::move(lowered), options_, std::move(*loaded)}
                                 : compilePlan(emitPlan(std::move(lowered), info, options_), ops);
  std::shared_ptr<const PreparedPlan> plan =
      std::make_shared<const PreparedPlan>(std::move(compiled), device, ops.hostMemory());
  std::shared_ptr<const PreparedPlan> evicted;  // destroyed after the lock is released: hits need not wait
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto [it, inserted] = plans_.try_emplace(signature);
  if (!inserted) return it->second.plan;
  // At most kMaxPlans were kept before this one: a slot is free.
  it->second.plan = plan;
  it->second.slot = free_slots_.back();
  free_slots_.pop_back();
  slot_owner_[it->second.slot] = &it->first;
  last_use_[it->second.slot].store(clock_.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
  if (plans_.size() > kMaxPlans) evicted = evictLeastRecentlyUsed();
  const size_t known = kernels_.size();
  const PreparedPlan& prepared = *plan;
  for (const LaunchedKernel& k : prepared.launchedKernels()) {
    kernels_.try_emplace(KernelKey{k.digest, device}, KnownKernel{k.function, k.summary});
  }
  if (known < kManyKernels && kernels_.size() >= kManyKernels) {
    // Said once per fusion: shapes that keep changing what the heuristics choose (or strides or
    // alignment, which kernels are specialized on) pay a compile for each new kernel.
    std::fprintf(stderr,
                 "braze: a fusion has needed %zu different kernels for %zu input signatures; each new one is "
                 "compiled (fd.explain tells why a shape needs its own)\n",
                 kernels_.size(), plans_.size());
  }
  return plan;
}

LoweredPlan FusionCache::planFor(const std::vector<DeviceValue>& inputs, const DeviceInfo& info, int device,
                                 bool remember) {
  const std::vector<HostValue> host = planningValues(inputs);
  if (!options_.reuse_segments) return lowerPlan(planSegments(*fusion_, host, options_), info);
  // A batch before the row extent counts by its power of two (foldedBatchOf): the class is that of the
  // inputs with it folded, and so is the representative.
  const std::optional<FoldedBatch> folded = foldedBatchOf(inputs, static_shapes_, launch_arguments_);
  const std::vector<DeviceValue>& classed = folded ? folded->inputs : inputs;
  const InputSignature shape_class = InputSignature::shapeClassOf(classed, launch_arguments_);
  std::optional<std::shared_ptr<const SegmentedFusion>> known;
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (auto it = segmentations_.find(shape_class); it != segmentations_.end()) known = it->second;
  }
  if (!known) {
    std::optional<std::vector<DeviceValue>> representative = InputSignature::representativeOf(classed, static_shapes_);
    if (representative &&
        InputSignature::of(*representative, launch_arguments_) == InputSignature::of(inputs, launch_arguments_)) {
      // These inputs are their class's representative: their plan is the class's.
      SegmentedFusion plan = planSegments(*fusion_, host, options_);
      auto segmentation = std::make_shared<const SegmentedFusion>(plan);
      if (remember) keepSegmentation(shape_class, segmentation);
      return lowerClassPlan(std::move(plan), segmentation, inputs, info, device, remember);
    }
    known = classSegmentation(representative);
    if (remember) keepSegmentation(shape_class, *known);
  }
  if (*known != nullptr) {
    ReusedSegments reused = reuseSegments(**known, host);
    if (reused.plan) return lowerClassPlan(std::move(*reused.plan), *known, inputs, info, device, remember);
    dumpAfter("reuse-segments", [&] { return fmt::format("planned afresh: {}", reused.why_not); });
  }
  return lowerPlan(planSegments(*fusion_, host, options_), info);
}

LoweredPlan FusionCache::lowerClassPlan(SegmentedFusion plan, const std::shared_ptr<const SegmentedFusion>& segmentation,
                                        const std::vector<DeviceValue>& inputs, const DeviceInfo& info, int device,
                                        bool remember) {
  std::optional<CanonicalRows> rows;
  if (options_.reuse_kernels) rows = canonicalRowsOf(inputs, static_shapes_, launch_arguments_);
  if (!rows) return lowerPlan(std::move(plan), info);
  CanonicalRowKernels source(std::move(*rows), launch_arguments_, segmentation, info, device, canonical_kernels_,
                             remember, kMaxPlans);
  return lowerPlan(std::move(plan), info, &source);
}

std::shared_ptr<const SegmentedFusion> FusionCache::classSegmentation(
    const std::optional<std::vector<DeviceValue>>& representative) const {
  if (!representative) {
    dumpAfter("reuse-segments", [] { return std::string("the shape class has no representative inputs"); });
    return nullptr;
  }
  try {
    return std::make_shared<const SegmentedFusion>(planSegments(*fusion_, planningValues(*representative), options_));
  } catch (const Error& e) {
    // Sizes the definition fixes (a reshape to given extents) refuse other sizes of the class: each
    // signature of it is planned on its own, as the error, if it is the inputs' own, says again then.
    if (e.kind() == ErrorKind::Internal) throw;
    dumpAfter("reuse-segments", [&] { return fmt::format("the shape class's representative inputs: {}", e.what()); });
    return nullptr;
  }
}

void FusionCache::keepSegmentation(const InputSignature& shape_class, std::shared_ptr<const SegmentedFusion> plan) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  if (segmentations_.size() < kMaxPlans) segmentations_.try_emplace(shape_class, std::move(plan));
}

std::optional<std::vector<std::optional<LoadedKernel>>> FusionCache::knownKernels(const LoweredPlan& plan,
                                                                                  int device) const {
  std::vector<std::optional<LoadedKernel>> loaded(plan.kernels.size());
  std::shared_lock<std::shared_mutex> lock(mutex_);
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    if (!launchesKernel(plan.kernels[i], options_)) continue;
    const kernel::CodeDigest digest = plan.digestOf(i);
    auto it = kernels_.find(KernelKey{digest, device});
    if (it == kernels_.end()) return std::nullopt;
    loaded[i] = LoadedKernel{it->second.function, digest};
  }
  return loaded;
}

std::shared_ptr<const PreparedPlan> FusionCache::evictLeastRecentlyUsed() {
  std::optional<size_t> oldest;
  uint64_t oldest_use = 0;
  for (size_t slot = 0; slot < kSlots; ++slot) {
    if (slot_owner_[slot] == nullptr) continue;
    const uint64_t use = last_use_[slot].load(std::memory_order_relaxed);
    if (!oldest || use < oldest_use) {
      oldest = slot;
      oldest_use = use;
    }
  }
  BRAZE_ASSERT(oldest.has_value(), "evicting from a FusionCache that keeps no plan");
  auto it = plans_.find(*slot_owner_[*oldest]);
  std::shared_ptr<const PreparedPlan> plan = std::move(it->second.plan);
  slot_owner_[*oldest] = nullptr;
  free_slots_.push_back(*oldest);
  plans_.erase(it);
  return plan;
}

size_t FusionCache::kernelCount() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return kernels_.size();
}

CacheExplanation FusionCache::explain(const std::vector<DeviceValue>& inputs) {
  const InputSignature signature = InputSignature::of(inputs, launch_arguments_);
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (auto it = plans_.find(signature); it != plans_.end()) {
      return {CacheLookup::Hit, "a prepared plan has this input signature (sizes, strides, alignment, scalars)",
              it->second.plan->compiled().plan};
    }
  }
  const int device = deviceOf(inputs);
  const DeviceInfo info = deviceInfo(device);
  LoweredPlan compiled = planFor(inputs, info, device, /*remember=*/false);
  std::vector<std::string> reasons;
  std::shared_lock<std::shared_mutex> lock(mutex_);
  for (size_t i = 0; i < compiled.kernels.size(); ++i) {
    const std::optional<kernel::Kernel>& k = compiled.kernels[i];
    if (!launchesKernel(k, options_)) continue;  // nothing to compile or launch
    if (kernels_.count(KernelKey{compiled.digestOf(i), device}) != 0) continue;
    // The same heuristics with another source: the index arithmetic names sizes (a broadcast input's
    // strides, a dim that is not contiguous with the rows); different heuristics: the summary says which.
    bool same_heuristics = false;
    for (const auto& [key, known] : kernels_) same_heuristics = same_heuristics || known.summary == k->summary;
    reasons.push_back(fmt::format("{} ({}): {}", k->name, k->summary,
                                  kernels_.empty()      ? "the first kernel of this fusion"
                                  : same_heuristics     ? "the same heuristics as a compiled kernel, but index "
                                                          "arithmetic that depends on these sizes or strides"
                                                        : "heuristics no compiled kernel of this fusion has"));
  }
  if (reasons.empty()) {
    return {CacheLookup::NewLaunch,
            "a new input signature, but every kernel it needs is compiled: it runs them with new launch arguments "
            "(grid, row or element counts)",
            std::move(compiled.plan)};
  }
  return {CacheLookup::NewKernel, fmt::format("new kernels: {}", fmt::join(reasons, "; ")), std::move(compiled.plan)};
}

std::string_view toString(CacheLookup lookup) {
  switch (lookup) {
    case CacheLookup::Hit: return "hit";
    case CacheLookup::NewLaunch: return "new launch parameters";
    case CacheLookup::NewKernel: return "new kernel";
  }
  return "?";
}

}  // namespace braze::exec
