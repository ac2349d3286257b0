// wgmma (sm_90a) in the kernel IR. The descriptor and the swizzled addresses are pinned to the PTX
// ISA's tables; the matmul lowering's wgmma schedule, run on the simulator (which reads each operand
// element where the hardware would and checks the asynchronous reads and writes), equals the reference
// on odd sizes, both orders of 16-bit A and B, bf16, f16, s8 (to s32 and narrowed to s8) and e4m3,
// operands copied as stored or computed in registers (a dequantize, a quantize, a row-major 8-bit B);
// NVRTC compiles it for sm_90a into HGMMA, IGMMA or QGMMA and LDGSTS with an empty log (no serialized
// wgmmas), without ldmatrix. The simulator reports a shared element written while a wgmma still reads
// it (before its warpgroup's wait, or after it but before a barrier by another thread), a write read by a
// wgmma with no proxy fence after it, accumulators written with no wgmma fence before the wgmma or
// touched before the wait, and a block ending with wgmmas in flight.
#include "fusions/wgmma_device.h"
#include "codegen/source_emitter.h"
#include "kernel/simulator.h"
#include "kernel/verifier.h"
#include "kernel/wgmma.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"
#include "support/error.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;
using namespace codegen;

TEST(WgmmaLayout, DescriptorFieldsAreThePtxEncoding) {
  // Start 0x2400 bytes, k-major (LBO 1, as PTX asks of swizzled k-major operands), SBO 1024, 128-byte swizzle.
  const uint64_t k_major = wgmmaDescriptor({false, 0, 1024}, 0x2400);
  EXPECT_EQ(k_major & 0x3FFF, 0x240u);
  EXPECT_EQ((k_major >> 16) & 0x3FFF, 1u);
  EXPECT_EQ((k_major >> 32) & 0x3FFF, 64u);
  EXPECT_EQ(k_major >> 62, 1u);
  const uint64_t mn_major = wgmmaDescriptor({true, 8192, 1024}, 0);
  EXPECT_EQ((mn_major >> 16) & 0x3FFF, 512u);
  EXPECT_EQ((mn_major >> 32) & 0x3FFF, 64u);
}

TEST(WgmmaLayout, SwizzledAddressesFollowTheCanonicalLayouts) {
  // 128-byte swizzle: 16-byte chunk c of line r (within its 1024-byte pattern) is stored at chunk c ^ r.
  EXPECT_EQ(swizzle128(0), 0);
  EXPECT_EQ(swizzle128(128 * 3 + 16 * 5 + 6), 128 * 3 + 16 * (5 ^ 3) + 6);
  EXPECT_EQ(swizzle128(1024 + 128 * 7), 1024 + 128 * 7 + 16 * 7);
  // k-major bf16: row 10 is line 2 of the second 8-row group (SBO 1024); k 9 is chunk 1 byte 2.
  EXPECT_EQ(wgmmaElementByte({false, 0, 1024}, 0, 10, 9, 2), 1024 + 256 + 16 * (1 ^ 2) + 2);
  // A k step's start 32 bytes into the line: k 0 of that step is chunk 2.
  EXPECT_EQ(wgmmaElementByte({false, 0, 1024}, 32, 3, 0, 2), 384 + 16 * (2 ^ 3));
  // mn-major bf16: n 70 is in the second 64-wide group (LBO), n % 64 = 6 in chunk 0; k 11 is line 3 of
  // the second 8-line group (SBO).
  EXPECT_EQ(wgmmaElementByte({true, 8192, 1024}, 0, 70, 11, 2), 8192 + 1024 + 384 + 16 * (0 ^ 3) + 12);
}

TEST(WgmmaLayout, AccumulatorsFollowTheMmaCLayoutPerWarp) {
  // Thread 37 (warp 1, lane 5): value 6 is row 16 + 1 + 8, column 8 + 2 * 1.
  EXPECT_EQ(wgmmaDPosition(37, 6).row, 25);
  EXPECT_EQ(wgmmaDPosition(37, 6).col, 10);
  for (int t = 0; t < 32; ++t) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(wgmmaDPosition(t, i).row, mmaCPosition(t, i).row);
      EXPECT_EQ(wgmmaDPosition(t, i).col, mmaCPosition(t, i).col);
      EXPECT_EQ(wgmmaDPosition(t, 4 * 5 + i).col, mmaCPosition(t, i).col + 40);
    }
  }
}

using testing::fourSmH100;
using testing::runOnSimulator;

TEST(Wgmma, StagedMatmulsMatchTheReference) {
  struct Case {
    testing::KernelCase c;
    const char* tuning;
  };
  const Case cases[] = {
      // B row-major (mn-major tiles), partial tiles along M, N and K.
      {testing::matmulCase({97, 200}, {200, 72}, DataType::BFloat16, false, DataType::Null, 31), "matmul_wgmma=1"},
      // B given as [n, k] (k-major), f16, K not a multiple of the slice.
      {testing::matmulCase({20, 40}, {40, 130}, DataType::Half, true, DataType::Null, 32), "matmul_wgmma=1"},
      // A given transposed (mn-major A), 128 x 256 tiles of two warpgroups, three stages.
      {testing::transposedAMatmulCase(136, 257, 304, DataType::BFloat16, 33),
       "matmul_wgmma=1, matmul_block_m=128, matmul_block_n=256, matmul_stages=3"},
      // Four warpgroups of 64 x 64, batched with a broadcast B.
      {testing::matmulCase({3, 70, 104}, {104, 64}, DataType::BFloat16, false, DataType::Null, 34),
       "matmul_wgmma=1, matmul_block_m=256, matmul_block_n=64"},
      // s8 x s8 -> s32 with B given [batch, n, k] (k-major, copied as stored), k = 32, K not a multiple of the
      // 128-element slice; and narrowed to s8 (the XLA seed's result).
      {testing::matmulCase({2, 70, 208}, {2, 208, 72}, DataType::Int8, true, DataType::Null, 35), "matmul_wgmma=1"},
      {testing::matmulCase({2, 70, 208}, {2, 208, 72}, DataType::Int8, true, DataType::Int8, 36), "matmul_wgmma=1"},
      // s8 with a row-major B: staged through registers, k-major.
      {testing::matmulCase({2, 65, 136}, {2, 136, 80}, DataType::Int8, false, DataType::Null, 37), "matmul_wgmma=1"},
      // bf16 activations times int8 weights dequantized per group of 32 (B through registers).
      {testing::weightInt8LinearCase(40, 72, 128, 32, 38), "matmul_wgmma=1"},
  };
  for (const Case& x : cases) {
    device::SimDeviceOps sim;
    std::unique_ptr<exec::FusionCache> cache;
    const Kernel& k = runOnSimulator(x.c, fourSmH100(x.tuning), cache, sim, x.tuning);
    EXPECT_NE(k.summary.find("wgmma.m64n"), std::string::npos) << k.summary;
    EXPECT_TRUE(k.arch_specific);
    EXPECT_EQ(compileArch(k, "sm_90"), "sm_90a");
  }
}

// Seed 000's second GEMM: bf16 operands quantized to e4m3fn in the prologue, stored k-major, multiplied by
// e4m3 wgmmas with f32 accumulators; the scores' N = 200 takes 256-column tiles of one column block.
TEST(Wgmma, Fp8OperandsQuantizedAsTheyAreLoadedMatchTheReference) {
  const testing::KernelCase c = testing::quantizedFp8MatmulCase(72, 64, 200, 12);
  device::SimDeviceOps sim;
  std::unique_ptr<exec::FusionCache> cache;
  const Kernel& k = runOnSimulator(c, fourSmH100("matmul_wgmma=1"), cache, sim, "fp8");
  EXPECT_NE(k.summary.find("wgmma.m64n256k32"), std::string::npos) << k.summary;
  EXPECT_NE(k.summary.find("A k-major through registers, B k-major through registers"), std::string::npos) << k.summary;
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: not compiled";
  const auto cubin = device::compileCuda(emitCuda(k), k.name, {.arch = "sm_90a"});
  EXPECT_TRUE(cubin.log.empty()) << cubin.log;
  const auto sass = device::disassemble(cubin.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  EXPECT_NE(sass->find("QGMMA"), std::string::npos) << k.summary;
}

TEST(Wgmma, CompilesForSm90aIntoHgmmaWithoutSerialization) {
  const std::pair<testing::KernelCase, const char*> cases[] = {
      {testing::matmulCase({100, 264}, {264, 72}, DataType::BFloat16, false, DataType::Null, 1), "HGMMA"},
      {testing::matmulCase({300, 264}, {264, 520}, DataType::Half, true, DataType::Null, 2), "HGMMA"},
      {testing::matmulCase({2, 300, 256}, {2, 256, 520}, DataType::Int8, true, DataType::Null, 3), "IGMMA"},
  };
  for (const auto& [c, opcode] : cases) {
    // cp.async's copies (wgmma_tma_test.cpp has TMA's).
    const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), fourSmH100("matmul_wgmma=1, matmul_tma=0"));
    const Kernel& k = testing::onlyKernel(compiled);
    ASSERT_TRUE(k.arch_specific) << k.summary;
    if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: not compiled";
    const auto cubin = device::compileCuda(emitCuda(k), k.name, {.arch = "sm_90a"});
    EXPECT_TRUE(cubin.log.empty()) << cubin.log;
    const auto sass = device::disassemble(cubin.cubin);
    if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
    EXPECT_NE(sass->find(opcode), std::string::npos) << k.summary;
    EXPECT_NE(sass->find("LDGSTS"), std::string::npos) << k.summary;
    EXPECT_EQ(sass->find("LDSM"), std::string::npos) << k.summary;
  }
}

// One warpgroup: A (64 x 16) and B (16 x 8, k-major) copied into swizzled tiles, one wgmma, then
// `after` (what the test gets wrong), a wait, D out.
enum class Mistake { None, NoProxyFence, WriteBeforeWait, ReadBeforeWait, NoWgmmaFence, NoWait };

void runOneWgmma(Mistake mistake) {
  Kernel k;
  k.name = "one_wgmma";
  k.summary = "one wgmma";
  k.block = {128, 1};
  KernelBuilder kb(k);
  const TensorId a = kb.addTensor(testing::vectorParam("A", DataType::BFloat16, 64 * 64, false));
  const TensorId b = kb.addTensor(testing::vectorParam("B", DataType::BFloat16, 8 * 64, false));
  const TensorId d = kb.addTensor(testing::vectorParam("D", DataType::Float, 128 * 4, true));
  const VarId ta = kb.sharedStorageArray("ta", DataType::BFloat16, 64 * 64, 1024);
  const VarId tb = kb.sharedStorageArray("tb", DataType::BFloat16, 8 * 64, 1024);
  const VarId acc = kb.arrayVar("acc", DataType::Float, 4);
  kb.declare(ta);
  kb.declare(tb);
  kb.declare(acc);
  for (int i = 0; i < 4; ++i) kb.localWrite(acc, kb.index(i), kb.constant(0.0, DataType::Float));
  // Thread t copies chunk t % 8 of rows t / 8 + 16 j: (row, chunk) at row * 64 + (chunk ^ row % 8) * 8.
  const ExprId t = kb.threadIdx(0);
  auto place = [&](ExprId row, ExprId chunk) {
    return kb.add(kb.mul(row, kb.index(64)), kb.mul(kb.bitXor(chunk, kb.mod(row, kb.index(8))), kb.index(8)));
  };
  for (int j = 0; j < 4; ++j) {
    const ExprId row = kb.add(kb.div(t, kb.index(8)), kb.index(16 * j));
    const ExprId chunk = kb.mod(t, kb.index(8));
    kb.cpAsync(ta, place(row, chunk), a, kb.add(kb.mul(row, kb.index(64)), kb.mul(chunk, kb.index(8))), 8, kb.index(16));
  }
  kb.openIf(kb.lt(t, kb.index(64)));
  const ExprId row = kb.div(t, kb.index(8)), chunk = kb.mod(t, kb.index(8));
  kb.cpAsync(tb, place(row, chunk), b, kb.add(kb.mul(row, kb.index(64)), kb.mul(chunk, kb.index(8))), 8, kb.index(16));
  kb.close();
  kb.cpAsyncCommit();
  kb.cpAsyncWait(0);
  if (mistake != Mistake::NoProxyFence) kb.proxyFence();
  kb.barrier();
  if (mistake != Mistake::NoWgmmaFence) kb.wgmmaFence(acc);
  kb.wgmma(acc, 8, ta, kb.index(0), {false, 0, 1024}, tb, kb.index(0), {false, 0, 1024});
  kb.wgmmaCommit();
  if (mistake == Mistake::WriteBeforeWait) kb.localWrite(ta, kb.index(0), kb.constant(0.0, DataType::BFloat16));
  if (mistake == Mistake::ReadBeforeWait) kb.store(d, t, kb.localRead(acc, kb.index(0)));
  if (mistake != Mistake::NoWait) {
    kb.wgmmaWait(0, acc);
    for (int i = 0; i < 4; ++i) kb.store(d, kb.add(kb.mul(t, kb.index(4)), kb.index(i)), kb.localRead(acc, kb.index(i)));
  }
  verifyKernel(k);

  HostTensor ha = HostTensor::empty(DataType::BFloat16, {64 * 64});
  HostTensor hb = HostTensor::empty(DataType::BFloat16, {8 * 64});
  for (int64_t i = 0; i < 64 * 64; ++i) ha.writeDouble(i, static_cast<double>((i * 7) % 13) - 6);
  for (int64_t i = 0; i < 8 * 64; ++i) hb.writeDouble(i, static_cast<double>((i * 5) % 11) - 5);
  HostTensor hd = HostTensor::empty(DataType::Float, {128 * 4});
  simulate(k, {&ha, &hb, &hd});
  // D (64 x 8) = A[:, :16] B^T[:16, :] (B is k-major: row n holds its k values).
  for (int th = 0; th < 128; ++th) {
    for (int i = 0; i < 4; ++i) {
      const MatrixPosition p = wgmmaDPosition(th, i);
      double want = 0;
      for (int kk = 0; kk < 16; ++kk) want += ha.readDouble(p.row * 64 + kk) * hb.readDouble(p.col * 64 + kk);
      EXPECT_EQ(hd.readDouble(th * 4 + i), want) << "thread " << th << " value " << i;
    }
  }
}

TEST(Wgmma, OneWgmmaReadsItsOperandsWhereTheDescriptorsPointIt) { runOneWgmma(Mistake::None); }

TEST(Wgmma, TheSimulatorReportsAsynchronousMistakes) {
  auto expectReport = [](Mistake mistake, const std::string& words) {
    try {
      runOneWgmma(mistake);
      ADD_FAILURE() << "no report of: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expectReport(Mistake::NoProxyFence, "no proxy fence");
  expectReport(Mistake::WriteBeforeWait, "which a wgmma still in flight reads");
  expectReport(Mistake::ReadBeforeWait, "the accumulators of a wgmma in flight");
  expectReport(Mistake::NoWgmmaFence, "written since the warpgroup's last wgmma fence");
  expectReport(Mistake::NoWait, "the block ends with wgmmas in flight");
}

}  // namespace
}  // namespace braze
