// The CUDA C++ emitter: kernel IR to one translation unit NVRTC compiles (extern "C" kernel, the op
// helpers of cuda_ops.h, a block reduction helper). Readable on purpose: it is what
// fd.last_cuda_code() and BRAZE_DUMP=kernel show.
#pragma once

#include "kernel/kernel_ir.h"

#include <string>

namespace braze::kernel {

std::string emitCuda(const Kernel& kernel);

}  // namespace braze::kernel
