// Kernel corpus cases of the scan scheduler's line walks besides cumsum: scatter and
// index_put_accumulate with indices that repeat (the order of writes and adds decides the result),
// negative ones (index_put counts them from the end), an index broadcast along a dim (stride 0); topk
// and argsort over ties and NaNs; operands read through views, odd sizes and size-1 dims, in float,
// bf16 and integer dtypes.
#pragma once

#include "fusions/host_util.h"
#include "fusions/kernel_case.h"
#include "fusions/kernel_util.h"
#include "fusions/plan_util.h"
#include "ir/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace braze::testing {

// `count` indices in [lo, hi), from a fixed LCG: repeats are certain when count exceeds hi - lo.
inline HostTensor indexTensor(DataType dtype, std::vector<int64_t> sizes, int64_t lo, int64_t hi, uint64_t seed) {
  HostTensor t = HostTensor::empty(dtype, std::move(sizes));
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    t.writeInt(i, lo + static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(hi - lo)));
  }
  return t;
}

// scatter along dim 1 of a bf16 [rows, cols] with a shorter index [rows - 1, min(cols, 6)] into its first 4 columns (repeats: the
// last write wins), and along dim 0 of an Int32 tensor with an index broadcast along its columns.
inline KernelCase scatterCase(int64_t rows, int64_t cols) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    TensorView* index = defineTensor({-1, -1}, {true, true}, DataType::Int64);
    TensorView* src = defineTensor({-1, -1}, {false, false}, DataType::BFloat16);
    TensorView* n = defineTensor({-1, -1}, {true, true}, DataType::Int32);
    TensorView* rows_index = defineTensor({-1, -1}, {true, std::nullopt}, DataType::Int32);
    f.addOutput(scatter(x, index, src, 1));
    f.addOutput(scatter(n, rows_index, n, 0));
  }
  const HostTensor src_storage = randomTensor(DataType::BFloat16, {rows, cols + 3}, 41);
  const HostTensor column = indexTensor(DataType::Int32, {rows, 1}, 0, rows, 43);
  c.inputs = {randomTensor(DataType::BFloat16, {rows, cols}, 40), indexTensor(DataType::Int64, {rows - 1, std::min<int64_t>(cols, 6)}, 0, std::min<int64_t>(cols, 4), 42),
              src_storage.view({rows, cols}, {cols + 3, 1}, 1), randomTensor(DataType::Int32, {rows, cols}, 44),
              column.view({rows, cols}, {1, 0}, 0)};
  return c;
}

// index_put_accumulate of `entries` rows (repeated and negative indices) into a float [rows, cols]
// tensor with the value read transposed, and into a bf16 [rows, 1, 5] one (each add rounds to bf16).
inline KernelCase indexPutAccumulateCase(int64_t rows, int64_t cols, int64_t entries) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* acc = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* index = defineTensor({-1}, {true}, DataType::Int64);
    TensorView* value = defineTensor({-1, -1}, {false, false}, DataType::Float);
    TensorView* narrow = defineTensor({-1, 1, -1}, {true, std::nullopt, true}, DataType::BFloat16);
    TensorView* narrow_index = defineTensor({-1}, {true}, DataType::Int32);
    TensorView* narrow_value = defineTensor({-1, 1, -1}, {true, std::nullopt, true}, DataType::BFloat16);
    f.addOutput(indexPutAccumulate(acc, index, value));
    f.addOutput(indexPutAccumulate(narrow, narrow_index, narrow_value));
  }
  const HostTensor value_t = randomTensor(DataType::Float, {cols, entries}, 51);
  c.inputs = {randomTensor(DataType::Float, {rows, cols}, 50), indexTensor(DataType::Int64, {entries}, -rows, rows, 52),
              value_t.view({entries, cols}, {1, entries}, 0), randomTensor(DataType::BFloat16, {rows, 1, 5}, 53),
              indexTensor(DataType::Int32, {entries}, 0, rows, 54), randomTensor(DataType::BFloat16, {entries, 1, 5}, 55)};
  return c;
}

// A `dtype` tensor of `sizes` with few distinct values (integers in [lo, hi) times `scale`: ties
// everywhere), element i NaN where i % nan_every == nan_at.
inline HostTensor tiedTensor(DataType dtype, const std::vector<int64_t>& sizes, int64_t lo, int64_t hi, double scale,
                             int64_t nan_every, int64_t nan_at, uint64_t seed) {
  const HostTensor storage = indexTensor(DataType::Int32, sizes, lo, hi, seed);
  HostTensor values = HostTensor::empty(dtype, sizes);
  for (int64_t i = 0; i < values.numel(); ++i) {
    values.writeDouble(i, i % nan_every == nan_at ? std::nan("") : static_cast<double>(storage.readInt(i)) * scale);
  }
  return values;
}

// topk (k of each line, largest and smallest) and argsort (descending) of a float [rows, cols] with
// ties and NaNs, read transposed, and argsort of an Int32 one along its rows.
inline KernelCase sortCase(int64_t rows, int64_t cols, int64_t k) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {false, false}, DataType::Float);
    TensorView* n = defineTensor({-1, -1}, {true, true}, DataType::Int32);
    auto [largest, largest_at] = topk(x, f.constant(k), 1, /*largest=*/true, /*sorted=*/true);
    auto [smallest, smallest_at] = topk(x, f.constant(k), 1, /*largest=*/false, /*sorted=*/true);
    f.addOutput(largest);
    f.addOutput(largest_at);
    f.addOutput(smallest_at);
    f.addOutput(argsort(x, 1, /*descending=*/true, /*stable=*/true));
    f.addOutput(argsort(n, 0, /*descending=*/false, /*stable=*/false));
  }
  const HostTensor values = tiedTensor(DataType::Float, {cols, rows}, -2, 3, 1.0, 5, 3, 60);  // every fifth NaN
  c.inputs = {values.view({rows, cols}, {1, rows}, 0), indexTensor(DataType::Int32, {rows, cols}, -4, 4, 61)};
  return c;
}

// topk of long bf16 lines (a vocabulary's logits), largest and smallest, with ties and NaNs, read
// through a strided view: block sorts of lines split into parts where k is small against the line, of
// several passes over the line where k is near half of it.
inline KernelCase longTopkCase(int64_t lines, int64_t extent, int64_t k) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {false, true}, DataType::BFloat16);
    auto [largest, largest_at] = topk(x, f.constant(k), 1, /*largest=*/true, /*sorted=*/true);
    auto [smallest, smallest_at] = topk(x, f.constant(k), 1, /*largest=*/false, /*sorted=*/true);
    f.addOutput(largest);
    f.addOutput(largest_at);
    f.addOutput(smallest);
    f.addOutput(smallest_at);
  }
  const HostTensor values = tiedTensor(DataType::BFloat16, {lines, extent + 3}, -200, 200, 1.0 / 8, 97, 5, 62);
  c.inputs = {values.view({lines, extent}, {extent + 3, 1}, 0)};
  return c;
}

// Line walks with the elementwise ops around them in their kernel: position ids from an int64 mask
// (`where(mask == 0, 1, cumsum(mask) - 1)`, the cumsum's result read beside the mask), a bf16 input read
// transposed, scaled in float, summed along dim 0 and rounded back to bf16, and the k largest logits after
// a temperature's division. Three kernels, each a scan: none writes the values between the ops.
inline KernelCase scanWithElementwiseCase(int64_t rows, int64_t cols, int64_t k) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* mask = defineTensor({-1, -1}, {true, true}, DataType::Int64);
    TensorView* x = defineTensor({-1, -1}, {false, false}, DataType::BFloat16);
    TensorView* logits = defineTensor({-1, -1}, {true, true}, DataType::Float);
    Val* positions = sub(cumsum(mask, 1), f.constant(int64_t{1}));
    f.addOutput(ternaryOp(OpKind::Where, binaryOp(OpKind::Eq, mask, f.constant(int64_t{0})), f.constant(int64_t{1}), positions));
    Val* scaled = mul(cast(x, DataType::Float), f.constant(0.5));
    f.addOutput(cast(cumsum(scaled->asTensor(), 0), DataType::BFloat16));
    auto [best, best_at] = topk(div(logits, f.constant(0.7))->asTensor(), f.constant(k), 1, /*largest=*/true, /*sorted=*/true);
    f.addOutput(best);
    f.addOutput(best_at);
  }
  const HostTensor x_storage = randomTensor(DataType::BFloat16, {cols, rows}, 71);
  c.inputs = {indexTensor(DataType::Int64, {rows, cols}, 0, 2, 70), x_storage.view({rows, cols}, {1, rows}, 0),
              randomTensor(DataType::Float, {rows, cols}, 72)};
  c.expect = [](const LoweredPlan& compiled) {
    EXPECT_EQ(compiled.plan.kernelCount(), 3) << compiled.plan.toString();
    for (const Segment& s : compiled.plan.segments) {
      if (s.kind == SegmentKind::Kernel) {
        EXPECT_TRUE(s.scheduler == SchedulerKind::Scan) << compiled.plan.toString();
      }
    }
  };
  return c;
}

// A mixture-of-experts router over bf16 logits: softmax over the experts in float, the k best, and their
// weights renormalized to sum to 1 in bf16. One scan kernel: the topk's thread walks its token's line for
// the softmax's max and sum, sorts it, then walks the k kept slots for their sum and their weights. With
// `training_outputs`, as Thunder returns them for the backward: the probabilities, the kept values, their
// sum at each slot and zeros of the logits' shape too, still one kernel (the probabilities and zeros
// stored by a walk of the line before the sort).
inline KernelCase routerCase(int64_t tokens, int64_t experts, int64_t k, bool training_outputs = false) {
  KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* logits = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    const std::vector<Val*> shape = ints(f, {tokens, experts});
    Val* x = cast(logits, DataType::Float);
    Val* e = unaryOp(OpKind::Exp, sub(x, expand(reduce(OpKind::Max, x->asTensor(), {1}, /*keepdim=*/true), shape)));
    Val* p = div(e, expand(reduce(OpKind::Sum, e->asTensor(), {1}, /*keepdim=*/true), shape));
    auto [best, best_at] = topk(p->asTensor(), f.constant(k), 1, /*largest=*/true, /*sorted=*/true);
    Val* total = expand(reduce(OpKind::Sum, best, {1}, /*keepdim=*/true), ints(f, {tokens, k}));
    f.addOutput(cast(div(best, total), DataType::BFloat16));
    f.addOutput(best_at);
    if (training_outputs) {
      f.addOutput(p);
      f.addOutput(best);
      f.addOutput(total);
      f.addOutput(full(shape, f.constant(0.0), DataType::BFloat16));
    }
  }
  c.inputs = randomInputs(f, 73, {{tokens, experts}});
  c.expect = [](const LoweredPlan& compiled) {
    EXPECT_EQ(compiled.plan.kernelCount(), 1) << compiled.plan.toString();
    EXPECT_TRUE(compiled.plan.segments.front().scheduler == SchedulerKind::Scan) << compiled.plan.toString();
  };
  return c;
}

}  // namespace braze::testing
