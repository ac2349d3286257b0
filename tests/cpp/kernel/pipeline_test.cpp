// The whole pipeline (plan, heuristics, kernel IR, CPU simulator) against the reference evaluator,
// on the acceptance fusions (seed layer_norm, litGPT RoPE, softmax) and on the layouts that break
// kernels: odd and size-1 dims, broadcast and expanded inputs, transposed and misaligned inputs.
#include "fusions/kernel_util.h"
#include "fusions/layer_norm.h"
#include "fusions/rope.h"
#include "ir/ops.h"
#include "kernel/cuda_emitter.h"
#include "runtime/nvrtc.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using testing::expectSimulatorMatches;
using testing::ints;
using testing::onlyKernel;
using testing::randomInputs;

TEST(Pipeline, SeedLayerNormIsVectorizedBy8AndMatchesTheReference) {
  Fusion f;
  testing::defineLayerNorm(f, {.batch = 2, .seq = 3, .hidden = 1600});
  const auto inputs = randomInputs(f, 3, {{2, 3, 1600}, {1600}, {1600}});
  const auto compiled = expectSimulatorMatches(f, inputs);
  const kernel::Kernel& k = onlyKernel(compiled);
  EXPECT_EQ(k.vectorize, 8) << k.summary;
  EXPECT_NE(k.summary.find("inner persistent"), std::string::npos) << k.summary;
}

TEST(Pipeline, LayerNormWithOddHiddenSizeIsNotVectorized) {
  Fusion f;
  testing::defineLayerNorm(f, {.batch = 3, .seq = 1, .hidden = 37});
  const auto inputs = randomInputs(f, 4, {{3, 1, 37}, {37}, {37}});
  EXPECT_EQ(onlyKernel(expectSimulatorMatches(f, inputs)).vectorize, 1);
}

TEST(Pipeline, LayerNormWithAMisalignedInputFallsBackToNarrowerVectors) {
  Fusion f;
  testing::defineLayerNorm(f, {.batch = 2, .seq = 2, .hidden = 64});
  auto inputs = randomInputs(f, 5, {{2, 2, 64}, {64}, {64}});
  // x starts one bf16 element (2 bytes) into a buffer: 16-byte vectors would be misaligned.
  const HostTensor big = testing::randomTensor(DataType::BFloat16, {2 * 2 * 64 + 1}, 9);
  inputs[0] = big.view({2, 2, 64}, {128, 64, 1}, 1);
  EXPECT_EQ(onlyKernel(expectSimulatorMatches(f, inputs)).vectorize, 1);
}

TEST(Pipeline, BookendedWeightViewsAreReadFromTheirRootWithItsAlignment) {
  // bookend=both turns the weight's broadcast into an alias segment; the kernel reads the view from
  // the weight's own buffer, and a weight 2 bytes off 16-byte alignment narrows the vectors.
  Fusion f;
  testing::defineLayerNorm(f, {.batch = 2, .seq = 3, .hidden = 64});
  auto inputs = randomInputs(f, 6, {{2, 3, 64}, {64}, {64}});
  const kernel::ExecuteOptions both{{.bookend = BookendPolicy::Both}, DeviceInfo::h100Sxm()};
  auto compiled = expectSimulatorMatches(f, inputs, both);
  EXPECT_EQ(compiled.plan.aliasCount(), 2) << compiled.plan.toString();
  EXPECT_EQ(onlyKernel(compiled).vectorize, 8);
  const HostTensor big = testing::randomTensor(DataType::BFloat16, {65}, 7);
  inputs[1] = big.view({64}, {1}, 1);
  compiled = expectSimulatorMatches(f, inputs, both);
  EXPECT_EQ(onlyKernel(compiled).vectorize, 1);
}

TEST(Pipeline, LitGptRopeMatchesTheReference) {
  for (int64_t groups : {4, 2}) {
    Fusion f;
    const testing::RopeConfig c{.batch = 2, .seq = 5, .heads = 4, .groups = groups, .head = 16, .rope_n_elem = 8};
    testing::defineLitGptQkvSplitRope(f, c);
    const auto inputs = randomInputs(f, 11);
    expectSimulatorMatches(f, inputs);
  }
}

TEST(Pipeline, SoftmaxMatchesTheReference) {
  for (auto [rows, cols, dtype] : {std::tuple{7, 33, DataType::Float}, std::tuple{5, 512, DataType::BFloat16}}) {
    Fusion f;
    {
      FusionGuard g(&f);
      TensorView* x = defineTensor({-1, -1}, {true, true}, dtype);
      Val* xf = cast(x, DataType::Float);
      TensorView* m = reduce(OpKind::Max, xf->asTensor(), {1}, /*keepdim=*/true);
      Val* e = unaryOp(OpKind::Exp, sub(xf, expand(m, ints(f, {rows, cols}))));
      TensorView* s = reduce(OpKind::Sum, e->asTensor(), {1}, /*keepdim=*/true);
      f.addOutput(cast(div(e, expand(s, ints(f, {rows, cols}))), dtype));
    }
    const auto inputs = randomInputs(f, 2, {{rows, cols}});
    const auto compiled = expectSimulatorMatches(f, inputs);
    EXPECT_EQ(compiled.plan.kernelCount(), 1) << compiled.plan.toString();
  }
}

TEST(Pipeline, ReductionsInnerAndOuterMatchTheReference) {
  for (int64_t dim : {0, 1, 2}) {
    for (OpKind kind : {OpKind::Sum, OpKind::Max, OpKind::Min, OpKind::Prod}) {
      Fusion f;
      {
        FusionGuard g(&f);
        TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
        f.addOutput(reduce(kind, x, {dim}));
      }
      const auto inputs = randomInputs(f, 7, {{3, 17, 5}});
      expectSimulatorMatches(f, inputs);
    }
  }
}

TEST(Pipeline, VarMeanAndIntegerSumsMatchTheReference) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* i = defineTensor({-1, -1}, {true, true}, DataType::Int32);
    auto [v, m] = varMean(x, {1}, 1.0, false);
    f.addOutput(v);
    f.addOutput(m);
    f.addOutput(reduce(OpKind::Sum, i, {0}));
  }
  const auto inputs = randomInputs(f, 8, {{6, 31}, {9, 4}});
  expectSimulatorMatches(f, inputs);
}

TEST(Pipeline, PointwiseOverBroadcastExpandedTransposedAndSlicedInputs) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* a = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
    TensorView* b = defineTensor({-1}, {true}, DataType::Float);
    TensorView* t = defineTensor({-1, -1}, {true, true}, DataType::Half);
    Val* bb = broadcastInDim(b, ints(f, {3, 5, 8}), {2});
    Val* tt = broadcastInDim(permute(t, {1, 0}), ints(f, {3, 5, 8}), {1, 2});
    Val* s = slice(a, ints(f, {0, 1, 0}), ints(f, {3, 6, 8}), ints(f, {1, 1, 1}), false);
    Val* out = add(mul(cast(s, DataType::Float), bb), cast(tt, DataType::Float));
    f.addOutput(cast(out, DataType::BFloat16));
    f.addOutput(pad(a, ints(f, {1, 2}), f.constant(0.5)));
    f.addOutput(cat({a, a}, 2));
  }
  const auto inputs = randomInputs(f, 21, {{3, 6, 8}, {8}, {8, 5}});
  expectSimulatorMatches(f, inputs);
}

TEST(Pipeline, SizeOneAndPrimeSizesAndReshapes) {
  for (int64_t n : {1, 7, 13}) {
    Fusion f;
    {
      FusionGuard g(&f);
      TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
      Val* r = reshape(x, ints(f, {n * 3}));
      f.addOutput(unaryOp(OpKind::Exp, r));
      f.addOutput(reduce(OpKind::Sum, x, {1}));
    }
    const auto inputs = randomInputs(f, 30 + n, {{n, 3}});
    expectSimulatorMatches(f, inputs);
  }
}

TEST(Pipeline, ExpandedWeightKeepsTheVectorWidth) {
  // The case that dropped nvFuser's vectorization to 1: a weight given as an expanded broadcast.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
    TensorView* w = defineTensor({-1, -1, -1}, {std::nullopt, std::nullopt, true}, DataType::BFloat16);
    f.addOutput(cast(mul(x, w), DataType::BFloat16));
  }
  const HostTensor w = testing::randomTensor(DataType::BFloat16, {1600}, 4);
  std::vector<HostValue> inputs{testing::randomTensor(DataType::BFloat16, {4, 8, 1600}, 3),
                                w.view({4, 8, 1600}, {0, 0, 1}, 0)};
  EXPECT_EQ(onlyKernel(expectSimulatorMatches(f, inputs)).vectorize, 8);
}

TEST(Pipeline, OutOfBoundsAccessesAreReportedWithTheKernelName) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1}, {true}, DataType::Float);
    TensorView* i = defineTensor({-1}, {true}, DataType::Int64);
    f.addOutput(indexSelect(x, i, 0));
  }
  const std::vector<HostValue> inputs{testing::tensorOf(DataType::Float, {3}, {1, 2, 3}),
                                      testing::tensorOf(DataType::Int64, {2}, {0, 1})};
  kernel::CompiledPlan compiled = kernel::compilePlan(explain(f, inputs), DeviceInfo::h100Sxm());
  testing::expectClose(kernel::runOnSimulator(compiled, inputs), evaluate(f, inputs));
  const std::vector<HostValue> bad{inputs[0], testing::tensorOf(DataType::Int64, {2}, {0, 7})};
  try {
    kernel::runOnSimulator(compiled, bad);
    FAIL() << "expected an out-of-bounds report";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("braze_s"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braze

namespace braze {
namespace {

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
    const auto compiled = kernel::compilePlan(explain(f, inputs), DeviceInfo::h100Sxm());
    const kernel::Kernel& k = onlyKernel(compiled);
    const bool huge = rows * 65536 >= (int64_t{1} << 31);
    EXPECT_EQ(k.index64, huge);
    const std::string source = kernel::emitCuda(k);
    EXPECT_NE(source.find(huge ? "typedef long long idx_t;" : "typedef int idx_t;"), std::string::npos);
    if (!runtime::nvrtcAvailable()) continue;
    EXPECT_TRUE(runtime::compileCuda(source, k.name, {.arch = "sm_90"}).log.empty());
  }
}

}  // namespace
}  // namespace braze
