// Dynamic shapes without recompile storms: kernels take their row count (inner reductions) or chunk
// count (one-group pointwise) as a launch argument, and contiguous leading dims index as one, so
// shapes that differ only in batch and sequence length share one CUDA source, which the kernel caches
// compile once. The reuse is checked the way the GPU would do it: the kernel lowered for one shape,
// launched with another shape's grid and extents on that shape's tensors, against the reference.
#include "fusions/kernel_util.h"
#include "fusions/layer_norm.h"
#include "ir/ops.h"
#include "codegen/source_emitter.h"
#include "kernel/simulator.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>

namespace braze {
namespace {

using testing::expectClose;
using testing::onlyKernel;
using testing::randomInputs;

// SwiGLU's silu(gate) * up in bf16 over [rows, hidden]: a one-group (1D) pointwise kernel.
std::shared_ptr<Fusion> dynamicSwiglu() {
  auto f = std::make_shared<Fusion>();
  FusionGuard g(f.get());
  TensorView* gate = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
  TensorView* up = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
  Val* silu = unaryOp(OpKind::Silu, cast(gate, DataType::Float));
  f->addOutput(cast(mul(silu, cast(up, DataType::Float)), DataType::BFloat16));
  return f;
}

// A tensor to plan for, never read: planning needs sizes, strides and the address's alignment only, so no
// memory is allocated for it (some of these shapes are gigabytes).
HostTensor shapeOnly(std::vector<int64_t> sizes) {
  alignas(256) static unsigned char nothing[16];
  auto strides = StridedLayout::rowMajor(sizes).strides;
  return HostTensor::wrap(nothing, DataType::BFloat16, std::move(sizes), std::move(strides));
}

LoweredPlan compileFor(const Fusion& f, const std::vector<HostValue>& inputs) {
  return planAndLower(f, inputs, {{}, DeviceInfo::h100Sxm()});
}

// Runs `kernel` (lowered for another shape, same source as `target`'s) with `target`'s grid and extents on
// `inputs`, the way a cached CUfunction is launched; returns its one output.
HostTensor launchAs(const kernel::Kernel& kernel, const LoweredPlan& planned, const kernel::Kernel& target,
                    std::vector<HostValue> inputs, const std::vector<int64_t>& out_sizes) {
  kernel::Kernel launched = kernel;
  launched.grid = target.grid;
  launched.arguments = target.arguments;
  // The layouts only bound the simulator's checks (the GPU sees the pointers alone): the target's.
  for (size_t i = 0; i < launched.tensors.size(); ++i) launched.tensors[i].layout = target.tensors[i].layout;
  HostTensor out = HostTensor::empty(DataType::BFloat16, out_sizes);
  std::vector<HostTensor*> tensors;
  const auto& fusion_inputs = planned.plan.fusion->inputs();
  for (const kernel::TensorParam& p : launched.tensors) {
    if (p.output) {
      tensors.push_back(&out);
      continue;
    }
    const auto at = std::find(fusion_inputs.begin(), fusion_inputs.end(), p.storage);
    EXPECT_NE(at, fusion_inputs.end()) << p.name << " is not a fusion input";
    tensors.push_back(&std::get<HostTensor>(inputs[at - fusion_inputs.begin()]));
  }
  kernel::simulate(launched, tensors);
  return out;
}

TEST(ShapeGenericKernels, LayerNormAt64RowCountsHasTwoSources) {
  const auto f = testing::sizelessLayerNorm();
  std::set<std::string> sources;
  std::set<std::string> sources_from_two_rows;
  for (int64_t i = 0; i < 64; ++i) {
    // Batch 1..4, sequence lengths from 1 to several thousand, odd ones included.
    const int64_t batch = 1 + i % 4;
    const int64_t seq = 1 + (i * 977) % 4096;
    const std::vector<HostValue> inputs{shapeOnly({batch, seq, 1600}), shapeOnly({1600}), shapeOnly({1600})};
    const LoweredPlan compiled = compileFor(*f, inputs);
    const kernel::Kernel& k = onlyKernel(compiled);
    ASSERT_EQ(k.arguments.size(), 1u) << k.summary;
    EXPECT_EQ(k.arguments[0].name, "rows");
    EXPECT_EQ(toInt(k.arguments[0].value), batch * seq);
    const std::string source = codegen::emitCuda(k);
    sources.insert(source);
    if (batch * seq >= 2) sources_from_two_rows.insert(source);
  }
  // One row gets a block of one row; every count from two up shares the other.
  EXPECT_EQ(sources_from_two_rows.size(), 1u);
  EXPECT_LE(sources.size(), 2u);
}

TEST(ShapeGenericKernels, ALayerNormKernelLaunchedForOtherRowCountsMatchesTheReference) {
  const auto f = testing::sizelessLayerNorm();
  // 5 vectors of 8 per row (odd chunk counts), small enough for the simulator: 2 threads per row, and from
  // 64 rows up, 64 rows per block (fewer rows get smaller blocks, and kernels of their own).
  const int64_t hidden = 40;
  auto inputsFor = [&](int64_t batch, int64_t seq, uint64_t seed) {
    return randomInputs(*f, seed, {{batch, seq, hidden}, {hidden}, {hidden}});
  };
  const LoweredPlan planned = compileFor(*f, inputsFor(4, 16, 1));
  const kernel::Kernel& k = onlyKernel(planned);
  for (const auto& [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{3, 33}, {1, 130}, {5, 27}, {2, 64}}) {
    const auto inputs = inputsFor(batch, seq, 10 + batch * seq);
    const LoweredPlan other = compileFor(*f, inputs);
    const kernel::Kernel& target = onlyKernel(other);
    // (Not ASSERT_EQ: a failure would print two sources of 20 KB.)
    ASSERT_TRUE(codegen::emitCuda(k) == codegen::emitCuda(target))
        << batch << "x" << seq << " needs another kernel: " << target.summary;
    const HostTensor out = launchAs(k, planned, target, inputs, {batch, seq, hidden});
    expectClose({out}, evaluate(*f, inputs), fmt::format("{}x{} with the 4x16 kernel", batch, seq));
  }
}

TEST(ShapeGenericKernels, PointwiseKernelsShareASourceAcrossRowCounts) {
  const auto f = dynamicSwiglu();
  std::map<std::string, std::set<std::string>> sources_by_heuristics;
  std::set<std::string> sources;
  for (int64_t rows : {1000, 1001, 4096, 5000, 12345, 65536, 100000}) {
    const std::vector<HostValue> inputs{shapeOnly({rows, 4096}), shapeOnly({rows, 4096})};
    const LoweredPlan compiled = compileFor(*f, inputs);
    const kernel::Kernel& k = onlyKernel(compiled);
    ASSERT_EQ(k.arguments.size(), 1u) << k.summary;
    EXPECT_EQ(toInt(k.arguments[0].value), rows * 4096 / k.vectorize);
    sources.insert(codegen::emitCuda(k));
    sources_by_heuristics[k.summary].insert(codegen::emitCuda(k));
  }
  // A source per choice of the heuristics (the unroll grows with the work), never one per size.
  for (const auto& [summary, distinct] : sources_by_heuristics) EXPECT_EQ(distinct.size(), 1u) << summary;
  EXPECT_LE(sources.size(), 3u);
  // And a kernel planned for 40 rows of 24, launched for 51 rows (a partial last block), computes the
  // reference. (Both are small enough for a block of the same size.)
  const auto small = randomInputs(*f, 3, {{40, 24}, {40, 24}});
  const auto more = randomInputs(*f, 4, {{51, 24}, {51, 24}});
  const LoweredPlan planned = compileFor(*f, small);
  const LoweredPlan other = compileFor(*f, more);
  ASSERT_TRUE(codegen::emitCuda(onlyKernel(planned)) == codegen::emitCuda(onlyKernel(other)))
      << onlyKernel(other).summary;
  const HostTensor out = launchAs(onlyKernel(planned), planned, onlyKernel(other), more, {51, 24});
  expectClose({out}, evaluate(*f, more), "51x24 with the 40x24 kernel");
}

// A bias over rows (2D tiles): the row count is an argument too, so row counts that keep the rows per
// thread share a source, and a kernel planned for one count runs another's.
TEST(ShapeGenericKernels, BiasTilesShareASourceAcrossRowCounts) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
    TensorView* bias = defineTensor({-1}, {true}, DataType::BFloat16);
    Val* sum = add(cast(x, DataType::Float), cast(broadcast(bias, {true, true, false}), DataType::Float));
    f->addOutput(cast(unaryOp(OpKind::Silu, sum), DataType::BFloat16));
  }
  std::map<std::string, std::set<std::string>> sources_by_heuristics;
  for (const auto& [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{1, 500}, {2, 999}, {4, 1024}, {8, 4096}}) {
    const LoweredPlan compiled = compileFor(*f, {shapeOnly({batch, seq, 4096}), shapeOnly({4096})});
    const kernel::Kernel& k = onlyKernel(compiled);
    ASSERT_NE(k.summary.find("pointwise 2D"), std::string::npos) << k.summary;
    ASSERT_EQ(k.arguments.size(), 1u) << k.summary;
    EXPECT_EQ(toInt(k.arguments[0].value), batch * seq);
    sources_by_heuristics[k.summary].insert(codegen::emitCuda(k));
  }
  for (const auto& [summary, distinct] : sources_by_heuristics) EXPECT_EQ(distinct.size(), 1u) << summary;
  EXPECT_LE(sources_by_heuristics.size(), 3u);  // one per rows-per-thread choice

  const auto small = randomInputs(*f, 8, {{2, 5, 40}, {40}});
  const auto more = randomInputs(*f, 9, {{3, 7, 40}, {40}});
  const LoweredPlan planned = compileFor(*f, small);
  const LoweredPlan other = compileFor(*f, more);
  ASSERT_TRUE(codegen::emitCuda(onlyKernel(planned)) == codegen::emitCuda(onlyKernel(other))) << onlyKernel(other).summary;
  const HostTensor out = launchAs(onlyKernel(planned), planned, onlyKernel(other), more, {3, 7, 40});
  expectClose({out}, evaluate(*f, more), "3x7x40 with the 2x5x40 kernel");
}

// A scalar input is a kernel argument: a kernel compiled for one value, launched with another's
// arguments, computes the other's result (floats, doubles, integers and bools alike).
TEST(ShapeGenericKernels, ScalarInputsAreArgumentsNotLiterals) {
  auto f = std::make_shared<Fusion>();
  {
    FusionGuard g(f.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    Val* scale = defineScalar(DataType::Double);
    Val* shift = defineScalar(DataType::Int64);
    Val* keep = defineScalar(DataType::Bool);
    Val* y = add(mul(cast(x, DataType::Float), scale), shift);
    f->addOutput(cast(ternaryOp(OpKind::Where, keep, y, unaryOp(OpKind::Neg, y)), DataType::BFloat16));
  }
  auto inputsFor = [&](double scale, int64_t shift, bool keep, uint64_t seed) {
    std::vector<HostValue> inputs = randomInputs(*f, seed, {{9, 24}});
    inputs.resize(1);  // x; then the scalars
    inputs.push_back(ScalarValue{scale});
    inputs.push_back(ScalarValue{shift});
    inputs.push_back(ScalarValue{keep});
    return inputs;
  };
  const auto first = inputsFor(0.3125, 3, true, 1);
  const LoweredPlan planned = compileFor(*f, first);
  const kernel::Kernel& k = onlyKernel(planned);
  const std::string source = codegen::emitCuda(k);
  EXPECT_EQ(source.find("0.3125"), std::string::npos) << "the scale is a literal";
  for (const auto& inputs : {inputsFor(-1.25, -7, false, 2), inputsFor(1e-3, 100, true, 3)}) {
    const LoweredPlan other = compileFor(*f, inputs);
    ASSERT_TRUE(codegen::emitCuda(onlyKernel(other)) == source) << onlyKernel(other).summary;
    const HostTensor out = launchAs(k, planned, onlyKernel(other), inputs, {9, 24});
    expectClose({out}, evaluate(*f, inputs), "new scalar values with the first values' kernel");
  }
}

// A NaN scalar input read in several places binds one argument (NaN never equals itself).
TEST(ShapeGenericKernels, ANaNScalarReadTwiceIsOneArgument) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1}, {true}, DataType::Float);
    TensorView* y = defineTensor({-1}, {true}, DataType::Float);
    Val* s = defineScalar(DataType::Double);
    f.addOutput(add(mul(x, s), mul(y, s)));
    f.addOutput(reduce(OpKind::Sum, mul(x, s)->asTensor(), {0}));
  }
  std::vector<HostValue> inputs = randomInputs(f, 5, {{40}, {40}});
  inputs.resize(2);
  inputs.push_back(ScalarValue{std::numeric_limits<double>::quiet_NaN()});
  testing::expectDeviceMatches(f, inputs);
}

// What may not be shared: sizes the heuristics or the index arithmetic depend on get their own source.
TEST(ShapeGenericKernels, AnotherHiddenSizeOrAMisalignedInputGetsItsOwnSource) {
  const auto f = testing::sizelessLayerNorm();
  auto sourceFor = [&](std::vector<HostValue> inputs) {
    const LoweredPlan compiled = compileFor(*f, inputs);
    return codegen::emitCuda(onlyKernel(compiled));
  };
  const std::string base = sourceFor({shapeOnly({4, 8, 1600}), shapeOnly({1600}), shapeOnly({1600})});
  EXPECT_TRUE(base != sourceFor({shapeOnly({4, 8, 2048}), shapeOnly({2048}), shapeOnly({2048})}));
  // x viewed one element into a buffer: 2-byte aligned, no vectors.
  const HostTensor buffer = shapeOnly({4 * 8 * 1600 + 1});
  EXPECT_TRUE(base !=
              sourceFor({buffer.view({4, 8, 1600}, {8 * 1600, 1600, 1}, 1), shapeOnly({1600}), shapeOnly({1600})}));
}

}  // namespace
}  // namespace braze
