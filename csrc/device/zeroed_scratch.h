// Memory kept zeroed per stream for the workspaces kernels count in: a kernel whose blocks count their
// arrival (the last one finishes a grid-wide reduction) takes a workspace that must be all zeros when
// it starts, and resets the count before it ends, so the same memory serves the next kernel on the
// stream without a memset (a memset costs a driver call, and a node of GPU time before the kernel, on
// every execute). The simulated device checks the reset after each kernel.
//
// One region per stream, by the stream's identity (a new stream may reuse an old one's handle while the
// old one's work still runs). It is zeroed once, on the stream, when made or grown, and again after a run
// there failed partway (spoil: a kernel may have stopped before its reset). Regions are kept for the
// device's life, grown ones too: a thread may have bound the smaller region and not yet launched on it.
// A stream being captured into a graph, or one without an identity, gets none: a run there allocates and
// zeroes its own workspaces, so the graph holds its own memsets.
#pragma once

#include "device/device_handles.h"
#include "device/stream_block_cache.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace braze::device {

// What the regions ask of the device underneath them.
struct ZeroedScratchSource {
  // Memory the device keeps for its life (0 when out of memory).
  std::function<DevicePtr(size_t bytes, StreamHandle stream)> allocate;
  // Zeroes memory in the stream's order.
  std::function<void(DevicePtr pointer, size_t bytes, StreamHandle stream)> zero;
  std::function<bool(StreamHandle stream)> capturing;
  std::function<std::optional<uint64_t>(StreamHandle stream)> identity;
};

// A GPU's: memory from its pool (never returned), the stream's capture state and identity as its block cache
// reads them.
ZeroedScratchSource zeroedScratchSource(const BlockSource& blocks,
                                        std::function<void(DevicePtr pointer, size_t bytes, StreamHandle stream)> zero);

class ZeroedScratch {
 public:
  // The smallest region made: a few kernels' arrival counts.
  static constexpr size_t kSmallestRegion = 4096;

  explicit ZeroedScratch(ZeroedScratchSource source) : source_(std::move(source)) {}
  ZeroedScratch(const ZeroedScratch&) = delete;
  ZeroedScratch& operator=(const ZeroedScratch&) = delete;

  // At least `bytes` of memory that is all zeros when the work queued next on `stream` starts, which that
  // work must leave all zeros; 0 where the stream gets none (see above).
  DevicePtr get(size_t bytes, StreamHandle stream);
  // The next get() on `stream` zeroes its region again.
  void spoil(StreamHandle stream);
  // Every region made, for a device that frees its memory when it ends.
  std::vector<DevicePtr> regions() const;
  // Zeroings queued (when regions were made, grown or spoiled).
  int64_t zeroings() const;

 private:
  struct Region {
    DevicePtr pointer = 0;
    size_t bytes = 0;
    bool clean = false;  // zeroed, or left zeroed by every run since
  };
  ZeroedScratchSource source_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, Region> by_stream_;
  std::vector<DevicePtr> made_;
  int64_t zeroings_ = 0;
};

}  // namespace braze::device
