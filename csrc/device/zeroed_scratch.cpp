#include "device/zeroed_scratch.h"

#include "support/error.h"

#include <algorithm>
#include <bit>

namespace braze::device {

ZeroedScratchSource zeroedScratchSource(const BlockSource& blocks,
                                        std::function<void(DevicePtr pointer, size_t bytes, StreamHandle stream)> zero) {
  return {blocks.allocate, std::move(zero), blocks.capturing, blocks.identity};
}

DevicePtr ZeroedScratch::get(size_t bytes, StreamHandle stream) {
  if (source_.capturing(stream)) return 0;
  const std::optional<uint64_t> id = source_.identity(stream);
  if (!id) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  Region& region = by_stream_[*id];
  if (region.bytes < bytes) {
    const size_t grown = std::bit_ceil(std::max({bytes, kSmallestRegion, region.bytes * 2}));
    const DevicePtr pointer = source_.allocate(grown, stream);
    BRAZE_CHECK_KIND(ErrorKind::Runtime, pointer != 0,
                     "out of device memory for {} bytes of zeroed workspace (the arrival counts of grid-wide steps)",
                     grown);
    made_.push_back(pointer);
    region = Region{pointer, grown, false};
  }
  if (!region.clean) {
    source_.zero(region.pointer, region.bytes, stream);
    region.clean = true;
    ++zeroings_;
  }
  return region.pointer;
}

void ZeroedScratch::spoil(StreamHandle stream) {
  const std::optional<uint64_t> id = source_.identity(stream);
  if (!id) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_stream_.find(*id);
  if (it != by_stream_.end()) it->second.clean = false;
}

std::vector<DevicePtr> ZeroedScratch::regions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return made_;
}

int64_t ZeroedScratch::zeroings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return zeroings_;
}

}  // namespace braze::device
