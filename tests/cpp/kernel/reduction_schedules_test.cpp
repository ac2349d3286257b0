// The reduction schedules beyond one block per row, through the simulator against the reference:
// grid reductions (few long rows split among blocks, the last block combining the partials), outer
// reductions vectorized over the kept dims, and persistent rows kept in shared memory when they do
// not fit in registers. Each test also checks that the heuristics chose the schedule under test.
#include "fusions/kernel_corpus.h"
#include "fusions/kernel_util.h"
#include "fusions/layer_norm.h"
#include "ir/ops.h"
#include "codegen/source_emitter.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using testing::expectDeviceMatches;
using testing::ints;
using testing::onlyKernel;
using testing::randomInputs;

bool says(const kernel::Kernel& k, const std::string& what) { return k.summary.find(what) != std::string::npos; }

TEST(ReductionSchedules, FewLongRowsAreSplitAcrossBlocks) {
  for (OpKind kind : {OpKind::Sum, OpKind::Max, OpKind::Min}) {
    Fusion f;
    {
      FusionGuard g(&f);
      TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
      f.addOutput(reduce(kind, x, {1}));
    }
    const auto compiled = expectDeviceMatches(f, randomInputs(f, 11, {{3, 40001}}));
    const kernel::Kernel& k = onlyKernel(compiled);
    EXPECT_TRUE(says(k, "split over")) << k.summary;
    EXPECT_GT(k.grid[1], 1) << k.summary;
  }
}

TEST(ReductionSchedules, GridReductionOfSeveralResultsWithAPerRowEpilogue) {
  // Two reductions share the partial buffers' round; the epilogue combines them per row.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
    Val* xf = cast(x, DataType::Float);
    TensorView* s = reduce(OpKind::Sum, xf->asTensor(), {2});
    TensorView* m = reduce(OpKind::Max, xf->asTensor(), {2});
    f.addOutput(cast(add(mul(s, f.constant(0.5)), m), DataType::BFloat16));
    f.addOutput(s);
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 12, {{2, 1, 100000}}));
  const kernel::Kernel& k = onlyKernel(compiled);
  EXPECT_TRUE(says(k, "split over")) << k.summary;
  // 16 bytes of bf16: the float output s is written once per row, so it does not narrow the vectors.
  EXPECT_EQ(k.vectorize, 8) << k.summary;
}

TEST(ReductionSchedules, GridReductionOfIntegersAndBooleans) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* i = defineTensor({-1, -1}, {true, true}, DataType::Int32);
    f.addOutput(reduce(OpKind::Sum, i, {1}));
    f.addOutput(reduce(OpKind::Any, binaryOp(OpKind::Gt, i, f.constant(int64_t{1}))->asTensor(), {1}));
    f.addOutput(reduce(OpKind::All, binaryOp(OpKind::Gt, i, f.constant(int64_t{-3}))->asTensor(), {1}));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 13, {{2, 50000}}));
  EXPECT_TRUE(says(onlyKernel(compiled), "split over")) << onlyKernel(compiled).summary;
}

TEST(ReductionSchedules, OuterReductionOfManyRowsIsSplitAcrossBlocks) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f.addOutput(reduce(OpKind::Sum, x, {0}));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 14, {{20011, 8}}));
  const kernel::Kernel& k = onlyKernel(compiled);
  EXPECT_TRUE(says(k, "outer reduction")) << k.summary;
  EXPECT_TRUE(says(k, "split over")) << k.summary;
  EXPECT_EQ(k.vectorize, 4) << k.summary;
}

TEST(ReductionSchedules, OuterReductionsAreVectorizedAlongTheKeptDims) {
  for (int64_t kept : {64, 24, 7}) {
    Fusion f;
    {
      FusionGuard g(&f);
      TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
      Val* xf = cast(x, DataType::Float);
      auto [v, m] = varMean(xf->asTensor(), {0}, 1.0, false);
      f.addOutput(cast(reduce(OpKind::Sum, xf->asTensor(), {0}), DataType::BFloat16));
      f.addOutput(v);
      f.addOutput(m);
    }
    const auto compiled = expectDeviceMatches(f, randomInputs(f, 15, {{37, 2, kept}}));
    const kernel::Kernel& k = onlyKernel(compiled);
    EXPECT_TRUE(says(k, "outer reduction")) << k.summary;
    // Float outputs (var, mean) cap the vectors at 4 lanes (16 bytes of float); 7 kept elements allow none.
    EXPECT_EQ(k.vectorize, kept == 7 ? 1 : 4) << k.summary;
  }
}

TEST(ReductionSchedules, OuterNormalizationRunsAsAVectorizedReductionAndPointwiseKernel) {
  // x - mean over dim 0, broadcast back: no scheduler keeps an outer row, so the plan cuts after the
  // reduction; both kernels vectorize along the kept dim.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* m = reduce(OpKind::Sum, x, {0}, true);
    f.addOutput(sub(x, expand(m, ints(f, {29, 32}))));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 16, {{29, 32}}));
  ASSERT_EQ(compiled.plan.kernelCount(), 2) << compiled.plan.toString();
  for (const auto& k : compiled.kernels) EXPECT_EQ(k->vectorize, 4) << k->summary;
}

TEST(ReductionSchedules, RowsTooLargeForRegistersStayInSharedMemory) {
  Fusion f;
  testing::defineLayerNorm(f, {.batch = 2, .seq = 1, .hidden = 40960});
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 17, {{2, 1, 40960}, {40960}, {40960}}));
  const kernel::Kernel& k = onlyKernel(compiled);
  EXPECT_TRUE(says(k, "inner persistent (shared memory)")) << k.summary;
  EXPECT_GT(k.shared_bytes, 48 * 1024) << k.summary;
  EXPECT_LE(k.shared_bytes, DeviceInfo::h100Sxm().smem_per_block_optin);
}

TEST(ReductionSchedules, PersistentRowsInSharedMemoryWithATail) {
  // An odd row: the last chunk is partly out of range, and its slots are never read back.
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* m = reduce(OpKind::Max, x, {1}, true);
    Val* e = unaryOp(OpKind::Exp, sub(x, expand(m, ints(f, {2, 41011}))));
    TensorView* s = reduce(OpKind::Sum, e->asTensor(), {1}, true);
    f.addOutput(div(e, expand(s, ints(f, {2, 41011}))));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 18, {{2, 41011}}));
  EXPECT_TRUE(says(onlyKernel(compiled), "shared memory")) << onlyKernel(compiled).summary;
}

// Counts `what` in the kernel's own code (the helpers before it define expf, tanhf...).
size_t countInKernel(const kernel::Kernel& k, const std::string& what) {
  const std::string full = codegen::emitCuda(k), source = full.substr(full.find("__global__"));
  size_t n = 0;
  for (size_t at = source.find(what); at != std::string::npos; at = source.find(what, at + 1)) ++n;
  return n;
}

TEST(ReductionSchedules, PersistentKernelsComputeCostlyValuesOnce) {
  // Three passes over a row kept in registers: max, then sum(exp(x - max)), then sum(tanh(x) * exp(..)).
  // exp and tanh are computed by the pass that first needs them and kept for the later ones; x itself
  // is still read by the last pass (log-softmax and the product with x).
  Fusion f;
  {
    FusionGuard g(&f);
    const std::vector<int64_t> shape = {6, 333};
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    Val* xf = cast(x, DataType::Float);
    TensorView* m = reduce(OpKind::Max, xf->asTensor(), {1}, true);
    Val* shifted = sub(xf, expand(m, ints(f, shape)));
    Val* e = unaryOp(OpKind::Exp, shifted);
    TensorView* s = reduce(OpKind::Sum, e->asTensor(), {1}, true);
    Val* t = unaryOp(OpKind::Tanh, xf);
    TensorView* weighted = reduce(OpKind::Sum, mul(t, e)->asTensor(), {1}, true);
    f.addOutput(cast(sub(shifted, unaryOp(OpKind::Log, expand(s, ints(f, shape)))), DataType::BFloat16));
    f.addOutput(cast(mul(div(e, expand(s, ints(f, shape))), xf), DataType::BFloat16));
    f.addOutput(div(t, expand(weighted, ints(f, shape))));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 19, {{6, 333}}));
  const kernel::Kernel& k = onlyKernel(compiled);
  EXPECT_TRUE(says(k, "inner persistent")) << k.summary;
  EXPECT_EQ(countInKernel(k, "expf("), 1u) << codegen::emitCuda(k);
  EXPECT_EQ(countInKernel(k, "tanhf("), 1u) << codegen::emitCuda(k);
}

TEST(ReductionSchedules, PerRowValuesAreComputedOnceBeforeThePass) {
  // layer_norm's 1 / sqrt(var + eps) and softmax's reciprocal of the sum: once per row, before the
  // last pass's chunk loop, not in every chunk (compiled for sm_90, the bf16 hidden-1600 layer_norm
  // kernel went from 70 to 55 registers with it; nvrtc_corpus_test checks the registers).
  Fusion layer_norm;
  testing::defineLayerNorm(layer_norm, {.batch = 4, .seq = 3, .hidden = 1600});
  const auto ln = expectDeviceMatches(layer_norm, randomInputs(layer_norm, 20, {{4, 3, 1600}, {1600}, {1600}}));
  const std::string ln_source = codegen::emitCuda(onlyKernel(ln));
  EXPECT_EQ(countInKernel(onlyKernel(ln), "braze_sqrt("), 1u) << ln_source;
  EXPECT_LT(ln_source.find("braze_sqrt("), ln_source.rfind("for (idx_t c0")) << ln_source;

  const testing::KernelCase softmax = testing::softmaxCase(9, 1000, DataType::BFloat16, false, 5);
  const auto sm = expectDeviceMatches(*softmax.fusion, softmax.inputs);
  const std::string sm_source = codegen::emitCuda(onlyKernel(sm));
  EXPECT_EQ(countInKernel(onlyKernel(sm), "braze_div((1.0f)"), 1u) << sm_source;
  EXPECT_LT(sm_source.find("braze_div((1.0f)"), sm_source.rfind("for (idx_t c0")) << sm_source;
}

}  // namespace
}  // namespace braze
