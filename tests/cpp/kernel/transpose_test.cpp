// The transpose scheduler's shared-memory tiles: permutes that move the innermost dim, inputs whose
// stride-1 dim is not their last, mixed with contiguous and broadcast inputs, reshapes after the
// permute, batch dims, odd and size-1 extents (partial tiles), several outputs. Each runs the whole
// pipeline on the simulator against the reference (the simulator also reports any shared-memory
// race), checks that the kernel really is tiled (not the pointwise fallback), and the kernels
// compile with NVRTC without a warning; the simple transpose's SASS has the loads the design predicts.
#include "fusions/kernel_util.h"
#include "ir/ops.h"
#include "codegen/source_emitter.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"

#include <gtest/gtest.h>

#include <functional>

namespace braze {
namespace {

using testing::expectDeviceMatches;
using testing::ints;
using testing::onlyKernel;
using testing::randomInputs;

bool isTiled(const kernel::Kernel& k) { return k.summary.rfind("transpose: tile", 0) == 0 && k.shared_bytes > 0; }

// A column-major ("transposed") input of logical sizes [m, n]: what x.T of a contiguous tensor is.
HostTensor columnMajor(DataType dtype, int64_t m, int64_t n, uint64_t seed) {
  return testing::randomTensor(dtype, {m * n}, seed).view({m, n}, {1, m}, 0);
}

// The kernels of a plan compile for sm_90 with an empty log; returns the sources.
void expectCompiles(const LoweredPlan& compiled) {
  if (!device::nvrtcAvailable()) return;
  for (const auto& k : compiled.kernels) {
    if (!k) continue;
    const std::string source = codegen::emitCuda(*k);
    const auto cubin = device::compileCuda(source, k->name, {.arch = "sm_90"});
    EXPECT_TRUE(cubin.log.empty()) << cubin.log << "\n" << source;
  }
}

// y = permute(x, [1, 0]) * 2 for x of sizes [m, n].
void defineTranspose2d(Fusion& f, DataType dtype) {
  FusionGuard g(&f);
  TensorView* x = defineTensor({-1, -1}, {true, true}, dtype);
  f.addOutput(cast(mul(permute(x, {1, 0}), f.constant(2.0)), dtype));
}

TEST(Transpose, SimpleTransposeIsTiledForManySizesAndDtypes) {
  const std::vector<std::pair<int64_t, int64_t>> shapes{{32, 32}, {64, 96}, {33, 65}, {97, 131}, {2, 300},
                                                          {300, 2}, {5, 7},  {128, 8}, {1000, 3}};
  for (DataType dtype : {DataType::Float, DataType::BFloat16, DataType::Half, DataType::Double}) {
    for (auto [m, n] : shapes) {
      Fusion f;
      defineTranspose2d(f, dtype);
      const auto compiled = expectDeviceMatches(f, randomInputs(f, m * 7 + n, {{m, n}}));
      const kernel::Kernel& k = onlyKernel(compiled);
      EXPECT_TRUE(isTiled(k)) << toString(dtype) << " " << m << "x" << n << ": " << k.summary;
      EXPECT_NE(k.summary.find("dims (a=0, b=1), 1 staged input"), std::string::npos) << k.summary;
    }
  }
}

TEST(Transpose, SizeOneDimsKeepTheTileOnTheNonTrivialDims) {
  // [1, m, 1, n] -> [1, n, 1, m]: the size-1 dims are neither a nor b.
  for (auto [m, n] : {std::pair<int64_t, int64_t>{37, 41}, {1, 9}, {9, 1}}) {
    Fusion f;
    {
      FusionGuard g(&f);
      TensorView* x = defineTensor({1, -1, 1, -1}, {std::nullopt, true, std::nullopt, true}, DataType::Float);
      f.addOutput(unaryOp(OpKind::Neg, permute(x, {0, 3, 2, 1})));
    }
    const auto compiled = expectDeviceMatches(f, randomInputs(f, 3, {{1, m, 1, n}}));
    if (m > 1 && n > 1) {
      const kernel::Kernel& k = onlyKernel(compiled);
      EXPECT_TRUE(isTiled(k)) << k.summary;
      EXPECT_NE(k.summary.find("dims (a=1, b=3)"), std::string::npos) << k.summary;
    }
  }
}

TEST(Transpose, BatchedPermuteTimesTwoPlusBias) {
  // y = permute(x, [0, 2, 1]) * 2 + bias: bias is broadcast along the output's inner dim's rows.
  for (DataType dtype : {DataType::Float, DataType::BFloat16}) {
    for (auto [b, m, n] : {std::tuple<int64_t, int64_t, int64_t>{3, 40, 72}, {2, 17, 33}, {1, 64, 64}}) {
      Fusion f;
      {
        FusionGuard g(&f);
        TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, dtype);
        TensorView* bias = defineTensor({-1}, {true}, dtype);
        Val* y = add(mul(permute(x, {0, 2, 1}), f.constant(2.0)), broadcastInDim(bias, ints(f, {b, n, m}), {2}));
        f.addOutput(cast(y, dtype));
      }
      const auto compiled = expectDeviceMatches(f, randomInputs(f, 5, {{b, m, n}, {m}}));
      const kernel::Kernel& k = onlyKernel(compiled);
      EXPECT_TRUE(isTiled(k)) << k.summary;
      EXPECT_NE(k.summary.find("dims (a=1, b=2), 1 staged input"), std::string::npos) << k.summary;
    }
  }
}

TEST(Transpose, FourDimensionalPermutesWithBatchDims) {
  const std::vector<std::vector<int64_t>> orders{{0, 2, 3, 1}, {0, 3, 1, 2}, {3, 1, 2, 0}, {1, 3, 0, 2}, {0, 1, 3, 2}};
  for (const auto& order : orders) {
    Fusion f;
    {
      FusionGuard g(&f);
      TensorView* x = defineTensor({-1, -1, -1, -1}, {true, true, true, true}, DataType::BFloat16);
      f.addOutput(cast(unaryOp(OpKind::Exp, permute(x, order)), DataType::BFloat16));
    }
    const auto compiled = expectDeviceMatches(f, randomInputs(f, 9, {{2, 5, 33, 12}}));
    const kernel::Kernel& k = onlyKernel(compiled);
    EXPECT_TRUE(isTiled(k)) << fmt::format("{}: {}", order, k.summary);
    expectCompiles(compiled);
  }
}

TEST(Transpose, RopeLikePermuteThatKeepsTheInnerDimStaysPointwise) {
  // [B, S, H, D] -> [B, H, S, D]: D stays innermost, rows move as whole vectors.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1, -1}, {true, true, true, true}, DataType::BFloat16);
    f.addOutput(cast(mul(permute(x, {0, 2, 1, 3}), f.constant(0.5)), DataType::BFloat16));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 2, {{2, 6, 4, 16}}));
  EXPECT_EQ(onlyKernel(compiled).summary.rfind("pointwise", 0), 0u) << onlyKernel(compiled).summary;
}

TEST(Transpose, TransposedInputPlusContiguousInputAndBroadcastBias) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{48, 80}, {31, 67}}) {
    Fusion f;
    {
      FusionGuard g(&f);
      // x is stored column-major (stride_order: dim 0 innermost).
      TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Half, false, {0, 1});
      TensorView* z = defineTensor({-1, -1}, {true, true}, DataType::Float);
      TensorView* bias = defineTensor({-1}, {true}, DataType::Float);
      Val* y = add(add(cast(x, DataType::Float), z), broadcastInDim(bias, ints(f, {m, n}), {0}));
      f.addOutput(y);
    }
    std::vector<HostValue> inputs{columnMajor(DataType::Half, m, n, 1), testing::randomTensor(DataType::Float, {m, n}, 2),
                                  testing::randomTensor(DataType::Float, {m}, 3)};
    const auto compiled = expectDeviceMatches(f, inputs);
    const kernel::Kernel& k = onlyKernel(compiled);
    EXPECT_TRUE(isTiled(k)) << k.summary;
    EXPECT_NE(k.summary.find("dims (a=0, b=1), 1 staged input"), std::string::npos) << k.summary;
    expectCompiles(compiled);
  }
}

TEST(Transpose, TwoTransposedInputsOfDifferentDtypesAreBothStaged) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
    TensorView* w = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
    f.addOutput(cast(mul(permute(x, {0, 2, 1}), permute(w, {0, 2, 1})), DataType::BFloat16));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 4, {{2, 45, 70}, {2, 45, 70}}));
  const kernel::Kernel& k = onlyKernel(compiled);
  EXPECT_NE(k.summary.find("2 staged inputs"), std::string::npos) << k.summary;
}

TEST(Transpose, PermuteFollowedByReshapeToTheOutput) {
  // NCHW -> NHWC: permute [B, C, HW] to [B, HW, C], then split HW; and back, merging H and W.
  {
    Fusion f;
    {
      FusionGuard g(&f);
      TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
      f.addOutput(mul(reshape(permute(x, {0, 2, 1}), ints(f, {2, 6, 7, 24})), f.constant(3.0)));
    }
    const auto compiled = expectDeviceMatches(f, randomInputs(f, 6, {{2, 24, 42}}));
    const kernel::Kernel& k = onlyKernel(compiled);
    EXPECT_TRUE(isTiled(k)) << k.summary;
    EXPECT_NE(k.summary.find("dims (a=2, b=3)"), std::string::npos) << k.summary;
    expectCompiles(compiled);
  }
  {
    Fusion f;
    {
      FusionGuard g(&f);
      TensorView* x = defineTensor({-1, -1, -1, -1}, {true, true, true, true}, DataType::BFloat16);
      f.addOutput(cast(mul(reshape(permute(x, {0, 3, 1, 2}), ints(f, {2, 20, 35})), f.constant(3.0)),
                       DataType::BFloat16));
    }
    const auto compiled = expectDeviceMatches(f, randomInputs(f, 7, {{2, 5, 7, 20}}));
    const kernel::Kernel& k = onlyKernel(compiled);
    EXPECT_TRUE(isTiled(k)) << k.summary;
    expectCompiles(compiled);
  }
}

TEST(Transpose, OutputsOfBothOrientationsEachStoreAlongTheirOwnInnerDim) {
  // y = x.T * 2 and z = x + 1: z is transposed with respect to y; each has its own tiling.
  for (auto [m, n] : {std::pair<int64_t, int64_t>{40, 72}, {33, 33}}) {
    Fusion f;
    {
      FusionGuard g(&f);
      TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
      f.addOutput(mul(permute(x, {1, 0}), f.constant(2.0)));
      f.addOutput(add(x, f.constant(1.0)));
    }
    const auto compiled = expectDeviceMatches(f, randomInputs(f, 8, {{m, n}}));
    const kernel::Kernel& k = onlyKernel(compiled);
    EXPECT_TRUE(isTiled(k)) << k.summary;
    expectCompiles(compiled);
  }
}

TEST(Transpose, SeveralOutputsOfOneShapeShareTheStagedTile) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
    TensorView* w = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
    Val* xt = permute(x, {0, 2, 1});
    f.addOutput(cast(unaryOp(OpKind::Exp, xt), DataType::BFloat16));
    f.addOutput(cast(mul(xt, w), DataType::BFloat16));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 10, {{3, 19, 64}, {3, 64, 19}}));
  const kernel::Kernel& k = onlyKernel(compiled);
  EXPECT_NE(k.summary.find("1 staged input"), std::string::npos) << k.summary;
  expectCompiles(compiled);
}

TEST(Transpose, SlicedAndPaddedTransposesStayCorrect) {
  // Slices shift the staged offsets, a pad selects: the staged load is the same expression.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* s = slice(x, ints(f, {1, 2}), ints(f, {40, 60}), ints(f, {1, 1}), false);
    f.addOutput(pad(mul(permute(s, {1, 0}), f.constant(2.0))->asTensor(), ints(f, {3, 1}), f.constant(0.0)));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 11, {{41, 63}}));
  EXPECT_TRUE(isTiled(onlyKernel(compiled))) << onlyKernel(compiled).summary;
}

TEST(Transpose, StridedTransposedReadFallsBackToPointwiseAndSaysWhy) {
  // Every other column, transposed: x is read with stride 2 along a, so no tile dim has stride 1.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* s = slice(x, ints(f, {0, 0}), ints(f, {24, 40}), ints(f, {1, 2}), false);
    f.addOutput(mul(permute(s, {1, 0}), f.constant(2.0)));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 12, {{24, 40}}));
  const kernel::Kernel& k = onlyKernel(compiled);
  EXPECT_EQ(k.summary.rfind("transpose fell back to pointwise", 0), 0u) << k.summary;
  EXPECT_NE(k.summary.find("stride 1 along no other"), std::string::npos) << k.summary;
}

TEST(Transpose, NvrtcCompilesTheTiledKernelsWithoutWarnings) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: compilation not checked";
  for (DataType dtype : {DataType::Float, DataType::BFloat16, DataType::Half, DataType::Double}) {
    Fusion f;
    defineTranspose2d(f, dtype);
    const auto compiled = lowerPlan(planSegments(f, randomInputs(f, 1, {{1000, 999}})), DeviceInfo::h100Sxm());
    expectCompiles(compiled);
  }
}

TEST(Transpose, SassOfTheSimpleTransposeHasTheLoadsAndStoresTheTilesPredict) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  // float [1024, 1024]: 32x32 tiles, 256 threads, vectorize 4. Phase 1: each thread loads one chunk
  // of 4 points along b, 4 scalar loads (32 threads per warp read 32 consecutive floats of x each);
  // phase 2: each thread stores one 16-byte vector of the output. Nothing else touches global memory.
  Fusion f;
  defineTranspose2d(f, DataType::Float);
  const auto compiled = lowerPlan(planSegments(f, randomInputs(f, 1, {{1024, 1024}})), DeviceInfo::h100Sxm());
  const kernel::Kernel& k = onlyKernel(compiled);
  ASSERT_EQ(k.summary.rfind("transpose: tile 32x32, dims (a=0, b=1), 1 staged input; vectorize 4, block 256", 0), 0u)
      << k.summary;
  const auto cubin = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = "sm_90"});
  const auto sass = device::disassemble(cubin.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  const auto counts = device::countGlobalAccesses(*sass);
  const std::map<int, int> loads{{32, 4}}, stores{{128, 1}};
  EXPECT_EQ(counts.load_bits, loads) << *sass;
  EXPECT_EQ(counts.store_bits, stores) << *sass;
}

}  // namespace
}  // namespace braze
