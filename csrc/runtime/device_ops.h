// The device operations a prepared plan performs, behind one interface: the CUDA driver in real
// use, and a recorder that does nothing in the host-overhead benchmark (which times everything an
// execute does on the host, without a GPU). Stream-ordered throughout: nothing here waits.
#pragma once

#include "runtime/cuda_driver.h"
#include "runtime/cuda_kernel.h"

#include <atomic>
#include <cstddef>
#include <string>

namespace braze::runtime {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  // Makes the device's context current on the calling thread (once per thread): every other call
  // needs it, and a thread the caller created has none.
  virtual void bindThread() {}
  // Compiles (or finds in the kernel caches) and loads a kernel; raises its shared-memory limit once
  // when `shared_bytes` needs it, so launches need no attribute call.
  virtual CuFunction load(const std::string& source, const std::string& name, const std::string& arch,
                          int64_t shared_bytes) = 0;
  virtual CuDevicePtr allocate(size_t bytes, CuStream stream) = 0;
  virtual void release(CuDevicePtr pointer, CuStream stream) = 0;
  virtual void zero(CuDevicePtr pointer, size_t bytes, CuStream stream) = 0;
  // `args`: one pointer per kernel parameter, to the parameter's value.
  virtual void launch(CuFunction function, const LaunchShape& shape, void** args, CuStream stream) = 0;
};

// The driver on device `ordinal`, allocating from the device's default memory pool, which is told to
// keep freed memory cached (a release threshold of all memory), so steady-state executes reuse blocks
// without returning to the driver's allocator.
DeviceOps& cudaDeviceOps(int ordinal = 0);

// Does nothing and hands out distinct, 256-byte aligned fake addresses; counts what was asked.
class NoOpDeviceOps final : public DeviceOps {
 public:
  CuFunction load(const std::string&, const std::string&, const std::string&, int64_t) override { return nullptr; }
  CuDevicePtr allocate(size_t bytes, CuStream) override {
    ++allocations;
    return next_.fetch_add((bytes + 255) / 256 * 256 + 256);
  }
  void release(CuDevicePtr, CuStream) override { ++releases; }
  void zero(CuDevicePtr, size_t, CuStream) override {}
  void launch(CuFunction, const LaunchShape&, void**, CuStream) override { ++launches; }

  std::atomic<int64_t> allocations{0}, releases{0}, launches{0};

 private:
  std::atomic<CuDevicePtr> next_{1 << 20};
};

}  // namespace braze::runtime
