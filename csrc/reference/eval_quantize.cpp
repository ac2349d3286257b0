// quantize / dequantize per tensor, per channel and per block, on the reference evaluator.
#include "support/error.h"
#include "reference/eval_ops.h"
#include "ir/numerics.h"
#include "reference/pointwise_math.h"

#include <cmath>

namespace braze::reference {
namespace {

// Offset into the scale (and zero point) for an element of x at `index`.
int64_t scaleOffset(const Expr& expr, const HostTensor& scale, const std::vector<int64_t>& index) {
  const std::string& granularity = expr.attrs().getString("granularity");
  if (granularity == "tensor") return 0;
  if (granularity == "channel") return index[expr.attrs().getInt("axis")] * scale.strides()[0];
  const auto& block = expr.attrs().getInts("block_shape");
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += (index[d] / block[d]) * scale.strides()[d];
  return off;
}

}  // namespace

std::vector<HostValue> evalQuantize(const Expr& expr, const Operands& operands) {
  const HostTensor& x = tensorOf(*operands[0]);
  const HostTensor& scale = tensorOf(*operands[1]);
  const HostTensor* zero_point = operands.size() > 2 ? &tensorOf(*operands[2]) : nullptr;
  const DataType out_dtype = expr.output(0)->dtype();
  HostTensor out = HostTensor::empty(out_dtype, x.sizes());
  int64_t linear = 0;
  const bool quantize = expr.kind() == OpKind::Quantize;
  forEachIndex(x.sizes(), [&](const std::vector<int64_t>& index) {
    const int64_t s_off = scaleOffset(expr, scale, index);
    const double s = scale.readDouble(s_off);
    const double zp = zero_point != nullptr ? zero_point->readDouble(scaleOffset(expr, *zero_point, index)) : 0.0;
    const int64_t x_off = x.offsetOf(index);
    if (!quantize) {
      out.writeDouble(linear++, (x.readDouble(x_off) - zp) * s);
      return;
    }
    const double scaled = x.readDouble(x_off) / s;
    if (isFloat8(out_dtype)) {
      out.writeDouble(linear++, scaled);  // the fp8 conversion saturates, as CUDA's satfinite
    } else {
      // Round half to even, add the zero point, saturate: torch's quantize_per_tensor.
      const double q = std::nearbyint(scaled) + zp;
      out.writeInt(linear++, numerics::roundHalfEvenSaturate(q, integerMin(out_dtype), integerMax(out_dtype)));
    }
  });
  return {out};
}

}  // namespace braze::reference
