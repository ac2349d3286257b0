// Kernel corpus cases of backward passes as Thunder hands them to a fuser: layer-norm and RMS-norm
// backward (grad_in per row; grad_weight and grad_bias over the rows; with or without the weight and
// bias; with the bias grad of the neighbouring linear, a reduction over the same rows of another
// width), GELU and SiLU backward with the bias grad of their linear, and softmax backward. Each case
// says how many kernels its plan may launch.
#pragma once

#include "fusions/kernel_case.h"
#include "fusions/kernel_util.h"
#include "fusions/plan_util.h"
#include "ir/ops.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace braze::testing {

// A plan launching at most `kernels` kernels, one of whose segments is `scheduler`'s.
inline std::function<void(const LoweredPlan&)> expectKernels(int64_t kernels, std::optional<SchedulerKind> scheduler) {
  return [kernels, scheduler](const LoweredPlan& plan) {
    EXPECT_LE(plan.plan.kernelCount(), kernels) << plan.plan.toString();
    if (!scheduler) return;
    bool found = false;
    for (const Segment& s : plan.plan.segments) found = found || s.scheduler == scheduler;
    EXPECT_TRUE(found) << "no " << toString(*scheduler) << " segment in\n" << plan.plan.toString();
  };
}

struct NormBackward {
  int64_t rows = 1, hidden = 1;
  DataType dtype = DataType::BFloat16;
  bool rms = false;           // RMS norm: x_hat = x * rstd (no mean input)
  bool weight = true, bias = true;
  int64_t extra_width = 0;    // > 0: the bias grad of a neighbouring linear, sum over rows of [rows, extra_width]
};

// grad_out, x, (mean), rstd ([rows, 1] float), (weight [hidden]), (extra [rows, extra_width]) in;
// grad_in, (grad_weight, grad_bias), (extra's column sums) out, in the inputs' dtype.
inline KernelCase normBackwardCase(const NormBackward& n, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  std::vector<std::vector<int64_t>> sizes{{n.rows, n.hidden}, {n.rows, n.hidden}};
  {
    FusionGuard g(&f);
    const DataType f32 = DataType::Float;
    TensorView* grad_out = defineTensor({-1, -1}, {true, true}, n.dtype);
    TensorView* x = defineTensor({-1, -1}, {true, true}, n.dtype);
    TensorView* mean = nullptr;
    if (!n.rms) {
      mean = defineTensor({-1, 1}, {true, std::nullopt}, f32);
      sizes.push_back({n.rows, 1});
    }
    TensorView* rstd = defineTensor({-1, 1}, {true, std::nullopt}, f32);
    sizes.push_back({n.rows, 1});
    TensorView* weight = nullptr;
    if (n.weight) {
      weight = defineTensor({-1}, {true}, n.dtype);
      sizes.push_back({n.hidden});
    }
    TensorView* extra = nullptr;
    if (n.extra_width > 0) {
      extra = defineTensor({-1, -1}, {true, true}, n.dtype);
      sizes.push_back({n.rows, n.extra_width});
    }
    Val* go = cast(grad_out, f32);
    Val* xf = cast(x, f32);
    Val* x_hat = mul(n.rms ? xf : sub(xf, mean), rstd);
    Val* gw = weight == nullptr ? go : mul(go, broadcast(cast(weight, f32)->asTensor(), {true, false}));
    Val* c_size = size(x, 1);
    Val* b = div(reduce(OpKind::Sum, mul(gw, x_hat)->asTensor(), {1}, /*keepdim=*/true), c_size);
    Val* centered = gw;
    if (!n.rms) centered = sub(gw, div(reduce(OpKind::Sum, gw->asTensor(), {1}, /*keepdim=*/true), c_size));
    f.addOutput(cast(mul(rstd, sub(centered, mul(x_hat, b))), n.dtype));
    if (n.weight) f.addOutput(cast(reduce(OpKind::Sum, mul(go, x_hat)->asTensor(), {0}), n.dtype));
    if (n.bias) f.addOutput(cast(reduce(OpKind::Sum, go->asTensor(), {0}), n.dtype));
    if (extra != nullptr) f.addOutput(cast(reduce(OpKind::Sum, cast(extra, f32)->asTensor(), {0}), n.dtype));
  }
  c.inputs = randomInputs(f, seed, sizes);
  return c;
}

// GPT's first layer-norm backward as Thunder hands it: grad_out, x and the grad arriving through the
// residual stream [batch, seq, hidden], mean and rstd [batch, seq, 1] float, weight [hidden] in; grad_in
// (plus the residual's) in the inputs' dtype, grad_weight, grad_bias, and grad_in summed over dim
// `summed` (0: the batch, the learned position embedding's grad [seq, hidden]; 1: the sequence) out.
inline KernelCase normBackwardGroupedCase(int64_t batch, int64_t seq, int64_t hidden, DataType dtype, int64_t summed,
                                          uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  const std::vector<int64_t> rows{batch, seq, hidden}, stats{batch, seq, 1};
  {
    FusionGuard g(&f);
    const DataType f32 = DataType::Float;
    TensorView* grad_out = defineTensor({-1, -1, -1}, {true, true, true}, dtype);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, dtype);
    TensorView* residual = defineTensor({-1, -1, -1}, {true, true, true}, dtype);
    TensorView* mean = defineTensor({-1, -1, 1}, {true, true, std::nullopt}, f32);
    TensorView* rstd = defineTensor({-1, -1, 1}, {true, true, std::nullopt}, f32);
    TensorView* weight = defineTensor({-1}, {true}, dtype);
    Val* go = cast(grad_out, f32);
    Val* x_hat = mul(sub(cast(x, f32), mean), rstd);
    Val* gw = mul(go, broadcast(cast(weight, f32)->asTensor(), {true, true, false}));
    Val* c_size = size(x, 2);
    Val* b = div(reduce(OpKind::Sum, mul(gw, x_hat)->asTensor(), {2}, /*keepdim=*/true), c_size);
    Val* centered = sub(gw, div(reduce(OpKind::Sum, gw->asTensor(), {2}, /*keepdim=*/true), c_size));
    Val* grad_in = add(cast(residual, f32), mul(rstd, sub(centered, mul(x_hat, b))));
    f.addOutput(cast(grad_in, dtype));
    f.addOutput(cast(reduce(OpKind::Sum, mul(go, x_hat)->asTensor(), {0, 1}), dtype));
    f.addOutput(cast(reduce(OpKind::Sum, go->asTensor(), {0, 1}), dtype));
    f.addOutput(cast(reduce(OpKind::Sum, grad_in->asTensor(), {summed}), dtype));
  }
  c.inputs = randomInputs(f, seed, {rows, rows, rows, stats, stats, {hidden}});
  c.expect = expectKernels(2, SchedulerKind::InnerOuterPersistent);
  return c;
}

// grad_in = grad * act'(x) (GELU with erf, or SiLU) in the inputs' dtype, and its sum over the rows
// (the bias grad of the linear before the activation; Thunder sums it in another fusion, `own_bias_grad`
// false). With `beside_width`, the bias grad of the next linear too: a third input [rows, beside_width]
// summed over the same rows, which reads nothing the activation's ops compute (a part side by side).
inline KernelCase activationBackwardCase(int64_t rows, int64_t cols, DataType dtype, bool gelu, uint64_t seed,
                                         int64_t beside_width = 0, bool own_bias_grad = true) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    const DataType f32 = DataType::Float;
    auto number = [](double v) { return defineScalar(DataType::Double, v); };
    TensorView* grad = defineTensor({-1, -1}, {true, true}, dtype);
    TensorView* x = defineTensor({-1, -1}, {true, true}, dtype);
    Val* gf = cast(grad, f32);
    Val* xf = cast(x, f32);
    Val* derivative = nullptr;
    if (gelu) {
      Val* cdf = mul(add(unaryOp(OpKind::Erf, mul(xf, number(0.7071067811865476))), number(1.0)), number(0.5));
      Val* pdf = mul(unaryOp(OpKind::Exp, mul(mul(xf, xf), number(-0.5))), number(0.3989422804014327));
      derivative = add(cdf, mul(xf, pdf));
    } else {
      Val* s = unaryOp(OpKind::Sigmoid, xf);
      derivative = mul(s, add(number(1.0), mul(xf, sub(number(1.0), s))));
    }
    Val* grad_in = mul(gf, derivative);
    f.addOutput(cast(grad_in, dtype));
    if (own_bias_grad) f.addOutput(cast(reduce(OpKind::Sum, grad_in->asTensor(), {0}), dtype));
    if (beside_width > 0) {
      TensorView* next_grad = defineTensor({-1, -1}, {true, true}, dtype);
      f.addOutput(cast(reduce(OpKind::Sum, cast(next_grad, f32)->asTensor(), {0}), dtype));
    }
  }
  std::vector<std::vector<int64_t>> shapes{{rows, cols}, {rows, cols}};
  if (beside_width > 0) shapes.push_back({rows, beside_width});
  c.inputs = randomInputs(f, seed, shapes);
  c.expect = expectKernels(1, SchedulerKind::Reduction);
  return c;
}

// grad_in = y * (grad - sum(grad * y) per row), y the softmax output. With `experts` > 0, beside outputs
// made from scalars alone, as a router's backward has them: zeros [rows, experts] (the gradient of the
// experts not picked) and an iota of the columns that the rows also read (grad + iota / cols): one inner
// persistent kernel, the rows' blocks, then a pointwise part's writing both.
inline KernelCase softmaxBackwardCase(int64_t rows, int64_t cols, DataType dtype, uint64_t seed, int64_t experts = 0) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    const DataType f32 = DataType::Float;
    TensorView* grad = defineTensor({-1, -1}, {true, true}, dtype);
    TensorView* y = defineTensor({-1, -1}, {true, true}, dtype);
    Val* gf = cast(grad, f32);
    TensorView* columns = nullptr;
    if (experts > 0) {
      columns = iota(f.constant(cols), f.constant(int64_t{0}), f.constant(int64_t{1}), DataType::Int64);
      Val* per_column = cast(broadcastInDim(columns, ints(f, {rows, cols}), {1}), f32);
      gf = add(gf, mul(per_column, f.constant(1.0 / static_cast<double>(cols))));
    }
    Val* yf = cast(y, f32);
    Val* dot = reduce(OpKind::Sum, mul(gf, yf)->asTensor(), {1}, /*keepdim=*/true);
    f.addOutput(cast(mul(yf, sub(gf, dot)), dtype));
    if (experts > 0) {
      f.addOutput(columns);
      f.addOutput(full(ints(f, {rows, experts}), f.constant(0.0), dtype));
    }
  }
  c.inputs = randomInputs(f, seed, {{rows, cols}, {rows, cols}});
  c.expect = [experts](const LoweredPlan& plan) {
    expectKernels(1, SchedulerKind::InnerPersistent)(plan);
    for (const Segment& s : plan.plan.segments) {
      if (experts > 0 && s.scheduler == SchedulerKind::InnerPersistent) {
        EXPECT_NE(s.heuristics.find("then pointwise"), std::string::npos) << plan.plan.toString();
      }
    }
  };
  return c;
}

// GQA attention's backward as Thunder hands it over: the query heads' gradient [b, g * q, t, h] scaled, the
// keys' and values' as each of the q query heads of a KV head read them, summed over those q, and the
// three concatenated per KV head and laid out as the fused QKV projection's output [b, t, g * (q + 2) * h].
// Up to 16 query heads a KV head the sums are computed in the one pointwise kernel that writes the result.
inline KernelCase gqaBackwardCase(int64_t b, int64_t g, int64_t q, int64_t t, int64_t h, DataType dtype, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard guard(&f);
    const DataType f32 = DataType::Float;
    auto shape = [&](const std::vector<int64_t>& sizes) { return ints(f, sizes); };
    TensorView* dq = defineTensor({-1, -1, -1, -1}, {true, true, true, true}, dtype);
    TensorView* dk = defineTensor({-1, -1, -1, -1}, {true, true, true, true}, dtype);
    TensorView* dv = defineTensor({-1, -1, -1, -1}, {true, true, true, true}, dtype);
    Val* scaled = cast(mul(cast(dq, f32), defineScalar(DataType::Double, 0.125)), dtype);
    std::vector<TensorView*> pieces{reshape(scaled->asTensor(), shape({b, g, q, t, h}))};
    for (TensorView* grad : {dk, dv}) {
      TensorView* total = reduce(OpKind::Sum, cast(reshape(grad, shape({b, g, q, t, h})), f32)->asTensor(), {2});
      pieces.push_back(broadcastInDim(cast(total, dtype)->asTensor(), shape({b, g, 1, t, h}), {0, 1, 3, 4}));
    }
    TensorView* qkv = permute(cat(pieces, 2), {0, 3, 1, 2, 4});
    f.addOutput(reshape(qkv, shape({b, t, g * (q + 2) * h})));
  }
  c.inputs = randomInputs(f, seed, {{b, g * q, t, h}, {b, g * q, t, h}, {b, g * q, t, h}});
  c.expect = expectKernels(q <= 16 ? 1 : 2, q <= 16 ? std::nullopt : std::optional(SchedulerKind::Reduction));
  return c;
}

// DiT's second norm backward as Thunder hands it: x and the grad of the modulated norm [b, t, c], mean and
// rstd [b, t, 1] float, the scale [b, c], four chunk grads of the modulation's output [b, c] computed before,
// and a conditioning grad [b, 1, c] that shares nothing with the rest in. Out: grad_x; the modulation's grad
// [b, 6 c], its shift and scale grads (sums over each image's tokens) padded beside the four chunks (Thunder's
// bf16 cat: pads in bf16, cast to float, added, cast back), and its transpose; the conditioning grad squeezed
// and cast. One inner-outer segment: the finish writes the cat (inner_outer/entry.h's finishCats), the cast
// runs in blocks after the rows' (inner_outer/parts.cpp).
inline KernelCase adalnNormBackwardCase(int64_t b, int64_t t, int64_t c, DataType dtype, uint64_t seed) {
  KernelCase kc;
  Fusion& f = *kc.fusion;
  {
    FusionGuard guard(&f);
    const DataType f32 = DataType::Float;
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, dtype);
    TensorView* grad_h = defineTensor({-1, -1, -1}, {true, true, true}, dtype);
    TensorView* mean = defineTensor({-1, -1, 1}, {true, true, std::nullopt}, f32);
    TensorView* rstd = defineTensor({-1, -1, 1}, {true, true, std::nullopt}, f32);
    TensorView* scale = defineTensor({-1, -1}, {true, true}, dtype);
    std::vector<TensorView*> chunks(6, nullptr);
    for (int64_t given : {0, 1, 2, 5}) chunks[given] = defineTensor({-1, -1}, {true, true}, dtype);
    TensorView* cond = defineTensor({-1, 1, -1}, {true, std::nullopt, true}, dtype);
    Val* x_hat = mul(sub(cast(x, f32), mean), rstd);
    Val* g = cast(grad_h, f32);
    chunks[3] = cast(reduce(OpKind::Sum, g->asTensor(), {1}), dtype)->asTensor();
    chunks[4] = cast(reduce(OpKind::Sum, mul(g, x_hat)->asTensor(), {1}), dtype)->asTensor();
    Val* one_plus = add(cast(scale, f32), defineScalar(DataType::Double, 1.0));
    Val* gn = mul(g, broadcast(one_plus->asTensor(), {false, true, false}));
    Val* c_size = size(x, 2);
    Val* mean_gn = div(reduce(OpKind::Sum, gn->asTensor(), {2}, /*keepdim=*/true), c_size);
    Val* mean_gx = div(reduce(OpKind::Sum, mul(gn, x_hat)->asTensor(), {2}, /*keepdim=*/true), c_size);
    f.addOutput(cast(mul(rstd, sub(sub(gn, mean_gn), mul(x_hat, mean_gx))), dtype));
    Val* total = nullptr;
    for (int64_t k = 0; k < 6; ++k) {
      Val* padded = cast(pad(chunks[static_cast<size_t>(k)], ints(f, {k * c, (5 - k) * c}), f.constant(0.0)), f32);
      total = total == nullptr ? padded : add(total, padded);
    }
    TensorView* cat_out = cast(total, dtype)->asTensor();
    f.addOutput(cat_out);
    f.addOutput(permute(cat_out, {1, 0}));
    f.addOutput(cast(squeeze(cast(cond, f32)->asTensor(), {1}), dtype));
  }
  const std::vector<int64_t> rows{b, t, c}, stats{b, t, 1}, chunk{b, c};
  kc.inputs = randomInputs(f, seed, {rows, rows, stats, stats, chunk, chunk, chunk, chunk, chunk, {b, 1, c}});
  kc.expect = expectKernels(2, SchedulerKind::InnerOuterPersistent);
  return kc;
}

// Bias grads over rows of their own (a ViT's over its tokens and over its class token) and a max over the
// short part's rows: one reduction kernel of parts, each its own split of its rows (reduction_parts.h).
inline KernelCase outerSumsOfTheirOwnRowsCase(int64_t long_rows, int64_t short_rows, int64_t c, DataType dtype,
                                              uint64_t seed) {
  KernelCase kc;
  Fusion& f = *kc.fusion;
  {
    FusionGuard guard(&f);
    const DataType f32 = DataType::Float;
    TensorView* tokens = defineTensor({-1, -1}, {true, true}, dtype);
    TensorView* cls = defineTensor({-1, -1}, {true, true}, dtype);
    f.addOutput(cast(reduce(OpKind::Sum, cast(tokens, f32)->asTensor(), {0}), dtype));
    f.addOutput(cast(reduce(OpKind::Sum, cast(cls, f32)->asTensor(), {0}), dtype));
    f.addOutput(reduce(OpKind::Max, cast(cls, f32)->asTensor(), {0}));
  }
  kc.inputs = randomInputs(f, seed, {{long_rows, c}, {short_rows, c}});
  kc.expect = expectKernels(1, SchedulerKind::Reduction);
  return kc;
}

// Every case above at odd sizes, size-1 rows and columns, and bf16, fp16 and fp32.
inline std::vector<KernelCaseMaker> backwardCases() {
  std::vector<KernelCaseMaker> cases;
  auto norm = [&](std::string name, NormBackward n, int64_t kernels, std::optional<SchedulerKind> scheduler) {
    cases.push_back({std::move(name), [n, kernels, scheduler] {
                       KernelCase c = normBackwardCase(n, 40 + static_cast<uint64_t>(n.rows + n.hidden));
                       c.expect = expectKernels(kernels, scheduler);
                       return c;
                     }});
  };
  const auto inner_outer = SchedulerKind::InnerOuterPersistent;
  norm("layer_norm_backward_bf16_37x96", {.rows = 37, .hidden = 96}, 2, inner_outer);
  norm("layer_norm_backward_f16_61x200", {.rows = 61, .hidden = 200, .dtype = DataType::Half}, 2, inner_outer);
  norm("layer_norm_backward_f32_5x33", {.rows = 5, .hidden = 33, .dtype = DataType::Float}, 2, inner_outer);
  norm("layer_norm_backward_weight_only_19x64", {.rows = 19, .hidden = 64, .bias = false}, 2, inner_outer);
  norm("layer_norm_backward_bias_only_19x64", {.rows = 19, .hidden = 64, .weight = false}, 2, inner_outer);
  norm("layer_norm_backward_no_affine_19x64", {.rows = 19, .hidden = 64, .weight = false, .bias = false}, 1,
       SchedulerKind::InnerPersistent);
  norm("layer_norm_backward_one_row_1x64", {.rows = 1, .hidden = 64}, 2, std::nullopt);
  norm("layer_norm_backward_one_column_9x1", {.rows = 9, .hidden = 1, .dtype = DataType::Float}, 2, std::nullopt);
  norm("layer_norm_backward_linear_bias_grad_33x48_w80", {.rows = 33, .hidden = 48, .extra_width = 80}, 2,
       inner_outer);
  // Enough rows that each block walks the linear's rows several at a time, and some one at a time after.
  norm("layer_norm_backward_linear_bias_grad_1100x48_w80", {.rows = 1100, .hidden = 48, .extra_width = 80}, 2,
       inner_outer);
  // With the position embedding's grad (grad_in summed over the batch): whole groups per block, groups split
  // into slices (few positions, many sequences), and a sum over the sequence instead.
  cases.push_back({"layer_norm_backward_position_grad_bf16_3x37x96",
                   [] { return normBackwardGroupedCase(3, 37, 96, DataType::BFloat16, 0, 71); }});
  cases.push_back({"layer_norm_backward_position_grad_f32_300x3x40",
                   [] { return normBackwardGroupedCase(300, 3, 40, DataType::Float, 0, 72); }});
  cases.push_back({"layer_norm_backward_sequence_sum_f16_5x19x64",
                   [] { return normBackwardGroupedCase(5, 19, 64, DataType::Half, 1, 73); }});
  norm("rms_norm_backward_bf16_29x160", {.rows = 29, .hidden = 160, .rms = true, .bias = false}, 2, inner_outer);
  norm("rms_norm_backward_f32_7x9", {.rows = 7, .hidden = 9, .dtype = DataType::Float, .rms = true, .bias = false},
       2, inner_outer);
  for (bool gelu : {true, false}) {
    const std::string name = gelu ? "gelu" : "silu";
    cases.push_back({name + "_backward_bias_grad_bf16_45x72",
                     [gelu] { return activationBackwardCase(45, 72, DataType::BFloat16, gelu, 61); }});
    cases.push_back({name + "_backward_bias_grad_f32_1x7",
                     [gelu] { return activationBackwardCase(1, 7, DataType::Float, gelu, 62); }});
  }
  // Side by side: the next linear's bias grad in the blocks after the activation's (reduction_parts.h), with
  // the activation's own bias grad, and without it (Thunder's form: its grad_in alone, a pointwise part).
  cases.push_back({"gelu_backward_beside_bias_grad_bf16_45x72_w24",
                   [] { return activationBackwardCase(45, 72, DataType::BFloat16, true, 65, 24); }});
  cases.push_back({"gelu_backward_thunder_beside_bias_grad_bf16_45x72_w24",
                   [] { return activationBackwardCase(45, 72, DataType::BFloat16, true, 66, 24, false); }});
  cases.push_back({"silu_backward_beside_bias_grad_f32_600x40_w7",  // split over blocks in y
                   [] { return activationBackwardCase(600, 40, DataType::Float, false, 67, 7); }});
  cases.push_back({"gqa_backward_bf16_2x2x4x5x16", [] { return gqaBackwardCase(2, 2, 4, 5, 16, DataType::BFloat16, 68); }});
  cases.push_back({"gqa_backward_f32_1x3x16x3x8", [] { return gqaBackwardCase(1, 3, 16, 3, 8, DataType::Float, 69); }});
  cases.push_back({"gqa_backward_17_query_heads_f16", [] { return gqaBackwardCase(1, 1, 17, 2, 8, DataType::Half, 70); }});
  cases.push_back({"adaln_norm_backward_bf16_2x40x48", [] { return adalnNormBackwardCase(2, 40, 48, DataType::BFloat16, 77); }});
  cases.push_back({"adaln_norm_backward_f32_3x19x33", [] { return adalnNormBackwardCase(3, 19, 33, DataType::Float, 78); }});
  cases.push_back({"outer_sums_of_their_own_rows_bf16_3000x24_2", [] {
                     return outerSumsOfTheirOwnRowsCase(3000, 2, 24, DataType::BFloat16, 79);
                   }});
  cases.push_back({"outer_sums_of_their_own_rows_f32_37x7_5", [] {
                     return outerSumsOfTheirOwnRowsCase(37, 5, 7, DataType::Float, 80);
                   }});
  cases.push_back({"softmax_backward_bf16_13x300", [] { return softmaxBackwardCase(13, 300, DataType::BFloat16, 63); }});
  cases.push_back({"softmax_backward_beside_scalars_bf16_13x300_e6",
                   [] { return softmaxBackwardCase(13, 300, DataType::BFloat16, 75, 6); }});
  cases.push_back({"softmax_backward_beside_scalars_f32_600x40_e9",  // more rows than one wave of blocks walks
                   [] { return softmaxBackwardCase(600, 40, DataType::Float, 76, 9); }});
  cases.push_back({"softmax_backward_f16_4x1", [] {
                     KernelCase c = softmaxBackwardCase(4, 1, DataType::Half, 64);
                     c.expect = expectKernels(1, std::nullopt);  // rows of one element: no reduction left
                     return c;
                   }});
  return cases;
}

}  // namespace braze::testing
