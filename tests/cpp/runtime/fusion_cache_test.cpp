// The FusionCache's host side, with kernels neither loaded nor launched (NoOpDeviceOps) and the plan
// made for a described H100: which signatures share a plan, what a run allocates, launches and frees,
// outputs that are views of inputs, and the errors for inputs it cannot run. GPU runs of the same
// path are in gpu_fusion_cache_test.cpp.
#include "fusions/kernel_corpus.h"
#include "exec/fusion_cache.h"
#include "exec/host_execute.h"
#include "device/sim/sim_device_ops.h"
#include "scheduler/launch_arguments.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <tuple>

namespace braze {
namespace {

using device::DeviceTensor;
using device::DeviceValue;
using exec::FusionCache;
using device::NoOpDeviceOps;

std::shared_ptr<Fusion> layerNorm() {
  auto f = std::make_shared<Fusion>();
  testing::defineLayerNorm(*f, {.batch = 16, .seq = 128, .hidden = 1600});
  return f;
}

std::vector<DeviceValue> layerNormInputs(device::DevicePtr x) {
  return {DeviceTensor::contiguous(x, DataType::BFloat16, {16, 128, 1600}),
          DeviceTensor::contiguous(0x200000, DataType::BFloat16, {1600}),
          DeviceTensor::contiguous(0x300000, DataType::BFloat16, {1600})};
}

TEST(FusionCache, OneSignatureIsPlannedOnceAndRunsWithoutReplanning) {
  NoOpDeviceOps ops;
  FusionCache cache(layerNorm(), {}, &ops, DeviceInfo::h100Sxm());
  const auto outputs = cache.run(layerNormInputs(0x100000));
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].tensor.sizes, (std::vector<int64_t>{16, 128, 1600}));
  EXPECT_EQ(outputs[0].tensor.strides, (std::vector<int64_t>{204800, 1600, 1}));
  EXPECT_EQ(outputs[0].tensor.dtype, DataType::BFloat16);
  EXPECT_NE(outputs[0].owner, nullptr);
  EXPECT_EQ(outputs[0].alias_of, -1);
  // Other pointers with the same alignment: the same plan.
  cache.run(layerNormInputs(0x500000));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(ops.launches.load(), 2);
  // One output allocation per run, nothing else; released when the caller drops it.
  EXPECT_EQ(ops.allocations.load(), 2);
  EXPECT_EQ(ops.releases.load(), 1);  // the second run's output, dropped at once; the first's is still held
}

TEST(FusionCache, SizesAlignmentAndScalarsSelectThePlan) {
  NoOpDeviceOps ops;
  FusionCache cache(layerNorm(), {}, &ops, DeviceInfo::h100Sxm());
  EXPECT_EQ(cache.prepare(layerNormInputs(0x100000))->compiled().kernels.back()->vectorize, 8);
  // x two bytes off 16-byte alignment: another plan, with narrower accesses.
  const auto misaligned = cache.prepare(layerNormInputs(0x100002));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(misaligned->compiled().kernels.back()->vectorize, 1);
  // Aligned to 32 bytes instead of 16: the same plan (vectors never exceed 16 bytes).
  cache.prepare(layerNormInputs(0x100020));
  EXPECT_EQ(cache.size(), 2u);

  auto scaled = std::make_shared<Fusion>();
  {
    FusionGuard g(scaled.get());
    TensorView* x = defineTensor({-1}, {true}, DataType::Float);
    Val* s = defineScalar(DataType::Double);
    scaled->addOutput(mul(x, s));
  }
  FusionCache by_scalar(scaled, {}, &ops, DeviceInfo::h100Sxm());
  by_scalar.run({DeviceTensor::contiguous(0x100000, DataType::Float, {64}), ScalarValue{2.0}});
  by_scalar.run({DeviceTensor::contiguous(0x100000, DataType::Float, {64}), ScalarValue{2.0}});
  EXPECT_EQ(by_scalar.size(), 1u);
  by_scalar.run({DeviceTensor::contiguous(0x100000, DataType::Float, {64}), ScalarValue{3.0}});
  // A scalar only read as a value is a launch argument, not part of the signature: one plan, one kernel.
  EXPECT_EQ(by_scalar.size(), 1u);
  EXPECT_EQ(by_scalar.kernelCount(), 1u);

  // A scalar that sizes a tensor is part of the plan: a plan per value.
  auto sized = std::make_shared<Fusion>();
  {
    FusionGuard g(sized.get());
    TensorView* x = defineTensor({-1}, {true}, DataType::Float);
    Val* n = defineScalar(DataType::Int64);
    sized->addOutput(add(broadcast(x, {true, false}), full({n, sized->constant(int64_t{64})}, sized->constant(1.0),
                                                            DataType::Float)));
  }
  FusionCache by_size(sized, {}, &ops, DeviceInfo::h100Sxm());
  by_size.run({DeviceTensor::contiguous(0x100000, DataType::Float, {64}), ScalarValue{int64_t{2}}});
  by_size.run({DeviceTensor::contiguous(0x100000, DataType::Float, {64}), ScalarValue{int64_t{3}}});
  EXPECT_EQ(by_size.size(), 2u);
}

TEST(FusionCache, EachRunPassesItsOwnValuesOfLaunchArgumentScalars) {
  // x * s + uniform(0, 1, seed, offset): a new s, seed or offset is the same plan with new words.
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    Val* s = defineScalar(DataType::Double);
    Val* seed = defineScalar(DataType::Int64);
    Val* offset = defineScalar(DataType::Int64);
    f->addOutput(add(mul(x, s), uniform(f->constant(0.0), f->constant(1.0), {f->constant(int64_t{4}), f->constant(int64_t{33})},
                                        seed, offset, DataType::Float)));
  }
  EXPECT_EQ(scheduler::launchArgumentInputs(*f), (std::vector<bool>{false, true, true, true}));
  device::SimDeviceOps ops;
  FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  const HostTensor x = testing::randomTensor(DataType::Float, {4, 33}, 1);
  for (const auto& [s, seed, offset] : {std::tuple{2.0, 7, 0}, std::tuple{-3.5, 7, 4}, std::tuple{0.5, 123456789, 8}}) {
    const std::vector<HostValue> inputs{x, ScalarValue{s}, ScalarValue{int64_t{seed}}, ScalarValue{int64_t{offset}}};
    testing::expectSameValues(runOnHost(cache, inputs), evaluate(*f, inputs));
  }
  EXPECT_EQ(cache.size(), 1u);
}

TEST(FusionCache, OutputsThatViewAnInputComeBackAsViews) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f->addOutput(permute(x, {1, 0}));
    f->addOutput(add(x, f->constant(1.0)));
  }
  NoOpDeviceOps ops;
  FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  const auto outputs = cache.run({DeviceTensor::contiguous(0x100000, DataType::Float, {3, 5})});
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].alias_of, 0);
  EXPECT_EQ(outputs[0].owner, nullptr);
  EXPECT_EQ(outputs[0].tensor.data, 0x100000u);
  EXPECT_EQ(outputs[0].tensor.sizes, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(outputs[0].tensor.strides, (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(outputs[1].alias_of, -1);
  EXPECT_EQ(ops.launches.load(), 1);
}

TEST(FusionCache, AnAllocatorProvidesEveryOutputThatIsABufferOfItsOwn) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f->addOutput(permute(x, {1, 0}));                        // a view of the input: no memory
    Val* y = add(x, f->constant(1.0));
    f->addOutput(y);                                         // a buffer of its own
    f->addOutput(mul(x, f->constant(2.0)));                  // another
    f->addOutput(permute(y->asTensor(), {1, 0}));            // a view of y's buffer: y's memory
  }
  NoOpDeviceOps ops;
  // Bookending at outputs: the last output is a view of y's buffer, not a kernel's transposed copy.
  FusionCache cache(f, PlanOptions{BookendPolicy::Outputs}, &ops, DeviceInfo::h100Sxm());
  std::vector<std::pair<size_t, DeviceTensor>> asked;
  device::DevicePtr next = 0x900000;
  const device::OutputAllocator allocator = [&](size_t output, const DeviceTensor& spec) {
    asked.emplace_back(output, spec);
    return next += 0x10000;
  };
  const auto outputs = cache.run({DeviceTensor::contiguous(0x100000, DataType::Float, {3, 5}, 1)}, nullptr, false,
                                 &allocator);
  ASSERT_EQ(outputs.size(), 4u);
  EXPECT_EQ(outputs[0].alias_of, 0);
  // y shares its buffer with a view of it: the pool provides that one; the product is the allocator's.
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].first, 2u);
  EXPECT_EQ(asked[0].second.sizes, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(asked[0].second.strides, (std::vector<int64_t>{5, 1}));
  EXPECT_EQ(asked[0].second.dtype, DataType::Float);
  EXPECT_EQ(asked[0].second.device, 1);
  EXPECT_TRUE(outputs[2].caller_allocated);
  EXPECT_EQ(outputs[2].owner, nullptr);
  EXPECT_EQ(outputs[2].tensor.data, 0x910000u);
  EXPECT_FALSE(outputs[1].caller_allocated);
  EXPECT_NE(outputs[1].owner, nullptr);
  EXPECT_EQ(outputs[3].owner, outputs[1].owner);
  EXPECT_EQ(ops.allocations.load(), 1);  // y's buffer only

  // An allocator that declines (returns 0) leaves the output to the pool.
  const device::OutputAllocator declines = [](size_t, const DeviceTensor&) { return device::DevicePtr{0}; };
  const auto pooled = cache.run({DeviceTensor::contiguous(0x100000, DataType::Float, {3, 5}, 1)}, nullptr, false,
                                &declines);
  EXPECT_FALSE(pooled[2].caller_allocated);
  EXPECT_NE(pooled[2].owner, nullptr);
  EXPECT_EQ(ops.allocations.load(), 3);

  // A misaligned address is refused by name, and what the failed run took from the pool goes back.
  const device::OutputAllocator misaligned = [](size_t, const DeviceTensor&) { return device::DevicePtr{0x900004}; };
  const int64_t allocations_before = ops.allocations.load(), releases_before = ops.releases.load();
  try {
    cache.run({DeviceTensor::contiguous(0x100000, DataType::Float, {3, 5}, 1)}, nullptr, false, &misaligned);
    ADD_FAILURE() << "a misaligned output address was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0x900004, which is not 16-byte aligned"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ops.allocations.load() - allocations_before, ops.releases.load() - releases_before);
}

TEST(FusionCache, GridReductionPartialsAreAllocatedAndReturnedTheCountsTakeTheZeroedScratch) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f->addOutput(reduce(OpKind::Sum, x, {1}));
  }
  NoOpDeviceOps ops;
  FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  {
    const auto outputs = cache.run({DeviceTensor::contiguous(0x100000, DataType::Float, {3, 1 << 20})});
    // The output and the partials; the blocks' arrival counts are in the stream's zeroed scratch, which
    // the device keeps (the kernel leaves them zeroed).
    EXPECT_EQ(ops.allocations.load(), 2);
    EXPECT_EQ(ops.releases.load(), 1);  // the partials, right after the launch
  }
  EXPECT_EQ(ops.releases.load(), 2);  // the output, once the caller let it go
  cache.run({DeviceTensor::contiguous(0x100000, DataType::Float, {3, 1 << 20})});
  EXPECT_EQ(ops.allocations.load(), 4);
  EXPECT_EQ(ops.releases.load(), 4);
}

TEST(FusionCache, InputsItCannotRunGetClearErrors) {
  NoOpDeviceOps ops;
  FusionCache cache(layerNorm(), {}, &ops, DeviceInfo::h100Sxm());
  auto inputs = layerNormInputs(0x100000);
  std::get<DeviceTensor>(inputs[1]).device = 1;
  try {
    cache.run(inputs);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 1 is on cuda:1 but input 0 is on cuda:0"), std::string::npos)
        << e.what();
  }
  inputs = layerNormInputs(0x100000);
  std::get<DeviceTensor>(inputs[0]).dtype = DataType::Float;
  EXPECT_THROW(cache.run(inputs), Error);
  EXPECT_EQ(cache.size(), 0u);

  auto mm = std::make_shared<Fusion>();
  {
    FusionGuard g(mm.get());
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::Float);
    mm->addOutput(matmul(a, b));
  }
  FusionCache matmuls(mm, {}, &ops, DeviceInfo::h100Sxm());
  try {
    matmuls.run({DeviceTensor::contiguous(0x100000, DataType::Float, {4, 4}), DeviceTensor::contiguous(0x200000, DataType::Float, {4, 4})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no GPU kernel"), std::string::npos) << e.what();
  }
}

TEST(FusionCache, ConcurrentRunsShareOnePlanPerSignature) {
  NoOpDeviceOps ops;
  FusionCache cache(layerNorm(), {}, &ops, DeviceInfo::h100Sxm());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Two signatures: x 16-byte aligned, or 2 bytes off.
      for (int i = 0; i < 50; ++i) cache.run(layerNormInputs(0x100000 + 0x10000 * t + (i % 2 == 0 ? 0 : 2)));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(ops.launches.load(), 200);
  EXPECT_EQ(ops.allocations.load(), ops.releases.load());
}

// Descriptors of host tensors as if they were on the GPU (NoOpDeviceOps touches no memory): the host
// addresses keep each input's alignment, so the plans are the ones a GPU run would make.
std::vector<DeviceValue> standInDeviceValues(const std::vector<HostValue>& inputs) {
  std::vector<DeviceValue> values;
  for (const HostValue& v : inputs) {
    if (const auto* t = std::get_if<HostTensor>(&v)) {
      values.push_back(DeviceTensor{reinterpret_cast<device::DevicePtr>(t->data()), t->dtype(), t->sizes(),
                                    t->strides()});
    } else {
      values.push_back(std::get<ScalarValue>(v));
    }
  }
  return values;
}

// 16 threads x 1000 runs over 8 fusions, all starting at once so that first plans race: each fusion
// keeps one plan (racing threads may each prepare one; all but the first are dropped), the same one a
// lone thread makes, every run launches that plan's kernels, and every output is released. Its main
// use is under ThreadSanitizer (tools/sanitize.sh thread).
TEST(FusionCache, SixteenThreadsOverEightFusionsShareOnePlanEach) {
  constexpr int kFusions = 8, kThreads = 16, kRunsPerThread = 1000;
  const std::vector<testing::KernelCaseMaker> corpus = testing::smallKernelCorpus();
  ASSERT_GE(corpus.size(), static_cast<size_t>(kFusions));
  std::vector<testing::KernelCase> cases;
  std::vector<std::vector<DeviceValue>> inputs;
  std::vector<std::vector<std::string>> lone_sources;
  std::vector<int64_t> lone_launches;
  std::vector<std::vector<std::vector<int64_t>>> output_sizes;
  for (int f = 0; f < kFusions; ++f) {
    cases.push_back(corpus[f].make());
    inputs.push_back(standInDeviceValues(cases[f].inputs));
    NoOpDeviceOps lone_ops;
    FusionCache lone(cases[f].fusion, cases[f].options.plan, &lone_ops, DeviceInfo::h100Sxm());
    std::vector<std::vector<int64_t>> sizes;
    for (const auto& out : lone.run(inputs[f])) sizes.push_back(out.tensor.sizes);
    output_sizes.push_back(std::move(sizes));
    lone_sources.push_back(lone.prepare(inputs[f])->cudaCode());
    lone_launches.push_back(lone_ops.launches.load());
  }

  NoOpDeviceOps ops;
  std::vector<std::unique_ptr<FusionCache>> caches;
  for (const auto& c : cases) {
    caches.push_back(std::make_unique<FusionCache>(c.fusion, c.options.plan, &ops, DeviceInfo::h100Sxm()));
  }
  std::atomic<int> waiting{kThreads};
  std::atomic<int> wrong_outputs{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0) std::this_thread::yield();
      try {
        for (int i = 0; i < kRunsPerThread; ++i) {
          const int f = (t + i) % kFusions;
          const auto outputs = caches[f]->run(inputs[f]);
          bool same = outputs.size() == output_sizes[f].size();
          for (size_t o = 0; same && o < outputs.size(); ++o) same = outputs[o].tensor.sizes == output_sizes[f][o];
          if (!same) wrong_outputs.fetch_add(1);
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(wrong_outputs.load(), 0);
  int64_t launches = 0;
  for (int f = 0; f < kFusions; ++f) {
    SCOPED_TRACE(corpus[f].name);
    EXPECT_EQ(caches[f]->size(), 1u);
    EXPECT_EQ(caches[f]->prepare(inputs[f])->cudaCode(), lone_sources[f]);
    launches += lone_launches[f] * (kThreads * kRunsPerThread / kFusions);
  }
  EXPECT_EQ(ops.launches.load(), launches);
  EXPECT_EQ(ops.allocations.load(), ops.releases.load());
}

}  // namespace
}  // namespace braze

namespace braze {
namespace {

std::vector<DeviceValue> sizelessLayerNormInputs(int64_t batch, int64_t seq) {
  return {DeviceTensor::contiguous(0x10000000, DataType::BFloat16, {batch, seq, 1600}),
          DeviceTensor::contiguous(0x200000, DataType::BFloat16, {1600}),
          DeviceTensor::contiguous(0x300000, DataType::BFloat16, {1600})};
}

TEST(FusionCache, SixtyFourRowCountsLoadTwoKernelsAndWarnNothing) {
  NoOpDeviceOps ops;
  FusionCache cache(testing::sizelessLayerNorm(), {}, &ops, DeviceInfo::h100Sxm());
  ::testing::internal::CaptureStderr();
  for (int64_t i = 0; i < 64; ++i) cache.run(sizelessLayerNormInputs(1 + i % 4, 1 + (i * 977) % 4096));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(cache.size(), 64u);        // a plan per shape (planning is host work, under a millisecond)
  EXPECT_LE(cache.kernelCount(), 2u);  // but one row per block, or two: two kernels for every shape
  EXPECT_LE(ops.distinctSources(), 2u);
  EXPECT_EQ(err, "");
}

// The layer-norm backward as Thunder defines it, at many row counts (odd ones too), plans as one
// inner-outer persistent segment of two kernels: the pass over the rows (grad_in, and per-block partial
// sums of grad_weight and grad_bias), then the finish that sums the partials per column. Both take the
// row, row-group, block and partial-row counts at launch, and the [rows, 1] statistics, read once per
// row, do not limit the row kernel's vectors, so every row count runs the kernels compiled already,
// the row kernel's bf16 rows read 8 at a time (16 bytes). Their plans run the functions loaded for the
// first: nothing is emitted or handed to the device's loader again.
TEST(FusionCache, LayerNormBackwardRowCountsShareTheirKernels) {
  NoOpDeviceOps ops;
  FusionCache cache(testing::sizelessLayerNormBackward(), {}, &ops, DeviceInfo::h100Sxm());
  auto inputs = [](int64_t rows) { return testing::layerNormBackwardAddresses(rows, 768); };
  cache.run(inputs(4097));
  const size_t kernels = cache.kernelCount();
  const int64_t loads = ops.loads.load();
  const int64_t launches = ops.launches.load();
  for (int64_t rows = 4098; rows < 4130; ++rows) cache.run(inputs(rows));
  EXPECT_EQ(cache.kernelCount(), kernels);
  EXPECT_EQ(ops.loads.load(), loads);
  EXPECT_EQ(ops.launches.load() - launches, 32 * 2);
  EXPECT_EQ(cache.size(), 33u);
  const LoweredPlan& plan = cache.lastPlan()->compiled();
  EXPECT_EQ(plan.plan.kernelCount(), 2) << plan.plan.toString();
  ASSERT_EQ(plan.plan.segments.size(), 1u) << plan.plan.toString();
  EXPECT_EQ(plan.plan.segments[0].scheduler, SchedulerKind::InnerOuterPersistent);
  ASSERT_EQ(plan.kernels.size(), 2u);
  ASSERT_TRUE(plan.kernels[0].has_value());
  EXPECT_EQ(plan.kernels[0]->vectorize, 8) << plan.kernels[0]->summary;
  EXPECT_EQ(kernels, 2u);
}

TEST(FusionCache, ExplainSaysHitNewLaunchOrNewKernelAndWhy) {
  NoOpDeviceOps ops;
  FusionCache cache(testing::sizelessLayerNorm(), {}, &ops, DeviceInfo::h100Sxm());
  exec::CacheExplanation first = cache.explain(sizelessLayerNormInputs(4, 128));
  EXPECT_EQ(first.lookup, exec::CacheLookup::NewKernel);
  EXPECT_NE(first.why.find("the first kernel of this fusion"), std::string::npos) << first.why;
  cache.run(sizelessLayerNormInputs(4, 128));
  EXPECT_EQ(cache.explain(sizelessLayerNormInputs(4, 128)).lookup, exec::CacheLookup::Hit);
  const exec::CacheExplanation longer = cache.explain(sizelessLayerNormInputs(2, 1000));
  EXPECT_EQ(longer.lookup, exec::CacheLookup::NewLaunch) << longer.why;
  EXPECT_EQ(cache.size(), 1u);  // explain keeps nothing
  // One row: a block of one row, which the heuristics had not chosen before.
  const exec::CacheExplanation one_row = cache.explain(sizelessLayerNormInputs(1, 1));
  EXPECT_EQ(one_row.lookup, exec::CacheLookup::NewKernel);
  EXPECT_NE(one_row.why.find("heuristics no compiled kernel of this fusion has"), std::string::npos) << one_row.why;
  EXPECT_NE(one_row.why.find("1 rows per block"), std::string::npos) << one_row.why;
}

TEST(FusionCache, PastItsCapTheLeastRecentlyRunPlanIsDropped) {
  NoOpDeviceOps ops;
  FusionCache cache(testing::sizelessLayerNorm(), {}, &ops, DeviceInfo::h100Sxm());
  const auto kept = sizelessLayerNormInputs(3, 5);
  std::shared_ptr<const exec::PreparedPlan> held = cache.prepare(sizelessLayerNormInputs(1, 1));
  const int64_t n = static_cast<int64_t>(FusionCache::kMaxPlans) + 8;
  for (int64_t seq = 2; seq <= n; ++seq) {
    cache.run(sizelessLayerNormInputs(1, seq));
    if (seq % 64 == 0) cache.run(kept);  // run now and then: never the least recently run
  }
  EXPECT_EQ(cache.size(), FusionCache::kMaxPlans);
  EXPECT_EQ(cache.explain(kept).lookup, exec::CacheLookup::Hit);
  EXPECT_EQ(cache.explain(sizelessLayerNormInputs(1, n)).lookup, exec::CacheLookup::Hit);
  // The first shapes were dropped: planned again, but with kernels compiled already.
  EXPECT_EQ(cache.explain(sizelessLayerNormInputs(1, 2)).lookup, exec::CacheLookup::NewLaunch);
  // A plan dropped while the caller holds it stays valid.
  EXPECT_EQ(held->compiled().kernels.size(), 1u);
  EXPECT_LE(cache.kernelCount(), 2u);
}

TEST(FusionCache, ManyKernelsAreWarnedAboutOnce) {
  // Row sums are specialized on the row length: every new length is a new kernel.
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f->addOutput(reduce(OpKind::Sum, x, {1}));
  }
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  ::testing::internal::CaptureStderr();
  const int64_t n = static_cast<int64_t>(exec::FusionCache::kManyKernels) + 4;
  for (int64_t i = 1; i <= n; ++i) cache.run({device::DeviceTensor::contiguous(0x100000, DataType::Float, {8, i})});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(cache.kernelCount(), static_cast<size_t>(n));
  const auto first = err.find("different kernels");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("different kernels", first + 1), std::string::npos) << err;
}

TEST(FusionCache, AScalarWhereATensorIsExpectedIsNamed) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1}, {true}, DataType::Float);
    f->addOutput(add(x, x));
  }
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(std::make_shared<Fusion>(*f), {}, &ops, DeviceInfo::h100Sxm());
  try {
    cache.run({ScalarValue{1.0}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 0"), std::string::npos) << e.what();
  }
}

// runIfPrepared writes each output over what the caller's vector held (another fusion's outputs, the
// last run's), field by field as run() returns them, and reuses the vectors' memory.
TEST(FusionCache, RunIfPreparedWritesOverTheCallersOutputs) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f->addOutput(permute(x, {1, 0}));                                                       // a view
    f->addOutput(add(x, f->constant(1.0)));                                                 // a buffer
    f->addOutput(binaryOp(OpKind::Mul, size(x, 1), defineScalar(DataType::Int64, int64_t{3})));  // a scalar
  }
  NoOpDeviceOps ops;
  FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  const std::vector<DeviceValue> inputs = {DeviceTensor::contiguous(0x100000, DataType::Float, {4, 7})};
  device::DeviceOutput stale;  // every field set, as no output of this fusion has them
  stale.tensor = DeviceTensor::contiguous(0x42, DataType::Half, {9, 9, 9, 9, 9});
  stale.owner = std::make_shared<int>(1);
  stale.alias_of = 3;
  stale.caller_allocated = true;
  stale.scalar = ScalarValue{2.5};
  std::vector<device::DeviceOutput> outputs(5, stale);
  EXPECT_FALSE(cache.runIfPrepared(inputs, outputs));  // nothing planned yet: nothing done
  EXPECT_EQ(outputs.size(), 5u);
  EXPECT_EQ(ops.launches.load(), 0);

  const device::OutputAllocator allocator = [](size_t, const DeviceTensor&) { return device::DevicePtr{0x900000}; };
  for (const device::OutputAllocator* with : {&allocator, static_cast<const device::OutputAllocator*>(nullptr)}) {
    const std::vector<device::DeviceOutput> expected = cache.run(inputs, nullptr, false, with);
    const int64_t* sizes_memory = outputs[1].tensor.sizes.data();
    ASSERT_TRUE(cache.runIfPrepared(inputs, outputs, nullptr, false, with));
    ASSERT_EQ(outputs.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      SCOPED_TRACE(i);
      // The pool's buffers differ from run to run (the expected run's are still held); views and the
      // allocator's do not.
      if (expected[i].owner == nullptr) {
        EXPECT_EQ(outputs[i].tensor.data, expected[i].tensor.data);
      }
      EXPECT_EQ(outputs[i].tensor.dtype, expected[i].tensor.dtype);
      EXPECT_EQ(outputs[i].tensor.sizes, expected[i].tensor.sizes);
      EXPECT_EQ(outputs[i].tensor.strides, expected[i].tensor.strides);
      EXPECT_EQ(outputs[i].tensor.device, expected[i].tensor.device);
      EXPECT_EQ(outputs[i].owner == nullptr, expected[i].owner == nullptr);
      EXPECT_EQ(outputs[i].alias_of, expected[i].alias_of);
      EXPECT_EQ(outputs[i].caller_allocated, expected[i].caller_allocated);
      EXPECT_EQ(outputs[i].scalar, expected[i].scalar);
    }
    EXPECT_EQ(outputs[1].caller_allocated, with != nullptr);
    EXPECT_EQ(outputs[1].tensor.sizes.data(), sizes_memory);  // rank 5 before, 2 now: the same memory
  }
  EXPECT_EQ(cache.size(), 1u);
}

// Scalars are known when the plan is made: a device the host cannot read returns them as values too.
TEST(FusionCache, ScalarOutputsComeBackAsValuesFromAnyDevice) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f->addOutput(add(x, x));
    f->addOutput(binaryOp(OpKind::Mul, size(x, 1), defineScalar(DataType::Int64, int64_t{3})));
  }
  device::NoOpDeviceOps ops;
  ASSERT_FALSE(ops.hostMemory());
  exec::FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  const auto outputs = cache.run({DeviceTensor::contiguous(0x100000, DataType::Float, {4, 7})});
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_FALSE(outputs[0].scalar.has_value());
  ASSERT_TRUE(outputs[1].scalar.has_value());
  EXPECT_EQ(std::get<int64_t>(*outputs[1].scalar), 21);
}

}  // namespace
}  // namespace braze

namespace braze {
namespace {

TEST(FusionCache, PlansOfSeveralKernelsLaunchAsOneGraphWhenAsked) {
  // x - mean over dim 0: a reduction kernel, then a pointwise one.
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* m = reduce(OpKind::Sum, x, {0}, true);
    f->addOutput(sub(x, expand(m, testing::ints(*f, {29, 32}))));
  }
  device::NoOpDeviceOps ops;
  exec::FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  cache.useCudaGraphs(true);
  auto input = [](device::DevicePtr x) {
    return std::vector<device::DeviceValue>{device::DeviceTensor::contiguous(x, DataType::Float, {29, 32})};
  };
  cache.run(input(0x100000));
  ASSERT_EQ(cache.prepare(input(0x100000))->launchedKernels().size(), 2u);
  EXPECT_EQ(ops.graphs_made.load(), 1);
  EXPECT_EQ(ops.graph_launches.load(), 1);
  EXPECT_EQ(ops.launches.load(), 0);
  // New input, intermediate and output addresses: the graph is updated, not made again.
  cache.run(input(0x500000));
  EXPECT_EQ(ops.graphs_made.load(), 1);
  EXPECT_EQ(ops.graph_launches.load(), 2);
  EXPECT_EQ(ops.graph_nodes_updated.load(), 2);
  cache.useCudaGraphs(false);
  cache.run(input(0x100000));
  EXPECT_EQ(ops.launches.load(), 2);
  EXPECT_EQ(ops.graph_launches.load(), 2);

  // A plan of one kernel launches it as it is.
  device::NoOpDeviceOps single_ops;
  exec::FusionCache single(layerNorm(), {}, &single_ops, DeviceInfo::h100Sxm());
  single.useCudaGraphs(true);
  single.run(layerNormInputs(0x100000));
  EXPECT_EQ(single_ops.launches.load(), 1);
  EXPECT_EQ(single_ops.graphs_made.load(), 0);
}

TEST(DeviceOps, AGraphUpdatesOnlyTheKernelsWhoseArgumentsChanged) {
  device::NoOpDeviceOps ops;
  std::unique_ptr<device::LaunchGraph> graph;
  uint64_t first[2] = {0x1000, 7}, second[1] = {0x2000};
  void* first_args[2] = {&first[0], &first[1]};
  void* second_args[1] = {&second[0]};
  const std::vector<device::KernelLaunch> chain = {{nullptr, {}, first_args, 2}, {nullptr, {}, second_args, 1}};
  ASSERT_TRUE(ops.launchGraph(graph, chain, nullptr));
  ASSERT_NE(graph, nullptr);
  ASSERT_TRUE(ops.launchGraph(graph, chain, nullptr));
  EXPECT_EQ(ops.graph_nodes_updated.load(), 0);
  first[1] = 8;  // a scalar word of the first kernel
  ops.launchGraph(graph, chain, nullptr);
  EXPECT_EQ(ops.graph_nodes_updated.load(), 1);
  first[0] = 0x3000;
  second[0] = 0x4000;
  ops.launchGraph(graph, chain, nullptr);
  EXPECT_EQ(ops.graph_nodes_updated.load(), 3);
  ops.launchGraph(graph, chain, nullptr);
  EXPECT_EQ(ops.graph_nodes_updated.load(), 3);
  EXPECT_EQ(ops.graphs_made.load(), 1);
  EXPECT_EQ(ops.graph_launches.load(), 5);
}

}  // namespace
}  // namespace braze
