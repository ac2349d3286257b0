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

#include <limits>
#include <sstream>

namespace braze {
namespace {

// out[r, :] = table[index[r], :] for a bf16 table of `width` columns: the embedding lookup, its index
// Int32 by default (an Int64 one is read whole when checked, where unchecked code reads only its low word).
testing::KernelCase embeddingCase(int64_t rows, int64_t width, DataType index_dtype = DataType::Int32) {
  testing::KernelCase c;
  {
    FusionGuard g(c.fusion.get());
    TensorView* table = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* index = defineTensor({-1}, {true}, index_dtype);
    c.fusion->addOutput(indexSelect(table, index, 0));
  }
  std::vector<double> index(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) index[static_cast<size_t>(r)] = static_cast<double>((r * 7) % 1000);
  c.inputs = {testing::randomTensor(DataType::BFloat16, {1000, width}, 5), testing::tensorOf(index_dtype, {rows}, index)};
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
  const std::string source = codegen::emitCuda(k);
  EXPECT_NE(source.find(fmt::format("{}ll", kernel::indexCheckSite("index_select T2 (dim 0 of T0, size 1000)"))),
            std::string::npos);
  // The value is checked as read: narrowed to idx_t first, 2^32 + 5 would pass as 5.
  EXPECT_EQ(source.find("braze_checked_index(static_cast<idx_t>"), std::string::npos) << source;
}

TEST(IndexChecks, AnIndexReadOncePerRowLimitsNeitherTheVectorNorItsWidth) {
  // The index is one scalar load per row, before the lanes: an Int64 index (8 bytes) and an odd row
  // count (its own layout's extent) leave a bf16 row of 1024 its 16-byte vectors.
  for (int64_t rows : {4096, 2049}) {
    for (DataType dtype : {DataType::Int64, DataType::Int32}) {
      EXPECT_EQ(lowered(embeddingCase(rows, 1024, dtype), true).vectorize, 8) << rows << " " << toString(dtype);
    }
  }
}

TEST(IndexChecks, CheckedKernelsCompileWithNvrtcAndKeepTheirVectorAccesses) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: kernel compilation not checked";
  const testing::KernelCase c = embeddingCase(4096, 1024);
  int instructions[2] = {0, 0};
  device::GlobalAccessCounts accesses[2];
  int64_t vectorize[2] = {0, 0};
  for (bool checks : {false, true}) {
    SCOPED_TRACE(checks ? "checked" : "unchecked");
    const kernel::Kernel k = lowered(c, checks);
    vectorize[checks] = k.vectorize;
    const device::CompiledKernel compiled = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = "sm_90"});
    EXPECT_EQ(compiled.log, "");
    const std::optional<std::string> sass = device::disassemble(compiled.cubin);
    if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
    accesses[checks] = device::countGlobalAccesses(*sass);
    instructions[checks] = sassInstructions(*sass);
  }
  // The check changes no access of the tensors: the same vector width, and the same loads and stores
  // beside the report's read and write of the record's 64-bit word.
  EXPECT_EQ(vectorize[0], vectorize[1]);
  auto withoutTheRecord = [](std::map<int, int> counts) {
    if (--counts[64] == 0) counts.erase(64);
    return counts;
  };
  EXPECT_EQ(accesses[0].load_bits, withoutTheRecord(accesses[1].load_bits));
  EXPECT_EQ(accesses[0].store_bits, withoutTheRecord(accesses[1].store_bits));
  // What it adds: a compare and a branch per index read, and the out-of-line report.
  std::printf("embedding gather 4096 x 1024 bf16 (vectorize %lld), sm_90 SASS instructions: %d unchecked, %d checked\n",
              static_cast<long long>(vectorize[1]), instructions[0], instructions[1]);
  EXPECT_LE(instructions[1], instructions[0] + 64);
}

TEST(IndexChecks, AnIndexIntoASizeOneOrExpandedDimIsCheckedThoughTheLoadIgnoresIt) {
  // The load of a one-row table (or of an expanded one, stride 0) reads row 0 whatever the index: the
  // checked index feeds no address, and is kept for its report all the same, without an NVRTC warning.
  for (const int64_t table_stride : {int64_t{8}, int64_t{0}}) {
    SCOPED_TRACE(table_stride == 0 ? "expanded" : "one row");
    testing::KernelCase c;
    {
      FusionGuard g(c.fusion.get());
      TensorView* table = defineTensor({-1, -1}, {false, true}, DataType::BFloat16);
      TensorView* index = defineTensor({-1}, {true}, DataType::Int64);
      c.fusion->addOutput(indexSelect(table, index, 0));
    }
    const HostTensor table = testing::randomTensor(DataType::BFloat16, {1, 8}, 5);
    c.inputs = {table_stride == 0 ? table.view({6, 8}, {0, 1}, 0) : table,
                testing::tensorOf(DataType::Int64, {3}, {0, 5, 0})};
    const kernel::Kernel k = lowered(c, true);
    EXPECT_NE(kernel::printKernel(k).find("checked("), std::string::npos) << kernel::printKernel(k);
    if (!device::nvrtcAvailable()) continue;
    const device::CompiledKernel compiled = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = "sm_90"});
    EXPECT_EQ(compiled.log, "");
  }
}

std::string raised(int64_t* record) {
  try {
    kernel::raiseRecordedIndexError(record);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
    return e.what();
  }
  return "";
}

TEST(IndexChecks, TheRecordHoldsTheFirstReportWholeUntilTheHostRaisesIt) {
  const int64_t site = kernel::indexCheckSite("gather T5 (dim 1 of T2, size 7)");
  const int64_t other = kernel::indexCheckSite("take_along_axis T9 (dim 0 of T8, size 3)");
  int64_t record = 0;
  EXPECT_EQ(raised(&record), "");  // nothing recorded: nothing raised
  kernel::recordIndexError(&record, site, -12);
  kernel::recordIndexError(&record, other, 40);  // the first report stays
  EXPECT_NE(raised(&record).find("gather T5 (dim 1 of T2, size 7): index -12 is out of bounds"), std::string::npos);
  EXPECT_EQ(record, 0);  // cleared: the next report is raised too
  kernel::recordIndexError(&record, other, int64_t{1} << 40);
  EXPECT_NE(raised(&record).find(fmt::format("take_along_axis T9 (dim 0 of T8, size 3): index {} or more",
                                             kernel::kIndexErrorValueLimit)),
            std::string::npos);
  kernel::recordIndexError(&record, site, std::numeric_limits<int64_t>::min());
  EXPECT_NE(raised(&record).find(fmt::format("index {} or less", -kernel::kIndexErrorValueLimit)), std::string::npos);
}

TEST(IndexChecks, CheckedKernelsCompileWithHiprtc) {
  if (!device::hiprtcAvailable()) GTEST_SKIP() << "hiprtc not found: HIP compilation not checked";
  const testing::KernelCase c = embeddingCase(64, 256);
  DeviceInfo device = DeviceInfo::mi250x();
  const kernel::Kernel k = testing::onlyKernel(lowerPlan(planSegments(*c.fusion, c.inputs), device));
  ASSERT_TRUE(k.index_errors.has_value());
  const device::CompiledKernel compiled = device::compileHip(codegen::emitHip(k), k.name, {.arch = "gfx90a"});
  EXPECT_EQ(compiled.log, "");
  EXPECT_FALSE(compiled.cubin.empty());
}

}  // namespace
}  // namespace braze
