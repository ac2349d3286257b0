// A chain of transformer-block stand-ins for the segmenter's scaling benchmark and tests: per block
// a layer_norm, a RoPE over the heads (reshape, permute, rotate, permute back), a residual add, a
// second layer_norm, a linear-free pointwise MLP stand-in and a second residual. Only the graph's
// shape matters here: it has the meta ops, reductions and long-range residual edges of a real one.
#pragma once

#include "ir/ops.h"

#include <cstdint>

namespace braze::testing {

struct BlockShape {
  int64_t batch = 2;
  int64_t seq = 8;
  int64_t heads = 2;
  int64_t head = 8;  // hidden = heads * head
};

namespace detail {
inline std::vector<Val*> constants(Fusion& f, const std::vector<int64_t>& v) {
  std::vector<Val*> out;
  for (int64_t x : v) out.push_back(f.constant(x));
  return out;
}

inline TensorView* layerNorm(Fusion& f, TensorView* x, TensorView* w, TensorView* b, const std::vector<Val*>& full) {
  TensorView* xf = cast(x, DataType::Float)->asTensor();
  auto [var, mean] = varMean(xf, {2}, 0.0, /*keepdim=*/true);
  Val* rstd = unaryOp(OpKind::Rsqrt, add(var, f.constant(1e-5)));
  Val* normed = mul(sub(xf, expand(mean, full)), expand(rstd->asTensor(), full));
  Val* wf = cast(broadcastInDim(w, full, {2}), DataType::Float);
  Val* bf = cast(broadcastInDim(b, full, {2}), DataType::Float);
  return cast(add(mul(normed, wf), bf), DataType::BFloat16)->asTensor();
}
}  // namespace detail

// Inputs: x [B, T, C], then per block ln1 w, b, ln2 w, b, mlp a, b (each [C]); cos, sin [T, head]
// shared by the blocks. Output: the last block's result (bf16).
inline void defineTransformerBlocks(Fusion& f, const BlockShape& s, int64_t blocks) {
  using detail::constants;
  FusionGuard guard(&f);
  const int64_t hidden = s.heads * s.head;
  const auto full = constants(f, {s.batch, s.seq, hidden});
  const auto heads_shape = constants(f, {s.batch, s.heads, s.seq, s.head});
  TensorView* x = defineTensor({s.batch, s.seq, hidden}, {true, true, true}, DataType::BFloat16);
  TensorView* cos = defineTensor({s.seq, s.head}, {true, true}, DataType::BFloat16);
  TensorView* sin = defineTensor({s.seq, s.head}, {true, true}, DataType::BFloat16);
  auto param = [&] { return defineTensor({hidden}, {true}, DataType::BFloat16); };
  auto sliceHead = [&](TensorView* t, int64_t start, int64_t end) {
    return slice(t, constants(f, {0, 0, 0, start}), constants(f, {s.batch, s.heads, s.seq, end}),
                 constants(f, {1, 1, 1, 1}));
  };
  for (int64_t b = 0; b < blocks; ++b) {
    TensorView* ln1_w = param();
    TensorView* ln1_b = param();
    TensorView* ln2_w = param();
    TensorView* ln2_b = param();
    TensorView* mlp_a = param();
    TensorView* mlp_b = param();
    TensorView* h = detail::layerNorm(f, x, ln1_w, ln1_b, full);
    TensorView* heads = permute(reshape(h, constants(f, {s.batch, s.seq, s.heads, s.head})), {0, 2, 1, 3});
    TensorView* rotated = cat({cast(unaryOp(OpKind::Neg, sliceHead(heads, s.head / 2, s.head)), DataType::BFloat16)->asTensor(),
                               sliceHead(heads, 0, s.head / 2)},
                              -1);
    Val* roped = add(mul(heads, broadcastInDim(cos, heads_shape, {2, 3})),
                     mul(rotated, broadcastInDim(sin, heads_shape, {2, 3})));
    TensorView* attn = reshape(permute(roped->asTensor(), {0, 2, 1, 3}), full);
    TensorView* x1 = cast(add(x, attn), DataType::BFloat16)->asTensor();
    TensorView* h2 = detail::layerNorm(f, x1, ln2_w, ln2_b, full);
    Val* t = add(mul(h2, cast(broadcastInDim(mlp_a, full, {2}), DataType::Float)),
                 cast(broadcastInDim(mlp_b, full, {2}), DataType::Float));
    Val* mlp = mul(t, unaryOp(OpKind::Sigmoid, mul(t, f.constant(1.702))));
    x = cast(add(x1, mlp), DataType::BFloat16)->asTensor();
  }
  f.addOutput(x);
}

}  // namespace braze::testing
