#include "exec/input_signature.h"

#include "ir/strided_layout.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

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
constexpr int64_t kZeroStride = kClassTag;
constexpr int64_t kRowMajorStride = kClassTag + 1;

// What a shape class knows of an extent of kSmallExtent or more: 2^power <= extent < 2^(power + 1), and
// 2^divisor_log (at most 16) is the largest power of two up to 16 that divides it.
struct LargeExtent {
  int64_t power = 0;
  int64_t divisor_log = 0;
};
LargeExtent largeExtent(int64_t extent) {
  return {static_cast<int64_t>(std::bit_width(static_cast<uint64_t>(extent))) - 1,
          std::min<int64_t>(std::countr_zero(static_cast<uint64_t>(extent)), 4)};
}

// An extent's word in a shape class: itself when small, else its LargeExtent.
int64_t extentWord(int64_t extent) {
  if (extent < kSmallExtent) return extent;
  const LargeExtent large = largeExtent(extent);
  return kClassTag | large.power << 8 | large.divisor_log;
}

// A tensor's strides in a shape class, appended to `words`: kZeroStride, kRowMajorStride (what a row-major
// tensor of its sizes has there) or the stride itself.
void appendStrideWords(std::vector<int64_t>& words, const DeviceTensor& t) {
  const size_t first = words.size();
  words.resize(first + t.sizes.size());
  int64_t row_major = 1;
  for (size_t d = t.sizes.size(); d-- > 0;) {
    const int64_t stride = d < t.strides.size() ? t.strides[d] : row_major;
    words[first + d] = stride == 0 ? kZeroStride : stride == row_major ? kRowMajorStride : stride;
    row_major *= t.sizes[d];
  }
}

std::vector<int64_t> strideWords(const DeviceTensor& t) {
  std::vector<int64_t> words;
  appendStrideWords(words, t);
  return words;
}

}  // namespace

int64_t largestOfShapeClass(int64_t extent) {
  if (extent < kSmallExtent) return extent;
  const LargeExtent large = largeExtent(extent);
  return (int64_t{1} << (large.power + 1)) - (int64_t{1} << large.divisor_log);
}

std::optional<int64_t> nthOfShapeClass(int64_t extent, int64_t k) {
  if (extent < kSmallExtent) return k == 0 ? std::optional<int64_t>(extent) : std::nullopt;
  const auto [power, divisor_log] = largeExtent(extent);
  const int64_t divisor = int64_t{1} << divisor_log;
  const int64_t value = (int64_t{1} << power) + (divisor == 16 ? 16 * k : divisor * (2 * k + 1));
  if (value >= int64_t{1} << (power + 1)) return std::nullopt;
  return value;
}

InputSignature InputSignature::of(const std::vector<DeviceValue>& inputs, const std::vector<bool>& launch_arguments) {
  InputSignature s;
  s.assign(inputs, launch_arguments);
  return s;
}

void InputSignature::assign(const std::vector<DeviceValue>& inputs, const std::vector<bool>& launch_arguments) {
  words_.clear();
  words_.reserve(inputs.size() * 10);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (const auto* t = std::get_if<DeviceTensor>(&inputs[i])) {
      appendTensorHead(words_, *t);
      words_.insert(words_.end(), t->sizes.begin(), t->sizes.end());
      words_.insert(words_.end(), t->strides.begin(), t->strides.end());
      continue;
    }
    appendScalar(std::get<ScalarValue>(inputs[i]), launchArgument(launch_arguments, i));
  }
  finish();
}

InputSignature InputSignature::shapeClassOf(const std::vector<DeviceValue>& inputs,
                                            const std::vector<bool>& launch_arguments) {
  InputSignature s;
  s.words_.reserve(inputs.size() * 16);
  std::vector<int64_t> extents;  // every extent so far, for the equalities
  extents.reserve(inputs.size() * 4);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* t = std::get_if<DeviceTensor>(&inputs[i]);
    if (t == nullptr) {
      s.appendScalar(std::get<ScalarValue>(inputs[i]), launchArgument(launch_arguments, i));
      continue;
    }
    appendTensorHead(s.words_, *t);
    for (const int64_t extent : t->sizes) {
      s.words_.push_back(extentWord(extent));
      const auto same = std::find(extents.begin(), extents.end(), extent);
      s.words_.push_back(same == extents.end() ? -1 : same - extents.begin());
      extents.push_back(extent);
    }
    appendStrideWords(s.words_, *t);
  }
  s.finish();
  return s;
}

std::optional<std::vector<DeviceValue>> InputSignature::representativeOf(
    const std::vector<DeviceValue>& inputs, const std::vector<std::vector<int64_t>>& static_shapes) {
  // Extents the definition fixes stand for themselves as it gives them (not as these inputs have them,
  // which may be wrong: the plan is the class's all the same, and binding these inputs says what is
  // wrong), and so do small extents; every extent equal to one of them too.
  std::unordered_map<int64_t, int64_t> standing_for;  // an extent -> what stands for it
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* t = std::get_if<DeviceTensor>(&inputs[i]);
    if (t == nullptr) continue;
    for (size_t d = 0; d < t->sizes.size(); ++d) {
      if (i < static_shapes.size() && d < static_shapes[i].size() && static_shapes[i][d] >= 0) {
        standing_for[t->sizes[d]] = static_shapes[i][d];
      } else if (t->sizes[d] < kSmallExtent) {
        standing_for.try_emplace(t->sizes[d], t->sizes[d]);
      }
    }
  }
  std::unordered_set<int64_t> kept;
  for (const auto& [extent, itself] : standing_for) kept.insert(itself);
  std::unordered_map<int64_t, int64_t> taken;  // per class word: the values tried for it so far
  std::vector<DeviceValue> representative = inputs;
  for (DeviceValue& value : representative) {
    auto* t = std::get_if<DeviceTensor>(&value);
    if (t == nullptr) continue;
    const std::vector<int64_t> stride_words = strideWords(*t);
    for (int64_t& extent : t->sizes) {
      auto [it, first] = standing_for.try_emplace(extent, 0);
      if (first) {
        // The next value of the extent's class word not taken.
        std::optional<int64_t> chosen;
        do {
          chosen = nthOfShapeClass(extent, taken[extentWord(extent)]++);
          if (!chosen) return std::nullopt;
        } while (kept.count(*chosen) != 0);
        it->second = *chosen;
      }
      extent = it->second;
    }
    int64_t row_major = 1;
    t->strides.resize(t->sizes.size());
    for (size_t d = t->sizes.size(); d-- > 0;) {
      if (stride_words[d] == kZeroStride) t->strides[d] = 0;
      if (stride_words[d] == kRowMajorStride) t->strides[d] = row_major;
      row_major *= t->sizes[d];
    }
  }
  // An exact stride can come out row-major at the new sizes: then the class has no representative.
  if (shapeClassOf(representative) != shapeClassOf(inputs)) return std::nullopt;
  return representative;
}

}  // namespace braze::exec
