// The GPU execute path of one fusion: input signature -> prepared plan, thread-safe. The first call
// with a signature plans, lowers and compiles (NVRTC, through the kernel caches); every later call
// computes the signature, finds the plan under a shared lock and runs it.
//
// Checked on a miss only (a hit has the signature of inputs that passed): the inputs' count, kinds,
// dtypes and ranks against the definition (explain's own checks), and that every tensor is on one
// device. Errors name the input and what was expected.
#pragma once

#include "runtime/input_signature.h"
#include "runtime/prepared_plan.h"

#include <array>
#include <atomic>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

namespace braze::runtime {

class FusionCache {
 public:
  // `ops`: how kernels are loaded and launched (the driver unless given: the host benchmark passes a
  // no-op); `device`: what to plan for (the driver's description of the inputs' GPU unless given).
  explicit FusionCache(std::shared_ptr<const Fusion> fusion, PlanOptions options = {}, DeviceOps* ops = nullptr,
                       std::optional<DeviceInfo> device = std::nullopt);

  // Runs the fusion on the inputs' device, on `stream` (nullptr: the legacy default stream); with
  // `wait`, returns only once the outputs are written (for consumers that ignore the stream).
  std::vector<DeviceOutput> run(const std::vector<DeviceValue>& inputs, CuStream stream = nullptr, bool wait = false);
  // The plan for these inputs, prepared if it was not.
  const PreparedPlan& prepare(const std::vector<DeviceValue>& inputs);
  size_t size() const;
  // After this many signatures the cache warns once (stderr) that each new one costs a compile.
  static constexpr size_t kManySignatures = 16;
  // The CUDA sources of the plan the last run used (empty before the first run).
  std::vector<std::string> lastCudaCode() const;

 private:
  const PreparedPlan& prepareMiss(const std::vector<DeviceValue>& inputs, const InputSignature& signature);
  DeviceOps& opsFor(int device);
  int deviceOf(const std::vector<DeviceValue>& inputs) const;

  std::shared_ptr<const Fusion> fusion_;
  PlanOptions options_;
  DeviceOps* ops_;
  std::optional<DeviceInfo> device_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<InputSignature, std::unique_ptr<PreparedPlan>, InputSignature::Hash> plans_;
  std::atomic<const PreparedPlan*> last_{nullptr};  // plans are never removed, so the pointer stays valid
  std::array<std::atomic<DeviceOps*>, 16> device_ops_{};
};

}  // namespace braze::runtime
