#include "device/sim/sim_device_ops.h"

#include "support/error.h"
#include "ir/host_tensor.h"
#include "ir/verifier.h"
#include "kernel/index_errors.h"
#include "kernel/simulator.h"
#include "kernel/verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>

namespace braze::device {
namespace {

constexpr size_t kAlignment = 256;  // what cuMemAllocAsync guarantees, and what plans assume
constexpr unsigned char kPoison = 0xff;

const kernel::Kernel& kernelOf(KernelHandle function) { return *reinterpret_cast<const kernel::Kernel*>(function); }

// A chain recorded on its first launch: the functions, shapes and argument values its nodes launch with.
struct SimGraph final : LaunchGraph {
  std::vector<KernelHandle> functions;
  std::vector<LaunchShape> shapes;
  std::vector<std::vector<uint64_t>> arguments;
};

// A tensor map's fields in its 128 bytes, after a tag that tells an encoded map from other bytes.
constexpr uint64_t kTensorMapTag = 0x70616d726f736e74;  // "tnsormap"

kernel::TensorMapSpec decodeTensorMap(const kernel::TensorMapBytes& map, const kernel::Kernel& k,
                                      const kernel::TensorParam& p) {
  BRAZE_CHECK_KIND(ErrorKind::Runtime, map.words[0] == kTensorMapTag,
                   "kernel {}: the tensor map parameter of {} is not a map the simulated device encoded", k.name, p.name);
  kernel::TensorMapSpec spec;
  spec.dtype = static_cast<DataType>(map.words[1]);
  spec.address = map.words[2];
  spec.columns = map.words[3];
  spec.rows = map.words[4];
  spec.row_stride_bytes = map.words[5];
  spec.box_columns = static_cast<uint32_t>(map.words[6]);
  spec.box_rows = static_cast<uint32_t>(map.words[6] >> 32);
  spec.swizzle = map.words[7] != 0;
  spec.batches = map.words[8];
  spec.batch_stride_bytes = map.words[9];
  return spec;
}

// A launch's argument words (argumentValues): the tensors' and scalar arguments' words, and the tensor maps
// after them (16 words each), decoded.
std::pair<std::vector<uint64_t>, std::vector<kernel::TensorMapSpec>> splitArguments(const kernel::Kernel& k,
                                                                                     const std::vector<uint64_t>& values) {
  const size_t count = k.tensors.size() + k.arguments.size();
  std::vector<uint64_t> words(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(count));
  std::vector<kernel::TensorMapSpec> maps;
  for (const kernel::TensorParam& p : k.tensors) {
    if (!p.tma) continue;
    const size_t at = count + maps.size() * (sizeof(kernel::TensorMapBytes) / sizeof(uint64_t));
    BRAZE_CHECK_KIND(ErrorKind::Runtime, at < values.size(), "kernel {}: no tensor map passed for {}", k.name, p.name);
    kernel::TensorMapBytes map;
    std::memcpy(map.words, values.data() + at, sizeof(map.words));
    maps.push_back(decodeTensorMap(map, k, p));
  }
  return {std::move(words), std::move(maps)};
}

bool sameShape(const LaunchShape& a, const LaunchShape& b) {
  return a.grid == b.grid && a.block == b.block && a.shared_bytes == b.shared_bytes;
}

}  // namespace

SimDeviceOps::SimDeviceOps(bool run_kernels)
    : run_kernels_(run_kernels),
      // One region for every stream, zeroed at once rather than in a stream's order: kernels run one at a
      // time under the device's lock and each leaves the region zeroed, so zeroing it between any two of
      // them changes nothing but what a failed one left.
      zeroed_({[this](size_t bytes, StreamHandle) -> DevicePtr {
                 void* memory = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
                 if (memory != nullptr) borrow(memory, bytes);
                 return reinterpret_cast<uintptr_t>(memory);
               },
               [this](DevicePtr pointer, size_t bytes, StreamHandle) {
                 std::lock_guard<std::recursive_mutex> lock(mutex_);
                 std::memset(reinterpret_cast<void*>(pointer), 0, bytes);
               },
               [](StreamHandle) { return false; }, [](StreamHandle) -> std::optional<uint64_t> { return 0; }}) {}

SimDeviceOps::~SimDeviceOps() {
  for (auto& [address, region] : regions_) std::free(reinterpret_cast<void*>(address));
  for (DevicePtr region : zeroed_.regions()) std::free(reinterpret_cast<void*>(region));
}

std::vector<KernelHandle> SimDeviceOps::load(const std::vector<KernelImage>& kernels) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  std::vector<KernelHandle> functions;
  functions.reserve(kernels.size());
  for (const KernelImage& image : kernels) {
    BRAZE_ASSERT(image.kernel != nullptr, "kernel {}: the simulated device needs its kernel IR", image.compile.name);
    BRAZE_ASSERT(image.shared_bytes == image.kernel->shared_bytes, "kernel {}: loaded for {} bytes of shared memory, "
                 "its IR declares {}", image.compile.name, image.shared_bytes, image.kernel->shared_bytes);
    // One copy per source, as a GPU has one binary per source: plans of other shapes that emit the same
    // source launch this copy with their own grid and arguments, which is what shares kernels on a GPU.
    if (verifiersEnabled()) kernel::verifyKernel(*image.kernel);  // what a compiler would reject
    auto& kept = kernels_[image.compile.source];
    if (!kept) {
      kept = std::make_unique<kernel::Kernel>(*image.kernel);
      // The copy outlives the plan that loaded it: it must not point into that plan's fusion.
      for (kernel::TensorParam& p : kept->tensors) p.val = p.storage = nullptr;
      loaded_.insert(kept.get());
    }
    functions.push_back(reinterpret_cast<KernelHandle>(kept.get()));
  }
  return functions;
}

DevicePtr SimDeviceOps::allocate(size_t bytes, StreamHandle) {
  BRAZE_CHECK_KIND(ErrorKind::Runtime, bytes <= kMaxHostAllocationBytes,
                   "the simulated device cannot allocate {} bytes: more than the {} one allocation may take", bytes,
                   kMaxHostAllocationBytes);
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  void* memory = std::aligned_alloc(kAlignment, rounded);
  BRAZE_CHECK_KIND(ErrorKind::Runtime, memory != nullptr, "the simulated device could not allocate {} bytes", bytes);
  std::memset(memory, kPoison, rounded);  // a read of what nothing wrote shows up (NaN, -1)
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  regions_[reinterpret_cast<uintptr_t>(memory)] = Region{bytes, 0};
  return reinterpret_cast<uintptr_t>(memory);
}

void SimDeviceOps::freeNow(DevicePtr pointer) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto it = regions_.find(static_cast<uintptr_t>(pointer));
  BRAZE_CHECK_KIND(ErrorKind::Runtime, it != regions_.end(),
                   "release of {:#x}, which the simulated device did not allocate or has freed already", pointer);
  std::free(reinterpret_cast<void*>(it->first));
  regions_.erase(it);
}

void SimDeviceOps::release(DevicePtr pointer, StreamHandle stream) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto queue = queues_.find(stream);
  if (queue == queues_.end() || queue->second.empty()) {
    freeNow(pointer);  // nothing queued that could still use it
    return;
  }
  enqueue(stream, {[this, pointer] { freeNow(pointer); }, true});
}

void SimDeviceOps::zero(DevicePtr pointer, size_t bytes, StreamHandle stream) {
  enqueue(stream, {[this, pointer, bytes] {
                     regionOf(pointer, bytes, fmt::format("zeroing {} bytes", bytes));
                     std::memset(reinterpret_cast<void*>(pointer), 0, bytes);
                   },
                   false});
}

void SimDeviceOps::enqueueHost(StreamHandle stream, std::function<void()> work) {
  enqueue(stream, {std::move(work), false});
}

void SimDeviceOps::enqueue(StreamHandle stream, Command command) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  queues_[stream].push_back(std::move(command));
}

void SimDeviceOps::synchronize(StreamHandle stream) {
  std::exception_ptr failure;
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    auto& queue = queues_[stream];
    // After a failure the rest of what is queued is skipped, as a faulted GPU context skips it, except the
    // frees, so that a failed run leaks nothing; the error is thrown once the queue is empty.
    while (!queue.empty()) {
      Command command = std::move(queue.front());
      queue.pop_front();
      if (failure && !command.frees) continue;
      try {
        command.work();
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    }
    queues_.erase(stream);  // streams are cheap names: a queue exists only while work waits on it
  }
  if (failure) {
    // A kernel that failed may have stopped before resetting its counts. Outside the lock: the scratch
    // takes its own lock, then this one (to queue a zeroing).
    zeroed_.spoil(stream);
    std::rethrow_exception(failure);
  }
}

void SimDeviceOps::checkLoaded(KernelHandle function) const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  BRAZE_CHECK_KIND(ErrorKind::Runtime, loaded_.count(&kernelOf(function)) != 0,
                   "launch of a function the simulated device did not load");
}

void SimDeviceOps::encodeTensorMap(const kernel::TensorMapSpec& spec, kernel::TensorMapBytes& map) {
  map = {};
  map.words[0] = kTensorMapTag;
  map.words[1] = static_cast<uint64_t>(spec.dtype);
  map.words[2] = spec.address;
  map.words[3] = spec.columns;
  map.words[4] = spec.rows;
  map.words[5] = spec.row_stride_bytes;
  map.words[6] = spec.box_columns | static_cast<uint64_t>(spec.box_rows) << 32;
  map.words[7] = spec.swizzle ? 1 : 0;
  map.words[8] = spec.batches;
  map.words[9] = spec.batch_stride_bytes;
}

void SimDeviceOps::launch(KernelHandle function, const LaunchShape& shape, void** args, StreamHandle stream) {
  checkLoaded(function);
  const kernel::Kernel& k = kernelOf(function);
  // The argument values are copied now, as the driver copies them: the caller reuses its buffers. Tensor
  // maps come last, one per tensor read through TMA.
  const size_t maps_passed = static_cast<size_t>(
      std::count_if(k.tensors.begin(), k.tensors.end(), [](const kernel::TensorParam& p) { return p.tma.has_value(); }));
  const KernelLaunch passed{function, shape, args, k.tensors.size() + k.arguments.size() + maps_passed, maps_passed};
  auto [words, maps] = splitArguments(k, argumentValues(passed));
  launches_.fetch_add(1, std::memory_order_relaxed);
  enqueue(stream, {[this, &k, shape, words = std::move(words), maps = std::move(maps)] { runLaunch(k, shape, words, maps); },
                   false});
}

bool SimDeviceOps::launchGraph(std::unique_ptr<LaunchGraph>& graph, const std::vector<KernelLaunch>& kernels,
                               StreamHandle stream) {
  for (const KernelLaunch& k : kernels) checkLoaded(k.function);
  if (!graph) {
    auto made = std::make_unique<SimGraph>();
    for (const KernelLaunch& k : kernels) {
      made->functions.push_back(k.function);
      made->shapes.push_back(k.shape);
      made->arguments.push_back(argumentValues(k));
    }
    graph = std::move(made);
    graphs_made_.fetch_add(1, std::memory_order_relaxed);
  } else {
    auto& g = static_cast<SimGraph&>(*graph);
    BRAZE_ASSERT(g.functions.size() == kernels.size(), "a graph of {} kernels launched with {}", g.functions.size(),
                 kernels.size());
    for (size_t i = 0; i < kernels.size(); ++i) {
      BRAZE_ASSERT(g.functions[i] == kernels[i].function && sameShape(g.shapes[i], kernels[i].shape),
                   "graph kernel {} launched with another function or shape than the graph was made with", i);
    }
    changedKernels(g.arguments, kernels);
  }
  // Each node runs with the graph's recorded arguments (not the caller's): an update that was missed
  // shows up as a wrong result.
  const auto& g = static_cast<const SimGraph&>(*graph);
  for (size_t i = 0; i < g.functions.size(); ++i) {
    const kernel::Kernel& k = kernelOf(g.functions[i]);
    launches_.fetch_add(1, std::memory_order_relaxed);
    auto [words, maps] = splitArguments(k, g.arguments[i]);
    enqueue(stream, {[this, &k, shape = g.shapes[i], words = std::move(words), maps = std::move(maps)] {
                       runLaunch(k, shape, words, maps);
                     },
                     false});
  }
  return true;
}

std::pair<uintptr_t, uintptr_t> SimDeviceOps::regionOf(uintptr_t address, size_t bytes, const std::string& what) const {
  auto holds = [&](uintptr_t begin, const Region& r) {
    return address >= begin && address + bytes <= begin + std::max<size_t>(r.bytes, 1);
  };
  auto it = regions_.upper_bound(address);
  if (it != regions_.begin() && holds(std::prev(it)->first, std::prev(it)->second)) {
    return {std::prev(it)->first, std::prev(it)->first + std::prev(it)->second.bytes};
  }
  // Lent arrays may overlap or touch (views of one array: the q and k of one qkv buffer, adjacent
  // windows): each run of lent memory without a gap is one region, so that a view's pointer inside
  // another view's memory is still given all of its own.
  for (auto l = lent_.begin(); l != lent_.end() && l->first <= address;) {
    const uintptr_t begin = l->first;
    uintptr_t end = begin + l->second.bytes;
    for (++l; l != lent_.end() && l->first <= end; ++l) end = std::max(end, l->first + l->second.bytes);
    // An empty array's pointer (one past nothing) counts as in it.
    if (address >= begin && address + bytes <= std::max(end, begin + 1)) return {begin, end};
  }
  throwError(ErrorKind::Runtime, __FILE__, __LINE__,
             fmt::format("{}: address {:#x} is not in memory the simulated device allocated or was lent (freed "
                         "already, or an argument packed in the wrong place)",
                         what, address));
}

void SimDeviceOps::runLaunch(const kernel::Kernel& k, const LaunchShape& shape, const std::vector<uint64_t>& words,
                             const std::vector<kernel::TensorMapSpec>& maps) {
  BRAZE_CHECK_KIND(ErrorKind::Runtime, shape.block == k.block && shape.shared_bytes == k.shared_bytes,
                   "kernel {} launched with block ({}, {}) and {} bytes of shared memory, but it was built for block "
                   "({}, {}) and {} bytes", k.name, shape.block[0], shape.block[1], shape.shared_bytes, k.block[0],
                   k.block[1], k.shared_bytes);
  kernel::SimLaunch launch;
  launch.grid = shape.grid;
  for (size_t t = 0; t < k.tensors.size(); ++t) {
    const kernel::TensorParam& p = k.tensors[t];
    const int64_t element = sizeOf(p.dtype);
    const uintptr_t address = static_cast<uintptr_t>(words[t]);
    const auto [begin, end] =
        regionOf(address, 0, fmt::format("kernel {}: argument {} (tensor {} of {})", k.name, t, p.name, toString(p.dtype)));
    // The elements before and after the pointer that lie in its memory: all the kernel may touch.
    const auto before = static_cast<int64_t>(address - begin) / element;
    const auto after = static_cast<int64_t>(end - address) / element;
    launch.tensors.push_back(reinterpret_cast<uint8_t*>(address));
    launch.extents.emplace_back(-before, after - 1);
  }
  launch.arguments = kernel::decodeArgumentWords(k, words.data() + k.tensors.size());
  // TMA loads read the maps passed, as a GPU's do (plans whose kernels share a source differ in their
  // maps only: a K inside one slice, say). A map must fit what the kernel was built for: its boxes (the
  // kernel announces their bytes and places them), its rank and dtype, and a start in the memory of the
  // pointer passed beside it, at an element boundary.
  size_t m = 0;
  launch.tma_maps.assign(k.tensors.size(), std::nullopt);
  for (size_t t = 0; t < k.tensors.size(); ++t) {
    const kernel::TensorParam& p = k.tensors[t];
    if (!p.tma) continue;
    BRAZE_CHECK_KIND(ErrorKind::Runtime, m < maps.size(), "kernel {}: no tensor map passed for {}", k.name, p.name);
    const kernel::TensorMapSpec built = kernel::tensorMapSpec(p, words[t]);
    const kernel::TensorMapSpec& got = maps[m++];
    const auto element = static_cast<uint64_t>(sizeOf(p.dtype));
    const int64_t offset = static_cast<int64_t>(got.address - words[t]) / static_cast<int64_t>(element);
    BRAZE_CHECK_KIND(ErrorKind::Runtime,
                     got.dtype == built.dtype && got.rank() == built.rank() && got.box_rows == built.box_rows &&
                         got.box_columns == built.box_columns && got.swizzle == built.swizzle &&
                         (got.address - words[t]) % element == 0 && got.row_stride_bytes % element == 0 &&
                         got.batch_stride_bytes % element == 0,
                     "kernel {}: the tensor map passed for {} is {}D {} at {:#x} in boxes of {} x {}{}, but the kernel "
                     "reads {}D {} boxes of {} x {}{} from the pointer {:#x} passed beside it",
                     k.name, p.name, got.rank(), toString(got.dtype), got.address, got.box_rows, got.box_columns,
                     got.swizzle ? " swizzled" : "", built.rank(), toString(built.dtype), built.box_rows,
                     built.box_columns, built.swizzle ? " swizzled" : "", words[t]);
    const auto rows = static_cast<int64_t>(got.rows), columns = static_cast<int64_t>(got.columns);
    const auto row_stride = static_cast<int64_t>(got.row_stride_bytes / element);
    launch.tma_maps[t] = got.rank() == 2 ? StridedLayout{{rows, columns}, {row_stride, 1}, offset}
                                         : StridedLayout{{static_cast<int64_t>(got.batches), rows, columns},
                                                         {static_cast<int64_t>(got.batch_stride_bytes / element),
                                                          row_stride, 1},
                                                         offset};
  }
  if (run_kernels_) kernel::simulate(k, launch);
  for (size_t t = 0; t < k.tensors.size(); ++t) {
    const kernel::TensorParam& p = k.tensors[t];
    if (!p.zeroed || !run_kernels_) continue;
    const auto* bytes = launch.tensors[t];
    const size_t count = static_cast<size_t>(launch.extents[t].second + 1) * sizeOf(p.dtype);
    for (size_t i = 0; i < count; ++i) {
      BRAZE_CHECK_KIND(ErrorKind::Index, bytes[i] == 0,
                       "kernel {} left its workspace {} non-zero at byte {}: the next launch would misread it", k.name,
                       p.name, i);
    }
  }
}

IndexErrorRecord SimDeviceOps::indexErrorRecord() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  std::unique_ptr<int64_t[]>& record = index_errors_[std::this_thread::get_id()];
  if (!record) {
    record = std::make_unique<int64_t[]>(kernel::kIndexErrorWords);  // zeroed
    borrow(record.get(), kernel::kIndexErrorWords * sizeof(int64_t));
  }
  return {reinterpret_cast<DevicePtr>(record.get()), record.get()};
}

void SimDeviceOps::borrow(const void* begin, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  Region& r = lent_[reinterpret_cast<uintptr_t>(begin)];
  r.bytes = std::max(r.bytes, bytes);
  ++r.lends;
}

void SimDeviceOps::giveBack(const void* begin) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto it = lent_.find(reinterpret_cast<uintptr_t>(begin));
  if (it != lent_.end() && --it->second.lends == 0) lent_.erase(it);
}

size_t SimDeviceOps::liveAllocations() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return regions_.size();
}

size_t SimDeviceOps::loadedKernels() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return kernels_.size();
}

SimDeviceOps& simDeviceOps() {
  static auto* ops = new SimDeviceOps();  // never destroyed: outputs may be released at exit
  return *ops;
}

}  // namespace braze::device
