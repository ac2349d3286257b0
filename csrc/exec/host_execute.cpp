#include "exec/host_execute.h"

#include "support/error.h"

namespace braze::exec {
namespace {

// The memory a host tensor spans: [first byte, bytes), all a kernel may touch through it (negative
// strides reach below the first element).
std::pair<const uint8_t*, size_t> span(const HostTensor& t) {
  if (t.numel() == 0) return {t.data(), 0};
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.rank(); ++d) {
    const int64_t reach = (t.sizes()[d] - 1) * t.strides()[d];
    (reach < 0 ? lo : hi) += reach;
  }
  const int64_t item = sizeOf(t.dtype());
  return {t.data() + lo * item, static_cast<size_t>((hi - lo + 1) * item)};
}

// Lends the inputs' memory to the device for one run, and takes it back however the run ends.
class Lending {
 public:
  Lending(SimDeviceOps& ops, const std::vector<HostValue>& inputs) : ops_(ops) {
    for (const HostValue& v : inputs) {
      if (const auto* t = std::get_if<HostTensor>(&v)) {
        const auto [first, bytes] = span(*t);
        ops_.borrow(first, bytes);
        lent_.push_back(first);
      }
    }
  }
  ~Lending() {
    for (const void* p : lent_) ops_.giveBack(p);
  }
  Lending(const Lending&) = delete;
  Lending& operator=(const Lending&) = delete;

 private:
  SimDeviceOps& ops_;
  std::vector<const void*> lent_;
};

}  // namespace

DeviceValue deviceValueOf(const HostValue& value) {
  if (const auto* t = std::get_if<HostTensor>(&value)) {
    return DeviceTensor{reinterpret_cast<uintptr_t>(t->data()), t->dtype(), t->sizes(), t->strides(), 0};
  }
  return std::get<ScalarValue>(value);
}

std::vector<HostValue> runOnHost(FusionCache& cache, const std::vector<HostValue>& inputs) {
  auto* ops = dynamic_cast<SimDeviceOps*>(cache.deviceOps());
  BRAZE_ASSERT(ops != nullptr, "runOnHost on a FusionCache that does not run on the simulated device");
  std::vector<DeviceValue> device_inputs;
  device_inputs.reserve(inputs.size());
  for (const HostValue& v : inputs) device_inputs.push_back(deviceValueOf(v));
  // A stream of this run's own (any distinct handle names a queue of the simulated device): threads
  // that share the device wait only for their own work, and one run's failure stays its own.
  char stream_tag = 0;
  const auto stream = reinterpret_cast<StreamHandle>(&stream_tag);
  std::vector<DeviceOutput> outputs;
  {
    const Lending lending(*ops, inputs);
    try {
      outputs = cache.run(device_inputs, stream, /*wait=*/true);
    } catch (...) {
      // A run that failed before its wait may leave work queued that reads the lent memory: drain it
      // (its own errors are the first one's consequences) before the memory is given back.
      try {
        ops->synchronize(stream);
      } catch (...) {
      }
      throw;
    }
  }
  std::vector<HostValue> host;
  host.reserve(outputs.size());
  for (DeviceOutput& out : outputs) {
    if (out.scalar) {
      host.emplace_back(*out.scalar);
      continue;
    }
    const DeviceTensor& t = out.tensor;
    if (out.alias_of >= 0) {
      // A view of an input: the same storage (the caller's array stays alive through the input).
      const HostTensor& in = std::get<HostTensor>(inputs[out.alias_of]);
      const auto first = static_cast<int64_t>(t.data - reinterpret_cast<uintptr_t>(in.data())) / sizeOf(t.dtype);
      host.emplace_back(in.view(t.sizes, t.strides, in.offset() + first));
      continue;
    }
    host.emplace_back(HostTensor::wrap(reinterpret_cast<void*>(static_cast<uintptr_t>(t.data)), t.dtype, t.sizes,
                                       t.strides, std::move(out.owner)));
  }
  return host;
}

}  // namespace braze::exec
