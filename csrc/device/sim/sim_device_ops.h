// The simulated device: a DeviceOps whose memory is host memory and whose kernels run on the CPU
// simulator. It receives exactly what the GPU receives (a function handle, a launch shape, and one
// pointer per kernel parameter to its 8-byte value) and decodes the arguments by the kernel's
// parameter list, so host inputs take the GPU's path (FusionCache, PreparedPlan, argument packing)
// and a packing mistake fails here as it would there, only with a message.
//
// What it checks, beyond what the simulator checks inside a kernel:
// - every tensor argument points into memory it handed out or was lent (borrow), and the kernel
//   touches nothing outside that memory (bounds come from the allocation, not from the kernel IR, so
//   a kernel lowered for one shape and launched for another is checked against what it was given);
// - the launch's block and shared memory are the kernel's own;
// - a workspace that must start zeroed is zeroed again when the kernel ends;
// - memory is used only while allocated: a kernel, or a zeroing, that touches freed memory fails (a
//   plan's host steps, which the host runs on the stream, are the plan's own code and are not checked);
// - a loaded kernel's IR passes the kernel verifier (when verifiers are on), as a compiler would reject it.
//
// Streams are queues, named by any distinct handle: work runs, in order, when a stream is synchronized (as a GPU runs it after the
// host has moved on), so a caller that reads outputs without synchronizing reads poison (fresh
// allocations are filled with 0xff bytes: NaN for floats). Frees are stream-ordered, and a CUDA graph
// is a recorded chain whose arguments change only where launchGraph updates them.
#pragma once

#include "device/device_ops.h"

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace braze::device {

class SimDeviceOps final : public DeviceOps {
 public:
  // `run_kernels` false: launches are decoded and checked but not simulated (host-overhead benchmarks).
  explicit SimDeviceOps(bool run_kernels = true);
  ~SimDeviceOps() override;

  std::vector<KernelHandle> load(const std::vector<KernelImage>& kernels) override;
  // Host memory, lent to the device for its life (so it is not counted among the live allocations).
  IndexErrorRecord indexErrorRecord() override;
  DevicePtr allocate(size_t bytes, StreamHandle stream) override;
  void release(DevicePtr pointer, StreamHandle stream) override;
  void zero(DevicePtr pointer, size_t bytes, StreamHandle stream) override;
  // Host memory lent to the device for its life, one region for every stream; a failed synchronize spoils it.
  DevicePtr zeroedScratch(size_t bytes, StreamHandle stream) override { return zeroed_.get(bytes, stream); }
  void spoilZeroedScratch(StreamHandle stream) override { zeroed_.spoil(stream); }
  int64_t zeroedScratchZeroings() const { return zeroed_.zeroings(); }
  void synchronize(StreamHandle stream) override;
  void launch(KernelHandle function, const LaunchShape& shape, void** args, StreamHandle stream) override;
  // The map's fields as they are (no driver to encode them): each launch checks the maps it is passed
  // against the ones its kernel's TMA tensors need at the pointers bound to them.
  void encodeTensorMap(const kernel::TensorMapSpec& spec, kernel::TensorMapBytes& map) override;
  bool launchGraph(std::unique_ptr<LaunchGraph>& graph, const std::vector<KernelLaunch>& kernels,
                   StreamHandle stream) override;
  bool hostMemory() const override { return true; }
  void enqueueHost(StreamHandle stream, std::function<void()> work) override;

  // Memory the caller owns (an input array) that kernels may use until giveBack.
  void borrow(const void* begin, size_t bytes);
  void giveBack(const void* begin);

  int64_t launches() const { return launches_.load(std::memory_order_relaxed); }
  int64_t graphsMade() const { return graphs_made_.load(std::memory_order_relaxed); }
  size_t liveAllocations() const;
  size_t loadedKernels() const;

 private:
  struct Region {
    size_t bytes = 0;
    int lends = 0;  // lent memory: how many borrows are open (one array may be passed as two inputs)
  };
  struct Command {
    std::function<void()> work;
    bool frees = false;  // run even after an earlier command failed, so a failed run leaks nothing
  };
  void enqueue(StreamHandle stream, Command command);
  void checkLoaded(KernelHandle function) const;
  void runLaunch(const kernel::Kernel& kernel, const LaunchShape& shape, const std::vector<uint64_t>& words,
                 const std::vector<kernel::TensorMapSpec>& maps = {});
  // The memory [begin, end) holding [address, address + bytes), or an error naming `what`.
  std::pair<uintptr_t, uintptr_t> regionOf(uintptr_t address, size_t bytes, const std::string& what) const;
  void freeNow(DevicePtr pointer);

  const bool run_kernels_;
  mutable std::recursive_mutex mutex_;  // host work on a stream may release memory, which takes it again
  std::map<uintptr_t, Region> regions_;  // allocated here, by address: they never overlap
  std::map<uintptr_t, Region> lent_;     // borrowed: views of one array may overlap
  std::unordered_map<std::string, std::unique_ptr<kernel::Kernel>> kernels_;  // by CUDA source: one per "binary"
  std::unordered_set<const kernel::Kernel*> loaded_;
  std::map<StreamHandle, std::deque<Command>> queues_;
  std::atomic<int64_t> launches_{0}, graphs_made_{0};
  // One index-error record per thread: a run on the simulator is synchronous on its caller's thread, so
  // an out-of-range index a kernel finds is raised by the execute that launched it, whatever other threads
  // run at the same time.
  std::unordered_map<std::thread::id, std::unique_ptr<int64_t[]>> index_errors_;
  ZeroedScratch zeroed_;
};

// The process's simulated device: what host (numpy) inputs run on.
SimDeviceOps& simDeviceOps();

}  // namespace braze::device
