#include "ir/host_tensor.h"

#include "support/error.h"
#include "ir/numerics.h"

#include <cstring>

namespace braze {

HostTensor HostTensor::empty(DataType dtype, std::vector<int64_t> sizes) {
  HostTensor t;
  t.dtype_ = dtype;
  t.sizes_ = std::move(sizes);
  t.strides_.assign(t.sizes_.size(), 1);
  for (int64_t d = t.rank() - 2; d >= 0; --d) t.strides_[d] = t.strides_[d + 1] * std::max<int64_t>(t.sizes_[d + 1], 1);
  const auto bytes = static_cast<size_t>(bufferBytes(t.numel(), dtype));
  BRAZE_CHECK_KIND(ErrorKind::Runtime, bytes <= kMaxHostAllocationBytes,
                   "a host tensor of {} elements of {} takes {} bytes: more than the {} one allocation may take",
                   t.numel(), toString(dtype), bytes, kMaxHostAllocationBytes);
  auto storage = std::shared_ptr<uint8_t[]>(new uint8_t[bytes]());
  t.base_ = storage.get();
  t.storage_ = std::move(storage);
  return t;
}

HostTensor HostTensor::wrap(void* data, DataType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                            std::shared_ptr<void> keepalive) {
  BRAZE_ASSERT(sizes.size() == strides.size(), "wrap: {} sizes but {} strides", sizes.size(), strides.size());
  HostTensor t;
  t.dtype_ = dtype;
  t.sizes_ = std::move(sizes);
  t.strides_ = std::move(strides);
  t.base_ = static_cast<uint8_t*>(data);
  t.storage_ = std::move(keepalive);
  return t;
}

HostTensor HostTensor::view(std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset) const {
  HostTensor t = *this;
  t.sizes_ = std::move(sizes);
  t.strides_ = std::move(strides);
  t.offset_ = offset;
  return t;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes_) n *= s;
  return n;
}

bool HostTensor::isContiguous() const {
  int64_t expected = 1;
  for (int64_t d = rank() - 1; d >= 0; --d) {
    if (sizes_[d] != 1 && strides_[d] != expected) return false;
    expected *= sizes_[d];
  }
  return true;
}

int64_t HostTensor::offsetOf(const std::vector<int64_t>& index) const {
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * strides_[d];
  return off;
}

namespace {
template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
}  // namespace

double HostTensor::readDouble(int64_t element_offset) const {
  const uint8_t* p = data() + element_offset * sizeOf(dtype_);
  switch (dtype_) {
    case DataType::Half: return numerics::fromHalfBits(load<uint16_t>(p));
    case DataType::BFloat16: return numerics::fromBFloat16Bits(load<uint16_t>(p));
    case DataType::Float: return load<float>(p);
    case DataType::Double: return load<double>(p);
    case DataType::Float8_e4m3fn: return numerics::fromFloat8E4M3FnBits(*p);
    case DataType::Float8_e5m2: return numerics::fromFloat8E5M2Bits(*p);
    case DataType::Float8_e4m3fnuz: return numerics::fromFloat8E4M3FnuzBits(*p);
    case DataType::Float8_e5m2fnuz: return numerics::fromFloat8E5M2FnuzBits(*p);
    default: return static_cast<double>(readInt(element_offset));
  }
}

int64_t HostTensor::readInt(int64_t element_offset) const {
  const uint8_t* p = data() + element_offset * sizeOf(dtype_);
  switch (dtype_) {
    case DataType::Bool: return *p != 0;
    case DataType::Int8: return load<int8_t>(p);
    case DataType::UInt8: return load<uint8_t>(p);
    case DataType::Int16: return load<int16_t>(p);
    case DataType::Int32: return load<int32_t>(p);
    case DataType::Int64: return load<int64_t>(p);
    default: BRAZE_UNREACHABLE("readInt of a {} tensor", toString(dtype_));
  }
}

void HostTensor::writeDouble(int64_t element_offset, double value) {
  uint8_t* p = data() + element_offset * sizeOf(dtype_);
  switch (dtype_) {
    case DataType::Half: return store(p, numerics::toHalfBits(value));
    case DataType::BFloat16: return store(p, numerics::toBFloat16Bits(value));
    case DataType::Float: return store(p, numerics::toFloat(value));
    case DataType::Double: return store(p, value);
    case DataType::Float8_e4m3fn: *p = numerics::toFloat8E4M3FnBits(value); return;
    case DataType::Float8_e5m2: *p = numerics::toFloat8E5M2Bits(value); return;
    case DataType::Float8_e4m3fnuz: *p = numerics::toFloat8E4M3FnuzBits(value); return;
    case DataType::Float8_e5m2fnuz: *p = numerics::toFloat8E5M2FnuzBits(value); return;
    default: BRAZE_UNREACHABLE("writeDouble to a {} tensor", toString(dtype_));
  }
}

void HostTensor::writeInt(int64_t element_offset, int64_t value) {
  uint8_t* p = data() + element_offset * sizeOf(dtype_);
  switch (dtype_) {
    case DataType::Bool: *p = value != 0; return;
    case DataType::Int8: return store(p, static_cast<int8_t>(value));
    case DataType::UInt8: return store(p, static_cast<uint8_t>(value));
    case DataType::Int16: return store(p, static_cast<int16_t>(value));
    case DataType::Int32: return store(p, static_cast<int32_t>(value));
    case DataType::Int64: return store(p, value);
    default: writeDouble(element_offset, static_cast<double>(value));
  }
}

HostTensor HostTensor::contiguous() const {
  HostTensor out = empty(dtype_, sizes_);
  const int64_t bytes = sizeOf(dtype_);
  int64_t next = 0;
  forEachIndex(sizes_, [&](const std::vector<int64_t>& index) {
    std::memcpy(out.data() + (next++) * bytes, data() + offsetOf(index) * bytes, bytes);
  });
  return out;
}

}  // namespace braze
