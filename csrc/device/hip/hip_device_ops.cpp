// The HIP runtime as a DeviceOps: kernels compiled by hiprtc (through the kernel caches, keyed by the
// gfx arch) and loaded as modules, memory from the device's stream-ordered pool (hipMallocAsync) through
// the cache of freed blocks per stream (where the runtime has hipStreamGetId), launches
// with hipModuleLaunchKernel on the caller's stream. No launch graphs: launchGraph declines, and plans
// launch their kernels one by one. A block's LDS needs no raised limit: plans stay within the device's
// smem_per_block_optin, which is what the runtime reports.
#include "device/hip/hip_block_source.h"
#include "device/hip/hip_runtime.h"
#include "device/hip/query_hip_device.h"
#include "device/device_ops.h"
#include "device/made_devices.h"
#include "device/zeroed_scratch.h"
#include "kernel/index_errors.h"
#include "device/parallel_compile.h"
#include "support/error.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace braze::device {
namespace {

HipStream hip(StreamHandle stream) { return reinterpret_cast<HipStream>(stream); }
HipFunction hip(KernelHandle kernel) { return reinterpret_cast<HipFunction>(kernel); }

class HipDeviceOps final : public DeviceOps {
 public:
  explicit HipDeviceOps(int ordinal)
      : ordinal_(ordinal),
        api_(requireHipRuntime()),
        lds_per_block_(queryHipDevice(ordinal).value_or(amdPresetFor("gfx90a", 0)).smem_per_block_optin),
        blocks_(hipBlockSource(api_, *this), blockCacheLimitFromEnv()),
        zeroed_(zeroedScratchSource(hipBlockSource(api_, *this), [this](DevicePtr pointer, size_t bytes,
                                                                         StreamHandle stream) {
          zero(pointer, bytes, stream);
        })) {}

  // HIP's current device is per thread: set it for the scope, restoring the caller's afterwards.
  void enter() override {
    int current = -1;
    api_.check(api_.getDevice(&current), "hipGetDevice");
    if (current != ordinal_) api_.check(api_.setDevice(ordinal_), "hipSetDevice", fmt::format("device {}", ordinal_));
    previous().push_back(current);
  }

  void leave() override {
    auto& stack = previous();
    if (stack.empty()) return;
    const int before = stack.back();
    stack.pop_back();
    if (before != ordinal_ && before >= 0) api_.setDevice(before);  // in a destructor: nothing useful to do with an error
  }

  std::vector<KernelHandle> load(const std::vector<KernelImage>& kernels) override {
    std::vector<KernelHandle> functions(kernels.size(), nullptr);
    std::vector<size_t> missing;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < kernels.size(); ++i) {
        const CompileJob& job = kernels[i].compile;
        auto it = loaded_.find(std::tie(job.options, job.name, job.source));
        if (it != loaded_.end()) {
          functions[i] = it->second;
        } else {
          missing.push_back(i);
        }
      }
    }
    if (missing.empty()) return functions;
    std::vector<CompileJob> jobs;
    for (size_t i : missing) {
      const KernelImage& k = kernels[i];
      BRAZE_CHECK_KIND(ErrorKind::Runtime, k.shared_bytes <= lds_per_block_,
                       "kernel {} asks for {} bytes of LDS; a block of device {} has at most {}", k.compile.name,
                       k.shared_bytes, ordinal_, lds_per_block_);
      jobs.push_back(k.compile);
    }
    const std::vector<CachedKernel> compiled = compileAll(jobs);
    for (size_t m = 0; m < missing.size(); ++m) {
      const CompileJob& job = jobs[m];
      HipModule module = nullptr;
      api_.check(api_.moduleLoadData(&module, compiled[m].kernel->cubin.data()), "hipModuleLoadData",
                 fmt::format("kernel {} for {}", job.name, job.options.arch));
      HipFunction function = nullptr;
      api_.check(api_.moduleGetFunction(&function, module, job.name.c_str()), "hipModuleGetFunction",
                 fmt::format("kernel {}", job.name));
      std::lock_guard<std::mutex> lock(mutex_);
      const auto key = std::make_tuple(job.options, job.name, job.source);
      functions[missing[m]] = loaded_.emplace(key, reinterpret_cast<KernelHandle>(function)).first->second;
    }
    return functions;
  }

  IndexErrorRecord indexErrorRecord() override {
    std::call_once(record_once_, [&] {
      // Pinned host memory mapped into the device (hipHostMallocMapped | hipHostMallocPortable), as on
      // CUDA: kernels write it, the host reads it without a synchronize. Never freed.
      constexpr size_t bytes = kernel::kIndexErrorWords * sizeof(int64_t);
      void* host = nullptr;
      api_.check(api_.hostMalloc(&host, bytes, 0x2 | 0x1), "hipHostMalloc", "the index-error record");
      std::memset(host, 0, bytes);
      void* device = nullptr;
      api_.check(api_.hostGetDevicePointer(&device, host, 0), "hipHostGetDevicePointer");
      record_ = {reinterpret_cast<DevicePtr>(device), static_cast<volatile int64_t*>(host)};
    });
    return record_;
  }

  DevicePtr allocate(size_t bytes, StreamHandle stream) override { return blocks_.allocate(bytes, stream); }

  void release(DevicePtr pointer, StreamHandle stream) override {
    // An output's last reference may drop on any thread, where another device is current: the null
    // stream, its capture state and its id are this device's only inside.
    DeviceScope scope(*this);
    blocks_.release(pointer, stream);
  }

  size_t releaseCachedBlocks() override { return blocks_.trim(); }

  BlockCacheCounts blockCacheCounts() const override { return blocks_.counts(); }

  void zero(DevicePtr pointer, size_t bytes, StreamHandle stream) override {
    api_.check(api_.memsetAsync(reinterpret_cast<void*>(pointer), 0, bytes, hip(stream)), "hipMemsetAsync");
  }

  DevicePtr zeroedScratch(size_t bytes, StreamHandle stream) override { return zeroed_.get(bytes, stream); }

  void spoilZeroedScratch(StreamHandle stream) override { zeroed_.spoil(stream); }

  void synchronize(StreamHandle stream) override { api_.check(api_.streamSynchronize(hip(stream)), "hipStreamSynchronize"); }

  void launch(KernelHandle function, const LaunchShape& shape, void** args, StreamHandle stream) override {
    api_.check(api_.moduleLaunchKernel(hip(function), static_cast<unsigned>(shape.grid[0]),
                                       static_cast<unsigned>(shape.grid[1]), 1, static_cast<unsigned>(shape.block[0]),
                                       static_cast<unsigned>(shape.block[1]), 1,
                                       static_cast<unsigned>(shape.shared_bytes), hip(stream), args, nullptr),
               "hipModuleLaunchKernel",
               fmt::format("grid ({}, {}), block ({}, {}), {} bytes of LDS", shape.grid[0], shape.grid[1],
                           shape.block[0], shape.block[1], shape.shared_bytes));
  }

 private:
  // Per thread: the device current before each open enter().
  static std::vector<int>& previous() {
    thread_local std::vector<int> stack;
    return stack;
  }

  int ordinal_;
  const HipRuntime& api_;
  std::once_flag record_once_;
  IndexErrorRecord record_;
  int64_t lds_per_block_;  // what the runtime reports (64 KiB on CDNA up to MI300)
  std::mutex mutex_;
  // Modules stay loaded for the process, as the CUDA driver's do.
  std::map<std::tuple<CompileOptions, std::string, std::string>, KernelHandle> loaded_;
  StreamBlockCache blocks_;  // after api_, which its source calls
  ZeroedScratch zeroed_;
};

MadeDevices<HipDeviceOps>& madeHipDevices() {
  static auto* made = new MadeDevices<HipDeviceOps>;  // never destroyed, like the runtime
  return *made;
}

}  // namespace

DeviceOps& hipDeviceOps(int ordinal) { return madeHipDevices().get(ordinal); }

size_t releaseHipCachedBlocks() { return madeHipDevices().releaseCachedBlocks(); }

}  // namespace braze::device
