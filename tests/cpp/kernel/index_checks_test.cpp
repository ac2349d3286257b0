// Index values checked in kernels (kernel/index_errors.h): the checked kernels compile with NVRTC and
// hiprtc without a warning, an embedding-style row gather keeps its vector accesses, and what the check
// costs in instructions is measured from the SASS (printed; the GPU timings are gpu_check.sh's).
#include "fusions/kernel_corpus.h"
#include "codegen/source_emitter.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"
#include "device/hip/hiprtc.h"
#include "kernel/index_errors.h"
#include "kernel/printer.h"

#include <gtest/gtest.h>

#include <sstream>

namespace braze {
namespace {

// out[r, :] = table[index[r], :] for a bf16 table of `width` columns: the embedding lookup.
testing::KernelCase embeddingCase(int64_t rows, int64_t width) {
  testing::KernelCase c;
  {
    FusionGuard g(c.fusion.get());
    TensorView* table = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* index = defineTensor({-1}, {true}, DataType::Int64);
    c.fusion->addOutput(indexSelect(table, index, 0));
  }
  std::vector<double> index(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) index[static_cast<size_t>(r)] = static_cast<double>((r * 7) % 1000);
  c.inputs = {testing::randomTensor(DataType::BFloat16, {1000, width}, 5), testing::tensorOf(DataType::Int64, {rows}, index)};
  return c;
}

kernel::Kernel lowered(const testing::KernelCase& c, bool checks) {
  DeviceInfo device = DeviceInfo::h100Sxm();
  device.tuning.index_checks = checks ? 1 : 0;
  return testing::onlyKernel(lowerPlan(planSegments(*c.fusion, c.inputs), device));
}

int sassInstructions(const std::string& sass) {
  // Instruction lines read "        /*0040*/                   IMAD ... ;".
  std::istringstream lines(sass);
  int count = 0;
  for (std::string line; std::getline(lines, line);) count += line.find("/*") != std::string::npos && line.find(';') != std::string::npos;
  return count;
}

TEST(IndexChecks, TheKernelIrShowsTheCheckAndTheRecord) {
  const kernel::Kernel k = lowered(embeddingCase(64, 256), true);
  ASSERT_TRUE(k.index_errors.has_value());
  EXPECT_TRUE(k.tensors[*k.index_errors].index_errors);
  const std::string ir = kernel::printKernel(k);
  EXPECT_NE(ir.find("checked("), std::string::npos) << ir;
  EXPECT_NE(ir.find("(index errors)"), std::string::npos) << ir;
  const kernel::Kernel unchecked = lowered(embeddingCase(64, 256), false);
  EXPECT_FALSE(unchecked.index_errors.has_value());
  EXPECT_EQ(kernel::printKernel(unchecked).find("checked("), std::string::npos);
  // The site names the op and the dim it selects from, the same in every process (the source is the
  // compiled-kernel cache's key).
  EXPECT_EQ(kernel::indexCheckSite("index_select T2 (dim 0 of T0, size 1000)"),
            kernel::indexCheckSite("index_select T2 (dim 0 of T0, size 1000)"));
  EXPECT_NE(kernel::emitCuda(k).find(fmt::format("{}ll", kernel::indexCheckSite("index_select T2 (dim 0 of T0, size 1000)"))),
            std::string::npos);
}

TEST(IndexChecks, CheckedKernelsCompileWithNvrtcAndKeepTheirVectorAccesses) {
  if (!runtime::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: kernel compilation not checked";
  const testing::KernelCase c = embeddingCase(4096, 1024);
  int instructions[2] = {0, 0};
  runtime::GlobalAccessCounts accesses[2];
  int64_t vectorize[2] = {0, 0};
  for (bool checks : {false, true}) {
    SCOPED_TRACE(checks ? "checked" : "unchecked");
    const kernel::Kernel k = lowered(c, checks);
    vectorize[checks] = k.vectorize;
    const runtime::CompiledKernel compiled = runtime::compileCuda(kernel::emitCuda(k), k.name, {.arch = "sm_90"});
    EXPECT_EQ(compiled.log, "");
    const std::optional<std::string> sass = runtime::disassemble(compiled.cubin);
    if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
    accesses[checks] = runtime::countGlobalAccesses(*sass);
    instructions[checks] = sassInstructions(*sass);
  }
  // The check changes no access of the tensors: the same vector width, the same loads, and the same
  // stores beside the report's three 64-bit words (site, value, ready).
  EXPECT_EQ(vectorize[0], vectorize[1]);
  EXPECT_EQ(accesses[0].load_bits, accesses[1].load_bits);
  std::map<int, int> tensor_stores = accesses[1].store_bits;
  if ((tensor_stores[64] -= 3) == 0) tensor_stores.erase(64);
  EXPECT_EQ(accesses[0].store_bits, tensor_stores);
  // What it adds: a compare and a branch per index read, and the out-of-line report.
  std::printf("embedding gather 4096 x 1024 bf16 (vectorize %lld), sm_90 SASS instructions: %d unchecked, %d checked\n",
              static_cast<long long>(vectorize[1]), instructions[0], instructions[1]);
  EXPECT_LE(instructions[1], instructions[0] + 64);
}

TEST(IndexChecks, CheckedKernelsCompileWithHiprtc) {
  if (!runtime::hiprtcAvailable()) GTEST_SKIP() << "hiprtc not found: HIP compilation not checked";
  const testing::KernelCase c = embeddingCase(64, 256);
  DeviceInfo device = DeviceInfo::mi250x();
  const kernel::Kernel k = testing::onlyKernel(lowerPlan(planSegments(*c.fusion, c.inputs), device));
  ASSERT_TRUE(k.index_errors.has_value());
  const runtime::CompiledKernel compiled = runtime::compileHip(kernel::emitHip(k), k.name, {.arch = "gfx90a"});
  EXPECT_EQ(compiled.log, "");
  EXPECT_FALSE(compiled.cubin.empty());
}

}  // namespace
}  // namespace braze
