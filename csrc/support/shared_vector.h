// A vector whose copies share its elements until one of them is written: a kernel's statements and
// expressions are copied with every relaunch of a kernel lowered once (another row count of its shape
// class) and with every plan that keeps them, and are written only while the kernel is being built.
// Reading goes through the const interface (or a const std::vector&); writing goes through mut(), which
// first gives this copy elements of its own where another copy shares them. A reference taken before a
// mut() that separates the copies still reads the elements the others keep.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace braze {

template <typename T>
class SharedVector {
 public:
  SharedVector() = default;
  SharedVector(std::vector<T> elements)  // NOLINT: implicit, as the vector it stands for
      : elements_(std::make_shared<std::vector<T>>(std::move(elements))) {}

  const std::vector<T>& get() const { return elements_ ? *elements_ : empty_; }
  operator const std::vector<T>&() const { return get(); }  // NOLINT: implicit, for readers
  // The elements to write: this copy's own.
  std::vector<T>& mut() {
    if (!elements_) {
      elements_ = std::make_shared<std::vector<T>>();
    } else if (elements_.use_count() != 1) {
      elements_ = std::make_shared<std::vector<T>>(*elements_);
    }
    return *elements_;
  }

  size_t size() const { return get().size(); }
  bool empty() const { return get().empty(); }
  const T& operator[](size_t i) const { return get()[i]; }
  const T& at(size_t i) const { return get().at(i); }
  const T& front() const { return get().front(); }
  const T& back() const { return get().back(); }
  typename std::vector<T>::const_iterator begin() const { return get().begin(); }
  typename std::vector<T>::const_iterator end() const { return get().end(); }

 private:
  inline static const std::vector<T> empty_{};
  std::shared_ptr<std::vector<T>> elements_;  // null: empty (a new or moved-from vector)
};

}  // namespace braze
