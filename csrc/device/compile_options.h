// What a kernel is compiled with and what compiling gives, for either runtime compiler (NVRTC for an sm_
// arch, hiprtc for a gfx arch: kernel_compiler.h chooses).
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <vector>

namespace braze::device {

struct CompileOptions {
  // "sm_80", "sm_90", "sm_90a" (NVRTC, a cubin) or "gfx90a", "gfx942" (hiprtc, an AMD code object):
  // compiled for exactly this arch.
  std::string arch = "sm_90";
  bool fmad = true;
  std::optional<int> maxrregcount = std::nullopt;
  bool lineinfo = false;
  // Ordered, so options can be part of a map key (the loaded-kernel cache).
  auto operator<=>(const CompileOptions&) const = default;
};

// The options braze compiles its kernels with for `arch` ("sm_90" or "gfx942", from DeviceInfo::arch()):
// fmad on, and line tables when BRAZE_LINEINFO is set to anything but "" or "0" (profilers and
// compute-sanitizer then map machine code back to source lines, at no cost in speed). maxrregcount is
// the heuristics' to set.
CompileOptions kernelCompileOptions(std::string arch);

struct CompiledKernel {
  std::vector<char> cubin;  // the cubin, or for a gfx arch the AMD code object
  std::string log;      // the compiler's log (empty when there were no warnings)
  std::string options;  // the options used, joined by spaces (for cache keys and error messages)
};

}  // namespace braze::device
