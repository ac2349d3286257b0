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
#include <vector>

namespace braze::exec {

using namespace device;  // exec runs plans through the device layer: its names are exec's vocabulary

class InputSignature {
 public:
  // `launch_arguments[i]`: input i is a scalar whose value is not part of the signature (none when empty).
  static InputSignature of(const std::vector<DeviceValue>& inputs, const std::vector<bool>& launch_arguments = {});

  bool operator==(const InputSignature& other) const { return hash_ == other.hash_ && words_ == other.words_; }
  size_t hash() const { return hash_; }

  struct Hash {
    size_t operator()(const InputSignature& s) const { return s.hash_; }
  };

 private:
  std::vector<int64_t> words_;
  size_t hash_ = 0;
};

// The address's alignment (ir/strided_layout.h) up to 16 bytes: what vectorized accesses depend on.
int64_t pointerAlignment(DevicePtr address);

}  // namespace braze::exec
