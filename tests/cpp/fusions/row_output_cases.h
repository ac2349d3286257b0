// Kernel corpus cases of row kernels writing outputs of their own shapes: some of a value's rows
// (reduction/row_slices.h), the rows in another order (reduction/domain_alignment.h's permuted outputs), the
// rows under other dims (a group norm's view back).
#pragma once

#include "fusions/kernel_case.h"
#include "fusions/kernel_util.h"
#include "fusions/plan_util.h"
#include "ir/ops.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace braze::testing {

// A softmax over [b, t, c] read as a ViT reads its tokens (reduction/row_slices.h): rows 1.. of each sequence
// (and those reshaped to [b (t - 1), c]) and row 0, stored by the softmax kernel where each output has them.
inline KernelCase softmaxRowSlicesCase(int64_t b, int64_t t, int64_t c, DataType dtype, uint64_t seed) {
  KernelCase kc;
  Fusion& f = *kc.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, dtype);
    Val* xf = cast(x, DataType::Float);
    Val* e = unaryOp(OpKind::Exp, sub(xf, reduce(OpKind::Max, xf->asTensor(), {2}, /*keepdim=*/true)));
    TensorView* y = cast(div(e, reduce(OpKind::Sum, e->asTensor(), {2}, /*keepdim=*/true)), dtype)->asTensor();
    TensorView* patches = slice(y, ints(f, {0, 1, 0}), ints(f, {b, t, c}), ints(f, {1, 1, 1}), false);
    f.addOutput(patches);
    f.addOutput(reshape(patches, ints(f, {b * (t - 1), c})));
    f.addOutput(slice(y, ints(f, {0, 0, 0}), ints(f, {b, 1, c}), ints(f, {1, 1, 1}), false));
  }
  kc.inputs = randomInputs(f, seed, {{b, t, c}});
  kc.expect = [](const LoweredPlan& compiled) {
    EXPECT_EQ(compiled.plan.segments.size(), 1u) << compiled.plan.toString();
    EXPECT_EQ(compiled.plan.kernelCount(), 1) << compiled.plan.toString();
  };
  return kc;
}

// Qwen3's QK-norm: each head of [b, t, h, d] RMS-normed over d with a weight, transposed to [b, h, t, d]
// and rotated (RoPE's rotate-half reads the normed row at its other half), and the rows' 1 / rms as
// [b, h, t]: one inner persistent kernel storing both where the permute puts each row.
inline KernelCase qkNormRopeCase(int64_t b, int64_t t, int64_t h, int64_t d, DataType dtype, uint64_t seed) {
  KernelCase kc;
  Fusion& f = *kc.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1, -1}, {true, true, true, true}, dtype);
    TensorView* w = defineTensor({-1}, {true}, dtype);
    TensorView* cos = defineTensor({-1, -1}, {true, true}, dtype);  // the model's dtype, as Thunder's tables
    TensorView* sin = defineTensor({-1, -1}, {true, true}, dtype);
    Val* xf = cast(x, DataType::Float);
    TensorView* squares = reduce(OpKind::Sum, mul(xf, xf)->asTensor(), {3}, /*keepdim=*/true);
    Val* inv = unaryOp(OpKind::Rsqrt, add(div(squares, f.constant(static_cast<double>(d))), f.constant(1e-6)));
    Val* weight = cast(broadcastInDim(w, ints(f, {b, t, h, d}), {3}), DataType::Float);
    TensorView* normed = cast(mul(mul(xf, inv), weight), dtype)->asTensor();
    TensorView* heads = permute(normed, {0, 2, 1, 3});
    const int64_t half = d / 2;
    Val* high = cast(slice(heads, ints(f, {0, 0, 0, half}), ints(f, {b, h, t, d}), ints(f, {1, 1, 1, 1}), false),
                     DataType::Float);
    TensorView* low = slice(heads, ints(f, {0, 0, 0, 0}), ints(f, {b, h, t, half}), ints(f, {1, 1, 1, 1}), false);
    TensorView* rotated = cat({cast(unaryOp(OpKind::Neg, high), dtype)->asTensor(), low}, 3);
    Val* tables_cos = cast(broadcastInDim(cos, ints(f, {b, h, t, d}), {2, 3}), DataType::Float);
    Val* tables_sin = cast(broadcastInDim(sin, ints(f, {b, h, t, d}), {2, 3}), DataType::Float);
    f.addOutput(cast(add(mul(cast(heads, DataType::Float), tables_cos), mul(cast(rotated, DataType::Float), tables_sin)),
                     dtype));
    f.addOutput(permute(reshape(inv->asTensor(), ints(f, {b, t, h})), {0, 2, 1}));
  }
  kc.inputs = randomInputs(f, seed, {{b, t, h, d}, {d}, {t, d}, {t, d}});
  kc.expect = [](const LoweredPlan& compiled) {
    EXPECT_EQ(compiled.plan.segments.size(), 1u) << compiled.plan.toString();
    EXPECT_EQ(compiled.plan.kernelCount(), 1) << compiled.plan.toString();
  };
  return kc;
}

// A UNet's group norm as Thunder writes it: x [b, c, h, w] viewed as [b, g, c / g, h, w], normed per group,
// viewed back as [b, c, h, w], scaled and shifted per channel, through a SiLU; with the groups' mean and
// 1 / std. One inner persistent kernel stores the normed value at each row element's linear position.
inline KernelCase groupNormSiluCase(int64_t b, int64_t c, int64_t h, int64_t w, int64_t groups, DataType dtype,
                                    uint64_t seed) {
  KernelCase kc;
  Fusion& f = *kc.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1, -1}, {true, true, true, true}, dtype);
    TensorView* weight = defineTensor({-1}, {true}, dtype);
    TensorView* bias = defineTensor({-1}, {true}, dtype);
    const std::vector<int64_t> grouped = {b, groups, c / groups, h, w};
    TensorView* xg = reshape(cast(x, DataType::Float)->asTensor(), ints(f, grouped));
    auto [var, mean] = varMean(xg, {2, 3, 4}, /*correction=*/0.0);
    Val* rstd = unaryOp(OpKind::Rsqrt, add(var, f.constant(1e-5)));
    Val* normed = mul(sub(xg, broadcastInDim(mean, ints(f, grouped), {0, 1})),
                      broadcastInDim(rstd->asTensor(), ints(f, grouped), {0, 1}));
    TensorView* view = reshape(normed->asTensor(), ints(f, {b, c, h, w}));
    Val* y = add(mul(view, cast(broadcastInDim(weight, ints(f, {b, c, h, w}), {1}), DataType::Float)),
                 cast(broadcastInDim(bias, ints(f, {b, c, h, w}), {1}), DataType::Float));
    Val* gate = unaryOp(OpKind::Reciprocal, add(unaryOp(OpKind::Exp, unaryOp(OpKind::Neg, y)), f.constant(1.0)));
    f.addOutput(mean);
    f.addOutput(rstd);
    f.addOutput(cast(mul(y, gate), dtype));
  }
  kc.inputs = randomInputs(f, seed, {{b, c, h, w}, {c}, {c}});
  kc.expect = [](const LoweredPlan& compiled) {
    EXPECT_EQ(compiled.plan.segments.size(), 1u) << compiled.plan.toString();
    EXPECT_EQ(compiled.plan.kernelCount(), 1) << compiled.plan.toString();
  };
  return kc;
}

}  // namespace braze::testing
