#include "device/cuda/device_transfer.h"

#include "device/cuda/cuda_driver.h"

#include <algorithm>
#include <memory>

namespace braze::device {
namespace {

// cuMemAlloc's alignment, and the largest alignment bindShapes records for an input.
constexpr int64_t kAllocationAlignment = 256;

}  // namespace

ElementSpan elementSpan(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  for (int64_t size : sizes) {
    if (size == 0) return {};
  }
  ElementSpan span{0, 1};
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t reach = (sizes[d] - 1) * strides[d];
    (reach < 0 ? span.lo : span.hi) += reach;
  }
  return span;
}

AlignedPlacement alignedPlacement(const void* first_element, const ElementSpan& span, int64_t item) {
  const auto misalignment = static_cast<int64_t>(reinterpret_cast<uintptr_t>(first_element) % kAllocationAlignment);
  // The span's lowest byte lands at `pad`; the first element `-lo` items after it.
  const int64_t pad =
      ((misalignment + span.lo * item) % kAllocationAlignment + kAllocationAlignment) % kAllocationAlignment;
  return {pad + (span.hi - span.lo) * item, pad - span.lo * item};
}

UploadedTensor uploadToDevice(const HostTensor& t, int ordinal) {
  useDevice(ordinal);
  const ElementSpan span = elementSpan(t.sizes(), t.strides());
  const int64_t item = sizeOf(t.dtype());
  const auto [bytes, first] = alignedPlacement(t.data(), span, item);
  UploadedTensor u;
  u.buffer = DeviceBuffer::allocate(static_cast<size_t>(bytes));
  u.buffer.upload(static_cast<size_t>(first + span.lo * item), t.data() + span.lo * item,
                  static_cast<size_t>((span.hi - span.lo) * item));
  u.tensor = {u.buffer.address() + static_cast<uint64_t>(first), t.dtype(), t.sizes(), t.strides(), ordinal};
  return u;
}

HostTensor downloadFromDevice(const DeviceTensor& t) {
  const CudaDriver& driver = useDevice(t.device);
  driver.check(driver.ctxSynchronize(), "cuCtxSynchronize", "before downloading a tensor");
  const ElementSpan span = elementSpan(t.sizes, t.strides);
  const int64_t item = sizeOf(t.dtype);
  auto storage =
      std::shared_ptr<uint8_t[]>(new uint8_t[static_cast<size_t>(std::max<int64_t>(span.hi - span.lo, 1) * item)]);
  if (span.hi > span.lo) {
    driver.check(driver.memcpyDtoH(storage.get(), t.data + static_cast<CuDevicePtr>(span.lo * item),
                                   static_cast<size_t>((span.hi - span.lo) * item)),
                 "cuMemcpyDtoH");
  }
  return HostTensor::wrap(storage.get() - span.lo * item, t.dtype, t.sizes, t.strides, storage).contiguous();
}

}  // namespace braze::device
