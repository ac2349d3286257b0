// Shared arrays: a block stages values in shared memory between barriers. The simulator keeps one
// array per block and reports a read or write of an element another thread touched since the last
// barrier (lockstep execution would otherwise hide the missing barrier); the emitter places the
// arrays in dynamic shared memory, which NVRTC compiles.
#include "fusions/kernel_util.h"
#include "ir/error.h"
#include "kernel/cuda_emitter.h"
#include "kernel/simulator.h"
#include "runtime/nvrtc.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;

// out[t] = in[(t + shift) % n] through a shared array, for a block of n threads: each thread writes
// its own element and reads a neighbour's.
Kernel rotateThroughShared(int64_t n, int64_t shift, bool with_barrier) {
  Kernel k;
  k.name = "rotate";
  k.block = {n, 1};
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
  const ExprId t = kb.threadIdx(0);
  kb.localWrite(tile, t, kb.load(tin, t));
  if (with_barrier) kb.barrier();
  kb.store(tout, t, kb.localRead(tile, kb.mod(kb.add(t, kb.index(shift)), kb.index(n))));
  return k;
}

TEST(SharedMemory, SimulatorRunsStagedValuesAcrossABarrier) {
  const int64_t n = 64;
  const Kernel k = rotateThroughShared(n, 5, true);
  EXPECT_EQ(k.shared_bytes, n * 4);
  HostTensor in = testing::randomTensor(DataType::Float, {n}, 7);
  HostTensor out = HostTensor::empty(DataType::Float, {n});
  simulate(k, {&in, &out});
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out.readDouble(i), in.readDouble((i + 5) % n)) << i;
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
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(out.readDouble(i), in.readDouble(i));
}

TEST(SharedMemory, EmitsDynamicSharedMemoryThatNvrtcCompiles) {
  const Kernel k = rotateThroughShared(128, 3, true);
  const std::string source = emitCuda(k);
  EXPECT_NE(source.find("extern __shared__ __align__(16) unsigned char braze_smem[];"), std::string::npos) << source;
  EXPECT_NE(source.find("reinterpret_cast<float*>(braze_smem + 0)"), std::string::npos) << source;
  if (!runtime::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: compilation not checked";
  const auto compiled = runtime::compileCuda(source, k.name, {.arch = "sm_90"});
  EXPECT_TRUE(compiled.log.empty()) << compiled.log;
}

}  // namespace
}  // namespace braze
