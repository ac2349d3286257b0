#include "device/hip/hip_block_source.h"

#include <fmt/format.h>

namespace braze::device {
namespace {

HipStream hip(StreamHandle stream) { return reinterpret_cast<HipStream>(stream); }

}  // namespace

BlockSource hipBlockSource(const HipRuntime& api, DeviceOps& device) {
  BlockSource source;
  source.allocate = [&api](size_t bytes, StreamHandle stream) -> DevicePtr {
    void* pointer = nullptr;
    const HipError result = api.mallocAsync(&pointer, bytes, hip(stream));
    if (result == kHipErrorOutOfMemory) return 0;
    api.check(result, "hipMallocAsync", fmt::format("{} bytes", bytes));
    return reinterpret_cast<DevicePtr>(pointer);
  };
  source.release = [&api, &device](DevicePtr pointer, StreamHandle stream) {
    DeviceScope scope(device);  // trim() may run on any thread (braze.empty_cache)
    api.check(api.freeAsync(reinterpret_cast<void*>(pointer), hip(stream)), "hipFreeAsync");
  };
  source.capturing = [&api](StreamHandle stream) {
    if (api.streamIsCapturing == nullptr) return false;
    int status = kHipStreamCaptureStatusNone;
    // An error (the null stream while another one is captured) counts as a capture.
    return api.streamIsCapturing(hip(stream), &status) != kHipSuccess || status != kHipStreamCaptureStatusNone;
  };
  source.identity = [&api](StreamHandle stream) -> std::optional<uint64_t> {
    if (api.streamGetId == nullptr || hip(stream) == hipStreamPerThread()) return std::nullopt;
    unsigned long long id = 0;
    if (api.streamGetId(hip(stream), &id) != kHipSuccess) return std::nullopt;
    return static_cast<uint64_t>(id);
  };
  source.synchronize = [&api, &device] {
    DeviceScope scope(device);
    api.check(api.deviceSynchronize(), "hipDeviceSynchronize", "before returning cached blocks to the pool");
  };
  return source;
}

}  // namespace braze::device
