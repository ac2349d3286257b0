#include "device/stream_block_cache.h"

#include "support/error.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdlib>
#include <cstring>
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

DevicePtr StreamBlockCache::allocate(size_t bytes, StreamHandle stream) {
  const size_t size = sizeClass(bytes);
  const bool cacheable = limit_bytes_ > 0 && size <= kLargestCachedBlock && !source_.capturing(stream);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto blocks = free_.find(stream);
    if (blocks != free_.end()) {
      auto same_class = blocks->second.find(size);
      if (same_class != blocks->second.end() && !same_class->second.empty()) {
        const DevicePtr pointer = same_class->second.back();
        same_class->second.pop_back();
        counts_.cached_bytes -= size;
        --counts_.cached_blocks;
        ++counts_.hits;
        live_[pointer] = Live{size, true};
        return pointer;
      }
    }
  }
  // Blocks that are never cached keep the size asked for (the pool rounds it as it likes).
  const size_t asked = cacheable ? size : std::max<size_t>(bytes, 1);
  DevicePtr pointer = source_.allocate(asked, stream);
  if (pointer == 0) {
    const size_t returned = trim();
    pointer = source_.allocate(asked, stream);
    BRAZE_CHECK_KIND(ErrorKind::Runtime, pointer != 0,
                     "out of device memory: {} bytes asked for ({} cached bytes of freed outputs were returned to the "
                     "device first and did not make room)",
                     bytes, returned);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.misses;
  if (cacheable) live_[pointer] = Live{size, true};
  return pointer;
}

void StreamBlockCache::release(DevicePtr pointer, StreamHandle stream) {
  if (limit_bytes_ > 0 && !source_.capturing(stream)) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto live = live_.find(pointer);
    if (live != live_.end()) {
      const size_t size = live->second.bytes;
      live_.erase(live);
      if (counts_.cached_bytes + size <= limit_bytes_) {
        free_[stream][size].push_back(pointer);
        counts_.cached_bytes += size;
        ++counts_.cached_blocks;
        return;
      }
    }
  } else if (limit_bytes_ > 0) {
    // Released while its stream is captured: the graph frees it when it runs, as the pool would.
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(pointer);
  }
  source_.release(pointer, stream);
}

size_t StreamBlockCache::trim() {
  std::vector<std::pair<DevicePtr, StreamHandle>> blocks;
  size_t returned = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [stream, classes] : free_) {
      for (auto& [size, pointers] : classes) {
        for (DevicePtr pointer : pointers) blocks.emplace_back(pointer, stream);
        returned += size * pointers.size();
      }
    }
    free_.clear();
    counts_.cached_bytes = 0;
    counts_.cached_blocks = 0;
  }
  for (const auto& [pointer, stream] : blocks) source_.release(pointer, stream);
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
