#include "device/cuda/device_buffer.h"

#include "support/error.h"

#include <algorithm>
#include <utility>

namespace braze::device {

DeviceBuffer DeviceBuffer::allocate(size_t bytes) {
  const CudaDriver& driver = requireCudaDriver();
  DeviceBuffer buffer;
  // cuMemAlloc rejects a size of 0, and a kernel of an empty tensor is still passed a pointer.
  const size_t asked = std::max<size_t>(bytes, 16);
  driver.check(driver.memAlloc(&buffer.address_, asked), "cuMemAlloc_v2", fmt::format("{} bytes", asked));
  buffer.bytes_ = asked;
  return buffer;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : address_(std::exchange(other.address_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    address_ = std::exchange(other.address_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() noexcept {
  // A failed free is not reported: a destructor cannot throw, and after a kernel fault (the one case
  // where it fails) the context is unusable anyway and the fault was reported at its launch.
  if (address_ != 0) requireCudaDriver().memFree(address_);
  address_ = 0;
  bytes_ = 0;
}

void DeviceBuffer::upload(size_t offset, const void* src, size_t bytes) {
  BRAZE_ASSERT(offset + bytes <= bytes_, "upload of {} bytes at {} into a device buffer of {}", bytes, offset, bytes_);
  if (bytes == 0) return;
  const CudaDriver& driver = requireCudaDriver();
  driver.check(driver.memcpyHtoD(address_ + offset, src, bytes), "cuMemcpyHtoD_v2", fmt::format("{} bytes", bytes));
}

void DeviceBuffer::download(size_t offset, void* dst, size_t bytes) const {
  BRAZE_ASSERT(offset + bytes <= bytes_, "download of {} bytes at {} from a device buffer of {}", bytes, offset,
               bytes_);
  if (bytes == 0) return;
  const CudaDriver& driver = requireCudaDriver();
  driver.check(driver.memcpyDtoH(dst, address_ + offset, bytes), "cuMemcpyDtoH_v2", fmt::format("{} bytes", bytes));
}

void DeviceBuffer::fill(unsigned char value) {
  const CudaDriver& driver = requireCudaDriver();
  driver.check(driver.memsetD8(address_, value, bytes_), "cuMemsetD8_v2", fmt::format("{} bytes", bytes_));
}

}  // namespace braze::device
