// Freed device memory kept on the host side, per stream and size class, for the next allocation of that
// class on the same stream: a cached execute's outputs, intermediates and workspaces then cost no driver
// call once the loop is warm (an allocate + release through the driver's stream-ordered pool costs a few
// microseconds of host time, most of a cached execute's overhead over its launches).
//
// Reuse on the same stream needs no synchronization: whatever used a block was queued on the stream
// before the block was released, and whatever the next owner queues comes after it (torch's caching
// allocator works the same way, with the same condition: memory read on another stream must be kept
// alive by the caller until that stream is done with it). Blocks never move between streams, and a
// stream is known by its identity for the life of the process, not by its handle, which a new stream
// may reuse while the old one's work still runs.
//
// Streams being captured into a CUDA graph: an allocation there is the graph's own (a graph memory
// node, never cached), and so is its release there. A block from outside the graph released during the
// capture cannot be freed inside it (the driver takes only the graph's allocations there): it waits until
// the stream is used outside a capture again, then is kept or freed as any other.
#pragma once

#include "device/device_handles.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace braze::device {

// What the cache asks of the device underneath it.
struct BlockSource {
  // Memory from the device's stream-ordered pool; 0 when the device is out of memory (any other
  // failure raises).
  std::function<DevicePtr(size_t bytes, StreamHandle stream)> allocate;
  // Back to the pool, ordered after the work queued on `stream` (null: the legacy stream).
  std::function<void(DevicePtr pointer, StreamHandle stream)> release;
  // Whether `stream` is being captured into a graph (or cannot say so).
  std::function<bool(StreamHandle stream)> capturing;
  // The stream's identity for the life of the process; none for a handle that names a different stream
  // on each thread (CUDA's per-thread default stream), whose blocks are never kept.
  std::function<std::optional<uint64_t>(StreamHandle stream)> identity;
  // Waits for all work on the device (before blocks are freed on a stream other than their own).
  std::function<void()> synchronize;
};

struct BlockCacheCounts {
  int64_t hits = 0;    // allocations served from the cache
  int64_t misses = 0;  // allocations that went to the device
  size_t cached_bytes = 0;
  size_t cached_blocks = 0;
  size_t deferred_blocks = 0;  // released during a capture, waiting for its end
  size_t orphaned_blocks = 0;  // released under a handle that names another stream now, waiting for trim()
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
  // memory, the blocks kept for `stream` go back to it and the allocation is tried once more before it
  // raises (blocks of other streams could only be freed after waiting for the device).
  DevicePtr allocate(size_t bytes, StreamHandle stream);
  // `pointer` must come from allocate() on the same `stream`. Callable from any thread.
  void release(DevicePtr pointer, StreamHandle stream);
  // Waits for the device, then returns every kept, deferred and orphaned block to the pool; the bytes
  // returned.
  // Not while a stream of the device is being captured: the wait would end the capture (it raises, keeping
  // the blocks, where the driver says so).
  size_t trim();
  BlockCacheCounts counts() const;

  // The size a block for `bytes` is allocated with: multiples of 512 bytes up to 1 MiB, then 16
  // classes per power of two (at most 1/16 more than asked).
  static size_t sizeClass(size_t bytes);

 private:
  struct Live {
    size_t bytes = 0;        // its size class where cacheable
    bool cacheable = false;  // at most kLargestCachedBlock, allocated outside a capture on a known stream
    bool in_graph = false;   // allocated while its stream was captured: the graph's
    std::optional<uint64_t> stream;  // the identity of the stream it was allocated on
  };
  struct Freed {
    DevicePtr pointer = 0;
    Live live;
  };
  // Under mutex_: keeps a block freed on the stream known as `id` (`stream` its handle), or hands it
  // to `to_release` past the limit.
  void keepOrReturn(const Freed& block, uint64_t id, StreamHandle stream,
                    std::vector<std::pair<DevicePtr, StreamHandle>>& to_release);
  // Returns the blocks kept for the stream known as `id` to the pool, in that stream's order (`stream`, its
  // handle, is live: the caller allocates on it); the bytes.
  size_t returnKept(uint64_t id, StreamHandle stream);
  // Under mutex_: the blocks released during a capture on the stream known as `id`, kept or returned.
  void settleDeferred(uint64_t id, StreamHandle stream, std::vector<std::pair<DevicePtr, StreamHandle>>& to_release);

  BlockSource source_;
  size_t limit_bytes_;
  mutable std::mutex mutex_;
  // Free blocks by stream identity, then size class.
  std::unordered_map<uint64_t, std::unordered_map<size_t, std::vector<DevicePtr>>> free_;
  // Blocks released during a capture, by stream identity.
  std::unordered_map<uint64_t, std::vector<Freed>> deferred_;
  // Blocks whose stream was destroyed while they were held (released under its handle, which another
  // stream has now): the old stream's work may still read them, so only trim() frees them, after its wait.
  std::vector<Freed> orphans_;
  std::unordered_map<DevicePtr, Live> live_;
  BlockCacheCounts counts_;
};

// The limit a device's cache is made with: BRAZE_BLOCK_CACHE_BYTES when set (0 turns the cache off),
// else 1 GiB.
size_t blockCacheLimitFromEnv();

}  // namespace braze::device
