#include "runtime/fusion_cache.h"

#include "ir/error.h"

#include <cstdio>
#include <mutex>

namespace braze::runtime {

FusionCache::FusionCache(std::shared_ptr<const Fusion> fusion, PlanOptions options, DeviceOps* ops,
                         std::optional<DeviceInfo> device)
    : fusion_(std::move(fusion)), options_(options), ops_(ops), device_(std::move(device)) {
  BRAZE_ASSERT(fusion_ != nullptr, "FusionCache of no fusion");
}

std::vector<DeviceOutput> FusionCache::run(const std::vector<DeviceValue>& inputs, CuStream stream, bool wait) {
  const InputSignature signature = InputSignature::of(inputs);
  const PreparedPlan* plan = nullptr;
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (auto it = plans_.find(signature); it != plans_.end()) plan = it->second.get();
  }
  if (plan == nullptr) plan = &prepareMiss(inputs, signature);
  DeviceOps& ops = opsFor(deviceOf(inputs));
  DeviceScope scope(ops);
  last_.store(plan, std::memory_order_relaxed);
  std::vector<DeviceOutput> outputs = plan->run(inputs, stream, ops);
  if (wait) ops.synchronize(stream);
  return outputs;
}

const PreparedPlan& FusionCache::prepare(const std::vector<DeviceValue>& inputs) {
  const InputSignature signature = InputSignature::of(inputs);
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (auto it = plans_.find(signature); it != plans_.end()) return *it->second;
  }
  return prepareMiss(inputs, signature);
}

size_t FusionCache::size() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return plans_.size();
}

std::vector<std::string> FusionCache::lastCudaCode() const {
  const PreparedPlan* plan = last_.load(std::memory_order_relaxed);
  return plan == nullptr ? std::vector<std::string>{} : plan->cudaCode();
}

int FusionCache::deviceOf(const std::vector<DeviceValue>& inputs) const {
  int device = -1;
  size_t first = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* t = std::get_if<DeviceTensor>(&inputs[i]);
    if (t == nullptr) continue;
    if (device < 0) {
      device = t->device;
      first = i;
    }
    BRAZE_CHECK(t->device == device, "input {} is on cuda:{} but input {} is on cuda:{}: all tensor inputs of a fusion "
                "must be on one GPU", i, t->device, first, device);
  }
  return device < 0 ? 0 : device;
}

DeviceOps& FusionCache::opsFor(int device) {
  if (ops_ != nullptr) return *ops_;
  // Remembered per device: cudaDeviceOps() takes a global lock, which the cached path should not.
  if (device >= 0 && device < static_cast<int>(device_ops_.size())) {
    DeviceOps* known = device_ops_[device].load(std::memory_order_acquire);
    if (known == nullptr) {
      known = &cudaDeviceOps(device);
      device_ops_[device].store(known, std::memory_order_release);
    }
    return *known;
  }
  return cudaDeviceOps(device);
}

const PreparedPlan& FusionCache::prepareMiss(const std::vector<DeviceValue>& inputs, const InputSignature& signature) {
  const int device = deviceOf(inputs);
  DeviceOps& ops = opsFor(device);
  DeviceScope scope(ops);
  DeviceInfo info;
  if (device_) {
    info = *device_;
  } else {
    const std::optional<DeviceInfo> queried = queryDevice(device);
    BRAZE_CHECK_KIND(ErrorKind::Runtime, queried.has_value(), "CUDA device {} cannot be queried", device);
    info = *queried;
  }
  // Prepared outside the lock (NVRTC takes tens of milliseconds); a racing thread's duplicate is dropped.
  auto plan = std::make_unique<PreparedPlan>(*fusion_, inputs, options_, info, ops);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto [it, inserted] = plans_.emplace(signature, std::move(plan));
  if (inserted && plans_.size() == kManySignatures) {
    // Said once per fusion: a workload whose shapes keep changing pays a compile for each new one.
    std::fprintf(stderr,
                 "braze: a fusion was prepared for %zu different input signatures; its kernels are specialized on "
                 "sizes, strides, alignment and scalar values, so every new one is planned and compiled again\n",
                 plans_.size());
  }
  return *it->second;
}

}  // namespace braze::runtime
