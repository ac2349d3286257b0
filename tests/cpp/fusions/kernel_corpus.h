// The fusions every kernel target runs, with their inputs and what their plans must look like: the
// acceptance fusions (seed layer_norm, litGPT RoPE, softmax) and the layouts that break kernels (odd
// and size-1 dims, broadcast and expanded inputs, transposed, sliced and misaligned inputs, integer
// gathers and pads, inner and outer reductions over each dim). One list, several targets:
// pipeline_test runs the small corpus on the CPU simulator, nvrtc_corpus_test compiles the large one,
// and gpu_pipeline_test runs both on a GPU where there is one.
#pragma once

#include "fusions/backward_cases.h"
#include "fusions/kernel_case.h"
#include "fusions/kernel_util.h"
#include "fusions/layer_norm.h"
#include "fusions/loss_cases.h"
#include "fusions/rope.h"
#include "fusions/rope_backward_cases.h"
#include "fusions/row_output_cases.h"
#include "fusions/scan_cases.h"
#include "ir/ops.h"
#include "codegen/source_emitter.h"

#include <cmath>
#include <functional>
#include <numeric>
#include <limits>
#include <memory>
#include <string>

namespace braze::testing {

inline std::function<void(const LoweredPlan&)> expectVectorize(int64_t factor) {
  return [factor](const LoweredPlan& compiled) {
    const kernel::Kernel& k = onlyKernel(compiled);
    EXPECT_EQ(k.vectorize, factor) << k.summary;
  };
}

inline std::function<void(const LoweredPlan&)> expectOneKernel() {
  return [](const LoweredPlan& compiled) {
    EXPECT_EQ(compiled.plan.kernelCount(), 1) << compiled.plan.toString();
  };
}

// bf16 layer_norm of [batch, seq, hidden]; `x_offset` elements into a larger buffer when non-zero
// (2 bytes per element: an offset of 1 defeats 16-byte vectors).
inline KernelCase layerNormCase(LayerNormShape shape, uint64_t seed, int64_t x_offset = 0) {
  KernelCase c;
  defineLayerNorm(*c.fusion, shape);
  c.inputs = randomInputs(*c.fusion, seed, {{shape.batch, shape.seq, shape.hidden}, {shape.hidden}, {shape.hidden}});
  if (x_offset != 0) {
    const int64_t n = shape.batch * shape.seq * shape.hidden;
    const HostTensor big = randomTensor(DataType::BFloat16, {n + x_offset}, seed + 10);
    c.inputs[0] = big.view({shape.batch, shape.seq, shape.hidden}, {shape.seq * shape.hidden, shape.hidden, 1}, x_offset);
  }
  return c;
}

inline KernelCase ropeCase(const RopeConfig& config, uint64_t seed) {
  KernelCase c;
  defineLitGptQkvSplitRope(*c.fusion, config);
  c.inputs = randomInputs(*c.fusion, seed);
  return c;
}

// Softmax over the rows of a [rows, cols] tensor, computed in float (double for double inputs) and
// stored as `dtype`; with `column_sums`, also the sums over dim 0 (an outer reduction beside the inner
// one). Double math for double: a float softmax stored as double would be held to double's tolerance,
// and CUDA's expf is not correctly rounded (1 ulp off the reference on an H100).
inline KernelCase softmaxCase(int64_t rows, int64_t cols, DataType dtype, bool column_sums, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, dtype);
    Val* xf = cast(x, dtype == DataType::Double ? DataType::Double : DataType::Float);
    TensorView* m = reduce(OpKind::Max, xf->asTensor(), {1}, /*keepdim=*/true);
    Val* e = unaryOp(OpKind::Exp, sub(xf, expand(m, ints(f, {rows, cols}))));
    TensorView* s = reduce(OpKind::Sum, e->asTensor(), {1}, /*keepdim=*/true);
    f.addOutput(cast(div(e, expand(s, ints(f, {rows, cols}))), dtype));
    if (column_sums) f.addOutput(reduce(OpKind::Sum, xf->asTensor(), {0}));
  }
  c.inputs = randomInputs(f, seed, {{rows, cols}});
  return c;
}

// Softmax over [batch, seq, cols] with its maximum over the batch ([seq, cols]): a reduction over some of the
// rows' dims beside the rows' own, each position's rows walked together by one kernel, which writes both.
inline KernelCase batchedSoftmaxMaxCase(int64_t batch, int64_t seq, int64_t cols, DataType dtype, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, dtype);
    Val* xf = cast(x, DataType::Float);
    TensorView* m = reduce(OpKind::Max, xf->asTensor(), {2}, /*keepdim=*/true);
    Val* e = unaryOp(OpKind::Exp, sub(xf, m));
    TensorView* s = reduce(OpKind::Sum, e->asTensor(), {2}, /*keepdim=*/true);
    Val* softmax = div(e, s);
    f.addOutput(cast(softmax, dtype));
    f.addOutput(cast(reduce(OpKind::Max, softmax->asTensor(), {0}), dtype));
  }
  c.inputs = randomInputs(f, seed, {{batch, seq, cols}});
  c.expect = expectKernels(1, SchedulerKind::InnerOuterPersistent);
  return c;
}

inline KernelCase reductionCase(OpKind kind, int64_t dim) {
  KernelCase c;
  {
    FusionGuard g(c.fusion.get());
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
    c.fusion->addOutput(reduce(kind, x, {dim}));
  }
  c.inputs = randomInputs(*c.fusion, 7, {{3, 17, 5}});
  return c;
}

inline KernelCase varMeanAndIntSumCase() {
  KernelCase c;
  {
    FusionGuard g(c.fusion.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* i = defineTensor({-1, -1}, {true, true}, DataType::Int32);
    auto [v, m] = varMean(x, {1}, 1.0, false);
    c.fusion->addOutput(v);
    c.fusion->addOutput(m);
    c.fusion->addOutput(reduce(OpKind::Sum, i, {0}));
  }
  c.inputs = randomInputs(*c.fusion, 8, {{6, 31}, {9, 4}});
  return c;
}

// A weight broadcast along two dims, a transposed half input, a slice, a pad and a cat.
inline KernelCase viewsPointwiseCase() {
  KernelCase c;
  Fusion& f = *c.fusion;
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
  c.inputs = randomInputs(f, 21, {{3, 6, 8}, {8}, {8, 5}});
  return c;
}

inline KernelCase reshapeAndRowSumCase(int64_t n) {
  KernelCase c;
  {
    FusionGuard g(c.fusion.get());
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    c.fusion->addOutput(unaryOp(OpKind::Exp, reshape(x, ints(*c.fusion, {n * 3}))));
    c.fusion->addOutput(reduce(OpKind::Sum, x, {1}));
  }
  c.inputs = randomInputs(*c.fusion, 30 + n, {{n, 3}});
  return c;
}

// The case that dropped nvFuser's vectorization to 1: a weight given as an expanded broadcast.
inline KernelCase expandedWeightCase() {
  KernelCase c;
  {
    FusionGuard g(c.fusion.get());
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
    TensorView* w = defineTensor({-1, -1, -1}, {std::nullopt, std::nullopt, true}, DataType::BFloat16);
    c.fusion->addOutput(cast(mul(x, w), DataType::BFloat16));
  }
  const HostTensor w = randomTensor(DataType::BFloat16, {1600}, 4);
  c.inputs = {randomTensor(DataType::BFloat16, {4, 8, 1600}, 3), w.view({4, 8, 1600}, {0, 0, 1}, 0)};
  c.expect = expectVectorize(8);
  return c;
}

// x[index] along dim 0, the index tensor given as data.
inline KernelCase indexSelectCase() {
  KernelCase c;
  {
    FusionGuard g(c.fusion.get());
    TensorView* x = defineTensor({-1}, {true}, DataType::Float);
    TensorView* i = defineTensor({-1}, {true}, DataType::Int64);
    c.fusion->addOutput(indexSelect(x, i, 0));
  }
  c.inputs = {tensorOf(DataType::Float, {3}, {1, 2, 3}), tensorOf(DataType::Int64, {2}, {0, 1})};
  return c;
}

inline KernelCase intGatherPadSumCase() {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Int32);
    TensorView* i = defineTensor({-1}, {true}, DataType::Int64);
    f.addOutput(indexSelect(x, i, 0));
    f.addOutput(pad(x, ints(f, {1, 1}), f.constant(int64_t{0})));
    f.addOutput(reduce(OpKind::Sum, x, {1}));
  }
  c.inputs = {randomTensor(DataType::Int32, {5, 6}, 1), tensorOf(DataType::Int64, {3}, {4, 0, 2})};
  return c;
}

// Two outputs of different layouts from one input, with partial tiles: y = permute(x) * 2 + bias
// (the innermost dim changes: shared-memory tiles once a transpose scheduler takes it) and z = x + 1
// (independent of y and staging nothing: a pointwise part after the tiles, with its own vectors).
inline KernelCase transposeTilesCase() {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
    TensorView* b = defineTensor({-1}, {true}, DataType::BFloat16);
    Val* y = add(mul(permute(x, {0, 2, 1}), f.constant(2.0)), broadcastInDim(b, ints(f, {4, 200, 72}), {2}));
    f.addOutput(cast(y, DataType::BFloat16));
    f.addOutput(cast(add(x, f.constant(1.0)), DataType::BFloat16));
  }
  c.inputs = randomInputs(f, 4, {{4, 72, 200}, {72}});
  return c;
}

// The schedules beyond one block per row or per chunk (reduction_schedules_test and
// pointwise_schedules_test check them on the simulator at these shapes): grid reductions inner and
// outer (partials, an atomic counter, fences), a persistent row in shared memory (dynamic shared
// memory over 48 KiB), and 2D pointwise tiles.
inline KernelCase gridInnerCase() {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f.addOutput(reduce(OpKind::Sum, x, {1}));
    f.addOutput(reduce(OpKind::Any, binaryOp(OpKind::Gt, x, f.constant(1.5))->asTensor(), {1}));
  }
  c.inputs = randomInputs(f, 4, {{3, 40001}});
  return c;
}

inline KernelCase gridOuterCase() {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    f.addOutput(reduce(OpKind::Max, x, {0}));
    f.addOutput(reduce(OpKind::Sum, cast(x, DataType::Float)->asTensor(), {0}));
  }
  c.inputs = randomInputs(f, 5, {{20011, 64}});
  return c;
}

inline KernelCase pointwise2DBiasCase() {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* b = defineTensor({-1}, {true}, DataType::BFloat16);
    f.addOutput(braze::add(x, broadcastInDim(b, ints(f, {1000, 4096}), {1})));
  }
  c.inputs = randomInputs(f, 7, {{1000, 4096}, {4096}});
  return c;
}

// Scalar inputs of every kind a kernel takes as an argument (double, float, int, bool), in a pointwise
// kernel and, with a per-row scale, in a row reduction.
inline KernelCase scalarInputsCase(int64_t rows, int64_t cols) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    Val* scale = defineScalar(DataType::Double);
    Val* shift = defineScalar(DataType::Int64);
    Val* keep = defineScalar(DataType::Bool);
    Val* temperature = defineScalar(DataType::Float);
    Val* y = add(mul(cast(x, DataType::Float), scale), shift);
    f.addOutput(cast(ternaryOp(OpKind::Where, keep, y, unaryOp(OpKind::Neg, y)), DataType::BFloat16));
    f.addOutput(reduce(OpKind::Sum, div(cast(x, DataType::Float), temperature)->asTensor(), {1}));
  }
  c.inputs = randomInputs(f, 17, {{rows, cols}});
  c.inputs.resize(1);
  for (ScalarValue v : {ScalarValue{-0.3125}, ScalarValue{int64_t{7}}, ScalarValue{false}, ScalarValue{0.7}}) {
    c.inputs.push_back(v);
  }
  return c;
}

// Dropout as Thunder records it (uniform with a seed input, compare, scale), its output in column-major
// order, and a normal draw: Philox in kernels, a random tensor's row-major positions, stride_order stores.
inline KernelCase dropoutCase(int64_t rows, int64_t cols) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    Val* seed = defineScalar(DataType::Int64);
    Val* rows_v = size(x, 0);
    Val* cols_v = size(x, 1);
    TensorView* r = uniform(f.constant(0.0), f.constant(1.0), {rows_v, cols_v}, seed, f.constant(int64_t{3}),
                            DataType::Float);
    Val* kept = ternaryOp(OpKind::Where, binaryOp(OpKind::Lt, r, f.constant(0.9)),
                          mul(cast(x, DataType::Float), f.constant(1 / 0.9)), f.constant(0.0));
    f.addOutput(strideOrder(cast(kept, DataType::BFloat16)->asTensor(), {0, 1}));
    f.addOutput(normal(f.constant(1.0), f.constant(2.0), {cols_v}, seed, f.constant(int64_t{0}), DataType::BFloat16));
  }
  c.inputs = randomInputs(f, 23, {{rows, cols}});
  c.inputs.resize(1);
  c.inputs.push_back(ScalarValue{int64_t{1234567}});
  return c;
}

// cumsum along the rows and along the columns of a bf16 input (double sums), and of an int8 input
// (Int64 sums): the scan scheduler's kernels.
inline KernelCase cumsumCase(int64_t rows, int64_t cols) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* n = defineTensor({-1, -1}, {true, true}, DataType::Int8);
    f.addOutput(cumsum(x, 1));
    f.addOutput(cumsum(x, 0));
    f.addOutput(cumsum(n, -1));
  }
  c.inputs = randomInputs(f, 29, {{rows, cols}, {rows, cols}});
  return c;
}

// x / sum(d) per row and x / a for a scalar input a: divisors shared by a whole row (or kernel), which
// kernels turn into one reciprocal and a product per element. The rows' sums are normal, subnormal
// (a float reciprocal would overflow: 1 / 2^-138 is 2^138), huge (its reciprocal would be subnormal),
// zero, infinite and NaN; a is 2^-140.
inline KernelCase divisionByRowValuesCase() {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* d = defineTensor({-1, -1}, {true, true}, DataType::Float);
    Val* a = defineScalar(DataType::Double);
    TensorView* s = reduce(OpKind::Sum, d, {1}, /*keepdim=*/true);
    f.addOutput(div(x, expand(s, ints(f, {6, 4}))));
    f.addOutput(div(x, a));
  }
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double tiny = std::ldexp(1.0, -140);
  c.inputs = {tensorOf(DataType::Float, {6, 4},
                       {tiny, -3 * tiny, 0.5 * tiny, 0,  //
                        1, -2, 0, 3,                    //
                        1, -1, inf, 2,                  //
                        1, 2, 3, 4,                     //
                        0.3, -1.7, 2.9, -0.01,          //
                        3e38, -1.7, 2.9e-3, 1e-30}),
              tensorOf(DataType::Float, {6, 4},
                       {tiny, tiny, tiny, tiny,  //
                        1, -1, 0, 0,             //
                        inf, 1, 2, 3,            //
                        nan, 1, 2, 3,            //
                        0.5, 1.25, -3, 2.75,     //
                        1e38, 1e38, 5e37, 0}),
              ScalarValue{tiny}};
  return c;
}

// Small enough for the simulator: each case runs there in well under a second.
// The plan has one segment: a matmul kernel where the GPU has mma.sync, the reference's host step on
// one without (an AMD GPU).
// One matmul kernel (none on an AMD GPU); `schedule` (when given) in its summary: "cp.async pipeline",
// "gemv", "fragments loaded from global memory".
inline std::function<void(const LoweredPlan&)> expectMatmulSegment(std::string schedule = "") {
  return [schedule](const LoweredPlan& compiled) {
    ASSERT_EQ(compiled.plan.segments.size(), 1u) << compiled.plan.toString();
    const auto& k = compiled.kernels.at(0);
    if (k) {
      EXPECT_NE(k->name.find("matmul"), std::string::npos) << compiled.plan.toString();
      EXPECT_NE(k->summary.find(schedule), std::string::npos) << k->summary;
    } else {
      EXPECT_NE(compiled.plan.device.find("AMD"), std::string::npos) << compiled.plan.toString();
    }
  };
}

// matmul(a, b) with a [batch_a..., m, k] and b [batch_b..., k, n] (given as [.., n, k] and permuted when
// `b_transposed`: a strided view), cast to `out` when it is not Null.
inline KernelCase matmulCase(std::vector<int64_t> a_shape, std::vector<int64_t> b_shape, DataType dtype,
                             bool b_transposed, DataType out, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* a = defineTensor(std::vector<int64_t>(a_shape.size(), -1),
                                 std::vector<std::optional<bool>>(a_shape.size(), true), dtype);
    TensorView* b = defineTensor(std::vector<int64_t>(b_shape.size(), -1),
                                 std::vector<std::optional<bool>>(b_shape.size(), true), dtype);
    TensorView* bk = b;
    if (b_transposed) {
      std::vector<int64_t> order(b_shape.size());
      std::iota(order.begin(), order.end(), 0);
      std::swap(order[order.size() - 1], order[order.size() - 2]);
      bk = permute(b, order);
      std::swap(b_shape[b_shape.size() - 1], b_shape[b_shape.size() - 2]);  // as stored: [.., n, k]
    }
    Val* y = matmul(a, bk);
    if (out != DataType::Null) y = cast(y, out);
    f.addOutput(y);
  }
  c.inputs = randomInputs(f, seed, {a_shape, b_shape});
  c.expect = expectMatmulSegment();
  return c;
}

// matmul(a, b) split into heads by the epilogue: reshape [m, n] -> [m, heads, n / heads], permute to
// [heads, m, n / heads], cast to float (an output reached through index maps, stored where they put it).
inline KernelCase headSplitMatmulCase(int64_t m, int64_t k, int64_t n, int64_t heads, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* y = matmul(a, b);
    f.addOutput(cast(permute(reshape(y, ints(f, {m, heads, n / heads})), {1, 0, 2}), DataType::Float));
  }
  c.inputs = randomInputs(f, seed, {{m, k}, {k, n}});
  c.expect = expectMatmulSegment();
  return c;
}

// matmul(permute(a), b): A given as its transpose [k, m] (a strided view: an mn-major A tile).
inline KernelCase transposedAMatmulCase(int64_t m, int64_t k, int64_t n, DataType dtype, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* at = defineTensor({-1, -1}, {true, true}, dtype);
    TensorView* b = defineTensor({-1, -1}, {true, true}, dtype);
    f.addOutput(matmul(permute(at, {1, 0}), b));
  }
  c.inputs = randomInputs(f, seed, {{k, m}, {k, n}});
  c.expect = expectMatmulSegment();
  return c;
}

// linear(x, w, bias) with a relu and a cast to bf16 after it: the epilogue in the matmul kernel.
inline KernelCase linearBiasReluCase(int64_t m, int64_t n, int64_t k) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
    TensorView* w = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* b = defineTensor({-1}, {true}, DataType::BFloat16);
    f.addOutput(cast(unaryOp(OpKind::Relu, linear(x, w, b)), DataType::BFloat16));
  }
  c.inputs = randomInputs(f, 9, {{2, m, k}, {n, k}, {n}});
  c.expect = expectMatmulSegment();
  return c;
}

// Seed 003's weight-only int8 linear: bf16 x [m, k] times int8 weights [n, k] dequantized to bf16 by a
// scale per output channel (group 0) or per channel and group of `group` K elements (scales [n, k /
// group], through a reshape), the result cast to bf16. A few rows take the GEMV schedule.
inline KernelCase weightInt8LinearCase(int64_t m, int64_t n, int64_t k, int64_t group, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* w = defineTensor({-1, -1}, {true, true}, DataType::Int8);
    Val* wf = cast(w, DataType::Float);
    if (group == 0) {
      TensorView* s = defineTensor({-1}, {true}, DataType::BFloat16);
      wf = binaryOp(OpKind::Mul, wf, broadcastInDim(s, ints(f, {n, k}), {0}));
    } else {
      TensorView* s = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
      const std::vector<int64_t> grouped_shape = {n, k / group, group};
      Val* grouped = reshape(wf->asTensor(), ints(f, grouped_shape));
      Val* scaled = binaryOp(OpKind::Mul, grouped, broadcastInDim(s, ints(f, grouped_shape), {0, 1}));
      wf = reshape(scaled->asTensor(), ints(f, {n, k}));
    }
    f.addOutput(cast(linear(x, cast(wf, DataType::BFloat16)->asTensor()), DataType::BFloat16));
  }
  c.inputs = randomInputs(f, seed, {{m, k}, {n, k}, group == 0 ? std::vector<int64_t>{n} : std::vector<int64_t>{n, k / group}});
  c.expect = expectMatmulSegment(m > 64 ? "" : (n < 64 && k >= 8192 ? "K split among" : m > 1 ? "gemv on tensor cores" : "matmul gemv"));
  return c;
}

// matmul(a, b) (bf16, staged) with two outputs: the result quantized to int8 by a per-column scale, and
// relu of the result as float (several outputs of the matmul's shape from one epilogue).
inline KernelCase matmulQuantizeEpilogueCase(int64_t m, int64_t k, int64_t n, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* scale = defineTensor({-1}, {true}, DataType::Float);
    TensorView* y = matmul(a, b, DataType::Float);
    f.addOutput(quantize(y, scale, nullptr, DataType::Int8, QuantAxis{1, {}}));
    f.addOutput(unaryOp(OpKind::Relu, y));
  }
  c.inputs = randomInputs(f, seed, {{m, k}, {k, n}, {n}});
  c.expect = [](const LoweredPlan& compiled) {
    ASSERT_EQ(compiled.plan.segments.size(), 1u) << compiled.plan.toString();
    const auto& k = compiled.kernels.at(0);
    if (k) {
      EXPECT_NE(k->summary.find("cp.async pipeline"), std::string::npos) << k->summary;
    }
  };
  return c;
}

// Seed 000's second GEMM: bf16 operands quantized to e4m3fn by one scale (an input), multiplied with f32
// accumulators: the quantizes are computed as the operands are loaded (through registers).
inline KernelCase quantizedFp8MatmulCase(int64_t m, int64_t k, int64_t n, uint64_t seed) {
  KernelCase c;
  {
    FusionGuard g(c.fusion.get());
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* b = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* scale = defineTensor({1}, {std::nullopt}, DataType::Float);
    TensorView* qa = quantize(a, scale, nullptr, DataType::Float8_e4m3fn);
    TensorView* qb = quantize(b, scale, nullptr, DataType::Float8_e4m3fn);
    c.fusion->addOutput(matmul(qa, qb, DataType::Float));
  }
  c.inputs = randomInputs(*c.fusion, seed, {{m, k}, {k, n}, {1}});
  c.expect = expectMatmulSegment();
  return c;
}

// A matmul case expected to split K among blocks.
inline KernelCase splitK(KernelCase c) {
  c.expect = expectMatmulSegment("K split among");
  return c;
}

// A matmul case expected to take the cp.async pipeline.
inline KernelCase staged(KernelCase c) {
  c.expect = expectMatmulSegment("cp.async pipeline");
  return c;
}

inline std::vector<KernelCaseMaker> smallKernelCorpus() {
  std::vector<KernelCaseMaker> cases = {
      {"scalar_inputs_13x40", [] { return scalarInputsCase(13, 40); }},
      {"seed_layer_norm_2x3x1600",
       [] {
         KernelCase c = layerNormCase({.batch = 2, .seq = 3, .hidden = 1600}, 3);
         c.expect = [](const LoweredPlan& compiled) {
           const kernel::Kernel& k = onlyKernel(compiled);
           EXPECT_EQ(k.vectorize, 8) << k.summary;
           EXPECT_NE(k.summary.find("inner persistent"), std::string::npos) << k.summary;
         };
         return c;
       }},
      {"layer_norm_odd_hidden_37",
       [] {
         KernelCase c = layerNormCase({.batch = 3, .seq = 1, .hidden = 37}, 4);
         c.expect = expectVectorize(1);
         return c;
       }},
      {"layer_norm_misaligned_input",
       [] {
         KernelCase c = layerNormCase({.batch = 2, .seq = 2, .hidden = 64}, 5, /*x_offset=*/1);
         c.expect = expectVectorize(1);
         return c;
       }},
      // bookend=both turns the weights' broadcasts into alias segments; the kernel reads the views
      // from the weights' own buffers, with their alignment.
      {"layer_norm_bookended_weights",
       [] {
         KernelCase c = layerNormCase({.batch = 2, .seq = 3, .hidden = 64}, 6);
         c.options.plan.bookend = BookendPolicy::Both;
         c.expect = [](const LoweredPlan& compiled) {
           EXPECT_EQ(compiled.plan.aliasCount(), 2) << compiled.plan.toString();
           EXPECT_EQ(onlyKernel(compiled).vectorize, 8);
         };
         return c;
       }},
      {"layer_norm_bookended_misaligned_weight",
       [] {
         KernelCase c = layerNormCase({.batch = 2, .seq = 3, .hidden = 64}, 6);
         c.options.plan.bookend = BookendPolicy::Both;
         c.inputs[1] = randomTensor(DataType::BFloat16, {65}, 7).view({64}, {1}, 1);  // 2 bytes off 16
         c.expect = expectVectorize(1);
         return c;
       }},
      {"rope_mha", [] { return ropeCase({.batch = 2, .seq = 5, .heads = 4, .groups = 4, .head = 16, .rope_n_elem = 8}, 11); }},
      {"rope_gqa", [] { return ropeCase({.batch = 2, .seq = 5, .heads = 4, .groups = 2, .head = 16, .rope_n_elem = 8}, 11); }},
      {"softmax_float_7x33",
       [] {
         KernelCase c = softmaxCase(7, 33, DataType::Float, false, 2);
         c.expect = expectOneKernel();
         return c;
       }},
      // Persistent: exp(x - max) is computed once per element, kept for the last pass, which divides
      // by the row's sum as a product with its reciprocal.
      {"softmax_bf16_9x1000",
       [] {
         KernelCase c = softmaxCase(9, 1000, DataType::BFloat16, false, 5);
         c.expect = [](const LoweredPlan& compiled) {
           const kernel::Kernel& k = onlyKernel(compiled);
           EXPECT_NE(k.summary.find("inner persistent"), std::string::npos) << k.summary;
           const std::string full = codegen::emitCuda(k), source = full.substr(full.find("__global__"));
           size_t exps = 0;
           for (size_t at = source.find("expf("); at != std::string::npos; at = source.find("expf(", at + 1)) ++exps;
           EXPECT_EQ(exps, 1u) << source;
           EXPECT_EQ(source.find("braze_div((t"), std::string::npos) << source;
         };
         return c;
       }},
      {"division_by_row_values", divisionByRowValuesCase},
      {"softmax_bf16_5x512",
       [] {
         KernelCase c = softmaxCase(5, 512, DataType::BFloat16, false, 2);
         c.expect = expectOneKernel();
         return c;
       }},
      {"softmax_double_7x33", [] { return softmaxCase(7, 33, DataType::Double, /*column_sums=*/true, 2); }},
      {"var_mean_and_int_sum", varMeanAndIntSumCase},
      {"views_pointwise_pad_cat", viewsPointwiseCase},
      {"expanded_weight_keeps_vector_width", expandedWeightCase},
      {"index_select", indexSelectCase},
      {"dropout_13x37", [] { return dropoutCase(13, 37); }},
      {"cumsum_7x45", [] { return cumsumCase(7, 45); }},
      {"cumsum_3x2050", [] { return cumsumCase(3, 2050); }},  // the int8 one along the rows: a block scan
      {"scatter_7x45", [] { return scatterCase(7, 45); }},
      {"scatter_2x1", [] { return scatterCase(2, 1); }},
      {"index_put_accumulate_9x33_from_40", [] { return indexPutAccumulateCase(9, 33, 40); }},
      {"index_put_accumulate_1x1_from_3", [] { return indexPutAccumulateCase(1, 1, 3); }},
      {"topk_argsort_9x37", [] { return sortCase(9, 37, 5); }},
      {"topk_argsort_1x1", [] { return sortCase(1, 1, 1); }},
      {"topk_long_2x3001", [] { return longTopkCase(2, 3001, 5); }},
      {"topk_wide_1x2600", [] { return longTopkCase(1, 2600, 600); }},
      {"scans_with_elementwise_ops_9x37", [] { return scanWithElementwiseCase(9, 37, 4); }},
      {"router_softmax_topk_37x8", [] { return routerCase(37, 8, 2); }},
      {"router_training_outputs_13x64x6", [] { return routerCase(13, 64, 6, /*training_outputs=*/true); }},
      {"softmax_max_over_batch_bf16_6x37x72", [] { return batchedSoftmaxMaxCase(6, 37, 72, DataType::BFloat16, 74); }},
      {"matmul_bf16_33x17x257",
       [] { return matmulCase({33, 257}, {257, 17}, DataType::BFloat16, false, DataType::Null, 21); }},
      {"matmul_f16_1x1x1", [] { return matmulCase({1, 1}, {1, 1}, DataType::Half, false, DataType::Null, 22); }},
      {"matmul_bf16_batch_broadcast_transposed_b",
       [] { return matmulCase({3, 7, 100}, {1, 100, 33}, DataType::BFloat16, true, DataType::BFloat16, 23); }},
      {"matmul_s8_to_s8_batch", [] { return matmulCase({2, 17, 70}, {2, 70, 9}, DataType::Int8, false, DataType::Int8, 24); }},
      {"matmul_u8_to_s32", [] { return matmulCase({16, 64}, {64, 8}, DataType::UInt8, false, DataType::Null, 25); }},
      {"linear_bias_relu_bf16", [] { return linearBiasReluCase(20, 30, 40); }},
      {"matmul_bf16_transposed_b_40_rows",
       [] { return matmulCase({40, 72}, {72, 24}, DataType::BFloat16, true, DataType::Null, 26); }},
      {"gemv_weight_int8_3x37x100", [] { return weightInt8LinearCase(3, 37, 100, 0, 27); }},  // K % 16 != 0
      {"gemv_weight_int8_group_32_1x9x96", [] { return weightInt8LinearCase(1, 9, 96, 32, 28); }},
      // Few columns and a long K (K % 16 != 0 too): K split among blocks.
      {"gemv_split_k_weight_int8_2x40x8200", [] { return weightInt8LinearCase(2, 40, 8200, 0, 42); }},
      // 64 rows on tensor cores (8 tiles of 8), K past whole groups of 64.
      {"gemv_mma_weight_int8_64x100x4104", [] { return weightInt8LinearCase(64, 100, 4104, 0, 43); }},
      {"gemv_s8_transposed_b_16_rows",
       [] { return matmulCase({16, 70}, {70, 13}, DataType::Int8, true, DataType::Null, 29); }},
      // Staged in shared memory (cp.async, ldmatrix): M and N past a block tile, K past a slice.
      {"matmul_bf16_staged_100x264x72",
       [] { return staged(matmulCase({100, 264}, {264, 72}, DataType::BFloat16, false, DataType::Null, 35)); }},
      {"matmul_f16_staged_transposed_a_48x80x56",
       [] { return staged(transposedAMatmulCase(48, 80, 56, DataType::Half, 36)); }},
      {"matmul_s8_staged_transposed_b_2x70x144x40",
       [] { return staged(matmulCase({2, 70, 144}, {2, 144, 40}, DataType::Int8, true, DataType::Int8, 37)); }},
      {"matmul_bf16_quantize_epilogue_two_outputs", [] { return matmulQuantizeEpilogueCase(33, 64, 40, 39); }},
      // One or two output tiles and a long K: split among blocks (the last split shorter).
      {"matmul_bf16_split_k_50x1040x40",
       [] { return splitK(matmulCase({50, 1040}, {1040, 40}, DataType::BFloat16, false, DataType::BFloat16, 40)); }},
      {"matmul_s8_split_k_2x40x2112x24",
       [] { return splitK(matmulCase({2, 40, 2112}, {2, 2112, 24}, DataType::Int8, true, DataType::Null, 41)); }},
      // (72 rows: fewer take the GEMV on tensor cores, B being read along K.)
      {"matmul_bf16_staged_batch_broadcast_3x72x96x24",
       [] { return staged(matmulCase({3, 72, 96}, {1, 96, 24}, DataType::BFloat16, true, DataType::BFloat16, 38)); }},
      // Block tiles and slices that divide M, N and K (no bounds tested): cp.async both ways, and an 8-bit B
      // stored n-major, through registers.
      {"matmul_bf16_staged_whole_tiles_128x96x192",
       [] { return staged(matmulCase({128, 96}, {96, 192}, DataType::BFloat16, false, DataType::Null, 42)); }},
      {"matmul_s8_staged_whole_tiles_2x64x128x64",
       [] { return staged(matmulCase({2, 64, 128}, {2, 128, 64}, DataType::Int8, false, DataType::Null, 43)); }},
      // A row-major 8-bit B staged four k rows at a time, N past the block tile (zeros written there).
      {"matmul_s8_row_major_b_four_k_rows_2x40x96x48",
       [] { return staged(matmulCase({2, 40, 96}, {2, 96, 48}, DataType::Int8, false, DataType::Int32, 44)); }},
      // The result split into heads by the epilogue's index maps (reshape, permute) and cast.
      {"matmul_bf16_heads_of_the_result_40x64x48", [] { return staged(headSplitMatmulCase(40, 64, 48, 3, 45)); }},
  };
  for (int64_t n : {1, 7, 13}) {
    cases.push_back({"reshape_and_row_sum_" + std::to_string(n), [n] { return reshapeAndRowSumCase(n); }});
  }
  for (int64_t dim : {0, 1, 2}) {
    for (OpKind kind : {OpKind::Sum, OpKind::Max, OpKind::Min, OpKind::Prod}) {
      cases.push_back({fmt::format("reduce_{}_dim{}", opName(kind), dim), [kind, dim] { return reductionCase(kind, dim); }});
    }
  }
  cases.push_back({"qk_norm_rope_bf16_2x5x3x16", [] { return qkNormRopeCase(2, 5, 3, 16, DataType::BFloat16, 46); }});
  cases.push_back({"qk_norm_rope_f32_1x7x2x10", [] { return qkNormRopeCase(1, 7, 2, 10, DataType::Float, 47); }});
  cases.push_back({"group_norm_silu_bf16_2x12x5x3", [] { return groupNormSiluCase(2, 12, 5, 3, 4, DataType::BFloat16, 48); }});
  cases.push_back({"group_norm_silu_f32_1x8x7x1", [] { return groupNormSiluCase(1, 8, 7, 1, 8, DataType::Float, 49); }});
  for (KernelCaseMaker& c : backwardCases()) cases.push_back(std::move(c));
  for (KernelCaseMaker& c : lossCases()) cases.push_back(std::move(c));
  for (KernelCaseMaker& c : ropeBackwardCases()) cases.push_back(std::move(c));
  return cases;
}

// The shapes of the benchmarks: compiled everywhere NVRTC is, and run by DeviceFusionCache.Large on
// the test device (the simulated device takes seconds for each).
inline std::vector<KernelCaseMaker> largeKernelCorpus() {
  std::vector<KernelCaseMaker> cases = {
      {"seed_layer_norm_16x128x1600",
       [] {
         KernelCase c = layerNormCase({.batch = 16, .seq = 128, .hidden = 1600}, 1);
         c.expect = expectVectorize(8);
         return c;
       }},
      {"rope_mha_32_heads",
       [] { return ropeCase({.batch = 1, .seq = 64, .heads = 32, .groups = 32, .head = 128, .rope_n_elem = 128}, 2); }},
      {"rope_gqa_8_groups",
       [] { return ropeCase({.batch = 1, .seq = 64, .heads = 32, .groups = 8, .head = 128, .rope_n_elem = 128}, 2); }},
      {"int_gather_pad_sum", intGatherPadSumCase},
      {"scalar_inputs_1000x4096", [] { return scalarInputsCase(1000, 4096); }},
      {"transpose_tiles", transposeTilesCase},
      {"grid_reduction_inner", gridInnerCase},
      {"grid_reduction_outer", gridOuterCase},
      {"layer_norm_row_in_shared_memory",
       [] { return layerNormCase({.batch = 2, .seq = 1, .hidden = 40960}, 6); }},
      // GPT-2's padded vocabulary: the bf16 row kept in shared memory as stored (100 KB), where as floats
      // it would not fit and would be read again from L2.
      {"cross_entropy_bf16_3x50304_row_in_shared_memory",
       [] {
         KernelCase c = crossEntropyCase(3, 50304, 13);
         c.expect = [](const LoweredPlan& compiled) {
           ASSERT_EQ(compiled.kernels.size(), 1u) << compiled.plan.toString();
           ASSERT_TRUE(compiled.kernels.front().has_value()) << compiled.plan.toString();
           const kernel::Kernel& k = *compiled.kernels.front();
           EXPECT_NE(k.summary.find("row kept in shared memory"), std::string::npos) << k.summary;
           EXPECT_LE(k.shared_bytes, 120 * 1024) << k.summary;
         };
         return c;
       }},
      {"pointwise_2d_bias", pointwise2DBiasCase},
      {"dropout_1024x4096", [] { return dropoutCase(1024, 4096); }},
      {"cumsum_512x4096", [] { return cumsumCase(512, 4096); }},
      {"index_put_accumulate_512x768_from_2048", [] { return indexPutAccumulateCase(512, 768, 2048); }},
      {"topk_argsort_96x200", [] { return sortCase(96, 200, 20); }},
      {"topk_long_1x6000", [] { return longTopkCase(1, 6000, 700); }},
      // The bias grad split among blocks over the rows, each block writing its rows of grad_in.
      {"gelu_backward_bias_grad_split_1000x256", [] { return activationBackwardCase(1000, 256, DataType::BFloat16, true, 9); }},
      {"layer_norm_backward_bf16_256x768",
       [] {
         KernelCase c = normBackwardCase({.rows = 256, .hidden = 768}, 8);
         c.expect = expectKernels(2, SchedulerKind::InnerOuterPersistent);
         return c;
       }},
      // The finish writing a cat of the grouped sums and given chunks; a cast in blocks after the rows'.
      {"adaln_norm_backward_bf16_2x128x256", [] { return adalnNormBackwardCase(2, 128, 256, DataType::BFloat16, 10); }},
      {"softmax_row_slices_bf16_4x65x256", [] { return softmaxRowSlicesCase(4, 65, 256, DataType::BFloat16, 12); }},
      {"qk_norm_rope_bf16_2x256x16x128", [] { return qkNormRopeCase(2, 256, 16, 128, DataType::BFloat16, 13); }},
      {"group_norm_silu_bf16_1x320x32x32", [] { return groupNormSiluCase(1, 320, 32, 32, 32, DataType::BFloat16, 14); }},
      // A part split over more blocks in y than it has rows.
      {"outer_sums_of_their_own_rows_bf16_8192x256_3",
       [] { return outerSumsOfTheirOwnRowsCase(8192, 3, 256, DataType::BFloat16, 11); }},
  };
  for (DataType dtype : {DataType::BFloat16, DataType::Half, DataType::Float8_e4m3fn, DataType::Double}) {
    cases.push_back({fmt::format("softmax_{}_64x4096", toString(dtype)),
                     [dtype] { return softmaxCase(64, 4096, dtype, /*column_sums=*/true, 3); }});
  }
  return cases;
}

// The matmul shapes of the benchmarks: compiled wherever NVRTC is, never simulated (billions of
// multiply-adds), so not in the large corpus, whose cases the simulated device runs too.
inline std::vector<KernelCaseMaker> matmulBenchmarkShapes() {
  return {
      {"matmul_bf16_1024x1024x1024",
       [] { return matmulCase({1024, 1024}, {1024, 1024}, DataType::BFloat16, false, DataType::Null, 31); }},
      {"bmm_s8_16x1024x1024x1024",
       [] { return matmulCase({16, 1024, 1024}, {16, 1024, 1024}, DataType::Int8, false, DataType::Int8, 32); }},
      {"linear_bias_relu_2x2048x4096x1024", [] { return linearBiasReluCase(2048, 4096, 1024); }},
      {"gemv_weight_int8_1x11008x4096", [] { return weightInt8LinearCase(1, 11008, 4096, 0, 33); }},
      {"gemv_weight_int8_group_128_16x4096x4096", [] { return weightInt8LinearCase(16, 4096, 4096, 128, 34); }},
  };
}

}  // namespace braze::testing
