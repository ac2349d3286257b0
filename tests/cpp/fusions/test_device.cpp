#include "fusions/test_device.h"
#include "device/cuda/query_device.h"

#include "support/error.h"
#include "codegen/source_emitter.h"
#include "device/cuda/cuda_driver.h"
#include "device/compile_options.h"
#include "device/cuda/device_transfer.h"
#include "device/cuda/nvrtc.h"
#include "device/hip/hip_runtime.h"
#include "device/hip/hiprtc.h"
#include "device/hip/query_hip_device.h"
#include "device/sim/sim_device_ops.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace braze::testing {
namespace {

// Each tensor input copied into `ops`' memory with `copy`, its first element at its host address modulo
// 256 (plans depend on alignment); scalars as they are.
TestDevice::Placed placeAligned(device::DeviceOps& ops, const std::vector<HostValue>& inputs,
                                const std::function<void(void*, const void*, size_t)>& copy) {
  TestDevice::Placed placed;
  for (const HostValue& v : inputs) {
    const auto* t = std::get_if<HostTensor>(&v);
    if (t == nullptr) {
      placed.values.push_back(std::get<ScalarValue>(v));
      continue;
    }
    const device::ElementSpan span = device::elementSpan(t->sizes(), t->strides());
    const int64_t item = sizeOf(t->dtype());
    const device::AlignedPlacement where = device::alignedPlacement(t->data(), span, item);
    const device::DevicePtr base = ops.allocate(static_cast<size_t>(where.bytes), nullptr);
    const device::DevicePtr first = base + static_cast<uint64_t>(where.first);
    copy(reinterpret_cast<uint8_t*>(first) + span.lo * item, t->data() + span.lo * item,
         static_cast<size_t>((span.hi - span.lo) * item));
    placed.values.push_back(device::DeviceTensor{first, t->dtype(), t->sizes(), t->strides(), 0});
    placed.keep.emplace_back(reinterpret_cast<void*>(base), [&ops, base](void*) { ops.release(base, nullptr); });
  }
  return placed;
}

class SimTestDevice final : public TestDevice {
 public:
  std::string name() const override { return "sim"; }
  device::DeviceOps& ops() override { return ops_; }
  DeviceInfo plannedFor(const DeviceInfo& simulated) const override { return simulated; }

  Placed place(const std::vector<HostValue>& inputs) override {
    return placeAligned(ops_, inputs, [](void* to, const void* from, size_t bytes) { std::memcpy(to, from, bytes); });
  }

  HostTensor fetch(const device::DeviceTensor& t) override {
    ops_.synchronize(nullptr);
    return HostTensor::wrap(reinterpret_cast<void*>(static_cast<uintptr_t>(t.data)), t.dtype, t.sizes, t.strides)
        .contiguous();
  }

 private:
  device::SimDeviceOps ops_;
};

class CudaTestDevice final : public TestDevice {
 public:
  std::string name() const override { return "cuda"; }
  device::DeviceOps& ops() override { return device::cudaDeviceOps(0); }
  DeviceInfo plannedFor(const DeviceInfo&) const override { return *queryDevice(0); }

  Placed place(const std::vector<HostValue>& inputs) override {
    Placed placed;
    for (const HostValue& v : inputs) {
      if (const auto* t = std::get_if<HostTensor>(&v)) {
        auto uploaded = std::make_shared<device::UploadedTensor>(device::uploadToDevice(*t));
        placed.values.push_back(uploaded->tensor);
        placed.keep.push_back(std::move(uploaded));
      } else {
        placed.values.push_back(std::get<ScalarValue>(v));
      }
    }
    return placed;
  }

  HostTensor fetch(const device::DeviceTensor& t) override { return device::downloadFromDevice(t); }
};

// An AMD GPU through the HIP runtime: inputs are placed as on the simulated device (each first element
// at its host address modulo 256) and copied with hipMemcpy.
class HipTestDevice final : public TestDevice {
 public:
  std::string name() const override { return "hip"; }
  device::DeviceOps& ops() override { return device::hipDeviceOps(0); }
  DeviceInfo plannedFor(const DeviceInfo&) const override { return *queryHipDevice(0); }

  Placed place(const std::vector<HostValue>& inputs) override {
    const device::HipRuntime& api = device::requireHipRuntime();
    device::DeviceScope scope(ops());
    return placeAligned(ops(), inputs, [&](void* to, const void* from, size_t bytes) {
      ops().synchronize(nullptr);  // the allocation is stream-ordered, the copy is not
      api.check(api.memcpy(to, from, bytes, 4), "hipMemcpy", "an input to the device");
    });
  }

  HostTensor fetch(const device::DeviceTensor& t) override {
    const device::HipRuntime& api = device::requireHipRuntime();
    device::DeviceScope scope(ops());
    ops().synchronize(nullptr);
    const device::ElementSpan span = device::elementSpan(t.sizes, t.strides);
    const int64_t item = sizeOf(t.dtype);
    std::vector<uint8_t> host(static_cast<size_t>(std::max<int64_t>(span.hi, 1) * item));
    api.check(api.memcpy(host.data() + span.lo * item,
                         reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(t.data)) + span.lo * item,
                         static_cast<size_t>((span.hi - span.lo) * item), 4),
              "hipMemcpy", "an output to the host");
    return HostTensor::wrap(host.data(), t.dtype, t.sizes, t.strides).contiguous();
  }
};

std::unique_ptr<TestDevice> chooseDevice() {
  const char* chosen = std::getenv("BRAZE_TEST_DEVICE");
  const std::string name = chosen == nullptr ? "" : chosen;
  const bool gpu = device::cudaAvailable() && device::nvrtcAvailable();
  if (name == "cuda" || (name.empty() && gpu)) {
    if (!gpu) {
      throw std::runtime_error("BRAZE_TEST_DEVICE=cuda, but " +
                               (device::cudaAvailable() ? std::string("NVRTC was not found")
                                                         : device::cudaUnavailableReason()));
    }
    return std::make_unique<CudaTestDevice>();
  }
  if (name == "hip") {
    // Never the default: a machine with an AMD GPU runs the suite on it when asked (tools/gpu_check.sh).
    if (device::hipRuntime() == nullptr) throw std::runtime_error("BRAZE_TEST_DEVICE=hip, but " + device::hipUnavailableReason());
    if (!device::hiprtcAvailable()) throw std::runtime_error("BRAZE_TEST_DEVICE=hip, but hiprtc was not found");
    return std::make_unique<HipTestDevice>();
  }
  if (name.empty() || name == "sim") return std::make_unique<SimTestDevice>();
  throw std::runtime_error("BRAZE_TEST_DEVICE=" + name + ": expected sim, cuda or hip");
}

}  // namespace

TestDevice& testDevice() {
  static std::unique_ptr<TestDevice> device = chooseDevice();
  return *device;
}

bool testDeviceIsGpu() { return testDevice().name() != "sim"; }

std::unique_ptr<exec::FusionCache> testFusionCache(std::shared_ptr<const Fusion> fusion, const PlanOptions& options,
                                                      const DeviceInfo& simulated) {
  TestDevice& device = testDevice();
  return std::make_unique<exec::FusionCache>(std::move(fusion), options, &device.ops(), device.plannedFor(simulated));
}

std::vector<HostValue> runOnTestDevice(exec::FusionCache& cache, const std::vector<HostValue>& inputs) {
  TestDevice& device = testDevice();
  const TestDevice::Placed placed = device.place(inputs);
  const std::vector<device::DeviceOutput> outputs = cache.run(placed.values, nullptr, /*wait=*/true);
  std::vector<HostValue> host;
  for (const device::DeviceOutput& out : outputs) {
    if (out.scalar) {
      host.emplace_back(*out.scalar);
    } else {
      host.emplace_back(device.fetch(out.tensor));
    }
  }
  return host;
}

void launchOnTestDevice(const kernel::Kernel& k, const std::vector<HostTensor*>& tensors) {
  BRAZE_ASSERT(tensors.size() == k.tensors.size(), "kernel {}: {} tensors for {} parameters", k.name, tensors.size(),
               k.tensors.size());
  TestDevice& device = testDevice();
  device::DeviceOps& ops = device.ops();
  device::DeviceScope scope(ops);
  device::CompileOptions options =
      device::kernelCompileOptions(kernel::compileArch(k, device.plannedFor(DeviceInfo::h100Sxm()).arch()));
  const DeviceInfo target = device.plannedFor(DeviceInfo::h100Sxm());
  const std::string source = codegen::emitSource(k, codegen::dialectFor(target));
  const device::KernelHandle function = ops.load({{&k, {source, k.name, options}, k.shared_bytes}})[0];
  std::vector<HostValue> host;
  for (HostTensor* t : tensors) host.emplace_back(*t);
  const TestDevice::Placed placed = device.place(host);
  std::vector<uint64_t> words;
  for (const device::DeviceValue& v : placed.values) words.push_back(std::get<device::DeviceTensor>(v).data);
  for (uint64_t w : kernel::argumentWords(k)) words.push_back(w);
  std::vector<void*> args;
  for (uint64_t& w : words) args.push_back(&w);
  ops.launch(function, {k.grid, k.block, k.shared_bytes}, args.data(), nullptr);
  ops.synchronize(nullptr);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const HostTensor back = device.fetch(std::get<device::DeviceTensor>(placed.values[i]));
    HostTensor& t = *tensors[i];
    int64_t next = 0;
    forEachIndex(t.sizes(), [&](const std::vector<int64_t>& index) {
      if (isFloating(t.dtype())) {
        t.writeDouble(t.offsetOf(index), back.readDouble(next++));
      } else {
        t.writeInt(t.offsetOf(index), back.readInt(next++));
      }
    });
  }
}

}  // namespace braze::testing
