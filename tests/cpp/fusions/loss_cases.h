// Kernel corpus cases of losses: a cross entropy's per-row loss (the target picked in the kernel that keeps
// the row) and its mean, a total over the rows that the rows' kernel finishes in its last block; a cosine
// embedding loss's mean over plain row reductions (the reduction scheduler's rows, with the same total).
#pragma once

#include "fusions/backward_cases.h"
#include "fusions/kernel_case.h"
#include "fusions/kernel_util.h"
#include "ir/ops.h"

#include <cstdint>
#include <vector>

namespace braze::testing {

// Cross entropy's per-row loss: -log_softmax(x)[row, target[row]] over [rows, vocab] bf16 logits, the
// target picked in the kernel that keeps the row (one kernel), targets spread over the vocabulary. With
// `mean`, their mean too: a total over the rows that the kernel's last block finishes.
inline KernelCase crossEntropyCase(int64_t rows, int64_t vocab, uint64_t seed, bool mean = false) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* t = defineTensor({-1, 1}, {true, std::nullopt}, DataType::Int64);
    Val* xf = cast(x, DataType::Float);
    Val* z = sub(xf, expand(reduce(OpKind::Max, xf->asTensor(), {1}, /*keepdim=*/true), ints(f, {rows, vocab})));
    TensorView* lse = reduce(OpKind::Sum, unaryOp(OpKind::Exp, z)->asTensor(), {1}, /*keepdim=*/true);
    Val* log_softmax = sub(z, expand(unaryOp(OpKind::Log, lse)->asTensor(), ints(f, {rows, vocab})));
    TensorView* loss = unaryOp(OpKind::Neg, takeAlongAxis(log_softmax->asTensor(), t, 1))->asTensor();
    f.addOutput(loss);
    if (mean) f.addOutput(mul(reduce(OpKind::Sum, loss, {0, 1}), f.constant(1.0 / static_cast<double>(rows))));
  }
  std::vector<double> targets;
  for (int64_t r = 0; r < rows; ++r) targets.push_back(static_cast<double>((r * 7919) % vocab));
  c.inputs = randomInputs(f, seed, {{rows, vocab}, {rows, 1}});
  c.inputs[1] = tensorOf(DataType::Int64, {rows, 1}, targets);
  c.expect = expectKernels(1, SchedulerKind::InnerPersistent);
  return c;
}

// 1 - cos(a_r, b_r) averaged over the rows of [rows, cols] `dtype` inputs: three plain sums per row (the
// dot product and both squared norms), then their total, in one reduction kernel.
inline KernelCase cosineLossCase(int64_t rows, int64_t cols, DataType dtype, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    const DataType f32 = DataType::Float;
    Val* a = cast(defineTensor({-1, -1}, {true, true}, dtype), f32);
    Val* b = cast(defineTensor({-1, -1}, {true, true}, dtype), f32);
    auto rowSum = [](Val* v) { return reduce(OpKind::Sum, v->asTensor(), {1}); };
    Val* norms = mul(unaryOp(OpKind::Sqrt, rowSum(mul(a, a))), unaryOp(OpKind::Sqrt, rowSum(mul(b, b))));
    Val* loss = sub(f.constant(1.0), div(rowSum(mul(a, b)), norms));
    f.addOutput(mul(reduce(OpKind::Sum, loss->asTensor(), {0}), f.constant(1.0 / static_cast<double>(rows))));
  }
  c.inputs = randomInputs(f, seed, {{rows, cols}, {rows, cols}});
  c.expect = expectKernels(1, SchedulerKind::Reduction);
  return c;
}

inline std::vector<KernelCaseMaker> lossCases() {
  return {
      {"cross_entropy_bf16_5x1000", [] { return crossEntropyCase(5, 1000, 12); }},
      {"cross_entropy_mean_bf16_37x1000", [] { return crossEntropyCase(37, 1000, 14, true); }},
      {"cross_entropy_mean_bf16_3x50304", [] { return crossEntropyCase(3, 50304, 15, true); }},
      {"cosine_loss_mean_bf16_33x200", [] { return cosineLossCase(33, 200, DataType::BFloat16, 16); }},
      {"cosine_loss_mean_f32_700x24", [] { return cosineLossCase(700, 24, DataType::Float, 17); }},
  };
}

}  // namespace braze::testing
