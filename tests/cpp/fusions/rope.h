// litGPT's qkv split + RoPE (litgpt 0.5.0 CausalSelfAttention.forward, as Thunder's
// litgpt_qkv_split_rope benchmark runs it): view the fused qkv projection as (B, T, groups,
// q_per_kv + 2, head), permute, split into q, k, v, expand k and v to n_head heads for grouped
// query attention, reshape to (B, heads, T, head), rotate the first rope_n_elem features of q and
// k, and cat the rest back. Outputs q, k, v (bf16).
#pragma once

#include "ir/ops.h"

namespace braze::testing {

struct RopeConfig {
  int64_t batch = 2;
  int64_t seq = 16;
  int64_t heads = 4;
  int64_t groups = 4;  // n_query_groups: heads for MHA, fewer for GQA
  int64_t head = 16;
  int64_t rope_n_elem = 16;  // features rotated (litGPT: rotary_percentage * head_size)
};

namespace detail {
inline std::vector<Val*> ints(Fusion& fusion, const std::vector<int64_t>& values) {
  std::vector<Val*> out;
  for (int64_t v : values) out.push_back(fusion.constant(v));
  return out;
}

inline TensorView* sliceLast(Fusion& fusion, TensorView* x, int64_t start, int64_t end) {
  const int64_t rank = x->rank();
  std::vector<int64_t> starts(rank, 0), ends(rank, INT64_MAX), steps(rank, 1);
  starts.back() = start;
  ends.back() = end;
  return slice(x, ints(fusion, starts), ints(fusion, ends), ints(fusion, steps));
}

// litGPT apply_rope on x [B, H, T, n]: (x * cos) + (rotate_half(x) * sin), in x's dtype.
inline TensorView* applyRope(Fusion& fusion, TensorView* x, int64_t n, TensorView* cos, TensorView* sin,
                             const std::vector<Val*>& shape) {
  TensorView* x1 = sliceLast(fusion, x, 0, n / 2);
  TensorView* x2 = sliceLast(fusion, x, n / 2, n);
  // torch keeps -x2 in bf16; the builders promote to float, so cast back as Thunder's trace does.
  TensorView* rotated = cat({cast(unaryOp(OpKind::Neg, x2), x->dtype())->asTensor(), x1}, -1);
  TensorView* cos_b = broadcastInDim(cos, shape, {2, 3});
  TensorView* sin_b = broadcastInDim(sin, shape, {2, 3});
  Val* roped = add(mul(x, cos_b), mul(rotated, sin_b));
  return cast(roped, x->dtype())->asTensor();
}
}  // namespace detail

// Inputs: qkv [B, T, (heads + 2 groups) head], cos and sin [T, rope_n_elem] (bf16, static sizes).
inline void defineLitGptQkvSplitRope(Fusion& fusion, const RopeConfig& c) {
  using detail::ints;
  FusionGuard guard(&fusion);
  const int64_t q_per_kv = c.heads / c.groups;
  const int64_t width = (c.heads + 2 * c.groups) * c.head;
  // Static sizes; a size-1 dim is a broadcast dim and has no contiguity.
  auto contiguous = [](const std::vector<int64_t>& shape) {
    std::vector<std::optional<bool>> c;
    for (int64_t s : shape) c.push_back(s == 1 ? std::nullopt : std::optional<bool>(true));
    return c;
  };
  TensorView* qkv = defineTensor({c.batch, c.seq, width}, contiguous({c.batch, c.seq, width}), DataType::BFloat16);
  TensorView* cos = defineTensor({c.seq, c.rope_n_elem}, contiguous({c.seq, c.rope_n_elem}), DataType::BFloat16);
  TensorView* sin = defineTensor({c.seq, c.rope_n_elem}, contiguous({c.seq, c.rope_n_elem}), DataType::BFloat16);
  TensorView* x = reshape(qkv, ints(fusion, {c.batch, c.seq, c.groups, q_per_kv + 2, c.head}));
  x = permute(x, {0, 2, 3, 1, 4});  // (B, groups, q_per_kv + 2, T, head)
  auto split = [&](int64_t start, int64_t end) {
    return slice(x, ints(fusion, {0, 0, start, 0, 0}), ints(fusion, {c.batch, c.groups, end, c.seq, c.head}),
                 ints(fusion, {1, 1, 1, 1, 1}));
  };
  TensorView* q = split(0, q_per_kv);
  TensorView* k = split(q_per_kv, q_per_kv + 1);
  TensorView* v = split(q_per_kv + 1, q_per_kv + 2);
  if (c.groups != c.heads) {
    const auto full = ints(fusion, {c.batch, c.groups, q_per_kv, c.seq, c.head});
    k = expand(k, full);
    v = expand(v, full);
  }
  const auto heads_shape = ints(fusion, {c.batch, -1, c.seq, c.head});
  q = reshape(q, heads_shape);
  k = reshape(k, heads_shape);
  v = reshape(v, heads_shape);
  auto rope = [&](TensorView* t) {
    TensorView* part = detail::sliceLast(fusion, t, 0, c.rope_n_elem);
    TensorView* roped = detail::applyRope(fusion, part, c.rope_n_elem, cos, sin,
                                          ints(fusion, {c.batch, c.heads, c.seq, c.rope_n_elem}));
    TensorView* rest = detail::sliceLast(fusion, t, c.rope_n_elem, c.head);
    return cat({roped, rest}, -1);
  };
  fusion.addOutput(rope(q));
  fusion.addOutput(rope(k));
  fusion.addOutput(v);
}

}  // namespace braze::testing
