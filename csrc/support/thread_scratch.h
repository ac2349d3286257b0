// A value of T reused by every call on one thread, so that the vectors in it keep their capacity from
// one call to the next: a hot path (a cached execute) then allocates nothing after its first call. A
// call entered again on the same thread while an outer one holds it (code the outer call runs, such as
// Python that executes another fusion) gets a T of its own, so neither sees the other's contents.
// The holder leaves the reused T as it wants the next call to find it: references to objects it must
// not keep alive (Python objects, device memory) released, capacity kept.
#pragma once

#include <optional>

namespace braze {

template <typename T>
class ThreadScratch {
 public:
  ThreadScratch() : outer_holds_(held()) {
    if (outer_holds_) own_.emplace();
    held() = true;
  }
  ~ThreadScratch() { held() = outer_holds_; }
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;

  T& get() { return own_ ? *own_ : reused(); }

 private:
  static T& reused() {
    thread_local T value;
    return value;
  }
  static bool& held() {
    thread_local bool flag = false;
    return flag;
  }

  bool outer_holds_;
  std::optional<T> own_;
};

}  // namespace braze
