// Test helpers: host tensors from values, values from host tensors, random inputs.
#pragma once

#include "ir/host_tensor.h"

#include <cstdint>
#include <random>
#include <vector>

namespace braze::testing {

// A row-major tensor holding `values` (rounded to dtype as a kernel would store them).
inline HostTensor tensorOf(DataType dtype, std::vector<int64_t> sizes, const std::vector<double>& values) {
  HostTensor t = HostTensor::empty(dtype, std::move(sizes));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (isFloating(dtype)) {
      t.writeDouble(i, values.at(i));
    } else {
      t.writeInt(i, static_cast<int64_t>(values.at(i)));
    }
  }
  return t;
}

// Every element in row-major order as double (reads through any strides).
inline std::vector<double> valuesOf(const HostTensor& t) {
  std::vector<double> values;
  forEachIndex(t.sizes(), [&](const std::vector<int64_t>& index) { values.push_back(t.readDouble(t.offsetOf(index))); });
  return values;
}

inline HostTensor randomTensor(DataType dtype, std::vector<int64_t> sizes, uint64_t seed, double lo = -2.0,
                               double hi = 2.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  HostTensor t = HostTensor::empty(dtype, std::move(sizes));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (isFloating(dtype)) {
      t.writeDouble(i, dist(rng));
    } else {
      t.writeInt(i, static_cast<int64_t>(std::floor(dist(rng))));
    }
  }
  return t;
}

inline const HostTensor& asTensor(const HostValue& v) { return std::get<HostTensor>(v); }

}  // namespace braze::testing
