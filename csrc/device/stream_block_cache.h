// Freed device memory kept on the host side, per stream and size class, for the next allocation of that
// class on the same stream: a cached execute's outputs, intermediates and workspaces then cost no driver
// call once the loop is warm (an allocate + release through the driver's stream-ordered pool costs a few
// microseconds of host time, most of a cached execute's overhead over its launches).
//
// Reuse on the same stream needs no synchronization: whatever used a block was queued on the stream
// before the block was released, and whatever the next owner queues comes after it (torch's caching
// allocator works the same way, with the same condition: memory read on another stream must be kept
// alive by the caller until that stream is done with it). Blocks never move between streams.
//
// A stream being captured into a CUDA graph bypasses the cache both ways: an address the graph bakes in
// must belong to the graph (the driver's graph memory nodes), not to a block that a later execute gets.
#pragma once

#include "device/device_handles.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace braze::device {

// What the cache asks of the device underneath it.
struct BlockSource {
  // Memory from the device's stream-ordered pool; 0 when the device is out of memory (any other
  // failure raises).
  std::function<DevicePtr(size_t bytes, StreamHandle stream)> allocate;
  // Back to the pool, ordered after the work queued on `stream`.
  std::function<void(DevicePtr pointer, StreamHandle stream)> release;
  // Whether `stream` is being captured into a graph (or cannot say so).
  std::function<bool(StreamHandle stream)> capturing;
};

struct BlockCacheCounts {
  int64_t hits = 0;    // allocations served from the cache
  int64_t misses = 0;  // allocations that went to the device
  size_t cached_bytes = 0;
  size_t cached_blocks = 0;
};

class StreamBlockCache {
 public:
  // Blocks above this size go to the device both ways: their kernels take long enough to hide the
  // driver's calls, and caching them would hold much memory for little.
  static constexpr size_t kLargestCachedBlock = size_t{64} << 20;

  // `limit_bytes`: the most freed memory kept; 0 keeps none (every call goes to the device).
  StreamBlockCache(BlockSource source, size_t limit_bytes);
  StreamBlockCache(const StreamBlockCache&) = delete;
  StreamBlockCache& operator=(const StreamBlockCache&) = delete;

  // A block of at least `bytes` (its size class), usable on `stream`. When the device is out of
  // memory, the cached blocks go back to it and the allocation is tried once more before it raises.
  DevicePtr allocate(size_t bytes, StreamHandle stream);
  // `pointer` must come from allocate() on the same `stream`. Callable from any thread.
  void release(DevicePtr pointer, StreamHandle stream);
  // Returns every cached block to the device; the bytes returned.
  size_t trim();
  BlockCacheCounts counts() const;

  // The size a block for `bytes` is allocated with: multiples of 512 bytes up to 1 MiB, then 16
  // classes per power of two (at most 1/16 more than asked).
  static size_t sizeClass(size_t bytes);

 private:
  struct Live {
    size_t bytes = 0;        // its size class
    bool cacheable = false;  // allocated outside a capture, at most kLargestCachedBlock
  };
  // Free blocks of one stream, by size class.
  using FreeBlocks = std::unordered_map<size_t, std::vector<DevicePtr>>;

  BlockSource source_;
  size_t limit_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<StreamHandle, FreeBlocks> free_;
  std::unordered_map<DevicePtr, Live> live_;
  BlockCacheCounts counts_;
};

// The limit a device's cache is made with: BRAZE_BLOCK_CACHE_BYTES when set (0 turns the cache off),
// else 1 GiB.
size_t blockCacheLimitFromEnv();

}  // namespace braze::device
