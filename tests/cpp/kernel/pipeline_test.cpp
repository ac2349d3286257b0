// The whole execute path (plan, heuristics, kernel IR, FusionCache, PreparedPlan, the test device)
// against the reference evaluator, on the small kernel corpus (fusions/kernel_corpus.h): the acceptance
// fusions (seed layer_norm, litGPT RoPE, softmax) and the layouts that break kernels.
#include "fusions/kernel_corpus.h"
#include "exec/host_execute.h"
#include "codegen/source_emitter.h"
#include "device/cuda/nvrtc.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

class Pipeline : public ::testing::TestWithParam<testing::KernelCaseMaker> {};

TEST_P(Pipeline, MatchesTheReferenceOnTheTestDevice) {
  const testing::KernelCase c = GetParam().make();
  const LoweredPlan compiled = testing::expectDeviceMatches(*c.fusion, c.inputs, c.options);
  if (c.expect) c.expect(compiled);
}

INSTANTIATE_TEST_SUITE_P(Small, Pipeline, ::testing::ValuesIn(testing::smallKernelCorpus()), testing::caseName);

// The same corpus planned for an MI300X and run on the simulated device: kernels lowered for 64-lane
// wavefronts (block reductions across 64 lanes, the heuristics' wavefront-sized minimums) equal the
// reference evaluator as the 32-lane ones do.
class PipelineWavefront64 : public ::testing::TestWithParam<testing::KernelCaseMaker> {};

TEST_P(PipelineWavefront64, MatchesTheReferenceOnTheSimulatorAsAnMi300x) {
  const testing::KernelCase c = GetParam().make();
  device::SimDeviceOps device;
  exec::FusionCache cache(c.fusion, c.options.plan, &device, DeviceInfo::mi300x());
  testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), "as an MI300X");
  for (const auto& k : cache.lastPlan()->compiled().kernels) {
    if (k) {
      EXPECT_EQ(k->warp_size, 64) << k->name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Small, PipelineWavefront64, ::testing::ValuesIn(testing::smallKernelCorpus()),
                         testing::caseName);

// The same signature (an index tensor of two int64s), so the same prepared plan, with an index past x.
std::vector<HostValue> indexPastTheEnd(const testing::KernelCase& c) {
  return {c.inputs[0], testing::tensorOf(DataType::Int64, {2}, {0, 7})};
}

TEST(Pipeline, AnIndexOutOfRangeIsAnIndexErrorNamingTheOpAndTheIndex) {
  const testing::KernelCase c = testing::indexSelectCase();
  device::SimDeviceOps device;
  exec::FusionCache cache(c.fusion, {}, &device, DeviceInfo::h100Sxm());
  testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs));
  try {
    exec::runOnHost(cache, indexPastTheEnd(c));
    FAIL() << "expected an IndexError";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index) << e.what();
    for (const char* part : {"index_select", "dim 0 of T0, size 3", "index 7 is out of bounds"}) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << part << " in: " << e.what();
    }
  }
  // Reported once: the record is clear again and the next execute runs.
  testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), "after the error");
}

TEST(Pipeline, AnIndexErrorOfAnExecuteThatDidNotWaitIsRaisedByTheNextExecute) {
  // As on a GPU, where the host does not wait for the kernels: the next execute on the device reports.
  const testing::KernelCase c = testing::indexSelectCase();
  device::SimDeviceOps device;
  exec::FusionCache cache(c.fusion, {}, &device, DeviceInfo::h100Sxm());
  const std::vector<HostValue> held = indexPastTheEnd(c);
  std::vector<device::DeviceValue> bad;
  for (const HostValue& v : held) {
    const HostTensor& t = std::get<HostTensor>(v);
    device.borrow(t.data(), static_cast<size_t>(t.numel() * sizeOf(t.dtype())));
    bad.push_back(exec::deviceValueOf(v));
  }
  char tag = 0;
  const auto stream = reinterpret_cast<device::StreamHandle>(&tag);
  (void)cache.run(bad, stream, /*wait=*/false);
  device.synchronize(stream);  // the kernel ran; nobody has looked at the record yet
  try {
    (void)exec::runOnHost(cache, c.inputs);
    FAIL() << "expected the next execute to raise the IndexError";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index) << e.what();
    EXPECT_NE(std::string(e.what()).find("index 7"), std::string::npos) << e.what();
  }
  for (const HostValue& v : held) device.giveBack(std::get<HostTensor>(v).data());
}

TEST(Pipeline, WithoutIndexChecksTheSimulatorReportsTheAccessWithTheKernelName) {
  const testing::KernelCase c = testing::indexSelectCase();
  device::SimDeviceOps device;
  DeviceInfo unchecked = DeviceInfo::h100Sxm();
  unchecked.tuning.index_checks = 0;
  exec::FusionCache cache(c.fusion, {}, &device, unchecked);
  testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs));
  const std::string source = cache.lastSourceCode(codegen::SourceDialect::Cuda).at(0);
  EXPECT_EQ(source.find("braze_checked_index"), std::string::npos) << source;
  try {
    exec::runOnHost(cache, indexPastTheEnd(c));
    FAIL() << "expected an out-of-bounds report";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("braze_s"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside"), std::string::npos) << e.what();
  }
}

// The scalar GEMV at tuned columns per warp and chunks in flight (what the GPU check sweeps for the one-row
// weight-only linear): columns past N in the last warp, K not a multiple of the unrolled steps, group-wise
// scales, a few rows through matmul_gemv=1, all equal to the reference.
TEST(Pipeline, TheScalarGemvAtTunedColumnsAndUnrollMatchesTheReference) {
  for (const char* tuning : {"matmul_gemv_cols=8, matmul_gemv_unroll=8", "matmul_gemv_cols=4, matmul_gemv_unroll=1",
                             "matmul_gemv_cols=1, matmul_gemv_unroll=3"}) {
    for (const testing::KernelCase& c : {testing::weightInt8LinearCase(1, 301, 1040, 0, 40),
                                         testing::weightInt8LinearCase(3, 77, 544, 32, 41)}) {
      DeviceInfo device = DeviceInfo::h100Sxm();
      device.tuning = HeuristicTuning::parse(std::string(tuning) + ", matmul_gemv=1, matmul_gemv_mma=0");
      device::SimDeviceOps sim;
      exec::FusionCache cache(c.fusion, c.options.plan, &sim, device);
      testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), tuning);
      const kernel::Kernel& k = testing::onlyKernel(cache.lastPlan()->compiled());
      EXPECT_NE(k.summary.find("matmul gemv:"), std::string::npos) << k.summary;
    }
  }
}

TEST(Pipeline, TensorsOf2To31ElementsOrMoreSwitchTo64BitIndexing) {
  // An expanded input with 2^32 logical elements (one row of storage): the reduction's linear indices
  // pass 2^31, so the kernel indexes with 64 bits; the same fusion at 2^20 elements uses 32.
  for (int64_t rows : {int64_t{1} << 16, int64_t{16}}) {
    Fusion f;
    {
      FusionGuard g(&f);
      TensorView* x = defineTensor({-1, -1}, {std::nullopt, true}, DataType::Float);
      f.addOutput(reduce(OpKind::Sum, x, {1}));
    }
    const HostTensor row = testing::randomTensor(DataType::Float, {65536}, 3);
    const std::vector<HostValue> inputs{row.view({rows, 65536}, {0, 1}, 0)};
    const auto compiled = lowerPlan(planSegments(f, inputs), DeviceInfo::h100Sxm());
    const kernel::Kernel& k = testing::onlyKernel(compiled);
    const bool huge = rows * 65536 >= (int64_t{1} << 31);
    EXPECT_EQ(k.index64, huge);
    const std::string source = codegen::emitCuda(k);
    EXPECT_NE(source.find(huge ? "typedef long long idx_t;" : "typedef int idx_t;"), std::string::npos);
    if (!device::nvrtcAvailable()) continue;
    EXPECT_TRUE(device::compileCuda(source, k.name, {.arch = "sm_90"}).log.empty());
  }
}

}  // namespace
}  // namespace braze
