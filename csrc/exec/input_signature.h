// What a prepared plan is specialized for: per input, its dtype, device, sizes, strides and the
// alignment of its pointer (up to 16 bytes); per scalar input, its type, and its value unless the
// scalar reaches kernels only as a launch argument (scheduler/launch_arguments.h: a learning rate, a
// random seed or offset, whose new values each run passes). A prepared plan is made for
// all of it (any change needs another plan, and nothing else does: two calls with the same signature
// share one); its kernels depend on less (row counts and scalar values are launch arguments), so a new
// signature is often a new plan over kernels compiled already.
//
// Computing it is the first thing every cached execute does, so it is a flat vector of integers
// and a hash, built without strings or maps.
#pragma once

#include "device/device_tensor.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace braze::exec {

using namespace device;  // exec runs plans through the device layer: its names are exec's vocabulary

class InputSignature {
 public:
  // `launch_arguments[i]`: input i is a scalar whose value is not part of the signature (none when empty).
  static InputSignature of(const std::vector<DeviceValue>& inputs, const std::vector<bool>& launch_arguments = {});
  // This signature made of() these inputs, its words' capacity kept (a caller looking plans up again
  // and again allocates nothing).
  void assign(const std::vector<DeviceValue>& inputs, const std::vector<bool>& launch_arguments = {});
  // The inputs' shape class: what a segmentation depends on besides the schedulers' size limits, which
  // FusionCache checks again for each signature of a class (segmenter/reuse_segments.h). The same words as
  // the signature's, except that an extent of 128 or more is known only by its power of two (2048 to 4095
  // are one class) and by the largest power of two up to 16 that divides it (what vectorization reads), a
  // stride by whether it is 0 or row-major (any other stride is kept exactly), and equal extents by which
  // earlier extent they equal.
  static InputSignature shapeClassOf(const std::vector<DeviceValue>& inputs,
                                     const std::vector<bool>& launch_arguments = {});
  // Inputs of the same shape class as these whose sizes and strides depend on the class alone: small
  // extents as they are, those `static_shapes` fixes (per input, the definition's extents, -1 where open)
  // as it fixes them; the k-th distinct other extent of a power of two and divisor the k-th such value from the power
  // up; strides 0, row-major (at the new sizes) or exact as the class has them; pointers and scalars as
  // given (their alignment and values are the class's). A plan made for them is the class's, whichever
  // signature of it came first. None when the class has no such inputs (an exact stride that the new
  // sizes make row-major, or more distinct extents of one power and divisor than it holds).
  static std::optional<std::vector<DeviceValue>> representativeOf(
      const std::vector<DeviceValue>& inputs, const std::vector<std::vector<int64_t>>& static_shapes = {});

  bool operator==(const InputSignature& other) const { return hash_ == other.hash_ && words_ == other.words_; }
  size_t hash() const { return hash_; }

  struct Hash {
    size_t operator()(const InputSignature& s) const { return s.hash_; }
  };

 private:
  void appendScalar(const ScalarValue& scalar, bool value_is_launch_argument);
  void finish();  // the hash of the words

  std::vector<int64_t> words_;
  size_t hash_ = 0;
};

// The largest extent a shape class does not tell from `extent`: itself below 128, else the largest of the
// same power of two and divisor (2^(power + 1) - divisor).
int64_t largestOfShapeClass(int64_t extent);
// The k-th value (from 0) of `extent`'s shape-class word from its power of two up: 2^power + 16k where 16
// divides it, else 2^power + divisor (2k + 1); `extent` itself for k = 0 below 128. None past the class.
std::optional<int64_t> nthOfShapeClass(int64_t extent, int64_t k);

// The address's alignment (ir/strided_layout.h) up to 16 bytes: what vectorized accesses depend on.
int64_t pointerAlignment(DevicePtr address);

}  // namespace braze::exec
