// Kernel corpus cases of row kernels writing outputs of their own shapes: some of a value's rows
// (reduction/row_slices.h).
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

}  // namespace braze::testing
