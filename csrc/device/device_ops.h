// The device operations a prepared plan performs, behind one interface: the CUDA driver on an NVIDIA
// GPU, the HIP runtime on an AMD GPU (both loaded with dlopen), the simulated device (sim_device_ops.h:
// host memory, kernels run by the CPU simulator) for host inputs and the tests, and a recorder that does
// nothing in the host-overhead benchmarks. Stream-ordered throughout: nothing here waits but synchronize.
#pragma once

#include "kernel/kernel_ir.h"
#include "kernel/tensor_map.h"
#include "device/device_handles.h"
#include "device/parallel_compile.h"
#include "device/stream_block_cache.h"
#include "device/zeroed_scratch.h"

#include <atomic>
#include <memory>
#include <cstddef>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

namespace braze::device {

// A kernel to make ready on a device: its IR (which the simulated device runs, and whose parameters
// it decodes a launch's arguments by), its CUDA source and NVRTC options (which the driver compiles),
// and the dynamic shared memory its launches ask for. `kernel` must outlive the loaded function.
struct KernelImage {
  const kernel::Kernel* kernel = nullptr;
  CompileJob compile;
  int64_t shared_bytes = 0;
};

// One kernel of a chain launched as a graph: `args[i]` points at parameter i's value, 8 bytes (device
// pointers and kernel::argumentWords) but for the last `maps` parameters, tensor maps of 128 bytes
// (kernel::TensorMapBytes).
struct KernelLaunch {
  KernelHandle function = nullptr;
  LaunchShape shape;
  void** args = nullptr;
  size_t arg_count = 0;
  size_t maps = 0;
};

// Each argument's bytes as 8-byte words (16 for a tensor map), copied: what a graph node keeps of a launch.
std::vector<uint64_t> argumentValues(const KernelLaunch& k);
// The kernels of a graph's chain whose arguments differ from those recorded for them; records the new ones.
std::vector<size_t> changedKernels(std::vector<std::vector<uint64_t>>& recorded, const std::vector<KernelLaunch>& kernels);

// A chain of kernels made into a CUDA graph on its first launch, kept by its owner (a prepared plan)
// for the later ones, which only update the arguments that changed.
class LaunchGraph {
 public:
  virtual ~LaunchGraph() = default;
};

// The device's index-error record (kernel/index_errors.h): `device`, the address kernels write it at;
// `host`, where the host reads it without synchronizing.
struct IndexErrorRecord {
  DevicePtr device = 0;
  volatile int64_t* host = nullptr;
};

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  // Makes the device's context current on the calling thread until the matching leave(), restoring
  // whatever was current before (the caller's framework may be on another device): every other call
  // needs it, and a thread the caller created has none. Nests.
  virtual void enter() {}
  virtual void leave() {}
  // Compiles (or finds in the kernel caches, in parallel) and loads the kernels of a plan; raises a
  // kernel's shared-memory limit once when its `shared_bytes` needs it, so launches need no attribute call.
  virtual std::vector<KernelHandle> load(const std::vector<KernelImage>& kernels) = 0;
  // Whether the host can read and write this device's memory directly (the simulated device): plans
  // then run on it the steps that have no kernel (segments no scheduler accepts, in-place updates of
  // inputs) on the host, in stream order, through enqueueHost.
  virtual bool hostMemory() const { return false; }
  virtual void enqueueHost(StreamHandle /*stream*/, std::function<void()> /*work*/) {
    throw std::logic_error("enqueueHost on a device whose memory the host cannot reach");
  }
  // The record every kernel that checks index values reports to, made zeroed on first use and kept for
  // the device's life; none (both null) on a device that runs no kernel.
  virtual IndexErrorRecord indexErrorRecord() { return {}; }
  virtual DevicePtr allocate(size_t bytes, StreamHandle stream) = 0;
  // Returns memory to the pool, ordered after the work on `stream` (the stream it was allocated on,
  // which must outlive the memory, as with torch's caching allocator). Callable from any thread.
  virtual void release(DevicePtr pointer, StreamHandle stream) = 0;
  // Returns the freed blocks a device keeps for reuse (stream_block_cache.h) to its pool; the bytes.
  virtual size_t releaseCachedBlocks() { return 0; }
  virtual BlockCacheCounts blockCacheCounts() const { return {}; }
  virtual void zero(DevicePtr pointer, size_t bytes, StreamHandle stream) = 0;
  // At least `bytes` of memory that is all zeros when the work queued next on `stream` starts and that
  // this work leaves all zeros (device/zeroed_scratch.h): where workspaces that must start zeroed go, so a
  // run zeroes nothing. 0 where the stream has none (it is being captured into a graph, or the device
  // keeps none): the caller then allocates and zeroes its own.
  virtual DevicePtr zeroedScratch(size_t /*bytes*/, StreamHandle /*stream*/) { return 0; }
  // After a run on `stream` failed partway: its zeroed scratch is zeroed again before the next use.
  virtual void spoilZeroedScratch(StreamHandle /*stream*/) {}
  // Waits for the work queued on `stream` (for consumers that cannot wait on a stream themselves).
  virtual void synchronize(StreamHandle stream) = 0;
  // Encodes the tensor map a kernel's TMA loads read (kernel/tensor_map.h) into `map`, which a launch then
  // passes as the parameter's value. A device without TMA raises.
  virtual void encodeTensorMap(const kernel::TensorMapSpec& spec, kernel::TensorMapBytes& map);
  // `args`: one pointer per kernel parameter, to the parameter's value (8 bytes, or a tensor map's 128).
  virtual void launch(KernelHandle function, const LaunchShape& shape, void** args, StreamHandle stream) = 0;
  // Launches `kernels`, each after the one before, as one CUDA graph on `stream`: `graph` is made on
  // the first call (when null); later calls must pass the same functions and shapes, and update the
  // graph's arguments where they differ. Not thread-safe for one `graph`. Returns false, launching
  // nothing, where graphs cannot be used: a driver without them, or a stream that the caller is
  // capturing into a graph of its own (the caller then launches the kernels one by one).
  virtual bool launchGraph(std::unique_ptr<LaunchGraph>& /*graph*/, const std::vector<KernelLaunch>& /*kernels*/,
                           StreamHandle /*stream*/) {
    return false;
  }
};

// The CUDA driver on device `ordinal` (device/cuda/cuda_device_ops.cpp).
DeviceOps& cudaDeviceOps(int ordinal = 0);
// releaseCachedBlocks() on every CUDA device whose DeviceOps was made (none is made here); the bytes.
size_t releaseCudaCachedBlocks();
// The HIP runtime on AMD device `ordinal` (device/hip/hip_device_ops.cpp); a Runtime error "no HIP
// runtime: ..." where there is none.
DeviceOps& hipDeviceOps(int ordinal = 0);
// releaseCachedBlocks() on every AMD device whose DeviceOps was made; the bytes.
size_t releaseHipCachedBlocks();
// Both of the above, every device trimmed even where another raises (a capture on it); the first error
// is raised after all of them. The bytes.
size_t releaseAllCachedBlocks();

// enter() .. leave() for a scope.
class DeviceScope {
 public:
  explicit DeviceScope(DeviceOps& ops) : ops_(ops) { ops_.enter(); }
  ~DeviceScope() { ops_.leave(); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  DeviceOps& ops_;
};

// Does nothing and hands out distinct, 256-byte aligned fake addresses; counts what was asked.
class NoOpDeviceOps final : public DeviceOps {
 public:
  std::vector<KernelHandle> load(const std::vector<KernelImage>& kernels) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const KernelImage& k : kernels) sources_.insert(k.compile.source);
    loads += static_cast<int64_t>(kernels.size());
    return std::vector<KernelHandle>(kernels.size(), nullptr);
  }
  DevicePtr allocate(size_t bytes, StreamHandle) override {
    ++allocations;
    return next_.fetch_add((bytes + 255) / 256 * 256 + 256);
  }
  void release(DevicePtr, StreamHandle) override { ++releases; }
  void zero(DevicePtr, size_t, StreamHandle) override {}
  DevicePtr zeroedScratch(size_t bytes, StreamHandle stream) override { return zeroed_.get(bytes, stream); }
  void spoilZeroedScratch(StreamHandle stream) override { zeroed_.spoil(stream); }
  void synchronize(StreamHandle) override {}
  void launch(KernelHandle, const LaunchShape&, void**, StreamHandle) override { ++launches; }
  void encodeTensorMap(const kernel::TensorMapSpec&, kernel::TensorMapBytes& map) override { map = {}; }
  // Emulates a graph: counts the graphs made, the nodes whose arguments were updated, the launches.
  bool launchGraph(std::unique_ptr<LaunchGraph>& graph, const std::vector<KernelLaunch>& kernels, StreamHandle) override;

  std::atomic<int64_t> allocations{0}, releases{0}, launches{0};
  std::atomic<int64_t> loads{0};  // kernels asked for (each would be compiled or found in a kernel cache)
  std::atomic<int64_t> graphs_made{0}, graph_nodes_updated{0}, graph_launches{0};
  // Distinct kernel sources asked for: what the driver would have compiled (or found on disk).
  size_t distinctSources() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return sources_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::set<std::string> sources_;
  std::atomic<DevicePtr> next_{1 << 20};
  // Kept regions at fake addresses, as a GPU keeps them (not counted among the allocations).
  ZeroedScratch zeroed_{{[this](size_t bytes, StreamHandle) { return next_.fetch_add((bytes + 255) / 256 * 256 + 256); },
                         [](DevicePtr, size_t, StreamHandle) {}, [](StreamHandle) { return false; },
                         [](StreamHandle stream) -> std::optional<uint64_t> { return reinterpret_cast<uintptr_t>(stream); }}};
};

}  // namespace braze::device
