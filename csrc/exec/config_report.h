// What braze.show_config() prints: every version, library and setting that decides how braze compiles
// and runs kernels here, for bug reports and for "why does this machine not use the GPU?". Asking never
// fails and never allocates on the GPU: a missing piece is reported as missing, with the reason.
#pragma once

#include <string>
#include <vector>

namespace braze::exec {

struct ConfigEntry {
  std::string key;    // "nvrtc", "cuda driver", "device 0", "env BRAZE_DUMP", ...
  std::string value;  // "13.0 (libnvrtc.so.13)", "not found: ...", ...
};

// In a fixed order: braze, the compiler it was built with, NVRTC and the CUDA headers, the driver and
// each device it sees, the kernel disk cache, then the BRAZE_* variables that are set.
std::vector<ConfigEntry> configReport();

}  // namespace braze::exec
