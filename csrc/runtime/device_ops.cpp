#include "runtime/device_ops.h"

#include "ir/error.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace braze::runtime {
namespace {

constexpr int64_t kDefaultDynamicSharedLimit = 48 * 1024;

class CudaDeviceOps final : public DeviceOps {
 public:
  explicit CudaDeviceOps(int ordinal)
      : ordinal_(ordinal), driver_(requireCudaDriver()), context_(primaryContext(ordinal)) {
    CuDevice device = 0;
    driver_.check(driver_.deviceGet(&device, ordinal), "cuDeviceGet");
    CuMemPool pool = nullptr;
    driver_.check(driver_.deviceGetDefaultMemPool(&pool, device), "cuDeviceGetDefaultMemPool");
    uint64_t keep_everything = std::numeric_limits<uint64_t>::max();
    driver_.check(driver_.memPoolSetAttribute(pool, kMemPoolAttrReleaseThreshold, &keep_everything),
                  "cuMemPoolSetAttribute(RELEASE_THRESHOLD)");
  }

  void enter() override {
    CuContext current = nullptr;
    driver_.check(driver_.ctxGetCurrent(&current), "cuCtxGetCurrent");
    const bool push = current != context_;
    if (push) driver_.check(driver_.ctxPushCurrent(context_), "cuCtxPushCurrent", fmt::format("device {}", ordinal_));
    pushed().push_back(push);
  }

  void leave() override {
    auto& stack = pushed();
    if (stack.empty()) return;
    const bool push = stack.back();
    stack.pop_back();
    CuContext popped = nullptr;
    if (push) driver_.ctxPopCurrent(&popped);  // in a destructor: nothing useful to do with an error
  }

  std::vector<CuFunction> load(const std::vector<CompileJob>& jobs, const std::vector<int64_t>& shared_bytes) override {
    std::vector<CuFunction> functions = loadCudaKernels(jobs, ordinal_);
    for (size_t i = 0; i < functions.size(); ++i) {
      if (shared_bytes[i] <= kDefaultDynamicSharedLimit) continue;
      driver_.check(driver_.funcSetAttribute(functions[i], kFuncAttributeMaxDynamicSharedSizeBytes,
                                             static_cast<int>(shared_bytes[i])),
                    "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                    fmt::format("kernel {} asks for {} bytes of dynamic shared memory", jobs[i].name, shared_bytes[i]));
    }
    return functions;
  }

  CuDevicePtr allocate(size_t bytes, CuStream stream) override {
    CuDevicePtr pointer = 0;
    driver_.check(driver_.memAllocAsync(&pointer, bytes == 0 ? 1 : bytes, stream), "cuMemAllocAsync",
                  fmt::format("{} bytes", bytes));
    return pointer;
  }

  void release(CuDevicePtr pointer, CuStream stream) override {
    DeviceScope scope(*this);  // an output's last reference may drop on any thread
    driver_.check(driver_.memFreeAsync(pointer, stream), "cuMemFreeAsync");
  }

  void zero(CuDevicePtr pointer, size_t bytes, CuStream stream) override {
    driver_.check(driver_.memsetD8Async(pointer, 0, bytes, stream), "cuMemsetD8Async");
  }

  void synchronize(CuStream stream) override {
    driver_.check(driver_.streamSynchronize(stream), "cuStreamSynchronize");
  }

  void launch(CuFunction function, const LaunchShape& shape, void** args, CuStream stream) override {
    driver_.check(driver_.launchKernel(function, static_cast<unsigned>(shape.grid[0]),
                                       static_cast<unsigned>(shape.grid[1]), 1, static_cast<unsigned>(shape.block[0]),
                                       static_cast<unsigned>(shape.block[1]), 1,
                                       static_cast<unsigned>(shape.shared_bytes), stream, args, nullptr),
                  "cuLaunchKernel");
  }

 private:
  // Per thread: whether each open enter() pushed the context (and leave() must pop it).
  static std::vector<bool>& pushed() {
    thread_local std::vector<bool> stack;
    return stack;
  }

  int ordinal_;
  const CudaDriver& driver_;
  CuContext context_;
};

}  // namespace

DeviceOps& cudaDeviceOps(int ordinal) {
  static std::mutex mutex;
  static auto* ops = new std::map<int, std::unique_ptr<CudaDeviceOps>>;  // never destroyed, like the driver
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*ops)[ordinal];
  if (!slot) slot = std::make_unique<CudaDeviceOps>(ordinal);
  return *slot;
}

}  // namespace braze::runtime
