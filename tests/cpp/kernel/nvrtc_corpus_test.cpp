// Every kernel of the test corpus compiles with NVRTC without a warning for the arch it is planned for
// (an A100's plan for sm_80, an H100's for sm_90, or sm_90a where it uses wgmma), and
// where the heuristics vectorize by 16 bytes the SASS has 128-bit global loads and stores.
// No GPU is needed: NVRTC and cuobjdump run on any machine with the toolkit.
#include "fusions/kernel_corpus.h"
#include "codegen/source_emitter.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

struct CorpusSource {
  std::string source, arch;
};

std::vector<CorpusSource> corpusSources() {
  std::vector<CorpusSource> sources;
  std::vector<testing::KernelCaseMaker> cases = testing::largeKernelCorpus();
  for (testing::KernelCaseMaker& maker : testing::matmulBenchmarkShapes()) cases.push_back(std::move(maker));
  // The small corpus's matmuls: every schedule (staged by cp.async or through registers, both tile
  // orders, GEMV, fragments from global memory) and dtype.
  for (testing::KernelCaseMaker& maker : testing::smallKernelCorpus()) {
    if (maker.name.find("matmul") != std::string::npos || maker.name.find("gemv") != std::string::npos ||
        maker.name.find("linear") != std::string::npos) {
      cases.push_back(std::move(maker));
    }
  }
  for (const testing::KernelCaseMaker& maker : cases) {
    const testing::KernelCase c = maker.make();
    for (const DeviceInfo& device : {DeviceInfo::a100(), DeviceInfo::h100Sxm()}) {
      const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs, c.options.plan), device);
      for (const auto& k : compiled.kernels) {
        if (k) sources.push_back({codegen::emitCuda(*k), kernel::compileArch(*k, device.arch())});
      }
    }
  }
  return sources;
}

TEST(NvrtcCorpus, EveryKernelCompilesForItsArchWithoutWarnings) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: kernel compilation not checked";
  const auto sources = corpusSources();
  ASSERT_GE(sources.size(), 16u);
  int64_t arch_specific = 0;
  for (const auto& [source, arch] : sources) {
    const auto compiled = device::compileCuda(source, source.substr(3, source.find(':') - 3), {.arch = arch});
    EXPECT_TRUE(compiled.log.empty()) << arch << ":\n" << compiled.log << "\n" << source;
    EXPECT_FALSE(compiled.cubin.empty());
    arch_specific += arch == "sm_90a" ? 1 : 0;
  }
  EXPECT_GT(arch_specific, 0) << "no kernel of the corpus takes wgmma on an H100";
}

TEST(NvrtcCorpus, VectorizedLayerNormUses128BitLoadsAndStores) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  const testing::KernelCase c = testing::layerNormCase({.batch = 16, .seq = 128, .hidden = 1600}, 1);
  const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
  const kernel::Kernel* k = &testing::onlyKernel(compiled);
  ASSERT_EQ(k->vectorize, 8);
  for (const char* arch : {"sm_80", "sm_90"}) {
    const auto cubin = device::compileCuda(codegen::emitCuda(*k), k->name, {.arch = arch});
    const auto sass = device::disassemble(cubin.cubin);
    if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
    const auto counts = device::countGlobalAccesses(*sass);
    EXPECT_GT(counts.load_bits.count(128) ? counts.load_bits.at(128) : 0, 0) << arch << "\n" << *sass;
    EXPECT_GT(counts.store_bits.count(128) ? counts.store_bits.at(128) : 0, 0) << arch << "\n" << *sass;
    // Only the 16-byte accesses move row data: no narrow loads of x or stores of the output.
    EXPECT_EQ(counts.store_bits.count(16), 0u) << arch;
  }
}

// The layer-norm backward's row kernel (inner-outer persistent) reads grad_out and x and writes grad_in
// 16 bytes at a time, although its [rows, 1] float statistics are read once per row, and stores its
// partial sums (the weight and bias grads', the next linear's bias grad's) 16 bytes at a time too: no
// narrower global store. The kernel spills nothing to local memory (its row and partial sums stay in
// registers).
TEST(NvrtcCorpus, InnerOuterLayerNormBackwardUses128BitAccessesAndNoLocalMemory) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  // nanoGPT's shape with the next linear's bias grad, and a large one (planned from shapes: the inputs'
  // values are never read).
  std::vector<kernel::Kernel> kernels;
  const testing::KernelCase small = testing::normBackwardCase({.rows = 2048, .hidden = 768, .extra_width = 3072}, 3);
  std::vector<HostValue> large;
  for (auto sizes : std::vector<std::vector<int64_t>>{{16384, 4096}, {16384, 4096}, {16384, 1}, {16384, 1}, {4096}}) {
    const bool statistic = sizes.size() == 2 && sizes[1] == 1;  // mean, rstd
    large.emplace_back(HostTensor::empty(statistic ? DataType::Float : DataType::BFloat16, sizes));
  }
  const auto large_fusion = testing::normBackwardCase({.rows = 1, .hidden = 1}, 3).fusion;
  for (const auto& [fusion, inputs] : {std::pair{small.fusion, small.inputs}, std::pair{large_fusion, large}}) {
    const auto compiled = lowerPlan(planSegments(*fusion, inputs), DeviceInfo::h100Sxm());
    ASSERT_EQ(compiled.kernels.size(), 2u) << compiled.plan.toString();
    kernels.push_back(*compiled.kernels[0]);
  }
  for (const kernel::Kernel& k : kernels) {
    ASSERT_EQ(k.vectorize, 8) << k.summary;
    for (const char* arch : {"sm_80", "sm_90"}) {
      const auto cubin = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = arch});
      EXPECT_TRUE(cubin.log.empty()) << cubin.log;
      const auto sass = device::disassemble(cubin.cubin);
      if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
      const auto counts = device::countGlobalAccesses(*sass);
      EXPECT_GT(counts.load_bits.count(128) ? counts.load_bits.at(128) : 0, 0) << arch << " " << k.summary;
      EXPECT_GT(counts.store_bits.count(128) ? counts.store_bits.at(128) : 0, 0) << arch << " " << k.summary;
      for (const auto& [bits, count] : counts.store_bits) {
        EXPECT_EQ(bits, 128) << arch << ": " << count << " global stores of " << bits << " bits in " << k.summary;
      }
      EXPECT_EQ(sass->find("LDL"), std::string::npos) << arch << ": local memory loads in " << k.summary;
      EXPECT_EQ(sass->find("STL"), std::string::npos) << arch << ": local memory stores in " << k.summary;
    }
  }
}

// `source` of kernel `k` compiles for sm_90 without a warning and its SASS has 128-bit global loads and
// stores (where cuobjdump is found).
void expect128BitLoadsAndStores(const std::string& source, const kernel::Kernel& k) {
  const auto cubin = device::compileCuda(source, k.name, {.arch = "sm_90"});
  EXPECT_TRUE(cubin.log.empty()) << cubin.log;
  const auto sass = device::disassemble(cubin.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  const auto counts = device::countGlobalAccesses(*sass);
  EXPECT_GT(counts.load_bits.count(128) ? counts.load_bits.at(128) : 0, 0) << k.summary;
  EXPECT_GT(counts.store_bits.count(128) ? counts.store_bits.at(128) : 0, 0) << k.summary;
}

// Qwen3's QK-norm at Qwen3-8B's head layout (32 heads of 128): the heads read with 128-bit loads and stored
// heads first with 128-bit stores (each row whole where the permute puts it); RoPE's other half is loaded
// again (from L1) rather than kept in a second register array beside the row's.
TEST(NvrtcCorpus, QkNormRopeStoresItsPermutedRowsWith128BitAccesses) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  const testing::KernelCase c = testing::qkNormRopeCase(2, 512, 32, 128, DataType::BFloat16, 5);
  const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
  ASSERT_EQ(compiled.kernels.size(), 1u) << compiled.plan.toString();
  const kernel::Kernel& k = *compiled.kernels[0];
  ASSERT_EQ(k.vectorize, 8) << k.summary;
  const std::string source = codegen::emitCuda(k);
  const size_t first = source.find("float cache[");
  ASSERT_NE(first, std::string::npos) << source;
  EXPECT_EQ(source.find("float cache", first + 1), std::string::npos) << "a second row cache array in\n" << source;
  expect128BitLoadsAndStores(source, k);
}

// Stable Diffusion's first UNet group norm (320 channels in 32 groups, 64x64 pixels, bf16): the groups read
// and the normed [b, c, h, w] stored with 128-bit accesses, the view back from the groups costing no vector.
TEST(NvrtcCorpus, GroupNormStoresItsViewBackWith128BitAccesses) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  const testing::KernelCase c = testing::groupNormSiluCase(2, 320, 64, 64, 32, DataType::BFloat16, 6);
  const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
  ASSERT_EQ(compiled.kernels.size(), 1u) << compiled.plan.toString();
  const kernel::Kernel& k = *compiled.kernels[0];
  ASSERT_EQ(k.vectorize, 8) << k.summary;
  expect128BitLoadsAndStores(codegen::emitCuda(k), k);
}

// The matmul kernels run on tensor cores: HMMA for bf16, IMMA for int8, in the SASS of sm_80 and sm_90.
TEST(NvrtcCorpus, MatmulKernelsUseTensorCores) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  const std::pair<testing::KernelCase, const char*> cases[] = {
      {testing::matmulCase({64, 96}, {96, 48}, DataType::BFloat16, true, DataType::Null, 1), "HMMA"},
      {testing::matmulCase({2, 40, 64}, {2, 64, 24}, DataType::Int8, false, DataType::Int8, 2), "IMMA"},
  };
  for (const auto& [c, opcode] : cases) {
    const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
    const kernel::Kernel& k = testing::onlyKernel(compiled);
    for (const char* arch : {"sm_80", "sm_90"}) {
      const auto cubin = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = arch});
      const auto sass = device::disassemble(cubin.cubin);
      if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
      EXPECT_NE(sass->find(opcode), std::string::npos) << arch << ": no " << opcode << " in " << k.summary;
    }
  }
}

// The GEMV streams the int8 weights with 16-byte loads: 128-bit global loads in the SASS, for per-channel
// and group-128 scales (the group's scale is one load per chunk, not per element), and dequantizes them
// without conversion instructions.
TEST(NvrtcCorpus, GemvReadsInt8WeightsWith128BitLoads) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  // The last at the widest tuning the GPU check sweeps: eight columns per warp, eight chunks in flight.
  DeviceInfo widest = DeviceInfo::h100Sxm();
  widest.tuning = HeuristicTuning::parse("matmul_gemv_cols=8, matmul_gemv_unroll=8");
  for (const auto& [c, device] : {std::pair{testing::weightInt8LinearCase(1, 11008, 4096, 0, 1), DeviceInfo::h100Sxm()},
                                  std::pair{testing::weightInt8LinearCase(4, 512, 1024, 128, 2), DeviceInfo::h100Sxm()},
                                  std::pair{testing::weightInt8LinearCase(1, 11008, 4096, 0, 1), widest}}) {
    const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), device);
    const kernel::Kernel& k = testing::onlyKernel(compiled);
    ASSERT_NE(k.summary.find("matmul gemv"), std::string::npos) << k.summary;
    for (const char* arch : {"sm_80", "sm_90"}) {
      const auto cubin = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = arch});
      const auto sass = device::disassemble(cubin.cubin);
      if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
      const auto counts = device::countGlobalAccesses(*sass);
      EXPECT_GT(counts.load_bits.count(128) ? counts.load_bits.at(128) : 0, 0) << arch << "\n" << *sass;
      // No byte-wide loads: every weight byte arrives in a 16-byte vector. Nothing in local memory.
      EXPECT_EQ(counts.load_bits.count(8), 0u) << arch << "\n" << *sass;
      EXPECT_EQ(sass->find("STL"), std::string::npos) << arch << " " << k.summary;
      // No conversion instructions (a quarter-rate pipe on sm_90, which bounded the GEMV): the int8 weights
      // become floats by float arithmetic on their bits, and the dequantized product is one bf16 multiply.
      for (const char* conversion : {" I2F", " F2F.", " F2F "}) {
        EXPECT_EQ(sass->find(conversion), std::string::npos) << arch << " has" << conversion << "\n" << *sass;
      }
    }
  }
}

// The GEMV on tensor cores: 128-bit loads of the weights and of the activations (whose fragments are those
// loads' registers), HMMA, no conversion instructions, nothing in local memory, and registers for four
// 128-thread blocks an SM at 16 rows.
TEST(NvrtcCorpus, GemvOnTensorCoresLoadsWith128BitsAndKeepsItsFragmentsInRegisters) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  for (int64_t rows : {16, 64}) {
    const testing::KernelCase c = testing::weightInt8LinearCase(rows, 11008, 4096, 0, 3);
    const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
    const kernel::Kernel& k = testing::onlyKernel(compiled);
    ASSERT_NE(k.summary.find("matmul gemv on tensor cores"), std::string::npos) << k.summary;
    const auto cubin = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = "sm_90"});
    const auto sass = device::disassemble(cubin.cubin);
    if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
    const auto counts = device::countGlobalAccesses(*sass);
    EXPECT_EQ(counts.load_bits.count(8), 0u) << *sass;
    EXPECT_NE(sass->find("HMMA.16816.F32.BF16"), std::string::npos) << *sass;
    // Per unrolled group: two weight rows (16 bytes each) and two loads of each of A's rows per tile.
    EXPECT_GE(counts.load_bits.count(128) ? counts.load_bits.at(128) : 0, 8) << *sass;
    for (const char* instruction : {" I2F", " F2F.", " F2F ", " LDL", " STL"}) {
      EXPECT_EQ(sass->find(instruction), std::string::npos) << "has" << instruction << "\n" << *sass;
    }
    const std::optional<int> registers = device::registersPerThread(cubin.cubin);
    if (rows == 16 && registers) {
      EXPECT_LE(*registers, 128) << k.summary;
    }
  }
}

TEST(NvrtcCorpus, NormsAndSoftmaxLeaveRoomForEightBlocksPerSm) {
  // 128-thread blocks: at most 64 registers per thread for 8 blocks on an SM's 64K registers. The
  // [2048, 1600] layer_norm's 1024 blocks then fit in one wave on 132 SMs (7 per SM would need two).
  // The row count is a launch argument: a few rows give the kernel of the benchmarks' shapes.
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: registers not checked";
  for (const testing::KernelCase& c :
       {testing::layerNormCase({.batch = 2, .seq = 4, .hidden = 1600}, 1),
        testing::layerNormCase({.batch = 2, .seq = 4, .hidden = 4096}, 1),
        testing::softmaxCase(8, 4096, DataType::BFloat16, false, 1)}) {
    const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
    const kernel::Kernel& k = testing::onlyKernel(compiled);
    ASSERT_EQ(k.threadsPerBlock(), 128) << k.summary;
    const auto cubin = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = "sm_90"});
    const std::optional<int> registers = device::registersPerThread(cubin.cubin);
    if (!registers) GTEST_SKIP() << "cuobjdump not found: registers not checked";
    EXPECT_LE(*registers, 64) << k.summary;
  }
}

}  // namespace
}  // namespace braze
