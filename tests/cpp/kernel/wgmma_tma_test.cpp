// wgmma's K slices loaded by TMA (MatmulParams::tma): each operand's matrices read through a 2D or 3D map
// that every launch encodes for the pointer bound to it, one thread issuing a stage's 128-byte swizzled
// boxes and every thread waiting on the stage's mbarrier. On the simulator, through the whole execute path
// (the simulated device's TMA loads read the maps each launch passes, as a GPU's do, and their boxes
// must be the kernel's), the result equals the reference on odd sizes (boxes past M, N and K filled with zeros), both
// tile orders of 16-bit operands, 8-bit operands, an operand that is a strided, offset window of a larger
// tensor, and batches (3D maps, a box in one batch: rows past M are zeros, not the next batch's), one
// operand broadcast along a batch dim. Operands without a map of their own (batch dims that do not merge
// into one, an expanded batch, one tensor read as both) keep cp.async.
// NVRTC compiles the kernel for sm_90a into HGMMA fed by UTMALDG, with mbarrier waits (SYNCS), and no
// LDGSTS.
#include "fusions/wgmma_device.h"
#include "codegen/source_emitter.h"
#include "kernel/tensor_map.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"
#include "support/error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;

// wgmma wherever it applies, and `tuning`.
DeviceInfo tmaDevice(const std::string& tuning) {
  return testing::fourSmH100("matmul_wgmma=1" + (tuning.empty() ? "" : ", " + tuning));
}

const Kernel& runOnSimulator(const testing::KernelCase& c, const std::string& tuning,
                             std::unique_ptr<exec::FusionCache>& cache, device::SimDeviceOps& sim, const std::string& what) {
  return testing::runOnSimulator(c, tmaDevice(tuning), cache, sim, what);
}

int64_t tmaTensors(const Kernel& k) {
  return std::count_if(k.tensors.begin(), k.tensors.end(), [](const TensorParam& p) { return p.tma.has_value(); });
}

// matmul(window of a, b): A is rows [3, 3 + m) and columns [8, 8 + k) of a [m + 5, k + 24] tensor (rows
// k + 24 elements apart, the first element 3 rows and 16 bytes in).
testing::KernelCase windowedAMatmulCase(int64_t m, int64_t k, int64_t n, uint64_t seed) {
  testing::KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* big = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* a = slice(big, testing::ints(f, {3, 8}), testing::ints(f, {3 + m, 8 + k}), testing::ints(f, {1, 1}));
    f.addOutput(matmul(a, b));
  }
  c.inputs = testing::randomInputs(f, seed, {{m + 5, k + 24}, {k, n}});
  return c;
}

TEST(WgmmaTma, MatmulsLoadedByTmaMatchTheReference) {
  struct Case {
    testing::KernelCase c;
    const char* tuning;
    const char* what;
  };
  const Case cases[] = {
      {testing::matmulCase({97, 200}, {200, 72}, DataType::BFloat16, false, DataType::Null, 41), "",
       "bf16, B row-major (mn-major boxes), M, N and K past the tiles"},
      {testing::matmulCase({20, 40}, {40, 130}, DataType::Half, true, DataType::Null, 42), "",
       "f16, B given [n, k] (k-major boxes), K shorter than a box"},
      {testing::transposedAMatmulCase(136, 257, 304, DataType::BFloat16, 43),
       "matmul_block_m=128, matmul_block_n=256, matmul_stages=3", "A given transposed (mn-major A), three stages"},
      {testing::matmulCase({70, 208}, {208, 72}, DataType::Int8, true, DataType::Null, 44), "",
       "s8 x s8 -> s32, 128-element slices"},
      {windowedAMatmulCase(77, 136, 96, 45), "", "A a strided window of a larger tensor"},
      {testing::matmulCase({200, 320}, {320, 192}, DataType::BFloat16, false, DataType::BFloat16, 46),
       "matmul_block_m=256, matmul_block_n=64", "four warpgroups of 64 x 64, K of five slices through four stages"},
      {testing::matmulCase({3, 70, 104}, {104, 64}, DataType::BFloat16, false, DataType::Null, 47), "",
       "a batch of A (3D map), B 2D"},
      {testing::matmulCase({2, 70, 208}, {2, 208, 72}, DataType::Int8, true, DataType::Null, 48), "",
       "s8, both batched (3D maps), B given [batch, n, k]"},
      {testing::matmulCase({2, 1, 33, 64}, {2, 3, 64, 136}, DataType::Half, false, DataType::Null, 50), "",
       "A broadcast along the second batch dim, B's two batch dims merged"},
  };
  for (const Case& x : cases) {
    device::SimDeviceOps sim;
    std::unique_ptr<exec::FusionCache> cache;
    const Kernel& k = runOnSimulator(x.c, x.tuning, cache, sim, x.what);
    EXPECT_NE(k.summary.find("TMA pipeline"), std::string::npos) << x.what << ": " << k.summary;
    EXPECT_EQ(tmaTensors(k), 2) << x.what;
  }
}

TEST(WgmmaTma, OperandsWithoutATensorMapOfTheirOwnKeepCpAsync) {
  auto twoInputs = [](int64_t rank) {
    testing::KernelCase c;
    FusionGuard g(c.fusion.get());
    defineTensor(std::vector<int64_t>(rank, -1), std::vector<std::optional<bool>>(rank, true), DataType::BFloat16);
    defineTensor(std::vector<int64_t>(rank, -1), std::vector<std::optional<bool>>(rank, true), DataType::BFloat16);
    return c;
  };
  // A's batch dims swapped: [3, 2] of a [2, 3, m, k] tensor, whose strides do not merge into one.
  testing::KernelCase swapped = twoInputs(4);
  {
    FusionGuard g(swapped.fusion.get());
    auto* a = static_cast<TensorView*>(swapped.fusion->inputs()[0]);
    auto* b = static_cast<TensorView*>(swapped.fusion->inputs()[1]);
    swapped.fusion->addOutput(matmul(permute(a, {1, 0, 2, 3}), b));
  }
  swapped.inputs = testing::randomInputs(*swapped.fusion, 51, {{2, 3, 40, 64}, {3, 2, 64, 72}});
  // B expanded along the batch: its batches overlap.
  testing::KernelCase expanded = twoInputs(3);
  {
    FusionGuard g(expanded.fusion.get());
    auto* a = static_cast<TensorView*>(expanded.fusion->inputs()[0]);
    auto* b = static_cast<TensorView*>(expanded.fusion->inputs()[1]);
    expanded.fusion->addOutput(matmul(a, expand(b, testing::ints(*expanded.fusion, {3, 64, 72}))));
  }
  expanded.inputs = testing::randomInputs(*expanded.fusion, 52, {{3, 40, 64}, {1, 64, 72}});
  // x @ x^T: one tensor would need two maps.
  testing::KernelCase gram;
  {
    FusionGuard g(gram.fusion.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    gram.fusion->addOutput(matmul(x, permute(x, {1, 0})));
  }
  gram.inputs = testing::randomInputs(*gram.fusion, 49, {{72, 128}});
  const std::pair<const testing::KernelCase*, const char*> cases[] = {
      {&swapped, "batch dims that do not merge"}, {&expanded, "an expanded batch"}, {&gram, "x @ x^T"}};
  std::unique_ptr<exec::FusionCache> cache;
  device::SimDeviceOps sim;
  for (const auto& [c, what] : cases) {
    const Kernel& k = runOnSimulator(*c, "", cache, sim, what);
    EXPECT_NE(k.summary.find("wgmma"), std::string::npos) << what << ": " << k.summary;
    EXPECT_EQ(tmaTensors(k), 0) << what << ": " << k.summary;
  }
  // Tuned off.
  const testing::KernelCase plain = testing::matmulCase({97, 200}, {200, 72}, DataType::BFloat16, false, DataType::Null, 41);
  EXPECT_EQ(tmaTensors(runOnSimulator(plain, "matmul_tma=0", cache, sim, "tuned off")), 0);
}

// A plan of a TMA GEMM and a reduction of its result, launched as one graph: the second run, at other
// addresses, updates the graph's nodes, tensor maps included (a stale map would point the boxes at the
// first run's memory).
TEST(WgmmaTma, AGraphOfATmaKernelEncodesItsMapsForEachRunsPointers) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* y = matmul(a, b);
    f->addOutput(y);
    f->addOutput(reduce(OpKind::Sum, cast(y, DataType::Float)->asTensor(), {1}));
  }
  device::SimDeviceOps sim;
  exec::FusionCache cache(f, {}, &sim, tmaDevice(""));
  cache.useCudaGraphs(true);
  for (uint64_t seed : {71, 72}) {
    const std::vector<HostValue> inputs = testing::randomInputs(*f, seed, {{70, 136}, {136, 96}});
    testing::expectClose(exec::runOnHost(cache, inputs), evaluate(*f, inputs), fmt::format("seed {}", seed));
  }
  const auto& compiled = cache.lastPlan()->compiled();
  ASSERT_EQ(cache.lastPlan()->launchedKernels().size(), 2u) << compiled.plan.toString();
  EXPECT_EQ(tmaTensors(*compiled.kernels[0]) + tmaTensors(*compiled.kernels[1]), 2);
  EXPECT_EQ(sim.graphsMade(), 1);
  EXPECT_EQ(sim.launches(), 4);
}

TEST(WgmmaTma, TheMapIsTheKernelsMatrixAtTheBoundPointer) {
  TensorParam p;
  p.name = "T0";
  p.dtype = DataType::BFloat16;
  p.tma = TensorParam::TmaBox{128, 64, true, StridedLayout{{77, 136}, {160, 1}, 3 * 160 + 8}};
  const TensorMapSpec spec = tensorMapSpec(p, 0x10000);
  EXPECT_EQ(spec.address, 0x10000u + (3 * 160 + 8) * 2);
  EXPECT_EQ(spec.rows, 77u);
  EXPECT_EQ(spec.columns, 136u);
  EXPECT_EQ(spec.row_stride_bytes, 320u);
  EXPECT_EQ(spec.box_rows, 128u);
  EXPECT_EQ(spec.box_columns, 64u);
  EXPECT_TRUE(spec.swizzle);
  try {
    tensorMapSpec(p, 0x10002);
    ADD_FAILURE() << "a misaligned start was encoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("T0 is read through a TMA tensor map, which needs its start 16-byte aligned"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(tensorMapDataType(DataType::BFloat16), 9);
  EXPECT_EQ(tensorMapDataType(DataType::Half), 6);
  EXPECT_EQ(tensorMapDataType(DataType::Int8), 0);
  EXPECT_THROW(tensorMapDataType(DataType::Double), Error);
}

TEST(WgmmaTma, CompilesForSm90aIntoWgmmasFedByUtmaldg) {
  const std::pair<testing::KernelCase, const char*> cases[] = {
      {testing::matmulCase({300, 264}, {264, 520}, DataType::Half, true, DataType::Null, 2), "HGMMA"},
      {testing::matmulCase({2, 300, 256}, {2, 256, 520}, DataType::Int8, true, DataType::Null, 3), "IGMMA"},  // 3D maps
  };
  for (const auto& [c, opcode] : cases) {
    const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), tmaDevice(""));
    const Kernel& k = testing::onlyKernel(compiled);
    ASSERT_NE(k.summary.find("TMA pipeline"), std::string::npos) << k.summary;
    if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: not compiled";
    const auto cubin = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = "sm_90a"});
    EXPECT_TRUE(cubin.log.empty()) << cubin.log;
    const auto sass = device::disassemble(cubin.cubin);
    if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
    for (const char* op : {opcode, "UTMALDG", "SYNCS"}) EXPECT_NE(sass->find(op), std::string::npos) << op << ": " << k.summary;
    EXPECT_EQ(sass->find("LDGSTS"), std::string::npos) << k.summary;
  }
}

}  // namespace
}  // namespace braze
