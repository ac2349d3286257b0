// The CUDA driver API, reached through dlopen of libcuda.so.1: braze never links against CUDA, so one
// build loads and runs its CPU paths (the simulator, the reference) on machines with no driver, and
// runs kernels on the GPU where there is one. Only the few functions braze calls are declared.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace braze::device {

// The driver's types, declared here so that building braze never needs cuda.h: CUresult and the
// attribute enums are C enums (int-sized), CUdevice an int, CUdeviceptr a 64-bit integer; contexts,
// modules, functions and streams are opaque pointers. CUDA_SUCCESS is 0.
using CuResult = int;
using CuDevice = int;
using CuDevicePtr = unsigned long long;
using CuContext = struct CuContextOpaque*;
using CuModule = struct CuModuleOpaque*;
using CuFunction = struct CuFunctionOpaque*;
using CuStream = struct CuStreamOpaque*;
using CuMemPool = struct CuMemPoolOpaque*;
using CuGraph = struct CuGraphOpaque*;
using CuGraphExec = struct CuGraphExecOpaque*;
using CuGraphNode = struct CuGraphNodeOpaque*;
// CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h since CUDA 12.0): a kernel node's launch, for the _v2 graph calls.
struct CuKernelNodeParams {
  CuFunction function = nullptr;
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned shared_bytes = 0;
  void** params = nullptr;
  void** extra = nullptr;
  void* kernel = nullptr;   // CUkernel: unused when function is set
  CuContext context = nullptr;  // ignored when function is set
};
// CU_STREAM_CAPTURE_STATUS_NONE: the stream is not being captured into a graph.
constexpr int kStreamCaptureStatusNone = 0;
// CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: bytes a pool keeps cached instead of returning them to the OS.
constexpr int kMemPoolAttrReleaseThreshold = 4;
constexpr CuResult kCudaSuccess = 0;
constexpr CuResult kCudaErrorOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: a launch may ask for more than 48 KiB of dynamic
// shared memory only after the function's limit was raised to it.
constexpr int kFuncAttributeMaxDynamicSharedSizeBytes = 8;

// Pointers to the driver's functions, resolved once. The _v2 entry points are the ones cuda.h maps
// the plain names to since CUDA 3.2 (64-bit sizes and pointers).
struct CudaDriver {
  CuResult (*init)(unsigned int flags) = nullptr;                                        // cuInit
  CuResult (*deviceGetCount)(int* count) = nullptr;                                      // cuDeviceGetCount
  CuResult (*deviceGet)(CuDevice* device, int ordinal) = nullptr;                        // cuDeviceGet
  CuResult (*deviceGetName)(char* name, int length, CuDevice device) = nullptr;          // cuDeviceGetName
  CuResult (*deviceGetAttribute)(int* value, int attribute, CuDevice device) = nullptr;  // cuDeviceGetAttribute
  CuResult (*devicePrimaryCtxRetain)(CuContext* context, CuDevice device) = nullptr;     // cuDevicePrimaryCtxRetain
  CuResult (*ctxSetCurrent)(CuContext context) = nullptr;                                // cuCtxSetCurrent
  CuResult (*ctxSynchronize)() = nullptr;                                                // cuCtxSynchronize
  CuResult (*ctxGetCurrent)(CuContext* context) = nullptr;                               // cuCtxGetCurrent
  CuResult (*ctxPushCurrent)(CuContext context) = nullptr;                               // cuCtxPushCurrent_v2
  CuResult (*ctxPopCurrent)(CuContext* context) = nullptr;                               // cuCtxPopCurrent_v2
  CuResult (*moduleLoadData)(CuModule* module, const void* image) = nullptr;             // cuModuleLoadData
  CuResult (*moduleGetFunction)(CuFunction* function, CuModule module, const char* name) = nullptr;
  CuResult (*funcSetAttribute)(CuFunction function, int attribute, int value) = nullptr;  // cuFuncSetAttribute
  CuResult (*launchKernel)(CuFunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                           unsigned block_y, unsigned block_z, unsigned shared_bytes, CuStream stream, void** params,
                           void** extra) = nullptr;                                         // cuLaunchKernel
  CuResult (*memAlloc)(CuDevicePtr* pointer, size_t bytes) = nullptr;                     // cuMemAlloc_v2
  CuResult (*memFree)(CuDevicePtr pointer) = nullptr;                                     // cuMemFree_v2
  CuResult (*memcpyHtoD)(CuDevicePtr dst, const void* src, size_t bytes) = nullptr;       // cuMemcpyHtoD_v2
  CuResult (*memcpyDtoH)(void* dst, CuDevicePtr src, size_t bytes) = nullptr;             // cuMemcpyDtoH_v2
  CuResult (*memsetD8)(CuDevicePtr dst, unsigned char value, size_t bytes) = nullptr;     // cuMemsetD8_v2
  CuResult (*memHostAlloc)(void** pointer, size_t bytes, unsigned flags) = nullptr;       // cuMemHostAlloc
  CuResult (*memHostGetDevicePointer)(CuDevicePtr* device, void* host, unsigned flags) = nullptr;  // cuMemHostGetDevicePointer_v2
  // Stream-ordered allocation (the device's default memory pool, which caches freed blocks) and the
  // stream operations the FusionCache's execute path uses.
  CuResult (*memAllocAsync)(CuDevicePtr* pointer, size_t bytes, CuStream stream) = nullptr;  // cuMemAllocAsync
  CuResult (*memFreeAsync)(CuDevicePtr pointer, CuStream stream) = nullptr;                 // cuMemFreeAsync
  CuResult (*memsetD8Async)(CuDevicePtr dst, unsigned char value, size_t bytes, CuStream stream) = nullptr;
  CuResult (*streamSynchronize)(CuStream stream) = nullptr;                                 // cuStreamSynchronize
  CuResult (*deviceGetDefaultMemPool)(CuMemPool* pool, CuDevice device) = nullptr;  // cuDeviceGetDefaultMemPool
  CuResult (*memPoolSetAttribute)(CuMemPool pool, int attribute, void* value) = nullptr;  // cuMemPoolSetAttribute
  // CUDA graphs (a plan's kernels launched as one graph): optional, null on a driver without the
  // CUDA 12 _v2 entry points, where plans launch their kernels one by one.
  CuResult (*graphCreate)(CuGraph* graph, unsigned flags) = nullptr;  // cuGraphCreate
  CuResult (*graphAddKernelNode)(CuGraphNode* node, CuGraph graph, const CuGraphNode* dependencies, size_t count,
                                 const CuKernelNodeParams* params) = nullptr;  // cuGraphAddKernelNode_v2
  CuResult (*graphInstantiate)(CuGraphExec* exec, CuGraph graph, unsigned long long flags) = nullptr;
  CuResult (*graphExecKernelNodeSetParams)(CuGraphExec exec, CuGraphNode node,
                                           const CuKernelNodeParams* params) = nullptr;  // ..._v2
  CuResult (*graphLaunch)(CuGraphExec exec, CuStream stream) = nullptr;                  // cuGraphLaunch
  CuResult (*graphExecDestroy)(CuGraphExec exec) = nullptr;                              // cuGraphExecDestroy
  CuResult (*graphDestroy)(CuGraph graph) = nullptr;                                     // cuGraphDestroy
  CuResult (*streamIsCapturing)(CuStream stream, int* status) = nullptr;                 // cuStreamIsCapturing
  // A stream's identity for the life of the process (handles may be reused): optional, CUDA 12.0 on.
  CuResult (*streamGetId)(CuStream stream, unsigned long long* id) = nullptr;  // cuStreamGetId
  bool hasGraphs() const {
    return graphCreate && graphAddKernelNode && graphInstantiate && graphExecKernelNodeSetParams && graphLaunch &&
           graphExecDestroy && graphDestroy && streamIsCapturing;
  }
  // TMA tensor maps (CUDA 12.0 on): optional, null on an older driver, where a TMA kernel cannot launch.
  CuResult (*tensorMapEncodeTiled)(void* map, int dtype, unsigned rank, void* address, const unsigned long long* dims,
                                   const unsigned long long* strides, const unsigned* box, const unsigned* element_strides,
                                   int interleave, int swizzle, int l2_promotion, int oob_fill) = nullptr;
  CuResult (*driverGetVersion)(int* version) = nullptr;  // cuDriverGetVersion: 13000 for CUDA 13.0 (optional)
  CuResult (*getErrorName)(CuResult result, const char** name) = nullptr;                 // cuGetErrorName
  CuResult (*getErrorString)(CuResult result, const char** text) = nullptr;               // cuGetErrorString

  // "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
  std::string errorText(CuResult result) const;
  // Throws braze::Error (ErrorKind::Runtime) "<call> failed: <errorText>[ (<context>)]" unless success.
  void check(CuResult result, std::string_view call, std::string_view context = {}) const;
};

// The driver, loaded and initialized (cuInit) on first use; nullptr when there is no libcuda, it lacks
// a function, cuInit fails, or it sees no device (containers often mount libcuda without a GPU).
const CudaDriver* cudaDriver();
bool cudaAvailable();
// Why cudaDriver() is null, for skips and errors: with no libcuda at all it is "no CUDA driver found;
// host inputs run on the CPU simulator (looked for libcuda.so.1, libcuda.so)". "" when available.
const std::string& cudaUnavailableReason();
// The libcuda that was opened, as found; "" when none was (set even when cuInit then failed).
std::string cudaDriverLibraryPath();
// The driver's CUDA version, "13.0"; "" when there is no usable driver or it cannot say.
std::string cudaDriverVersion();
// The driver, or a Runtime error carrying cudaUnavailableReason().
const CudaDriver& requireCudaDriver();

// Makes device `ordinal`'s primary context (the one the CUDA runtime and PyTorch share) current on the
// calling thread, retaining it on first use; returns the driver. Device memory, modules and launches
// below all need a current context, and a new thread has none.
const CudaDriver& useDevice(int ordinal = 0);
// Device `ordinal`'s primary context, retained on first use (without making it current).
CuContext primaryContext(int ordinal);

}  // namespace braze::device
