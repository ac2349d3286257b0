#include "exec/input_signature.h"

#include "ir/strided_layout.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace braze::exec {

int64_t pointerAlignment(DevicePtr address) {
  return std::min<int64_t>(addressAlignment(static_cast<uintptr_t>(address)), 16);
}

InputSignature InputSignature::of(const std::vector<DeviceValue>& inputs, const std::vector<bool>& launch_arguments) {
  InputSignature s;
  s.words_.reserve(inputs.size() * 10);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DeviceValue& v = inputs[i];
    if (const auto* t = std::get_if<DeviceTensor>(&v)) {
      s.words_.push_back(static_cast<int64_t>(t->dtype) << 8 | static_cast<int64_t>(t->sizes.size()));
      // A CPU scalar (device -1) is read as a value: where it lives says nothing about the kernels.
      s.words_.push_back(static_cast<int64_t>(t->device) << 8 | (t->device < 0 ? 0 : pointerAlignment(t->data)));
      s.words_.insert(s.words_.end(), t->sizes.begin(), t->sizes.end());
      s.words_.insert(s.words_.end(), t->strides.begin(), t->strides.end());
      continue;
    }
    const ScalarValue& scalar = std::get<ScalarValue>(v);
    s.words_.push_back(-1 - static_cast<int64_t>(scalar.index()));
    if (i < launch_arguments.size() && launch_arguments[i]) continue;
    std::visit(
        [&](auto x) {
          if constexpr (std::is_same_v<decltype(x), double>) {
            s.words_.push_back(std::bit_cast<int64_t>(x));
          } else {
            s.words_.push_back(static_cast<int64_t>(x));
          }
        },
        scalar);
  }
  // FNV-1a over the words: the map also compares the words, so the hash only spreads entries.
  uint64_t h = 1469598103934665603ull;
  for (int64_t w : s.words_) {
    h ^= static_cast<uint64_t>(w);
    h *= 1099511628211ull;
  }
  s.hash_ = static_cast<size_t>(h);
  return s;
}

}  // namespace braze::exec
