// Device memory owned by one object: cuMemAlloc on creation, cuMemFree when it goes, and synchronous
// copies to and from the host. The current context (device::useDevice) must be the one it was
// allocated in.
#pragma once

#include "device/cuda/cuda_driver.h"

#include <cstddef>

namespace braze::device {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `bytes` of device memory (256-byte aligned, as cuMemAlloc guarantees); an empty request still
  // allocates a little, so every buffer has a valid address to pass to a kernel.
  static DeviceBuffer allocate(size_t bytes);

  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  CuDevicePtr address() const { return address_; }
  size_t bytes() const { return bytes_; }

  // Synchronous copies of `bytes` at byte `offset` into the buffer; checked against its size.
  void upload(size_t offset, const void* src, size_t bytes);
  void download(size_t offset, void* dst, size_t bytes) const;
  void fill(unsigned char value);

 private:
  void release() noexcept;

  CuDevicePtr address_ = 0;
  size_t bytes_ = 0;
};

}  // namespace braze::device
