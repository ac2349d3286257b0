// Atomic adds to shared memory (SKind::SharedAtomicAdd) and the order key of a float (EKind::OrderKey),
// what a radix select is built of. The simulator lets any threads add to one element between two
// barriers, hands out the old values in an order of its own (not the threads'), and reports any other
// access to an element that other threads added to since the last barrier; NVRTC compiles the adds to
// shared atomics (ATOMS in the SASS).
#include "fusions/kernel_util.h"
#include "fusions/test_device.h"
#include "support/error.h"
#include "codegen/source_emitter.h"
#include "kernel/simulator.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace braze {
namespace {

using namespace kernel;

constexpr int64_t kThreads = 128;
constexpr int64_t kBinCount = 16;

TensorParam vectorParam(const char* name, DataType dtype, int64_t n, bool output) {
  TensorParam p;
  p.name = name;
  p.dtype = dtype;
  p.layout = StridedLayout{{n}, {1}, 0};
  p.output = output;
  return p;
}

enum class Race { None, ReadAfterAdds, AddAfterWrite };

// A histogram of n values in [0, 16) (hist[v] += 1 for each, from every thread at once), then each thread
// takes a slot with an add to a counter and writes its index there: counts[0..16) and order[0..threads).
Kernel histogramKernel(int64_t n, Race race = Race::None) {
  Kernel k;
  k.name = "histogram";
  k.block = {kThreads, 1};
  KernelBuilder kb(k);
  const TensorId values = kb.addTensor(vectorParam("T0", DataType::Int32, n, false));
  const TensorId counts = kb.addTensor(vectorParam("T1", DataType::Int32, kBinCount, true));
  const TensorId order = kb.addTensor(vectorParam("T2", DataType::Int32, kThreads, true));
  const VarId hist = kb.sharedStorageArray("hist", DataType::Int32, kBinCount);
  const VarId counter = kb.sharedStorageArray("counter", DataType::Int32, 1);
  kb.declare(hist);
  kb.declare(counter);
  const ExprId tid = kb.threadIdx(0);
  const ExprId zero = kb.index(0);
  auto setInt = [&](VarId array, ExprId at, ExprId value) {
    kb.localWrite(array, at, kb.indexToValue(value, DataType::Int32));
  };
  kb.openIf(kb.lt(tid, kb.index(kBinCount)));
  setInt(hist, tid, zero);
  kb.close();
  kb.openIf(kb.eq(tid, zero));
  setInt(counter, zero, zero);
  kb.close();
  if (race != Race::AddAfterWrite) kb.barrier();
  const VarId i = kb.scalarVar("i", DataType::Int64, /*is_index=*/true);
  kb.openFor(i, tid, kb.index(n), kb.index(kThreads), /*unroll=*/false);
  kb.sharedAtomicAdd(-1, hist, kb.valueToIndex(kb.load(values, kb.ref(i))), kb.index(1));
  kb.close();
  const VarId slot = kb.scalarVar("slot", DataType::Int64, /*is_index=*/true);
  kb.sharedAtomicAdd(slot, counter, zero, kb.index(1));
  kb.store(order, kb.ref(slot), kb.indexToValue(tid, DataType::Int32));
  if (race != Race::ReadAfterAdds) kb.barrier();
  kb.openIf(kb.lt(tid, kb.index(kBinCount)));
  kb.store(counts, tid, kb.localRead(hist, tid));
  kb.close();
  return k;
}

HostTensor binValues(int64_t n) {
  HostTensor values = HostTensor::empty(DataType::Int32, {n});
  for (int64_t i = 0; i < n; ++i) values.writeInt(i, (i * 7 + i / 5) % kBinCount);
  return values;
}

TEST(SharedAtomics, AHistogramCountsEveryValueAndEachThreadGetsItsOwnSlot) {
  const int64_t n = 1000;
  const Kernel k = histogramKernel(n);
  HostTensor values = binValues(n);
  HostTensor counts = HostTensor::empty(DataType::Int32, {kBinCount});
  HostTensor order = HostTensor::empty(DataType::Int32, {kThreads});
  testing::launchOnTestDevice(k, {&values, &counts, &order});
  std::vector<int64_t> want(kBinCount, 0);
  for (int64_t i = 0; i < n; ++i) ++want[values.readInt(i)];
  for (int64_t b = 0; b < kBinCount; ++b) EXPECT_EQ(counts.readInt(b), want[b]) << "bin " << b;
  std::vector<int64_t> got(kThreads);
  for (int64_t s = 0; s < kThreads; ++s) got[s] = order.readInt(s);
  std::vector<int64_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> every(kThreads);
  std::iota(every.begin(), every.end(), 0);
  EXPECT_EQ(sorted, every);  // a slot for each thread, none shared
}

TEST(SharedAtomics, TheSimulatorHandsOutOldValuesInAnOrderOtherThanTheThreads) {
  const Kernel k = histogramKernel(kThreads);
  HostTensor values = binValues(kThreads);
  HostTensor counts = HostTensor::empty(DataType::Int32, {kBinCount});
  HostTensor order = HostTensor::empty(DataType::Int32, {kThreads});
  simulate(k, {&values, &counts, &order});
  int64_t in_place = 0;
  for (int64_t s = 0; s < kThreads; ++s) in_place += order.readInt(s) == s;
  EXPECT_LT(in_place, kThreads / 4);  // code that counted on thread order would see it fail here
}

void expectRace(Race race, const std::string& phrase) {
  const Kernel k = histogramKernel(kThreads, race);
  HostTensor values = binValues(kThreads);
  HostTensor counts = HostTensor::empty(DataType::Int32, {kBinCount});
  HostTensor order = HostTensor::empty(DataType::Int32, {kThreads});
  try {
    simulate(k, {&values, &counts, &order});
    FAIL() << "the race was not reported: " << phrase;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

TEST(SharedAtomics, TheSimulatorReportsOtherAccessesBetweenTheSameBarriers) {
  expectRace(Race::ReadAfterAdds, "added to atomically, with no barrier in between");
  expectRace(Race::AddAfterWrite, "adds atomically to shared hist");
}

TEST(SharedAtomics, NvrtcCompilesThemToSharedAtomics) {
  const Kernel k = histogramKernel(1000);
  const std::string source = codegen::emitCuda(k);
  EXPECT_NE(source.find("atomicAdd(&hist["), std::string::npos) << source;
  EXPECT_NE(source.find("idx_t slot = (idx_t)atomicAdd(&counter[0]"), std::string::npos) << source;
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: compilation not checked";
  const auto compiled = device::compileCuda(source, k.name, {.arch = "sm_90"});
  EXPECT_TRUE(compiled.log.empty()) << compiled.log;
  const auto sass = device::disassemble(compiled.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  EXPECT_NE(sass->find("ATOMS"), std::string::npos) << *sass;
}

// out[i] = order_key(in[i]) for floats around every edge of the order.
TEST(SharedAtomics, OrderKeysGrowWithTheFloatNanOnTopAndBothZerosAlike) {
  const float inf = std::numeric_limits<float>::infinity();
  const float denormal = std::numeric_limits<float>::denorm_min();
  const std::vector<float> ascending = {-inf, -3.4e38f, -1.0f, -denormal, 0.0f, denormal, 1e-30f, 1.0f, 3.4e38f, inf};
  const int64_t n = static_cast<int64_t>(ascending.size()) + 3;
  Kernel k;
  k.name = "order_keys";
  k.block = {32, 1};
  k.index64 = true;  // the keys take 32 bits
  KernelBuilder kb(k);
  const TensorId in = kb.addTensor(vectorParam("T0", DataType::Float, n, false));
  const TensorId out = kb.addTensor(vectorParam("T1", DataType::Int64, n, true));
  const ExprId tid = kb.threadIdx(0);
  kb.openIf(kb.lt(tid, kb.index(n)));
  kb.store(out, tid, kb.indexToValue(kb.orderKey(kb.load(in, tid)), DataType::Int64));
  kb.close();
  HostTensor x = HostTensor::empty(DataType::Float, {n});
  for (size_t i = 0; i < ascending.size(); ++i) x.writeDouble(static_cast<int64_t>(i), ascending[i]);
  x.writeDouble(n - 3, -0.0);
  x.writeDouble(n - 2, std::nan(""));
  x.writeDouble(n - 1, -std::nan(""));
  HostTensor keys = HostTensor::empty(DataType::Int64, {n});
  testing::launchOnTestDevice(k, {&x, &keys});
  for (size_t i = 1; i < ascending.size(); ++i) {
    EXPECT_LT(keys.readInt(static_cast<int64_t>(i - 1)), keys.readInt(static_cast<int64_t>(i))) << ascending[i];
  }
  EXPECT_EQ(keys.readInt(n - 3), keys.readInt(4));  // -0 as +0
  EXPECT_EQ(keys.readInt(n - 2), 0xffffffffLL);     // NaN of either sign above +inf
  EXPECT_EQ(keys.readInt(n - 1), 0xffffffffLL);
  EXPECT_GE(keys.readInt(0), 0);
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: compilation not checked";
  const auto compiled = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = "sm_90"});
  EXPECT_TRUE(compiled.log.empty()) << compiled.log;
}

}  // namespace
}  // namespace braze
