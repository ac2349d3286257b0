// The scan scheduler's parameters: a cumsum walks `extent` elements along `dim` for each of `lines`
// lines (every position of the other dims), one thread per line, `block` threads per block.
#pragma once

#include "target/device_info.h"

#include <cstdint>
#include <string>

namespace braze {

struct ScanProblem {
  int64_t lines = 0;
  int64_t extent = 0;
};

struct ScanParams {
  int64_t block = 128;
  int64_t grid = 1;
  std::string toString() const;  // heads the kernel's source
};

ScanParams scanHeuristics(const DeviceInfo& device, const ScanProblem& problem);

}  // namespace braze
