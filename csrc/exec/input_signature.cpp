#include "exec/input_signature.h"

#include "ir/strided_layout.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace braze::exec {

int64_t pointerAlignment(DevicePtr address) {
  return std::min<int64_t>(addressAlignment(static_cast<uintptr_t>(address)), 16);
}

void InputSignature::appendScalar(const ScalarValue& scalar, bool value_is_launch_argument) {
  words_.push_back(-1 - static_cast<int64_t>(scalar.index()));
  if (value_is_launch_argument) return;
  std::visit(
      [&](auto x) {
        if constexpr (std::is_same_v<decltype(x), double>) {
          words_.push_back(std::bit_cast<int64_t>(x));
        } else {
          words_.push_back(static_cast<int64_t>(x));
        }
      },
      scalar);
}

void InputSignature::finish() {
  // FNV-1a over the words: the map also compares the words, so the hash only spreads entries.
  uint64_t h = 1469598103934665603ull;
  for (int64_t w : words_) {
    h ^= static_cast<uint64_t>(w);
    h *= 1099511628211ull;
  }
  hash_ = static_cast<size_t>(h);
}

namespace {

bool launchArgument(const std::vector<bool>& launch_arguments, size_t i) {
  return i < launch_arguments.size() && launch_arguments[i];
}

// A tensor's dtype, rank, device and (on a GPU) pointer alignment: one word each for the first two pairs.
void appendTensorHead(std::vector<int64_t>& words, const DeviceTensor& t) {
  words.push_back(static_cast<int64_t>(t.dtype) << 8 | static_cast<int64_t>(t.sizes.size()));
  // A CPU scalar (device -1) is read as a value: where it lives says nothing about the kernels.
  words.push_back(static_cast<int64_t>(t.device) << 8 | (t.device < 0 ? 0 : pointerAlignment(t.data)));
}

constexpr int64_t kSmallExtent = 128;        // below it, extents stay exact in a shape class
constexpr int64_t kClassTag = int64_t{1} << 40;  // marks a word that stands for a class of values

}  // namespace

InputSignature InputSignature::of(const std::vector<DeviceValue>& inputs, const std::vector<bool>& launch_arguments) {
  InputSignature s;
  s.words_.reserve(inputs.size() * 10);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (const auto* t = std::get_if<DeviceTensor>(&inputs[i])) {
      appendTensorHead(s.words_, *t);
      s.words_.insert(s.words_.end(), t->sizes.begin(), t->sizes.end());
      s.words_.insert(s.words_.end(), t->strides.begin(), t->strides.end());
      continue;
    }
    s.appendScalar(std::get<ScalarValue>(inputs[i]), launchArgument(launch_arguments, i));
  }
  s.finish();
  return s;
}

InputSignature InputSignature::shapeClassOf(const std::vector<DeviceValue>& inputs,
                                            const std::vector<bool>& launch_arguments) {
  InputSignature s;
  s.words_.reserve(inputs.size() * 16);
  std::vector<int64_t> extents;  // every extent so far, for the equalities
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* t = std::get_if<DeviceTensor>(&inputs[i]);
    if (t == nullptr) {
      s.appendScalar(std::get<ScalarValue>(inputs[i]), launchArgument(launch_arguments, i));
      continue;
    }
    appendTensorHead(s.words_, *t);
    int64_t row_major = 1;
    std::vector<int64_t> strides(t->sizes.size());
    for (size_t d = t->sizes.size(); d-- > 0;) {
      const int64_t stride = d < t->strides.size() ? t->strides[d] : row_major;
      strides[d] = stride == 0 ? kClassTag : stride == row_major ? kClassTag + 1 : stride;
      row_major *= t->sizes[d];
    }
    for (const int64_t extent : t->sizes) {
      if (extent < kSmallExtent) {
        s.words_.push_back(extent);
      } else {
        const int64_t power = std::bit_width(static_cast<uint64_t>(extent)) - 1;
        const int64_t divisor = std::min<int64_t>(std::countr_zero(static_cast<uint64_t>(extent)), 4);
        s.words_.push_back(kClassTag | power << 8 | divisor);
      }
      const auto same = std::find(extents.begin(), extents.end(), extent);
      s.words_.push_back(same == extents.end() ? -1 : same - extents.begin());
      extents.push_back(extent);
    }
    s.words_.insert(s.words_.end(), strides.begin(), strides.end());
  }
  s.finish();
  return s;
}

}  // namespace braze::exec
