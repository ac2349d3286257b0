// Runtime compilation of generated CUDA C++ to a cubin with NVRTC. libnvrtc is opened with dlopen on
// first use, so braze builds and runs (without compiling kernels) where no CUDA toolkit is installed.
#pragma once

#include "device/compile_options.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braze::device {

// libnvrtc can be loaded and the CUDA include dir was found.
bool nvrtcAvailable();
// NVRTC's version, "13.0"; "" when libnvrtc cannot be loaded.
std::string nvrtcVersion();
// The libnvrtc that was loaded, as found ("libnvrtc.so.13" or a path); "" when none was.
std::string nvrtcLibraryPath();
// The first of $CUDA_HOME/include, $CUDA_PATH/include, /usr/local/cuda/include, /opt/cuda/include,
// /usr/lib/cuda/include that has cuda_bf16.h; "" if none has.
std::string cudaIncludeDir();

// The arguments compileCuda passes to NVRTC for `options` (arch, -default-device, the CUDA include dirs,
// fmad, maxrregcount, -lineinfo): what CompiledKernel::options holds, joined by spaces, and so a part of
// every kernel cache key (a different toolkit's headers make a different cubin). Throws a Value error
// for a virtual arch or a non-positive maxrregcount, a Runtime error when the CUDA headers are missing.
std::vector<std::string> nvrtcArguments(const CompileOptions& options);

// With -lineinfo a cubin's line table names the file its source was saved to ($TMPDIR or /tmp, as
// braze_<what>_<hash>.cu), where profilers look for it: compileCuda writes it, and a cubin loaded from
// the disk cache needs it written again in a new process. Writes it when it is missing; never throws.
void saveSourceForProfilers(std::string_view source, std::string_view what);

// Compiles `source` (a whole translation unit with extern "C" __global__ kernels) to a cubin.
// When compilation fails, throws braze::Error (ErrorKind::Runtime) naming `what` (the fusion or
// kernel name), with NVRTC's log and the path where the source was saved ($TMPDIR or /tmp, as
// braze_<what>_<hash>.cu; the log's line numbers refer to that file). Throws a Runtime error
// "NVRTC not found (looked for ...)" when libnvrtc cannot be loaded, and one naming the directories
// searched when the CUDA headers cannot be found.
CompiledKernel compileCuda(std::string_view source, std::string_view what, const CompileOptions& options);

}  // namespace braze::device
