#include "device/stream_block_cache.h"

#include "support/error.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

namespace braze::device {

StreamBlockCache::StreamBlockCache(BlockSource source, size_t limit_bytes)
    : source_(std::move(source)), limit_bytes_(limit_bytes) {}

size_t StreamBlockCache::sizeClass(size_t bytes) {
  constexpr size_t kSmallStep = 512, kSmallBlocks = size_t{1} << 20;
  if (bytes <= kSmallBlocks) return std::max<size_t>(1, (bytes + kSmallStep - 1) / kSmallStep) * kSmallStep;
  const size_t step = std::bit_floor(bytes) / 16;
  return (bytes + step - 1) / step * step;
}

namespace {

using Returns = std::vector<std::pair<DevicePtr, StreamHandle>>;

// Every block back to the pool, each on its stream, even when one of them fails (the first failure is
// raised after the others were tried).
void releaseAll(const BlockSource& source, const Returns& blocks) {
  std::exception_ptr first;
  for (const auto& [pointer, stream] : blocks) {
    try {
      source.release(pointer, stream);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace

void StreamBlockCache::keepOrReturn(const Freed& block, uint64_t id, StreamHandle stream, Returns& to_release) {
  const Live& live = block.live;
  if (live.cacheable && counts_.cached_bytes + live.bytes <= limit_bytes_) {
    free_[id][live.bytes].push_back(block.pointer);
    counts_.cached_bytes += live.bytes;
    ++counts_.cached_blocks;
    return;
  }
  to_release.emplace_back(block.pointer, stream);
}

void StreamBlockCache::settleDeferred(uint64_t id, StreamHandle stream, Returns& to_release) {
  auto waiting = deferred_.find(id);
  if (waiting == deferred_.end()) return;
  for (const Freed& block : waiting->second) keepOrReturn(block, id, stream, to_release);
  counts_.deferred_blocks -= waiting->second.size();
  deferred_.erase(waiting);
}

size_t StreamBlockCache::returnKept(uint64_t id, StreamHandle stream) {
  Returns kept;
  size_t returned = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto blocks = free_.find(id);
    if (blocks == free_.end()) return 0;
    for (const auto& [size, pointers] : blocks->second) {
      for (DevicePtr pointer : pointers) kept.emplace_back(pointer, stream);
      returned += size * pointers.size();
      counts_.cached_blocks -= pointers.size();
    }
    counts_.cached_bytes -= returned;
    free_.erase(blocks);
  }
  releaseAll(source_, kept);
  return returned;
}

DevicePtr StreamBlockCache::allocate(size_t bytes, StreamHandle stream) {
  const size_t size = sizeClass(bytes);
  const bool capturing = source_.capturing(stream);
  const std::optional<uint64_t> id = source_.identity(stream);
  const bool cacheable = limit_bytes_ > 0 && size <= kLargestCachedBlock && !capturing && id.has_value();
  if (!capturing && id) {
    Returns settled;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      settleDeferred(*id, stream, settled);  // the capture that deferred them is over
    }
    releaseAll(source_, settled);
  }
  if (cacheable) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto blocks = free_.find(*id);
    if (blocks != free_.end()) {
      auto same_class = blocks->second.find(size);
      if (same_class != blocks->second.end() && !same_class->second.empty()) {
        const DevicePtr pointer = same_class->second.back();
        same_class->second.pop_back();
        counts_.cached_bytes -= size;
        --counts_.cached_blocks;
        ++counts_.hits;
        live_[pointer] = Live{size, true, false, *id};
        return pointer;
      }
    }
  }
  // Blocks that are never cached keep the size asked for (the pool rounds it as it likes).
  const size_t asked = cacheable ? size : std::max<size_t>(bytes, 1);
  DevicePtr pointer = source_.allocate(asked, stream);
  if (pointer == 0) {
    // Out of memory: this stream's kept blocks go back to the pool, in its order (no wait for the device,
    // which a capture elsewhere would not allow), and the allocation is tried once more.
    const size_t returned = !capturing && id ? returnKept(*id, stream) : 0;
    if (returned > 0) pointer = source_.allocate(asked, stream);
    BRAZE_CHECK_KIND(ErrorKind::Runtime, pointer != 0,
                     "out of device memory: {} bytes asked for ({} bytes of freed blocks braze kept for this stream "
                     "were returned to the device first; braze.empty_cache() returns those of every stream)",
                     bytes, returned);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.misses;
  live_[pointer] = Live{asked, cacheable, capturing, id};
  return pointer;
}

void StreamBlockCache::release(DevicePtr pointer, StreamHandle stream) {
  const bool capturing = source_.capturing(stream);
  const std::optional<uint64_t> id = source_.identity(stream);
  Returns to_release;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = live_.find(pointer);
    const bool known = found != live_.end();
    const Freed block{pointer, known ? found->second : Live{}};
    if (known) live_.erase(found);
    if (known && block.live.stream && id != block.live.stream) {
      // Its stream is gone and another has the handle: neither its blocks nor its order are the old one's.
      orphans_.push_back(block);
      ++counts_.orphaned_blocks;
    } else if (!known || !id || (capturing && block.live.in_graph)) {
      // Not a block this cache can keep (another stream on each thread), or the graph's own (freed where
      // the graph says): to the pool.
      to_release.emplace_back(pointer, stream);
    } else if (capturing) {
      deferred_[*id].push_back(block);
      ++counts_.deferred_blocks;
    } else {
      settleDeferred(*id, stream, to_release);
      if (block.live.in_graph) {
        to_release.emplace_back(pointer, stream);  // a graph's allocation, freed after the capture
      } else {
        keepOrReturn(block, *id, stream, to_release);
      }
    }
  }
  releaseAll(source_, to_release);
}

size_t StreamBlockCache::trim() {
  decltype(free_) taken_free;
  decltype(deferred_) taken_deferred;
  decltype(orphans_) taken_orphans;
  BlockCacheCounts taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    taken_free.swap(free_);
    taken_deferred.swap(deferred_);
    taken_orphans.swap(orphans_);
    taken = counts_;
    counts_.cached_bytes = 0;
    counts_.cached_blocks = 0;
    counts_.deferred_blocks = 0;
    counts_.orphaned_blocks = 0;
  }
  if (taken.cached_blocks == 0 && taken.deferred_blocks == 0 && taken.orphaned_blocks == 0) return 0;
  try {
    // Freed on the legacy stream below, not on their own (which may be gone): only after all work.
    source_.synchronize();
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [id, classes] : taken_free) {
      for (auto& [size, pointers] : classes) {
        std::vector<DevicePtr>& kept = free_[id][size];
        kept.insert(kept.end(), pointers.begin(), pointers.end());
      }
    }
    for (auto& [id, blocks] : taken_deferred) {
      std::vector<Freed>& kept = deferred_[id];
      kept.insert(kept.end(), blocks.begin(), blocks.end());
    }
    orphans_.insert(orphans_.end(), taken_orphans.begin(), taken_orphans.end());
    counts_.cached_bytes += taken.cached_bytes;
    counts_.cached_blocks += taken.cached_blocks;
    counts_.deferred_blocks += taken.deferred_blocks;
    counts_.orphaned_blocks += taken.orphaned_blocks;
    throw;
  }
  Returns blocks;
  size_t returned = 0;
  for (const auto& [id, classes] : taken_free) {
    for (const auto& [size, pointers] : classes) {
      for (DevicePtr pointer : pointers) blocks.emplace_back(pointer, nullptr);
      returned += size * pointers.size();
    }
  }
  for (const auto& [id, deferred] : taken_deferred) {
    for (const Freed& block : deferred) {
      blocks.emplace_back(block.pointer, nullptr);
      returned += block.live.bytes;
    }
  }
  for (const Freed& block : taken_orphans) {
    blocks.emplace_back(block.pointer, nullptr);
    returned += block.live.bytes;
  }
  releaseAll(source_, blocks);
  return returned;
}

size_t blockCacheLimitFromEnv() {
  constexpr size_t kDefaultLimit = size_t{1} << 30;
  const char* value = std::getenv("BRAZE_BLOCK_CACHE_BYTES");
  if (value == nullptr || *value == '\0') return kDefaultLimit;
  size_t limit = 0;
  const char* end = value + std::strlen(value);
  const auto [at, error] = std::from_chars(value, end, limit);
  BRAZE_CHECK(error == std::errc() && at == end,
              "BRAZE_BLOCK_CACHE_BYTES={}: expected a number of bytes (0 turns the cache of freed device memory off)",
              value);
  return limit;
}

BlockCacheCounts StreamBlockCache::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

}  // namespace braze::device
