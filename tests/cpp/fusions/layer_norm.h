// The nanoGPT layer_norm from shared/seeds/001 (nvFuser PR #2815), built with the C++ builders exactly
// as the seed's FusionDefinition builds it: bf16 in, float math, bf16 out, weight and bias broadcast.
#pragma once

#include "device/device_tensor.h"
#include "ir/ops.h"

#include <memory>
#include <optional>
#include <vector>

namespace braze::testing {

struct LayerNormShape {
  int64_t batch = 16;
  int64_t seq = 128;
  int64_t hidden = 1600;
};

// Inputs: x [batch, seq, hidden] (symbolic sizes), weight [hidden], bias [hidden]; output bf16.
inline void defineLayerNorm(Fusion& fusion, const LayerNormShape& s, double eps = 1e-5) {
  FusionGuard guard(&fusion);
  TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16, false, {2, 1, 0});
  TensorView* weight = defineTensor({-1}, {true}, DataType::BFloat16, false, {0});
  TensorView* bias = defineTensor({-1}, {true}, DataType::BFloat16, false, {0});
  auto c = [&](int64_t v) -> Val* { return fusion.constant(v); };
  Val* xf = cast(x, DataType::Float);
  auto [var, mean] = varMean(xf->asTensor(), {2}, /*correction=*/0.0, /*keepdim=*/false);
  TensorView* var_b = broadcastInDim(var, {c(s.batch), c(s.seq), c(1)}, {0, 1});
  TensorView* mean_b = broadcastInDim(mean, {c(s.batch), c(s.seq), c(1)}, {0, 1});
  Val* rstd = unaryOp(OpKind::Rsqrt, add(var_b, fusion.constant(eps)));
  const std::vector<Val*> full_shape{c(s.batch), c(s.seq), c(s.hidden)};
  Val* centered = sub(xf, broadcastInDim(mean_b, full_shape, {0, 1, 2}));
  Val* normed = mul(centered, broadcastInDim(rstd->asTensor(), full_shape, {0, 1, 2}));
  Val* scaled = mul(normed, cast(broadcastInDim(weight, full_shape, {2}), DataType::Float));
  Val* shifted = add(scaled, cast(broadcastInDim(bias, full_shape, {2}), DataType::Float));
  fusion.addOutput(cast(shifted, DataType::BFloat16));
}

// The same layer_norm with no size in the definition (keepdim statistics, weight and bias broadcast
// with flags), as model code defines it once for every batch and sequence length.
inline std::shared_ptr<Fusion> sizelessLayerNorm() {
  auto f = std::make_shared<Fusion>();
  FusionGuard guard(f.get());
  TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
  TensorView* weight = defineTensor({-1}, {true}, DataType::BFloat16);
  TensorView* bias = defineTensor({-1}, {true}, DataType::BFloat16);
  TensorView* xf = cast(x, DataType::Float)->asTensor();
  auto [var, mean] = varMean(xf, {2}, /*correction=*/0.0, /*keepdim=*/true);
  Val* normed = mul(sub(xf, mean), unaryOp(OpKind::Rsqrt, add(var, f->constant(1e-5))));
  Val* scaled = mul(normed, cast(broadcast(weight, {true, true, false}), DataType::Float));
  f->addOutput(cast(add(scaled, cast(broadcast(bias, {true, true, false}), DataType::Float)), DataType::BFloat16));
  return f;
}

// The layer-norm backward as Thunder hands it to nvFuser, sizes left to execute (bf16 in and out, float
// math): grad_out, x, mean and rstd ([rows, 1]) and weight in; grad_in (a reduction over the hidden dim
// per row), grad_weight and grad_bias (reductions over the rows) out. `row_dims` leading dims hold the
// rows: 1 for [rows, hidden], 2 for a model's [batch, seq, hidden] (Thunder keeps that shape).
inline std::shared_ptr<Fusion> sizelessLayerNormBackward(int row_dims = 1) {
  auto f = std::make_shared<Fusion>();
  FusionGuard guard(f.get());
  const DataType bf16 = DataType::BFloat16, f32 = DataType::Float;
  const auto rank = static_cast<size_t>(row_dims) + 1;
  const std::vector<int64_t> open(rank, -1);
  std::vector<int64_t> stats_shape = open;
  stats_shape.back() = 1;
  std::vector<std::optional<bool>> stats_contiguity(rank, true);
  stats_contiguity.back() = std::nullopt;
  TensorView* grad_out = defineTensor(open, std::vector<std::optional<bool>>(rank, true), bf16);
  TensorView* x = defineTensor(open, std::vector<std::optional<bool>>(rank, true), bf16);
  TensorView* mean = defineTensor(stats_shape, stats_contiguity, f32);
  TensorView* rstd = defineTensor(stats_shape, stats_contiguity, f32);
  TensorView* weight = defineTensor({-1}, {true}, bf16);
  std::vector<bool> broadcast_rows(rank, true);
  broadcast_rows.back() = false;
  std::vector<int64_t> rows(static_cast<size_t>(row_dims));
  for (int d = 0; d < row_dims; ++d) rows[static_cast<size_t>(d)] = d;
  const auto hidden = static_cast<int64_t>(row_dims);
  Val* go = cast(grad_out, f32);
  Val* x_hat = mul(sub(cast(x, f32), mean), rstd);
  TensorView* g = mul(go, broadcast(cast(weight, f32)->asTensor(), broadcast_rows))->asTensor();
  Val* c = size(x, hidden);
  Val* a = div(reduce(OpKind::Sum, g, {hidden}, /*keepdim=*/true), c);
  Val* b = div(reduce(OpKind::Sum, mul(g, x_hat)->asTensor(), {hidden}, /*keepdim=*/true), c);
  f->addOutput(cast(mul(rstd, sub(sub(g, a), mul(x_hat, b))), bf16));
  f->addOutput(cast(reduce(OpKind::Sum, mul(go, x_hat)->asTensor(), rows), bf16));
  f->addOutput(cast(reduce(OpKind::Sum, go->asTensor(), rows), bf16));
  return f;
}

// Stand-in device tensors (addresses never dereferenced) for sizelessLayerNormBackward at `rows` (its
// row dims' extents) x hidden.
inline std::vector<device::DeviceValue> layerNormBackwardAddresses(const std::vector<int64_t>& rows, int64_t hidden) {
  using device::DeviceTensor;
  std::vector<int64_t> full = rows, stats = rows;
  full.push_back(hidden);
  stats.push_back(1);
  return {DeviceTensor::contiguous(0x10000000, DataType::BFloat16, full),
          DeviceTensor::contiguous(0x20000000, DataType::BFloat16, full),
          DeviceTensor::contiguous(0x30000000, DataType::Float, stats),
          DeviceTensor::contiguous(0x40000000, DataType::Float, stats),
          DeviceTensor::contiguous(0x50000000, DataType::BFloat16, {hidden})};
}
inline std::vector<device::DeviceValue> layerNormBackwardAddresses(int64_t rows, int64_t hidden) {
  return layerNormBackwardAddresses(std::vector<int64_t>{rows}, hidden);
}

}  // namespace braze::testing
