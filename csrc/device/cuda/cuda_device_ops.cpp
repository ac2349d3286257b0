// The CUDA driver as a DeviceOps: kernels compiled by NVRTC (through the kernel caches) and loaded into
// the device's primary context, memory from the device's default stream-ordered pool behind a host-side
// cache of freed blocks per stream (stream_block_cache.h), launches and graphs through the driver API.
// The pool is told to keep freed memory cached (a release threshold of all memory), so that blocks the
// host cache returns, or never held, are reused without going back to the driver's allocator. (That
// setting is process-wide: a library sharing the default pool through cudaMallocAsync keeps its freed
// memory cached too.) DeviceOps' backend-neutral handles are the driver's own under other names.
#include "device/cuda/cuda_driver.h"
#include "device/cuda/cuda_kernel.h"
#include "device/device_ops.h"
#include "device/made_devices.h"
#include "device/stream_block_cache.h"
#include "device/zeroed_scratch.h"
#include "kernel/index_errors.h"
#include "support/error.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace braze::device {
namespace {

CuStream cu(StreamHandle stream) { return reinterpret_cast<CuStream>(stream); }
CuFunction cu(KernelHandle kernel) { return reinterpret_cast<CuFunction>(kernel); }
// CU_STREAM_PER_THREAD: the calling thread's own default stream.
const CuStream kStreamPerThread = reinterpret_cast<CuStream>(uintptr_t{0x2});

CuKernelNodeParams nodeParams(const KernelLaunch& k) {
  CuKernelNodeParams p;
  p.function = cu(k.function);
  p.grid_x = static_cast<unsigned>(k.shape.grid[0]);
  p.grid_y = static_cast<unsigned>(k.shape.grid[1]);
  p.block_x = static_cast<unsigned>(k.shape.block[0]);
  p.block_y = static_cast<unsigned>(k.shape.block[1]);
  p.shared_bytes = static_cast<unsigned>(k.shape.shared_bytes);
  p.params = k.args;
  return p;
}

// The driver's graph of a chain, its executable and nodes, and each node's last arguments.
class CudaLaunchGraph final : public LaunchGraph {
 public:
  CudaLaunchGraph(const CudaDriver& driver, DeviceOps& ops) : driver_(driver), ops_(ops) {}
  ~CudaLaunchGraph() override {
    try {
      DeviceScope scope(ops_);  // a plan may be dropped on any thread
      if (exec) driver_.graphExecDestroy(exec);
      if (graph) driver_.graphDestroy(graph);
    } catch (...) {
      // At exit the context may be gone, and the graph with it.
    }
  }
  CuGraph graph = nullptr;
  CuGraphExec exec = nullptr;
  std::vector<CuGraphNode> nodes;
  std::vector<std::vector<uint64_t>> arguments;

 private:
  const CudaDriver& driver_;
  DeviceOps& ops_;
};

class CudaDeviceOps final : public DeviceOps {
 public:
  explicit CudaDeviceOps(int ordinal)
      : ordinal_(ordinal),
        driver_(requireCudaDriver()),
        context_(primaryContext(ordinal)),
        blocks_(blockSource(), blockCacheLimitFromEnv()),
        zeroed_(zeroedScratchSource(blockSource(), [this](DevicePtr pointer, size_t bytes, StreamHandle stream) {
          zero(pointer, bytes, stream);
        })) {
    CuDevice device = 0;
    driver_.check(driver_.deviceGet(&device, ordinal), "cuDeviceGet");
    CuMemPool pool = nullptr;
    driver_.check(driver_.deviceGetDefaultMemPool(&pool, device), "cuDeviceGetDefaultMemPool");
    uint64_t keep_everything = std::numeric_limits<uint64_t>::max();
    driver_.check(driver_.memPoolSetAttribute(pool, kMemPoolAttrReleaseThreshold, &keep_everything),
                  "cuMemPoolSetAttribute(RELEASE_THRESHOLD)");
  }

  void enter() override {
    CuContext current = nullptr;
    driver_.check(driver_.ctxGetCurrent(&current), "cuCtxGetCurrent");
    const bool push = current != context_;
    if (push) driver_.check(driver_.ctxPushCurrent(context_), "cuCtxPushCurrent", fmt::format("device {}", ordinal_));
    pushed().push_back(push);
  }

  void leave() override {
    auto& stack = pushed();
    if (stack.empty()) return;
    const bool push = stack.back();
    stack.pop_back();
    CuContext popped = nullptr;
    if (push) driver_.ctxPopCurrent(&popped);  // in a destructor: nothing useful to do with an error
  }

  std::vector<KernelHandle> load(const std::vector<KernelImage>& kernels) override {
    std::vector<CompileJob> jobs;
    jobs.reserve(kernels.size());
    for (const KernelImage& k : kernels) jobs.push_back(k.compile);
    const std::vector<CuFunction> loaded = loadCudaKernels(jobs, ordinal_);
    std::vector<KernelHandle> functions;
    for (size_t i = 0; i < loaded.size(); ++i) {
      functions.push_back(reinterpret_cast<KernelHandle>(loaded[i]));
      // A kernel's own static shared memory (its block reductions' scratch) counts against the 48 KiB a
      // block may have without opting in, so 48 KiB of dynamic shared memory or a little less may
      // already be too much: every kernel with dynamic shared memory declares how much it takes.
      const int64_t shared_bytes = kernels[i].shared_bytes;
      if (shared_bytes <= 0) continue;
      driver_.check(driver_.funcSetAttribute(loaded[i], kFuncAttributeMaxDynamicSharedSizeBytes,
                                             static_cast<int>(shared_bytes)),
                    "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                    fmt::format("kernel {} asks for {} bytes of dynamic shared memory", jobs[i].name, shared_bytes));
    }
    return functions;
  }

  IndexErrorRecord indexErrorRecord() override {
    std::call_once(record_once_, [&] {
      // Pinned host memory mapped into the device: kernels write it, the host reads it without a
      // synchronize. Never freed, like the context.
      void* host = nullptr;
      driver_.check(driver_.memHostAlloc(&host, kIndexErrorBytes, kMemHostAllocPortable | kMemHostAllocDeviceMap),
                    "cuMemHostAlloc", "the index-error record");
      std::memset(host, 0, kIndexErrorBytes);
      CuDevicePtr device = 0;
      driver_.check(driver_.memHostGetDevicePointer(&device, host, 0), "cuMemHostGetDevicePointer");
      record_ = {device, static_cast<volatile int64_t*>(host)};
    });
    return record_;
  }

  DevicePtr allocate(size_t bytes, StreamHandle stream) override { return blocks_.allocate(bytes, stream); }

  void release(DevicePtr pointer, StreamHandle stream) override {
    // An output's last reference may drop on any thread, where another device's context (or none) is
    // current: the null stream, its capture state and its identity are this device's only inside.
    DeviceScope scope(*this);
    blocks_.release(pointer, stream);
  }

  size_t releaseCachedBlocks() override { return blocks_.trim(); }

  BlockCacheCounts blockCacheCounts() const override { return blocks_.counts(); }

  void zero(DevicePtr pointer, size_t bytes, StreamHandle stream) override {
    driver_.check(driver_.memsetD8Async(pointer, 0, bytes, cu(stream)), "cuMemsetD8Async");
  }

  DevicePtr zeroedScratch(size_t bytes, StreamHandle stream) override { return zeroed_.get(bytes, stream); }

  void spoilZeroedScratch(StreamHandle stream) override { zeroed_.spoil(stream); }

  void synchronize(StreamHandle stream) override {
    driver_.check(driver_.streamSynchronize(cu(stream)), "cuStreamSynchronize");
  }

  void launch(KernelHandle function, const LaunchShape& shape, void** args, StreamHandle stream) override {
    driver_.check(driver_.launchKernel(cu(function), static_cast<unsigned>(shape.grid[0]),
                                       static_cast<unsigned>(shape.grid[1]), 1, static_cast<unsigned>(shape.block[0]),
                                       static_cast<unsigned>(shape.block[1]), 1,
                                       static_cast<unsigned>(shape.shared_bytes), cu(stream), args, nullptr),
                  "cuLaunchKernel");
  }

  // A 2D or 3D map (columns, rows, batches), its rows and batches the spec's strides apart; zeros outside
  // the tensor (OOB fill none), boxes of one batch promoted to L2 in 256-byte lines.
  void encodeTensorMap(const kernel::TensorMapSpec& spec, kernel::TensorMapBytes& map) override {
    BRAZE_CHECK_KIND(ErrorKind::Runtime, driver_.tensorMapEncodeTiled != nullptr,
                     "the CUDA driver {} has no cuTensorMapEncodeTiled (CUDA 12.0 on): TMA kernels cannot launch",
                     cudaDriverVersion());
    const unsigned long long dims[3] = {spec.columns, spec.rows, spec.batches};
    const unsigned long long strides[2] = {spec.row_stride_bytes, spec.batch_stride_bytes};
    const unsigned box[3] = {spec.box_columns, spec.box_rows, 1}, element_strides[3] = {1, 1, 1};
    constexpr int kInterleaveNone = 0, kSwizzleNone = 0, kSwizzle128 = 3, kL2Promotion256 = 3, kOobFillZeros = 0;
    driver_.check(driver_.tensorMapEncodeTiled(&map, kernel::tensorMapDataType(spec.dtype), spec.rank(),
                                               reinterpret_cast<void*>(spec.address), dims, strides, box,
                                               element_strides, kInterleaveNone,
                                               spec.swizzle ? kSwizzle128 : kSwizzleNone, kL2Promotion256, kOobFillZeros),
                  "cuTensorMapEncodeTiled",
                  fmt::format("{} x {} x {} {} at {:#x}, rows {} and batches {} bytes apart, boxes of {} x {}",
                              spec.batches, spec.rows, spec.columns, toString(spec.dtype), spec.address,
                              spec.row_stride_bytes, spec.batch_stride_bytes, spec.box_rows, spec.box_columns));
  }

  bool launchGraph(std::unique_ptr<LaunchGraph>& graph, const std::vector<KernelLaunch>& kernels,
                   StreamHandle stream) override {
    if (!driver_.hasGraphs()) return false;
    int capture = kStreamCaptureStatusNone;
    driver_.check(driver_.streamIsCapturing(cu(stream), &capture), "cuStreamIsCapturing");
    if (capture != kStreamCaptureStatusNone) return false;
    if (!graph) {
      auto made = std::make_unique<CudaLaunchGraph>(driver_, *this);
      driver_.check(driver_.graphCreate(&made->graph, 0), "cuGraphCreate");
      for (const KernelLaunch& k : kernels) {
        const CuKernelNodeParams params = nodeParams(k);  // the driver copies the argument values
        CuGraphNode node = nullptr;
        const CuGraphNode* after = made->nodes.empty() ? nullptr : &made->nodes.back();
        driver_.check(driver_.graphAddKernelNode(&node, made->graph, after, after ? 1 : 0, &params),
                      "cuGraphAddKernelNode", fmt::format("kernel {} of {}", made->nodes.size(), kernels.size()));
        made->nodes.push_back(node);
        made->arguments.push_back(argumentValues(k));
      }
      driver_.check(driver_.graphInstantiate(&made->exec, made->graph, 0), "cuGraphInstantiate");
      graph = std::move(made);
    } else {
      auto& g = static_cast<CudaLaunchGraph&>(*graph);
      // Launches already queued keep the arguments they were launched with.
      for (size_t i : changedKernels(g.arguments, kernels)) {
        const CuKernelNodeParams params = nodeParams(kernels[i]);
        driver_.check(driver_.graphExecKernelNodeSetParams(g.exec, g.nodes[i], &params),
                      "cuGraphExecKernelNodeSetParams", fmt::format("kernel {} of {}", i, kernels.size()));
      }
    }
    driver_.check(driver_.graphLaunch(static_cast<CudaLaunchGraph&>(*graph).exec, cu(stream)), "cuGraphLaunch");
    return true;
  }

 private:
  // Per thread: whether each open enter() pushed the context (and leave() must pop it).
  static std::vector<bool>& pushed() {
    thread_local std::vector<bool> stack;
    return stack;
  }

  static constexpr size_t kIndexErrorBytes = kernel::kIndexErrorWords * sizeof(int64_t);
  static constexpr unsigned kMemHostAllocPortable = 0x01, kMemHostAllocDeviceMap = 0x02;

  BlockSource blockSource() {
    BlockSource source;
    source.allocate = [this](size_t bytes, StreamHandle stream) -> DevicePtr {
      DevicePtr pointer = 0;
      const CuResult result = driver_.memAllocAsync(&pointer, bytes, cu(stream));
      if (result == kCudaErrorOutOfMemory) return 0;
      driver_.check(result, "cuMemAllocAsync", fmt::format("{} bytes", bytes));
      return pointer;
    };
    source.release = [this](DevicePtr pointer, StreamHandle stream) {
      DeviceScope scope(*this);  // trim() may run on any thread (braze.empty_cache)
      driver_.check(driver_.memFreeAsync(pointer, cu(stream)), "cuMemFreeAsync");
    };
    source.capturing = [this](StreamHandle stream) {
      if (driver_.streamIsCapturing == nullptr) return false;  // a driver that cannot capture
      int status = kStreamCaptureStatusNone;
      // An error (the legacy stream while another one is captured globally) counts as a capture.
      return driver_.streamIsCapturing(cu(stream), &status) != kCudaSuccess || status != kStreamCaptureStatusNone;
    };
    source.identity = [this](StreamHandle stream) -> std::optional<uint64_t> {
      if (cu(stream) == kStreamPerThread) return std::nullopt;  // another stream on every thread
      if (driver_.streamGetId == nullptr) return reinterpret_cast<uintptr_t>(stream);  // a driver before 12.0
      unsigned long long id = 0;
      if (driver_.streamGetId(cu(stream), &id) != kCudaSuccess) return std::nullopt;
      return static_cast<uint64_t>(id);
    };
    source.synchronize = [this] {
      DeviceScope scope(*this);
      driver_.check(driver_.ctxSynchronize(), "cuCtxSynchronize", "before returning cached blocks to the pool");
    };
    return source;
  }

  int ordinal_;
  const CudaDriver& driver_;
  CuContext context_;
  StreamBlockCache blocks_;
  ZeroedScratch zeroed_;
  std::once_flag record_once_;
  IndexErrorRecord record_;
};

MadeDevices<CudaDeviceOps>& madeCudaDevices() {
  static auto* made = new MadeDevices<CudaDeviceOps>;  // never destroyed, like the driver
  return *made;
}

}  // namespace

DeviceOps& cudaDeviceOps(int ordinal) { return madeCudaDevices().get(ordinal); }

size_t releaseCudaCachedBlocks() { return madeCudaDevices().releaseCachedBlocks(); }

}  // namespace braze::device
