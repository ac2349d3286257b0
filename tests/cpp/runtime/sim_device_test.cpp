// The simulated device as a device: it decodes launches exactly as packed for a GPU (so a packing
// mistake fails), orders work on streams (outputs exist only after synchronize; frees wait for the work
// before them), refuses memory it does not know, shares one loaded kernel across shapes, runs graphs
// with the arguments they were updated with, and runs a plan's host steps (segments no scheduler
// accepts, in-place updates, scalar outputs) in stream order.
#include "fusions/kernel_corpus.h"
#include "codegen/source_emitter.h"
#include "exec/host_execute.h"
#include "device/sim/sim_device_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <atomic>
#include <cstring>
#include <thread>

namespace braze {
namespace {

using device::DevicePtr;
using device::DeviceTensor;
using device::SimDeviceOps;

// The one kernel of a small layer_norm, planned as the FusionCache plans it, with its inputs and
// output placed in the device's memory.
struct LayerNormLaunch {
  testing::KernelCase c = testing::layerNormCase({.batch = 2, .seq = 3, .hidden = 64}, 5);
  LoweredPlan compiled;
  const kernel::Kernel* k = nullptr;
  std::vector<DevicePtr> pointers;  // x, weight, bias, out: the order of k->tensors

  explicit LayerNormLaunch(SimDeviceOps& ops) {
    std::vector<device::DeviceValue> inputs;
    for (const HostValue& v : c.inputs) {
      const HostTensor& t = std::get<HostTensor>(v);
      const size_t bytes = static_cast<size_t>(t.numel() * sizeOf(t.dtype()));
      const DevicePtr p = ops.allocate(bytes, nullptr);
      std::memcpy(reinterpret_cast<void*>(p), t.data(), bytes);
      inputs.push_back(DeviceTensor::contiguous(p, t.dtype(), t.sizes()));
      pointers.push_back(p);
    }
    compiled = exec::planForDevice(*c.fusion, inputs, {}, DeviceInfo::h100Sxm());
    k = &testing::onlyKernel(compiled);
    EXPECT_EQ(k->tensors.size(), 4u);
    pointers.push_back(ops.allocate(2 * 3 * 64 * 2, nullptr));
  }

  // Launches with the tensor pointers in `order` (k->tensors' order when it is 0, 1, 2, 3).
  void launch(SimDeviceOps& ops, device::KernelHandle f, const std::vector<size_t>& order) const {
    std::vector<uint64_t> words;
    for (size_t i : order) words.push_back(pointers[i]);
    for (uint64_t w : kernel::argumentWords(*k)) words.push_back(w);
    std::vector<void*> args;
    for (uint64_t& w : words) args.push_back(&w);
    ops.launch(f, {k->grid, k->block, k->shared_bytes}, args.data(), nullptr);
  }

  device::KernelHandle load(SimDeviceOps& ops) const {
    return ops.load({{k, {codegen::emitCuda(*k), k->name, {}}, k->shared_bytes}})[0];
  }

  HostTensor output() const {
    return HostTensor::wrap(reinterpret_cast<void*>(pointers[3]), DataType::BFloat16, {2, 3, 64}, {192, 64, 1});
  }
};

std::string failureOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SimDevice, RunsALaunchPackedAsForAGpu) {
  SimDeviceOps ops;
  const LayerNormLaunch ln(ops);
  ln.launch(ops, ln.load(ops), {0, 1, 2, 3});
  ops.synchronize(nullptr);
  testing::expectClose({ln.output()}, evaluate(*ln.c.fusion, ln.c.inputs));
}

TEST(SimDevice, RejectsPermutedPackedArguments) {
  SimDeviceOps ops;
  const LayerNormLaunch ln(ops);
  const device::KernelHandle f = ln.load(ops);
  // x and weight swapped: the kernel reads a row of 64 through a pointer to 64 elements in all.
  ln.launch(ops, f, {1, 0, 2, 3});
  const std::string swapped = failureOf([&] { ops.synchronize(nullptr); });
  EXPECT_NE(swapped.find("outside"), std::string::npos) << swapped;
  EXPECT_NE(swapped.find(ln.k->name), std::string::npos) << swapped;
  // The output pointer where the row count goes, and the count where a pointer goes.
  std::vector<uint64_t> words{ln.pointers[0], ln.pointers[1], ln.pointers[2]};
  const std::vector<uint64_t> scalars = kernel::argumentWords(*ln.k);
  ASSERT_FALSE(scalars.empty()) << ln.k->summary;
  words.push_back(scalars[0]);
  words.push_back(ln.pointers[3]);
  std::vector<void*> args;
  for (uint64_t& w : words) args.push_back(&w);
  ops.launch(f, {ln.k->grid, ln.k->block, ln.k->shared_bytes}, args.data(), nullptr);
  const std::string shifted = failureOf([&] { ops.synchronize(nullptr); });
  EXPECT_NE(shifted.find("argument 3 (tensor"), std::string::npos) << shifted;
  EXPECT_NE(shifted.find("not in memory the simulated device allocated"), std::string::npos) << shifted;
  // A launch with another block than the kernel's.
  std::vector<uint64_t> good{ln.pointers[0], ln.pointers[1], ln.pointers[2], ln.pointers[3]};
  for (uint64_t w : scalars) good.push_back(w);
  std::vector<void*> good_args;
  for (uint64_t& w : good) good_args.push_back(&w);
  ops.launch(f, {ln.k->grid, {ln.k->block[0] * 2, ln.k->block[1]}, ln.k->shared_bytes}, good_args.data(), nullptr);
  EXPECT_NE(failureOf([&] { ops.synchronize(nullptr); }).find("launched with block"), std::string::npos);
}

TEST(SimDevice, WorkRunsWhenTheStreamIsSynchronizedAndFreesWaitForIt) {
  SimDeviceOps ops;
  const LayerNormLaunch ln(ops);
  ln.launch(ops, ln.load(ops), {0, 1, 2, 3});
  // Queued, not run: the output still holds the poison of a fresh allocation (NaN for bf16).
  EXPECT_TRUE(std::isnan(ln.output().readDouble(0)));
  const size_t live = ops.liveAllocations();
  ops.release(ln.pointers[0], nullptr);  // x: freed after the launch that reads it
  EXPECT_EQ(ops.liveAllocations(), live);
  ops.synchronize(nullptr);
  EXPECT_EQ(ops.liveAllocations(), live - 1);
  testing::expectClose({ln.output()}, evaluate(*ln.c.fusion, ln.c.inputs));
  // Now x is gone: a launch that reads it fails, naming the argument.
  ln.launch(ops, ln.load(ops), {0, 1, 2, 3});
  const std::string freed = failureOf([&] { ops.synchronize(nullptr); });
  EXPECT_NE(freed.find("argument 0"), std::string::npos) << freed;
  EXPECT_NE(freed.find("freed already"), std::string::npos) << freed;
  EXPECT_NE(failureOf([&] { ops.release(ln.pointers[0], nullptr); }).find("freed already"), std::string::npos);
}

TEST(SimDevice, ShapesThatShareASourceLaunchOneLoadedKernel) {
  SimDeviceOps ops;
  exec::FusionCache cache(testing::sizelessLayerNorm(), {}, &ops, DeviceInfo::h100Sxm());
  for (int64_t seq : {5, 9, 33}) {
    const std::vector<HostValue> inputs = testing::randomInputs(*testing::sizelessLayerNorm(), 7, {{4, seq, 256},
                                                                                                 {256}, {256}});
    testing::expectClose(exec::runOnHost(cache, inputs), evaluate(*testing::sizelessLayerNorm(), inputs),
                         "seq " + std::to_string(seq));
  }
  EXPECT_EQ(cache.size(), 3u);         // a plan per shape,
  EXPECT_EQ(ops.loadedKernels(), 1u);  // one kernel, launched with each plan's grid and row count
  EXPECT_EQ(ops.launches(), 3);
}

TEST(SimDevice, ASecondRunWithTheSameSignatureIsACacheHit) {
  SimDeviceOps ops;
  const testing::KernelCase c = testing::softmaxCase(6, 100, DataType::Float, false, 3);
  exec::FusionCache cache(c.fusion, {}, &ops, DeviceInfo::h100Sxm());
  std::vector<device::DeviceValue> device_inputs;
  for (const HostValue& v : c.inputs) device_inputs.push_back(exec::deviceValueOf(v));
  EXPECT_NE(cache.explain(device_inputs).lookup, exec::CacheLookup::Hit);
  exec::runOnHost(cache, c.inputs);
  const auto plan = cache.lastPlan();
  EXPECT_EQ(cache.explain(device_inputs).lookup, exec::CacheLookup::Hit);
  testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs));
  EXPECT_EQ(cache.lastPlan(), plan);  // the same prepared plan: nothing planned or lowered again
  EXPECT_EQ(cache.size(), 1u);
}

// Segments without a kernel (a matmul), an input updated in place, an output that views that input
// (its value from before the update), and a scalar output: steps the host runs, in stream order.
TEST(SimDevice, RunsHostStepsInStreamOrder) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* c = defineTensor({-1, -1}, {true, true}, DataType::Float);
    Val* s = defineScalar(DataType::Double);
    f->addOutput(mul(matmul(a, b), f->constant(2.0)));
    f->addOutput(permute(c, {1, 0}));
    f->aliasOutputToInput(add(c, s), c);
    f->addOutput(mul(s, f->constant(3.0)));
  }
  auto inputs = [] {
    return std::vector<HostValue>{testing::randomTensor(DataType::Float, {5, 7}, 1),
                                  testing::randomTensor(DataType::Float, {7, 3}, 2),
                                  testing::randomTensor(DataType::Float, {4, 6}, 3), ScalarValue{1.5}};
  };
  const std::vector<HostValue> ours = inputs(), theirs = inputs();
  SimDeviceOps ops;
  exec::FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  const std::vector<HostValue> got = exec::runOnHost(cache, ours);
  const std::vector<HostValue> want = evaluate(*f, theirs);
  ASSERT_EQ(got.size(), 3u);
  testing::expectClose({got[0], got[1]}, {want[0], want[1]});
  EXPECT_EQ(toDouble(std::get<ScalarValue>(got[2])), 4.5);
  testing::expectClose({ours[2]}, {theirs[2]});  // c updated in place, as the reference updates it
  EXPECT_EQ(ops.liveAllocations(), 2u);  // the two returned buffers; intermediates are freed
}

TEST(SimDevice, AGraphRunsWithTheArgumentsItWasUpdatedWith) {
  // x minus its column sums, then row sums of the square: two kernels (an outer, then an inner reduction).
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* centered = sub(x, broadcast(reduce(OpKind::Sum, x, {0}), {true, false}))->asTensor();
    f->addOutput(reduce(OpKind::Sum, mul(centered, centered)->asTensor(), {1}));
  }
  SimDeviceOps ops;
  exec::FusionCache cache(f, {}, &ops, DeviceInfo::h100Sxm());
  cache.useCudaGraphs(true);
  const std::vector<HostValue> first{testing::randomTensor(DataType::Float, {40, 24}, 4)};
  testing::expectClose(exec::runOnHost(cache, first), evaluate(*f, first));
  ASSERT_EQ(cache.lastPlan()->launchedKernels().size(), 2u) << cache.lastPlan()->compiled().plan.toString();
  // Other values at another address (the same signature): the graph's nodes must be updated to read them.
  const std::vector<HostValue> second{testing::randomTensor(DataType::Float, {40, 24}, 5)};
  testing::expectClose(exec::runOnHost(cache, second), evaluate(*f, second));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(ops.graphsMade(), 1);
  EXPECT_EQ(ops.launches(), 4);
}

TEST(SimDevice, ThreadsShareOneDeviceAndOneCache) {
  // Eight threads, each running its own inputs through one cache on one simulated device: plans race on
  // the first runs, launches and frees interleave, and every result is still its own.
  SimDeviceOps ops;
  const testing::KernelCase c = testing::softmaxCase(6, 100, DataType::Float, false, 3);
  exec::FusionCache cache(c.fusion, {}, &ops, DeviceInfo::h100Sxm());
  std::vector<std::vector<HostValue>> inputs;
  for (int t = 0; t < 8; ++t) inputs.push_back(testing::randomInputs(*c.fusion, 100 + t, {{6, 100}}));
  std::vector<std::vector<HostValue>> got(inputs.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < inputs.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int run = 0; run < 5; ++run) got[t] = exec::runOnHost(cache, inputs[t]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t t = 0; t < inputs.size(); ++t) testing::expectClose(got[t], evaluate(*c.fusion, inputs[t]));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(ops.launches(), 40);
  got.clear();
  EXPECT_EQ(ops.liveAllocations(), 0u);  // every output freed with its last view
}

TEST(SimDevice, AnInPlaceUpdateMayReadTheInputItWrites) {
  // a <- a^T on a square input: the new value is a view of a, so it is staged before a is written (an
  // element-by-element copy through the view would write a[0][1] before reading it for a[1][0]).
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* transposed = permute(a, {1, 0});
    f->addOutput(transposed);
    f->aliasOutputToInput(transposed, a);
  }
  const HostTensor ours = testing::randomTensor(DataType::Float, {5, 5}, 9);
  const HostTensor theirs = ours.contiguous();
  exec::FusionCache cache(f, {}, &device::simDeviceOps(), DeviceInfo::h100Sxm());
  exec::runOnHost(cache, {ours});
  evaluate(*f, {theirs});
  testing::expectSameValues({ours}, {theirs});
}

TEST(SimDevice, OneThreadsFailureStaysItsOwn) {
  // One device, two fusions: a thread whose runs read out of bounds gets its errors, and the other
  // thread's runs, interleaved on the same device, still compute their results. The index is unchecked
  // (an index error a kernel records is the device's, raised by whichever execute comes next, as torch's
  // device asserts are), so that the simulator's report of the access is the failing run's own.
  SimDeviceOps ops;
  const testing::KernelCase bad = testing::indexSelectCase();
  const testing::KernelCase good = testing::softmaxCase(6, 100, DataType::Float, false, 3);
  DeviceInfo unchecked = DeviceInfo::h100Sxm();
  unchecked.tuning.index_checks = 0;
  exec::FusionCache bad_cache(bad.fusion, {}, &ops, unchecked);
  exec::FusionCache good_cache(good.fusion, {}, &ops, DeviceInfo::h100Sxm());
  const std::vector<HostValue> out_of_bounds{bad.inputs[0], testing::tensorOf(DataType::Int64, {2}, {0, 7})};
  std::atomic<int> errors{0};
  std::thread failing([&] {
    for (int run = 0; run < 20; ++run) {
      try {
        exec::runOnHost(bad_cache, out_of_bounds);
      } catch (const Error&) {
        ++errors;
      }
    }
  });
  const std::vector<HostValue> want = evaluate(*good.fusion, good.inputs);
  for (int run = 0; run < 20; ++run) testing::expectClose(exec::runOnHost(good_cache, good.inputs), want);
  failing.join();
  EXPECT_EQ(errors.load(), 20);
}

TEST(SimDevice, A32BitIndexArgumentReadsItsWordsLowBytes) {
  kernel::Kernel k;
  k.arguments.push_back({"rows", /*index=*/true, DataType::Int64, int64_t{0}});
  const uint64_t word = (uint64_t{1} << 40) | 7;  // high bytes a 32-bit idx_t parameter never sees
  EXPECT_EQ(toInt(kernel::decodeArgumentWords(k, &word)[0]), 7);
  k.index64 = true;
  EXPECT_EQ(toInt(kernel::decodeArgumentWords(k, &word)[0]), static_cast<int64_t>(word));
  const uint64_t negative = static_cast<uint32_t>(-3);
  k.index64 = false;
  EXPECT_EQ(toInt(kernel::decodeArgumentWords(k, &negative)[0]), -3);
}

}  // namespace
}  // namespace braze
