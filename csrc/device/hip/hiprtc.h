// Runtime compilation of generated HIP C++ to an AMD code object with hiprtc. Like NVRTC, hiprtc is
// opened with dlopen on first use: libhiprtc (ROCm 5.3 on) or, before it was split out, libamdhip64,
// which exports the hiprtc functions itself (Debian's HIP 5.2). hiprtc needs no include directory: the
// HIP device headers are built into it, and braze's kernels use no other header.
#pragma once

#include "device/compile_options.h"

#include <string>
#include <string_view>
#include <vector>

namespace braze::device {

// A library exporting hiprtc could be loaded.
bool hiprtcAvailable();
// The ROCm version of the loaded hiprtc ("5.2.21153", from its library file's name); "" when none can be
// loaded or its name tells none.
std::string hiprtcVersion();
// The library hiprtc was loaded from, as found; "" when none was.
std::string hiprtcLibraryPath();
// The candidates tried, in order (for "not found" messages and show_config).
std::vector<std::string> hiprtcCandidates();

// Whether the loaded hiprtc can compile for `arch`: an arch newer than its compiler is refused before it
// is tried, because an old hiprtc does not fail cleanly (HIP 5.2's aborts the process on gfx942).
// Empty when it can, else why not.
std::string hiprtcArchProblem(std::string_view arch);

// The arguments compileHip passes to hiprtc for `options` (--offload-arch, -std=c++17, -O3, -ffp-contract=off): what
// CompiledKernel::options holds and a part of the kernel cache key. Throws a Value error for an arch
// that is not a gfx ISA name and for maxrregcount, which hiprtc has no option for.
std::vector<std::string> hiprtcArguments(const CompileOptions& options);

// Compiles `source` (a whole translation unit with extern "C" __global__ kernels) to a code object
// for options.arch. Errors as compileCuda's: a Runtime error naming `what` with hiprtc's log and where
// the source was saved (braze_<what>_<hash>.hip); "hiprtc not found (looked for ...)" without one.
CompiledKernel compileHip(std::string_view source, std::string_view what, const CompileOptions& options);

}  // namespace braze::device
