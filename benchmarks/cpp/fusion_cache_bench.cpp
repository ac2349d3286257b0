// Host overhead of a cached execute: the input signature, the plan lookup, pointer binding, output
// allocation and kernel launches, with the device operations replaced by no-ops (NoOpDeviceOps), so
// it runs without a GPU. Target: under 1 us per execute of the one-kernel seed layer_norm. The
// BM_GpuLaunch_ benchmarks time the same on a GPU against a bare cuLaunchKernel (skipped without one);
// the planning of new signatures is timed too.
#include "device/cuda/query_device.h"
#include "fusions/layer_norm.h"
#include "fusions/rope.h"
#include "device/cuda/device_buffer.h"
#include "device/cuda/cuda_kernel.h"
#include "exec/fusion_cache.h"
#include "exec/host_execute.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <malloc.h>

namespace braze {
namespace {

using device::DeviceTensor;
using device::DeviceValue;

// Heap bytes in use (glibc's count; resident memory would miss what freed blocks are reused for).
int64_t heapBytesInUse() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  return static_cast<int64_t>(mallinfo2().uordblks);
#else
  return 0;
#endif
}

void BM_CachedExecuteNoOpLaunch_LayerNorm(benchmark::State& state) {
  auto fusion = std::make_shared<Fusion>();
  testing::defineLayerNorm(*fusion, {.batch = 16, .seq = 128, .hidden = 1600});
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(fusion, {}, &ops, DeviceInfo::h100Sxm());
  const std::vector<DeviceValue> inputs{DeviceTensor::contiguous(0x100000, DataType::BFloat16, {16, 128, 1600}),
                                        DeviceTensor::contiguous(0x200000, DataType::BFloat16, {1600}),
                                        DeviceTensor::contiguous(0x300000, DataType::BFloat16, {1600})};
  cache.run(inputs);  // the miss: planned and "compiled" once
  for (auto _ : state) benchmark::DoNotOptimize(cache.run(inputs));
  state.counters["launches"] = static_cast<double>(ops.launches.load());
}
BENCHMARK(BM_CachedExecuteNoOpLaunch_LayerNorm)->Unit(benchmark::kNanosecond);

void BM_CachedExecuteNoOpLaunch_Rope(benchmark::State& state) {
  auto fusion = std::make_shared<Fusion>();
  const testing::RopeConfig c{.batch = 2, .seq = 4096, .heads = 32, .groups = 32, .head = 128, .rope_n_elem = 128};
  testing::defineLitGptQkvSplitRope(*fusion, c);
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(fusion, {}, &ops, DeviceInfo::h100Sxm());
  const int64_t width = (c.heads + 2 * c.groups) * c.head;
  const std::vector<DeviceValue> inputs{DeviceTensor::contiguous(0x100000, DataType::BFloat16, {c.batch, c.seq, width}),
                                        DeviceTensor::contiguous(0x200000, DataType::BFloat16, {c.seq, c.rope_n_elem}),
                                        DeviceTensor::contiguous(0x300000, DataType::BFloat16, {c.seq, c.rope_n_elem})};
  cache.run(inputs);
  for (auto _ : state) benchmark::DoNotOptimize(cache.run(inputs));
}
BENCHMARK(BM_CachedExecuteNoOpLaunch_Rope)->Unit(benchmark::kNanosecond);

// A kernel whose blocks count their arrival (row sums of [3, 2^20] floats split among blocks, the last
// block of a row finishing it) takes its counts from the stream's zeroed scratch: a cached run allocates
// and zeroes nothing for them (the counters: the device's allocations and launches per run; the output
// and the partials are the allocations).
void BM_CachedExecuteNoOpLaunch_GridReduction(benchmark::State& state) {
  auto fusion = std::make_shared<Fusion>();
  {
    FusionGuard g(fusion.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    fusion->addOutput(reduce(OpKind::Sum, x, {1}));
  }
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(fusion, {}, &ops, DeviceInfo::h100Sxm());
  const std::vector<DeviceValue> inputs{DeviceTensor::contiguous(0x100000, DataType::Float, {3, 1 << 20})};
  cache.run(inputs);
  const int64_t allocations = ops.allocations.load(), launches = ops.launches.load();
  for (auto _ : state) benchmark::DoNotOptimize(cache.run(inputs));
  const auto runs = static_cast<double>(state.iterations());
  state.counters["allocations"] = static_cast<double>(ops.allocations.load() - allocations) / runs;
  state.counters["launches"] = static_cast<double>(ops.launches.load() - launches) / runs;
}
BENCHMARK(BM_CachedExecuteNoOpLaunch_GridReduction)->Unit(benchmark::kNanosecond);

// A cached execute of numpy-like host inputs (the path fd.execute takes for them): lending the inputs'
// memory to the simulated device, the signature, the plan lookup, argument packing, a host allocation
// for the output, the launch decoded and checked against the device's memory, the synchronize, and
// the output handed back as a HostTensor. Simulation excluded (the device decodes launches without
// running them), as the no-op benchmarks exclude the GPU. The argument is the sequence length of a
// [16, seq, 1600] bf16 input: at 128 the output's 6.5 MB allocation (fresh pages, filled with poison)
// is most of the time; at 1 the rest of the path shows.
void BM_HostExecuteCached_LayerNorm(benchmark::State& state) {
  const int64_t seq = state.range(0);
  auto fusion = std::make_shared<Fusion>();
  testing::defineLayerNorm(*fusion, {.batch = 16, .seq = seq, .hidden = 1600});
  device::SimDeviceOps ops(/*run_kernels=*/false);
  exec::FusionCache cache(fusion, {}, &ops, DeviceInfo::h100Sxm());
  const std::vector<HostValue> inputs{HostTensor::empty(DataType::BFloat16, {16, seq, 1600}),
                                      HostTensor::empty(DataType::BFloat16, {1600}),
                                      HostTensor::empty(DataType::BFloat16, {1600})};
  exec::runOnHost(cache, inputs);  // the miss: planned and loaded once
  for (auto _ : state) benchmark::DoNotOptimize(exec::runOnHost(cache, inputs));
  state.counters["launches"] = static_cast<double>(ops.launches());
  state.counters["plans"] = static_cast<double>(cache.size());
}
BENCHMARK(BM_HostExecuteCached_LayerNorm)->Arg(1)->Arg(128)->Unit(benchmark::kNanosecond);

// x minus its column means, `steps` times over, x of [64, 1024] floats: a plan of about 2 * steps
// kernels (a reduction, then a pointwise kernel, each time).
std::shared_ptr<Fusion> columnMeanSteps(int64_t steps) {
  auto fusion = std::make_shared<Fusion>();
  FusionGuard g(fusion.get());
  TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
  Val* rows = fusion->constant(int64_t{64});
  Val* cols = fusion->constant(int64_t{1024});
  for (int64_t step = 0; step < steps; ++step) {
    x = sub(x, expand(reduce(OpKind::Sum, x, {0}, true), {rows, cols}))->asTensor();
  }
  fusion->addOutput(x);
  return fusion;
}

// What each extra kernel of a plan adds to a cached execute's host time (USER_EXPECTATIONS 1: at most
// 2 us a segment): columnMeanSteps' plans launched one by one on no-op device operations.
void BM_CachedExecuteNoOpLaunch_Segments(benchmark::State& state) {
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(columnMeanSteps(state.range(0)), {}, &ops, DeviceInfo::h100Sxm());
  const std::vector<DeviceValue> inputs{DeviceTensor::contiguous(0x100000, DataType::Float, {64, 1024})};
  cache.run(inputs);
  const int64_t before = ops.launches.load();
  for (auto _ : state) benchmark::DoNotOptimize(cache.run(inputs));
  state.counters["kernels"] = static_cast<double>(ops.launches.load() - before) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_CachedExecuteNoOpLaunch_Segments)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Unit(benchmark::kNanosecond);

// What a new signature of a shape class reuses: 0 nothing (segmented and lowered afresh), 1 the class's
// segmentation (PlanOptions::reuse_segments), 2 that and the row kernels lowered for the class's canonical
// row count (PlanOptions::reuse_kernels; both are the default).
PlanOptions reuseOptions(int64_t reuse) {
  PlanOptions options;
  options.reuse_segments = reuse >= 1;
  options.reuse_kernels = reuse >= 2;
  return options;
}

// A new sequence length of a layer_norm defined without sizes: the miss path when the kernel is
// compiled already (plan, lower, emit, hash; no NVRTC), and the memory each prepared plan keeps.
void BM_NewSequenceLengthNoCompile_LayerNorm(benchmark::State& state) {
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(testing::sizelessLayerNorm(), reuseOptions(state.range(0)), &ops, DeviceInfo::h100Sxm());
  auto inputs = [](int64_t seq) {
    return std::vector<DeviceValue>{DeviceTensor::contiguous(0x10000000, DataType::BFloat16, {4, seq, 1600}),
                                    DeviceTensor::contiguous(0x200000, DataType::BFloat16, {1600}),
                                    DeviceTensor::contiguous(0x300000, DataType::BFloat16, {1600})};
  };
  cache.run(inputs(1));
  const int64_t heap_before = heapBytesInUse();
  int64_t seq = 2;
  for (auto _ : state) benchmark::DoNotOptimize(cache.run(inputs(seq++)));
  state.counters["kernels"] = static_cast<double>(cache.kernelCount());
  // Per plan kept (past FusionCache::kMaxPlans, the least recently run are dropped).
  state.counters["KiB_per_plan"] = static_cast<double>(heapBytesInUse() - heap_before) / 1024.0 /
                                   static_cast<double>(std::max<size_t>(cache.size() - 1, 1));
  state.counters["plans"] = static_cast<double>(cache.size());
}
BENCHMARK(BM_NewSequenceLengthNoCompile_LayerNorm)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

// Runs the layer-norm backward of `row_dims` row dims at its inputs for 1024 (compiling its kernels), then
// at 1025, 1026, ... one per iteration: each a new signature whose kernels are compiled.
void newRowExtents(benchmark::State& state, int row_dims, std::vector<DeviceValue> (*inputs)(int64_t)) {
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(testing::sizelessLayerNormBackward(row_dims), reuseOptions(state.range(0)), &ops,
                          DeviceInfo::h100Sxm());
  cache.run(inputs(1024));
  int64_t extent = 1025;
  for (auto _ : state) benchmark::DoNotOptimize(cache.run(inputs(extent++)));
  state.counters["kernels"] = static_cast<double>(cache.kernelCount());
}

// A new row count of the layer-norm backward as Thunder defines it (2 kernels: the inner-outer row kernel
// and its finish), its kernels compiled: what another batch size or sequence length costs before the
// launch. Target (issue 25): at most 100 us. The argument is reuseOptions'.
void BM_NewRowCountNoCompile_LayerNormBackward(benchmark::State& state) {
  newRowExtents(state, 1, [](int64_t rows) { return testing::layerNormBackwardAddresses(rows, 768); });
}
BENCHMARK(BM_NewRowCountNoCompile_LayerNormBackward)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

// The same with the rows in two dims, [8, seq, 768], as Thunder hands a model's layer-norm backward: a new
// sequence length. The argument is reuseOptions'.
void BM_NewSequenceLengthNoCompile_LayerNormBackward(benchmark::State& state) {
  newRowExtents(state, 2, [](int64_t seq) { return testing::layerNormBackwardAddresses({8, seq}, 768); });
}
BENCHMARK(BM_NewSequenceLengthNoCompile_LayerNormBackward)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

// New batch sizes of [batch, 1024, 768]: `first` (its kernels compiled), then next(first), next of that,
// ... one per iteration up to 127, then a new cache (made and run outside the timing). A batch before the
// row extent counts in the shape class by its power of two (exec/canonical_rows.h's foldedBatchOf).
void newBatchSizes(benchmark::State& state, int64_t first, int64_t (*next)(int64_t)) {
  device::NoOpDeviceOps ops;
  auto inputs = [](int64_t batch) { return testing::layerNormBackwardAddresses({batch, 1024}, 768); };
  std::unique_ptr<exec::FusionCache> cache;
  int64_t batch = 128;
  for (auto _ : state) {
    if (batch >= 128) {
      state.PauseTiming();
      cache = std::make_unique<exec::FusionCache>(testing::sizelessLayerNormBackward(/*row_dims=*/2),
                                                  reuseOptions(state.range(0)), &ops, DeviceInfo::h100Sxm());
      cache->run(inputs(first));
      batch = next(first);
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(cache->run(inputs(batch)));
    batch = next(batch);
  }
}
int64_t plusOne(int64_t batch) { return batch + 1; }

// A new batch size of a known power of two (65 to 127 after 64): a known class. The argument is
// reuseOptions'.
void BM_NewBatchSizeNoCompile_LayerNormBackward(benchmark::State& state) { newBatchSizes(state, 64, plusOne); }
BENCHMARK(BM_NewBatchSizeNoCompile_LayerNormBackward)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

// Every batch size from 2 to 127 after 1: the first of each power of two (6 of the 126) is a new class,
// segmented for its representative inputs and lowered at its canonical sizes.
void BM_NewBatchSizeSweepNoCompile_LayerNormBackward(benchmark::State& state) { newBatchSizes(state, 1, plusOne); }
BENCHMARK(BM_NewBatchSizeSweepNoCompile_LayerNormBackward)->Arg(0)->Arg(2)->Unit(benchmark::kMicrosecond);

// The first batch of each power of two, 2 to 64 after 1: each a new shape class, segmented for its
// representative inputs and lowered at its canonical sizes, its kernels compiled already (the batch is no
// part of their code). Target (issue 25): at most 100 us. The argument is reuseOptions'.
void BM_NewBatchPowerNoCompile_LayerNormBackward(benchmark::State& state) {
  newBatchSizes(state, 1, [](int64_t batch) { return 2 * batch; });
}
BENCHMARK(BM_NewBatchPowerNoCompile_LayerNormBackward)->Arg(0)->Arg(2)->Unit(benchmark::kMicrosecond);

void BM_InputSignature(benchmark::State& state) {
  const std::vector<DeviceValue> inputs{DeviceTensor::contiguous(0x100000, DataType::BFloat16, {16, 128, 1600}),
                                        DeviceTensor::contiguous(0x200000, DataType::BFloat16, {1600}),
                                        DeviceTensor::contiguous(0x300000, DataType::BFloat16, {1600})};
  for (auto _ : state) benchmark::DoNotOptimize(exec::InputSignature::of(inputs));
}
BENCHMARK(BM_InputSignature)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace braze

namespace braze {
namespace {

// On a GPU: the per-call host time of a cached execute of a one-element add (its output allocated
// from the stream-ordered pool and freed when dropped), against a bare cuLaunchKernel of the same
// kernel in the same process. Target: within 1 us of the bare launch. Skipped without a GPU.
std::shared_ptr<Fusion> tinyAdd() {
  auto fusion = std::make_shared<Fusion>();
  FusionGuard g(fusion.get());
  TensorView* x = defineTensor({-1}, {true}, DataType::Float);
  fusion->addOutput(add(x, x));
  return fusion;
}

void BM_GpuLaunch_CachedExecute(benchmark::State& state) {
  if (!device::cudaAvailable()) {
    state.SkipWithError("no CUDA driver or GPU");
    return;
  }
  device::useDevice(0);
  device::DeviceBuffer x = device::DeviceBuffer::allocate(256);
  exec::FusionCache cache(tinyAdd());
  const std::vector<DeviceValue> inputs{DeviceTensor::contiguous(x.address(), DataType::Float, {1})};
  cache.run(inputs);
  int64_t calls = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(cache.run(inputs));
    if (++calls % 512 == 0) device::synchronizeDevice("benchmark");  // keep the launch queue short
  }
  device::synchronizeDevice("benchmark");
}
BENCHMARK(BM_GpuLaunch_CachedExecute)->Unit(benchmark::kMicrosecond);

void BM_GpuLaunch_Bare(benchmark::State& state) {
  if (!device::cudaAvailable()) {
    state.SkipWithError("no CUDA driver or GPU");
    return;
  }
  device::useDevice(0);
  device::DeviceBuffer x = device::DeviceBuffer::allocate(256);
  device::DeviceBuffer y = device::DeviceBuffer::allocate(256);
  exec::FusionCache cache(tinyAdd());
  const std::vector<DeviceValue> inputs{DeviceTensor::contiguous(x.address(), DataType::Float, {1})};
  const std::shared_ptr<const exec::PreparedPlan> plan = cache.prepare(inputs);
  const kernel::Kernel& k = *plan->compiled().kernels.back();
  const device::CuFunction function =
      device::loadCudaKernel(plan->cudaCode().back(), k.name,
                              device::kernelCompileOptions(queryDevice(0).value_or(DeviceInfo()).arch()));
  // The tensors, then the kernel's scalar arguments (the element count), as the cached execute passes them.
  std::vector<device::CuDevicePtr> words = {x.address(), y.address()};
  for (uint64_t word : kernel::argumentWords(k)) words.push_back(static_cast<device::CuDevicePtr>(word));
  std::vector<void*> params;
  for (device::CuDevicePtr& word : words) params.push_back(&word);
  const device::CudaDriver& driver = device::requireCudaDriver();
  int64_t calls = 0;
  for (auto _ : state) {
    // The driver call alone: no checks, no strings.
    driver.launchKernel(function, static_cast<unsigned>(k.grid[0]), static_cast<unsigned>(k.grid[1]), 1,
                        static_cast<unsigned>(k.block[0]), static_cast<unsigned>(k.block[1]), 1, 0, nullptr,
                        params.data(), nullptr);
    if (++calls % 512 == 0) device::synchronizeDevice("benchmark");
  }
  device::synchronizeDevice("benchmark");
}
BENCHMARK(BM_GpuLaunch_Bare)->Unit(benchmark::kMicrosecond);

// On a GPU: the driver calls a cached execute makes besides the launch, one at a time, so that the gap
// between BM_GpuLaunch_CachedExecute and BM_GpuLaunch_Bare can be read off: an output's allocation and
// release (arg 0: from the cache of freed blocks, or with BRAZE_BLOCK_CACHE_BYTES=0 from the driver's
// stream-ordered pool) and the device scope each execute enters (cuCtxGetCurrent; arg 1).
void BM_GpuLaunch_DriverCalls(benchmark::State& state) {
  if (!device::cudaAvailable()) {
    state.SkipWithError("no CUDA driver or GPU");
    return;
  }
  device::useDevice(0);
  device::DeviceOps& ops = device::cudaDeviceOps(0);
  const bool scope_only = state.range(0) == 1;
  int64_t calls = 0;
  for (auto _ : state) {
    if (scope_only) {
      device::DeviceScope scope(ops);
      benchmark::ClobberMemory();
    } else {
      ops.release(ops.allocate(256, nullptr), nullptr);
      if (++calls % 512 == 0) device::synchronizeDevice("benchmark");
    }
  }
  device::synchronizeDevice("benchmark");
  const bool cached = ops.blockCacheCounts().hits > 0;
  state.SetLabel(scope_only ? "device scope (cuCtxGetCurrent)"
                 : cached   ? "output allocate + release (the cache of freed blocks)"
                            : "output allocate + release (cuMemAllocAsync, cuMemFreeAsync)");
}
BENCHMARK(BM_GpuLaunch_DriverCalls)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// On a GPU: the host time per call of a cached execute of columnMeanSteps(steps) (its intermediates from
// the cache of freed blocks, or the pool with BRAZE_BLOCK_CACHE_BYTES=0), its kernels launched one by one
// (second argument 0) or as one CUDA graph (1). Issue 25's target: 1 us over the launches, whose cost alone
// BM_GpuLaunch_Bare gives.
void BM_GpuLaunch_Segments(benchmark::State& state) {
  if (!device::cudaAvailable()) {
    state.SkipWithError("no CUDA driver or GPU");
    return;
  }
  device::useDevice(0);
  device::DeviceBuffer x = device::DeviceBuffer::allocate(64 * 1024 * 4);
  exec::FusionCache cache(columnMeanSteps(state.range(0)));
  cache.useCudaGraphs(state.range(1) == 1);
  const std::vector<DeviceValue> inputs{DeviceTensor::contiguous(x.address(), DataType::Float, {64, 1024})};
  cache.run(inputs);
  int64_t calls = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(cache.run(inputs));
    if (++calls % 512 == 0) device::synchronizeDevice("benchmark");
  }
  device::synchronizeDevice("benchmark");
  state.counters["kernels"] = static_cast<double>(cache.prepare(inputs)->launchedKernels().size());
  if (state.range(1) == 1) state.SetLabel("one CUDA graph");
}
BENCHMARK(BM_GpuLaunch_Segments)
    ->ArgsProduct({{1, 2, 4, 8}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace braze
