// A stand-in for a GPU's stream-ordered pool under the cache of freed blocks (device/stream_block_cache.h):
// it hands out distinct addresses, records every call, has switches for out-of-memory, capture, stream
// identities and a device that cannot be waited for, and notes what the driver would refuse or what
// would corrupt memory: a block freed twice or never allocated, and a block freed inside a capture that
// is not one of the graph's own allocations.
#pragma once

#include "device/stream_block_cache.h"
#include "support/error.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace braze::testing {

inline device::StreamHandle stream(uintptr_t n) { return reinterpret_cast<device::StreamHandle>(n); }

struct FakePool {
  using DevicePtr = device::DevicePtr;
  using StreamHandle = device::StreamHandle;

  std::mutex mutex;
  DevicePtr next = 1 << 20;
  std::vector<size_t> allocated;                              // the sizes asked for, in order
  std::vector<std::pair<DevicePtr, StreamHandle>> released;  // in order
  std::set<StreamHandle> captured;
  std::map<StreamHandle, std::optional<uint64_t>> identities;  // default: the handle's value
  int fail_next = 0;                                          // allocations that report out of memory
  int synchronized = 0;
  bool synchronize_fails = false;
  int fail_release = 0;  // releases that fail
  std::set<DevicePtr> owned;             // allocated and not yet freed
  std::set<DevicePtr> graph_allocations;  // of those, the ones allocated while their stream was captured
  std::vector<std::string> violations;

  bool capturing(StreamHandle s) {
    std::lock_guard<std::mutex> lock(mutex);
    return captured.count(s) > 0;
  }
  std::optional<uint64_t> identity(StreamHandle s) {
    std::lock_guard<std::mutex> lock(mutex);
    auto known = identities.find(s);
    return known != identities.end() ? known->second : std::optional<uint64_t>(reinterpret_cast<uintptr_t>(s));
  }

  device::BlockSource source() {
    device::BlockSource s;
    s.allocate = [this](size_t bytes, StreamHandle st) -> DevicePtr {
      std::lock_guard<std::mutex> lock(mutex);
      if (fail_next > 0) {
        --fail_next;
        return 0;
      }
      allocated.push_back(bytes);
      const DevicePtr p = next;
      next += (bytes + 255) / 256 * 256 + 256;
      owned.insert(p);
      if (captured.count(st) > 0) graph_allocations.insert(p);
      return p;
    };
    s.release = [this](DevicePtr p, StreamHandle st) {
      std::lock_guard<std::mutex> lock(mutex);
      if (fail_release > 0) {
        --fail_release;
        throw Error(ErrorKind::Runtime, "cuMemFreeAsync failed");
      }
      if (owned.erase(p) == 0) violations.push_back(fmt::format("{:#x} freed twice or never allocated", p));
      if (captured.count(st) > 0 && graph_allocations.count(p) == 0) {
        violations.push_back(fmt::format("{:#x} freed inside a capture, not one of the graph's allocations", p));
      }
      graph_allocations.erase(p);
      released.emplace_back(p, st);
    };
    s.capturing = [this](StreamHandle st) { return capturing(st); };
    s.identity = [this](StreamHandle st) { return identity(st); };
    s.synchronize = [this] {
      if (synchronize_fails) throw Error(ErrorKind::Runtime, "cuCtxSynchronize failed: a capture is in progress");
      ++synchronized;
    };
    return s;
  }
};

}  // namespace braze::testing
