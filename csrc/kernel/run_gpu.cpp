#include "kernel/run_gpu.h"

#include "ir/error.h"
#include "kernel/cuda_emitter.h"
#include "reference/evaluator.h"
#include "runtime/cuda_kernel.h"
#include "runtime/device_buffer.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

namespace braze::kernel {
namespace {

using runtime::DeviceBuffer;

constexpr int kDevice = 0;
// cuMemAlloc's alignment, and the largest alignment bindShapes records for an input.
constexpr int64_t kAllocationAlignment = 256;
// Every byte of a fresh output is 0xFF before its kernel runs (NaN for floats, -1 for integers), so
// an element the kernel forgets to write cannot pass for a correct zero.
constexpr unsigned char kPoison = 0xFF;

// A host tensor's storage on the device.
struct DeviceTensor {
  DeviceBuffer buffer;
  int64_t first = 0;  // byte offset in the buffer of the tensor's first element (its host data())
  runtime::CuDevicePtr pointer() const { return buffer.address() + static_cast<uint64_t>(first); }
};

// The elements a tensor can touch, in elements from its first one: [lo, hi). Stride-0 dims add
// nothing, so an expanded weight is copied once, not once per broadcast row.
struct Span {
  int64_t lo = 0;
  int64_t hi = 0;
};

Span spanOf(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  for (int64_t size : sizes) {
    if (size == 0) return {};
  }
  Span span{0, 1};
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t reach = (sizes[d] - 1) * strides[d];
    (reach < 0 ? span.lo : span.hi) += reach;
  }
  return span;
}

Span spanOf(const HostTensor& t) { return spanOf(t.sizes(), t.strides()); }

// Device memory laid out like the host tensor's storage span, with the first element at the same
// address modulo 256 as on the host: the kernel was specialized for the host pointer's alignment (a
// misaligned input was planned with narrow accesses, an aligned one with 16-byte vectors), so the
// device copy must keep it.
DeviceTensor allocateLike(const HostTensor& t, Span span) {
  const int64_t item = sizeOf(t.dtype());
  const auto address = reinterpret_cast<uintptr_t>(t.data());
  const int64_t misalignment = static_cast<int64_t>(address % kAllocationAlignment);
  // The span's lowest byte lands at `pad`; the first element `-lo` items after it.
  const int64_t pad = ((misalignment + span.lo * item) % kAllocationAlignment + kAllocationAlignment) %
                      kAllocationAlignment;
  return {DeviceBuffer::allocate(static_cast<size_t>(pad + (span.hi - span.lo) * item)), pad - span.lo * item};
}

DeviceTensor upload(const HostTensor& t) {
  const Span span = spanOf(t);
  DeviceTensor d = allocateLike(t, span);
  const int64_t item = sizeOf(t.dtype());
  d.buffer.upload(static_cast<size_t>(d.first + span.lo * item), t.data() + span.lo * item,
                  static_cast<size_t>((span.hi - span.lo) * item));
  return d;
}

DeviceTensor allocatePoisoned(const HostTensor& t) {
  DeviceTensor d = allocateLike(t, spanOf(t));
  d.buffer.fill(kPoison);
  return d;
}

void download(const DeviceTensor& d, HostTensor& t) {
  const Span span = spanOf(t);
  const int64_t item = sizeOf(t.dtype());
  d.buffer.download(static_cast<size_t>(d.first + span.lo * item), t.data() + span.lo * item,
                    static_cast<size_t>((span.hi - span.lo) * item));
}

// No block to run (a tensor with a zero-size dim): the simulator runs none either, and such a kernel
// is neither compiled nor launched.
bool hasBlocks(const Kernel& kernel) { return kernel.grid[0] * kernel.grid[1] != 0; }

runtime::CompileJob compileJob(const Kernel& kernel, const std::string& arch) {
  runtime::CompileOptions options = runtime::kernelCompileOptions(arch);
  options.maxrregcount = kernel.maxrregcount;
  return {emitCuda(kernel), kernel.name, std::move(options)};
}

// Launches `function` (the kernel, compiled and loaded) and waits: a fault is reported with the
// kernel's name.
void launch(const Kernel& kernel, runtime::CuFunction function, std::vector<runtime::CuDevicePtr> pointers) {
  BRAZE_ASSERT(pointers.size() == kernel.tensors.size(), "kernel {}: {} pointers for {} parameters", kernel.name,
               pointers.size(), kernel.tensors.size());
  if (!hasBlocks(kernel)) return;
  // The kernel's own scratch memory (grid reduction partials, poisoned; semaphores, zeroed).
  std::vector<std::pair<size_t, DeviceBuffer>> workspaces;
  for (size_t i = 0; i < kernel.tensors.size(); ++i) {
    const TensorParam& p = kernel.tensors[i];
    if (!p.workspace) continue;
    DeviceBuffer buffer = DeviceBuffer::allocate(static_cast<size_t>(p.layout.numel() * sizeOf(p.dtype)));
    buffer.fill(p.zeroed ? 0 : kPoison);
    pointers[i] = buffer.address();
    workspaces.emplace_back(i, std::move(buffer));
  }
  std::vector<uint64_t> words = argumentWords(kernel);
  std::vector<void*> args;
  for (runtime::CuDevicePtr& p : pointers) args.push_back(&p);
  for (uint64_t& word : words) args.push_back(&word);
  runtime::launchCudaKernel(function, kernel.name, {kernel.grid, kernel.block, kernel.shared_bytes}, args);
  runtime::synchronizeDevice("after kernel " + kernel.name);
  // A zeroed workspace must come back zeroed: a cached one is reused by the next launch unchanged.
  for (const auto& [i, buffer] : workspaces) {
    if (!kernel.tensors[i].zeroed) continue;
    std::vector<unsigned char> bytes(buffer.bytes());
    buffer.download(0, bytes.data(), bytes.size());
    const bool zero = std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0; });
    BRAZE_CHECK_KIND(::braze::ErrorKind::Index, zero, "kernel {} left its workspace {} non-zero on the GPU",
                     kernel.name, kernel.tensors[i].name);
  }
}

// The device the kernels run on, as the driver describes it.
DeviceInfo currentDevice() {
  runtime::useDevice(kDevice);  // throws the driver's own message ("no CUDA driver found; ...") when there is none
  const std::optional<DeviceInfo> device = queryDevice(kDevice);
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, device.has_value(), "CUDA device {} cannot be queried", kDevice);
  return *device;
}

// The state of one plan run: host values as runOnSimulator keeps them, plus device copies of every
// buffer a kernel was bound to. A kernel output has a host placeholder (so alias segments can build
// their views of it without reading data) that is filled from the device only when the host reads it.
class GpuPlanRun {
 public:
  GpuPlanRun(const CompiledPlan& compiled, const std::vector<HostValue>& inputs)
      : compiled_(compiled), plan_(compiled.plan), values_(planValues(plan_, inputs)), arch_(currentDevice().arch()) {}

  std::vector<HostValue> run() {
    // Every kernel is compiled (or found in the caches) before the first launch, all at once: a cold
    // plan then waits for its slowest kernel instead of the sum, and a compile error comes before any
    // device work.
    std::vector<runtime::CompileJob> jobs;
    std::vector<size_t> job_segments;
    for (size_t s = 0; s < plan_.segments.size(); ++s) {
      const std::optional<Kernel>& kernel = compiled_.kernels[s];
      if (plan_.segments[s].kind == SegmentKind::Alias || !kernel || !hasBlocks(*kernel)) continue;
      jobs.push_back(compileJob(*kernel, arch_));
      job_segments.push_back(s);
    }
    const std::vector<runtime::CuFunction> loaded = runtime::loadCudaKernels(jobs, kDevice);
    std::vector<runtime::CuFunction> functions(plan_.segments.size(), nullptr);
    for (size_t j = 0; j < loaded.size(); ++j) functions[job_segments[j]] = loaded[j];

    for (size_t s = 0; s < plan_.segments.size(); ++s) {
      const Segment& segment = plan_.segments[s];
      if (segment.kind == SegmentKind::Alias) {
        runAliasSegment(plan_, segment, values_);  // views only: no data is read
      } else if (!compiled_.kernels[s]) {
        for (const Val* in : segment.inputs) needOnHost(values_.at(in));
        runSegmentOnReference(segment, values_);
      } else {
        runKernel(*compiled_.kernels[s], functions[s]);
      }
    }
    for (const Val* out : plan_.fusion->outputs()) needOnHost(values_.at(out));  // aliased outputs too
    return collectOutputs(*plan_.fusion, values_, /*row_major=*/false);
  }

 private:
  void runKernel(const Kernel& kernel, runtime::CuFunction function) {
    for (const TensorParam& p : kernel.tensors) {
      if (!p.output) continue;
      HostTensor placeholder = HostTensor::empty(p.dtype, plan_.bound.sizesOf(p.val));
      device_.insert_or_assign(p.val, allocatePoisoned(placeholder));
      values_.insert_or_assign(p.val, std::move(placeholder));
      stale_on_host_.insert(p.val);
    }
    std::vector<runtime::CuDevicePtr> pointers;
    for (const TensorParam& p : kernel.tensors) pointers.push_back(p.workspace ? 0 : onDevice(p.storage).pointer());
    launch(kernel, function, std::move(pointers));
  }

  // The device copy of a buffer: a kernel output is there already; a fusion input, or the output of
  // a segment run on the host, is uploaded on first use.
  const DeviceTensor& onDevice(const Val* storage) {
    auto it = device_.find(storage);
    if (it == device_.end()) {
      it = device_.emplace(storage, upload(std::get<HostTensor>(values_.at(storage)))).first;
    }
    return it->second;
  }

  // Downloads every kernel output whose storage `value` reads (itself, or the buffer it views).
  void needOnHost(const HostValue& value) {
    const auto* tensor = std::get_if<HostTensor>(&value);
    if (tensor == nullptr) return;
    for (auto it = stale_on_host_.begin(); it != stale_on_host_.end();) {
      HostTensor& root = std::get<HostTensor>(values_.at(*it));
      if (!root.sharesStorageWith(*tensor)) {
        ++it;
        continue;
      }
      download(device_.at(*it), root);
      it = stale_on_host_.erase(it);
    }
  }

  const CompiledPlan& compiled_;
  const SegmentedFusion& plan_;
  std::unordered_map<const Val*, HostValue> values_;
  std::string arch_;
  std::unordered_map<const Val*, DeviceTensor> device_;
  std::unordered_set<const Val*> stale_on_host_;  // kernel outputs not yet copied to their host placeholder
};

}  // namespace

void runKernelOnGpu(const Kernel& kernel, const std::vector<HostTensor*>& tensors) {
  BRAZE_ASSERT(tensors.size() == kernel.tensors.size(), "kernel {}: {} tensors bound to {} parameters", kernel.name,
               tensors.size(), kernel.tensors.size());
  const std::string arch = currentDevice().arch();
  std::vector<DeviceTensor> device;
  std::vector<runtime::CuDevicePtr> pointers;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (kernel.tensors[i].workspace) {  // launch() allocates it
      device.emplace_back();
      pointers.push_back(0);
      continue;
    }
    device.push_back(kernel.tensors[i].output ? allocatePoisoned(*tensors[i]) : upload(*tensors[i]));
    pointers.push_back(device.back().pointer());
  }
  const runtime::CuFunction function =
      hasBlocks(kernel) ? runtime::loadCudaKernels({compileJob(kernel, arch)}, kDevice).front() : nullptr;
  launch(kernel, function, std::move(pointers));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (kernel.tensors[i].output) download(device[i], *tensors[i]);
  }
}

UploadedTensor uploadToDevice(const HostTensor& t) {
  runtime::useDevice(kDevice);
  DeviceTensor d = upload(t);
  UploadedTensor u;
  u.tensor = {d.pointer(), t.dtype(), t.sizes(), t.strides(), kDevice};
  u.buffer = std::move(d.buffer);
  return u;
}

HostTensor downloadFromDevice(const runtime::DeviceTensor& t) {
  const runtime::CudaDriver& driver = runtime::useDevice(t.device);
  driver.check(driver.ctxSynchronize(), "cuCtxSynchronize", "before downloading a tensor");
  const Span span = spanOf(t.sizes, t.strides);
  const int64_t item = sizeOf(t.dtype);
  auto storage = std::shared_ptr<uint8_t[]>(new uint8_t[static_cast<size_t>(std::max<int64_t>(span.hi - span.lo, 1) * item)]);
  if (span.hi > span.lo) {
    driver.check(driver.memcpyDtoH(storage.get(), t.data + static_cast<runtime::CuDevicePtr>(span.lo * item),
                                   static_cast<size_t>((span.hi - span.lo) * item)),
                 "cuMemcpyDtoH");
  }
  return HostTensor::wrap(storage.get() - span.lo * item, t.dtype, t.sizes, t.strides, storage).contiguous();
}

std::vector<HostValue> runOnGpu(const CompiledPlan& compiled, const std::vector<HostValue>& inputs) {
  return GpuPlanRun(compiled, inputs).run();
}

std::vector<HostValue> executeOnGpu(const Fusion& fusion, const std::vector<HostValue>& inputs,
                                    const ExecuteOptions& options, CompiledPlan* compiled_out) {
  ExecuteOptions on_device = options;
  on_device.device = currentDevice();
  CompiledPlan compiled = planAndCompile(fusion, inputs, on_device);
  std::vector<HostValue> outputs = runOnGpu(compiled, inputs);
  if (compiled_out != nullptr) *compiled_out = std::move(compiled);
  return outputs;
}

}  // namespace braze::kernel
