// The kernel emitter: kernel IR to one translation unit that NVRTC (CUDA) or hiprtc (HIP) compiles: an
// extern "C" kernel, the op helpers of source_preamble.h in the dialect, a block reduction helper. One
// printer for both: the kernel body is the same text, only the preamble differs. Readable on purpose:
// it is what fd.last_cuda_code(), fd.last_hip_code() and BRAZE_DUMP=after:emit show.
#pragma once

#include "codegen/source_preamble.h"
#include "kernel/kernel_ir.h"
#include "target/device_info.h"

#include <string>

namespace braze::codegen {

using kernel::Kernel;

// A kernel planned for a wavefront of 64 has no CUDA spelling (a Value error says so).
std::string emitSource(const Kernel& kernel, SourceDialect dialect);
inline std::string emitCuda(const Kernel& kernel) { return emitSource(kernel, SourceDialect::Cuda); }
inline std::string emitHip(const Kernel& kernel) { return emitSource(kernel, SourceDialect::Hip); }
// The dialect a device's compiler takes: HIP for AMD GPUs, CUDA for NVIDIA's.
inline SourceDialect dialectFor(const DeviceInfo& device) {
  return device.vendor == GpuVendor::Amd ? SourceDialect::Hip : SourceDialect::Cuda;
}

}  // namespace braze::codegen
