// A vendor's DeviceOps, one per device ordinal, made on first use and never destroyed (like the
// driver or runtime they call: outputs may be released from static destructors).
#pragma once

#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace braze::device {

template <class Ops>
class MadeDevices {
 public:
  Ops& get(int ordinal) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = by_ordinal_.find(ordinal);
    if (found == by_ordinal_.end()) {
      // Made before it is entered: a device that fails to open (no driver) leaves no slot behind.
      found = by_ordinal_.emplace(ordinal, std::make_unique<Ops>(ordinal)).first;
    }
    return *found->second;
  }

  // releaseCachedBlocks() on every device made; the bytes. Each device is waited for outside the lock,
  // so a thread making another device is not held up by the wait. Every device is trimmed even where
  // another raises (a capture on it); the first error is raised after all of them.
  size_t releaseCachedBlocks() {
    std::vector<Ops*> devices;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [ordinal, ops] : by_ordinal_) devices.push_back(ops.get());
    }
    size_t returned = 0;
    std::exception_ptr first_error;
    for (Ops* ops : devices) {
      try {
        returned += ops->releaseCachedBlocks();
      } catch (...) {
        if (!first_error) first_error = std::current_exception();
      }
    }
    if (first_error) std::rethrow_exception(first_error);
    return returned;
  }

 private:
  std::mutex mutex_;
  std::map<int, std::unique_ptr<Ops>> by_ordinal_;
};

}  // namespace braze::device
