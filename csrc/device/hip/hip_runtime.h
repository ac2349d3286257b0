// The HIP runtime (libamdhip64), opened with dlopen on first use as the CUDA driver is, so braze builds
// and runs where ROCm is not installed. Only the calls braze makes are declared, with HIP's C ABI
// (hipError_t is an int-sized enum, hipSuccess 0; streams, modules and functions are opaque pointers;
// hipDevice_t is an int).
#pragma once

#include "support/dynamic_library.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace braze::device {

using HipError = int;
using HipStream = struct HipStreamOpaque*;
using HipModule = struct HipModuleOpaque*;
using HipFunction = struct HipFunctionOpaque*;
constexpr HipError kHipSuccess = 0;
constexpr HipError kHipErrorOutOfMemory = 2;
// hipStreamPerThread: the calling thread's own default stream, a different stream on each thread.
inline HipStream hipStreamPerThread() { return reinterpret_cast<HipStream>(2); }
constexpr int kHipStreamCaptureStatusNone = 0;

struct HipRuntime {
  DynamicLibrary library;
  HipError (*init)(unsigned flags) = nullptr;
  HipError (*getDeviceCount)(int*) = nullptr;
  HipError (*getDevice)(int*) = nullptr;
  HipError (*setDevice)(int) = nullptr;
  HipError (*runtimeGetVersion)(int*) = nullptr;
  HipError (*deviceGetName)(char*, int, int device) = nullptr;
  HipError (*deviceGetAttribute)(int*, int attribute, int device) = nullptr;
  // hipGetDevicePropertiesR0600 (ROCm 6 on) or hipGetDeviceProperties: read only for the gfx arch name
  // (queryHipDevice), whose place in the struct differs between them.
  HipError (*getDeviceProperties)(void*, int device) = nullptr;
  HipError (*moduleLoadData)(HipModule*, const void* image) = nullptr;
  HipError (*moduleGetFunction)(HipFunction*, HipModule, const char* name) = nullptr;
  HipError (*moduleLaunchKernel)(HipFunction, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared_bytes, HipStream, void** args, void** extra) = nullptr;
  HipError (*mallocAsync)(void**, size_t, HipStream) = nullptr;
  HipError (*freeAsync)(void*, HipStream) = nullptr;
  HipError (*memsetAsync)(void*, int value, size_t bytes, HipStream) = nullptr;
  HipError (*streamSynchronize)(HipStream) = nullptr;
  HipError (*deviceSynchronize)() = nullptr;
  // Null where the runtime lacks them: hipStreamGetId (a stream's id, unique for the life of the process) and
  // hipStreamIsCapturing (status: a hipStreamCaptureStatus).
  HipError (*streamGetId)(HipStream, unsigned long long* id) = nullptr;
  HipError (*streamIsCapturing)(HipStream, int* status) = nullptr;
  HipError (*memcpy)(void* dst, const void* src, size_t bytes, int kind) = nullptr;  // kind 4: hipMemcpyDefault
  HipError (*hostMalloc)(void** pointer, size_t bytes, unsigned flags) = nullptr;     // hipHostMalloc
  HipError (*hostGetDevicePointer)(void** device, void* host, unsigned flags) = nullptr;  // hipHostGetDevicePointer
  const char* (*getErrorName)(HipError) = nullptr;
  const char* (*getErrorString)(HipError) = nullptr;

  // "hipErrorNoDevice (no ROCm-capable device is detected)".
  std::string describe(HipError result) const;
  // Throws a Runtime error naming `call` (and `context`) with describe(result) when it is not hipSuccess.
  void check(HipError result, std::string_view call, std::string_view context = "") const;
};

// The runtime with at least one AMD GPU initialized; nullptr otherwise (hipUnavailableReason says why).
const HipRuntime* hipRuntime();
// The runtime or a Runtime error: "no HIP runtime: ..." with the reason.
const HipRuntime& requireHipRuntime();
// Why hipRuntime() is null: "libamdhip64 not found (looked for ...)", "libamdhip64.so: hipInit failed:
// hipErrorNoDevice (...)", "libamdhip64.so: no AMD GPU (hipGetDeviceCount: 0)".
std::string hipUnavailableReason();
// The loaded runtime's version ("5.2.21153") and file; "" when no libamdhip64 loads. Neither needs a GPU.
std::string hipRuntimeVersion();
std::string hipRuntimeLibraryPath();

}  // namespace braze::device
