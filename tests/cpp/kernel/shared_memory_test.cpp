// Shared arrays: a block stages values in shared memory between barriers. The simulator keeps one
// array per block and reports a read or write of an element another thread touched since the last
// barrier (lockstep execution would otherwise hide the missing barrier); the emitter places the
// arrays in dynamic shared memory, which NVRTC compiles.
#include "fusions/kernel_util.h"
#include "support/error.h"
#include "codegen/source_emitter.h"
#include "kernel/simulator.h"
#include "device/cuda/nvrtc.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;
using namespace codegen;

// out[i] = in[(i + shift) % n] through a shared array of n floats, for a block of `threads` threads
// (n by default): each thread stages elements t, t + threads, ... and reads a neighbour's. With more
// elements than threads the array can outgrow the 48 KiB a launch gets without opting in.
Kernel rotateThroughShared(int64_t n, int64_t shift, bool with_barrier, int64_t threads = 0) {
  if (threads == 0) threads = n;
  Kernel k;
  k.name = "rotate";
  k.block = {threads, 1};
  KernelBuilder kb(k);
  TensorParam in;
  in.name = "T0";
  in.dtype = DataType::Float;
  in.layout = StridedLayout{{n}, {1}, 0};
  TensorParam out = in;
  out.name = "T1";
  out.output = true;
  const TensorId tin = kb.addTensor(in), tout = kb.addTensor(out);
  const VarId tile = kb.arrayVar("tile", DataType::Float, n, VarKind::SharedArray);
  kb.declare(tile);
  const VarId j = kb.scalarVar("j", DataType::Int64, /*is_index=*/true);
  auto forEachOwnElement = [&](auto body) {
    kb.openFor(j, kb.index(0), kb.index(n), kb.index(threads), /*unroll=*/false);
    body(kb.add(kb.ref(j), kb.threadIdx(0)));
    kb.close();
  };
  forEachOwnElement([&](ExprId i) { kb.localWrite(tile, i, kb.load(tin, i)); });
  if (with_barrier) kb.barrier();
  forEachOwnElement([&](ExprId i) {
    kb.store(tout, i, kb.localRead(tile, kb.mod(kb.add(i, kb.index(shift)), kb.index(n))));
  });
  return k;
}

void expectRotated(const HostTensor& in, const HostTensor& out, int64_t shift) {
  const int64_t n = in.numel();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.readDouble(i), in.readDouble((i + shift) % n)) << i;
}

TEST(SharedMemory, SimulatorRunsStagedValuesAcrossABarrier) {
  const int64_t n = 64;
  const Kernel k = rotateThroughShared(n, 5, true);
  EXPECT_EQ(k.shared_bytes, n * 4);
  HostTensor in = testing::randomTensor(DataType::Float, {n}, 7);
  HostTensor out = HostTensor::empty(DataType::Float, {n});
  simulate(k, {&in, &out});
  expectRotated(in, out, 5);
}

TEST(SharedMemory, SimulatorReportsAMissingBarrier) {
  const Kernel k = rotateThroughShared(32, 1, false);
  HostTensor in = testing::randomTensor(DataType::Float, {32}, 7);
  HostTensor out = HostTensor::empty(DataType::Float, {32});
  try {
    simulate(k, {&in, &out});
    FAIL() << "the race was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reads shared tile"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no barrier in between"), std::string::npos) << e.what();
  }
}

TEST(SharedMemory, SimulatorAllowsAThreadToReadItsOwnWriteWithoutABarrier) {
  const Kernel k = rotateThroughShared(32, 0, false);
  HostTensor in = testing::randomTensor(DataType::Float, {32}, 7);
  HostTensor out = HostTensor::empty(DataType::Float, {32});
  simulate(k, {&in, &out});
  expectRotated(in, out, 0);
}

TEST(SharedMemory, EmitsDynamicSharedMemoryThatNvrtcCompiles) {
  const Kernel k = rotateThroughShared(128, 3, true);
  const std::string source = emitCuda(k);
  EXPECT_NE(source.find("extern __shared__ __align__(16) unsigned char braze_smem[];"), std::string::npos) << source;
  EXPECT_NE(source.find("reinterpret_cast<float*>(braze_smem + 0)"), std::string::npos) << source;
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: compilation not checked";
  const auto compiled = device::compileCuda(source, k.name, {.arch = "sm_90"});
  EXPECT_TRUE(compiled.log.empty()) << compiled.log;
}

// The same kernels launched on the test device as plans launch them: on a GPU, shared arrays placed
// in dynamic shared memory, the launch's size, and above 48 KiB the function attribute a launch needs
// (without it the launch fails).
TEST(SharedMemory, TestDeviceRunsStagedValuesAcrossABarrier) {
  const Kernel k = rotateThroughShared(128, 3, true);
  HostTensor in = testing::randomTensor(DataType::Float, {128}, 7);
  HostTensor out = HostTensor::empty(DataType::Float, {128});
  testing::launchOnTestDevice(k, {&in, &out});
  expectRotated(in, out, 3);
}

TEST(SharedMemory, TestDeviceRunsATileLargerThan48KiB) {
  const int64_t n = 16384;  // 64 KiB of floats, 64 per thread
  const Kernel k = rotateThroughShared(n, 1000, true, /*threads=*/256);
  ASSERT_EQ(k.shared_bytes, 64 * 1024);
  HostTensor in = testing::randomTensor(DataType::Float, {n}, 9);
  HostTensor out = HostTensor::empty(DataType::Float, {n});
  testing::launchOnTestDevice(k, {&in, &out});
  expectRotated(in, out, 1000);
  HostTensor simulated = HostTensor::empty(DataType::Float, {n});
  simulate(k, {&in, &simulated});
  expectRotated(in, simulated, 1000);
}

}  // namespace
}  // namespace braze
