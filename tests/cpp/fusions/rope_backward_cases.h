// Kernel corpus cases of the backward of litGPT's QKV split with RoPE on grouped-query attention, as
// Thunder hands it to a fuser after SDPA's backward: the keys' gradient arrives transposed, the queries'
// and values' as they were read; RoPE's backward runs on the queries' and keys', the keys' and values'
// are summed over the query heads of each KV head, and the three are concatenated per KV head into the
// fused QKV projection's gradient. One transpose kernel, each element computing the cat input it falls in
// (scheduler/cat_pieces.h), at any query heads a KV head up to 16.
#pragma once

#include "fusions/backward_cases.h"
#include "fusions/kernel_case.h"
#include "fusions/kernel_util.h"
#include "fusions/plan_util.h"
#include "ir/ops.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace braze::testing {

struct RopeGqaBackward {
  int64_t batch = 1, groups = 1, q_per_kv = 1, seq = 1, head = 8;
};

// Inputs (bf16): the keys' gradient [b, heads, head, seq], RoPE's sin and cos [seq + 3, head] (sliced to
// seq), the queries' and values' gradients [b, heads, seq, head]. Outputs the QKV gradient [b, seq,
// groups * (q_per_kv + 2) * head] and its 2D view.
inline KernelCase ropeGqaBackwardCase(const RopeGqaBackward& r, uint64_t seed) {
  KernelCase c;
  Fusion& f = *c.fusion;
  const int64_t b = r.batch, heads = r.groups * r.q_per_kv, t = r.seq, hs = r.head, half = r.head / 2;
  const std::vector<int64_t> shape{b, heads, t, hs};
  {
    FusionGuard g(&f);
    auto tensor = [](const std::vector<int64_t>& sizes) {
      std::vector<std::optional<bool>> contiguity;
      for (int64_t s : sizes) contiguity.push_back(s == 1 ? std::nullopt : std::optional<bool>(true));
      return defineTensor(sizes, contiguity, DataType::BFloat16);
    };
    TensorView* dk_t = tensor({b, heads, hs, t});
    TensorView* sin = tensor({t + 3, hs});
    TensorView* cos = tensor({t + 3, hs});
    TensorView* dq = tensor(shape);
    TensorView* dv = tensor(shape);
    auto f32 = [](Val* x) { return cast(x, DataType::Float)->asTensor(); };
    auto bf16 = [](Val* x) { return cast(x, DataType::BFloat16)->asTensor(); };
    auto table = [&](TensorView* x) {
      return f32(broadcastInDim(slice(x, ints(f, {0, 0}), ints(f, {t, hs}), ints(f, {1, 1})), ints(f, shape), {2, 3}));
    };
    auto last = [&](TensorView* x, int64_t lo, int64_t hi) {
      return slice(x, ints(f, {0, 0, 0, lo}), ints(f, {b, heads, t, hi}), ints(f, {1, 1, 1, 1}));
    };
    auto padLast = [&](TensorView* x, int64_t left, int64_t right) {
      return pad(x, ints(f, {left, right, 0, 0, 0, 0, 0, 0}), f.constant(0.0));
    };
    TensorView* sin_t = table(sin);
    TensorView* cos_t = table(cos);
    // grad * cos + cat(s[half:], -s[:half]) with s = grad * sin rounded to bf16, as Thunder writes it.
    auto ropeBackward = [&](Val* grad) {
      TensorView* by_sin = bf16(mul(sin_t, grad));
      TensorView* rotated = f32(padLast(last(by_sin, half, hs), 0, half));
      TensorView* negated = f32(padLast(bf16(unaryOp(OpKind::Neg, f32(last(by_sin, 0, half)))), half, 0));
      return bf16(add(add(mul(cos_t, grad), rotated), negated));
    };
    Val* scale = f.constant(0.125);
    TensorView* keys = ropeBackward(f32(permute(bf16(mul(scale, f32(dk_t))), {0, 1, 3, 2})));
    TensorView* queries = ropeBackward(mul(scale, f32(dq)));
    const std::vector<Val*> grouped = ints(f, {b, r.groups, r.q_per_kv, t, hs});
    auto summed = [&](TensorView* x) {
      TensorView* total = bf16(reduce(OpKind::Sum, f32(reshape(x, grouped)), {2}));
      return broadcastInDim(total, ints(f, {b, r.groups, 1, t, hs}), {0, 1, 3, 4});
    };
    TensorView* qkv = cat({reshape(queries, grouped), summed(keys), summed(dv)}, 2);
    const int64_t width = r.groups * (r.q_per_kv + 2) * hs;
    TensorView* out = reshape(permute(qkv, {0, 3, 1, 2, 4}), ints(f, {b, t, width}));
    f.addOutput(out);
    f.addOutput(reshape(out, ints(f, {b * t, width})));
  }
  c.inputs = randomInputs(f, seed);
  c.expect = expectKernels(1, SchedulerKind::Transpose);
  return c;
}

inline std::vector<KernelCaseMaker> ropeBackwardCases() {
  std::vector<KernelCaseMaker> cases;
  auto add = [&](std::string name, RopeGqaBackward r) {
    cases.push_back({std::move(name), [r] { return ropeGqaBackwardCase(r, 70 + static_cast<uint64_t>(r.q_per_kv + r.seq)); }});
  };
  add("rope_gqa_backward_8_per_kv_2x2x33x16", {.batch = 2, .groups = 2, .q_per_kv = 8, .seq = 33, .head = 16});
  add("rope_gqa_backward_4_per_kv_1x3x20x32", {.batch = 1, .groups = 3, .q_per_kv = 4, .seq = 20, .head = 32});
  add("rope_gqa_backward_16_per_kv_1x1x9x8", {.batch = 1, .groups = 1, .q_per_kv = 16, .seq = 9, .head = 8});
  return cases;
}

}  // namespace braze::testing
