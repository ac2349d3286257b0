#include "device/kernel_compiler.h"

#include "device/cuda/nvrtc.h"
#include "device/hip/hiprtc.h"

namespace braze::device {

bool isHipArch(std::string_view arch) { return arch.starts_with("gfx"); }

std::string compilerName(const CompileOptions& options) {
  if (!isHipArch(options.arch)) return "nvrtc " + nvrtcVersion();
  // Without a version in its file name, the library itself tells compilers apart.
  if (!hiprtcVersion().empty()) return "hiprtc " + hiprtcVersion();
  return hiprtcAvailable() ? "hiprtc of " + hiprtcLibraryPath() : std::string("hiprtc (not found)");
}

std::vector<std::string> compilerArguments(const CompileOptions& options) {
  return isHipArch(options.arch) ? hiprtcArguments(options) : nvrtcArguments(options);
}

CompiledKernel compileKernel(std::string_view source, std::string_view what, const CompileOptions& options) {
  return isHipArch(options.arch) ? compileHip(source, what, options) : compileCuda(source, what, options);
}

}  // namespace braze::device
