// The runtime compiler of an arch: NVRTC for NVIDIA's sm_ archs, hiprtc for AMD's gfx ISAs. The kernel
// caches reach both through here, so a cache key names the compiler, its version and its arguments.
#pragma once

#include "device/compile_options.h"

#include <string>
#include <string_view>
#include <vector>

namespace braze::device {

// "gfx90a", "gfx942": an AMD ISA, compiled by hiprtc.
bool isHipArch(std::string_view arch);

// "nvrtc 13.0" or "hiprtc 5.2.21153" ("hiprtc of <library>" when its version cannot be told, "hiprtc
// (not found)" without one).
std::string compilerName(const CompileOptions& options);
// nvrtcArguments or hiprtcArguments (and what they throw).
std::vector<std::string> compilerArguments(const CompileOptions& options);
// compileCuda or compileHip.
CompiledKernel compileKernel(std::string_view source, std::string_view what, const CompileOptions& options);

}  // namespace braze::device
