// Quantize / dequantize builders: first-class ops (not cast+mul chains) so the segmenter can fuse
// them into GEMM prologues and epilogues through meta-op chains (the MIGraphX seed).
#include "support/error.h"
#include "ir/ops.h"
#include "ir/ops_util.h"

namespace braze {

using detail::newTensorLike;
using detail::shapeString;

namespace {

// Checks the scale (and zero point) against x for the granularity and returns the attributes.
Attributes granularityAttrs(std::string_view op, TensorView* x, TensorView* scale, TensorView* zero_point,
                            const QuantAxis& g) {
  BRAZE_CHECK(scale != nullptr, "{}: scale is None", op);
  BRAZE_TYPE_CHECK(isFloating(scale->dtype()), "{}: scale {} must be floating, got {}", op, scale->name(),
                   toString(scale->dtype()));
  BRAZE_CHECK(!(g.axis && !g.block_shape.empty()), "{}: give either axis (per channel) or block_shape (per block)", op);
  Attributes attrs;
  const auto xs = x->logical();
  const auto ss = scale->logical();
  if (g.axis) {
    const int64_t axis = x->normalizeAxis(*g.axis, op);
    BRAZE_CHECK(scale->rank() == 1, "{}: a per-channel scale must be 1-D, got {} {}", op, scale->name(), shapeString(scale));
    BRAZE_CHECK(ss[0].extent < 0 || xs[axis].extent < 0 || ss[0].extent == xs[axis].extent,
                "{}: per-channel scale {} has {} entries but {} has {} along axis {}", op, scale->name(), ss[0].extent,
                x->name(), xs[axis].extent, axis);
    attrs.set("granularity", std::string("channel"));
    attrs.set("axis", axis);
  } else if (!g.block_shape.empty()) {
    BRAZE_CHECK(static_cast<int64_t>(g.block_shape.size()) == x->rank(),
                "{}: block_shape [{}] needs one entry per dim of {} (rank {})", op, fmt::join(g.block_shape, ", "),
                x->name(), x->rank());
    BRAZE_CHECK(scale->rank() == x->rank(), "{}: a per-block scale needs the rank {} of {}, got {} {}", op, x->rank(),
                x->name(), scale->name(), shapeString(scale));
    for (size_t d = 0; d < g.block_shape.size(); ++d) {
      const int64_t b = g.block_shape[d];
      BRAZE_CHECK(b >= 1, "{}: block_shape[{}] = {} must be >= 1", op, d, b);
      if (xs[d].extent >= 0 && ss[d].extent >= 0) {
        BRAZE_CHECK(ss[d].extent == (xs[d].extent + b - 1) / b,
                    "{}: scale {} has {} blocks on dim {}, expected ceil({} / {}) = {}", op, scale->name(), ss[d].extent,
                    d, xs[d].extent, b, (xs[d].extent + b - 1) / b);
      }
    }
    attrs.set("granularity", std::string("block"));
    attrs.set("block_shape", g.block_shape);
  } else {
    for (const IterDomain& id : ss) {
      BRAZE_CHECK(id.isBroadcast() || id.extent == 1,
                  "{}: a per-tensor scale must have one element, got {} {} (pass axis= or block_shape= for finer scales)",
                  op, scale->name(), shapeString(scale));
    }
    attrs.set("granularity", std::string("tensor"));
  }
  if (zero_point != nullptr) {
    BRAZE_CHECK(zero_point->rank() == scale->rank(), "{}: zero_point {} {} must have the scale's shape {}", op,
                zero_point->name(), shapeString(zero_point), shapeString(scale));
  }
  return attrs;
}

}  // namespace

TensorView* quantize(TensorView* x, TensorView* scale, TensorView* zero_point, DataType dtype, const QuantAxis& g) {
  BRAZE_CHECK(x != nullptr, "quantize: operand is None");
  BRAZE_TYPE_CHECK(isFloating(x->dtype()), "quantize: {} must be floating, got {}", x->name(), toString(x->dtype()));
  BRAZE_TYPE_CHECK(dtype == DataType::Int8 || dtype == DataType::UInt8 || isFloat8(dtype),
                   "quantize: the output dtype must be Int8, UInt8 or a Float8 type, got {}", toString(dtype));
  BRAZE_CHECK(zero_point == nullptr || !isFloat8(dtype), "quantize: fp8 outputs take no zero_point");
  // torch's zero points are integers; a Float one would be added before or after the rounding.
  BRAZE_TYPE_CHECK(zero_point == nullptr || isIntegral(zero_point->dtype()),
                   "quantize: the zero_point {} must be an integer tensor, got {}", zero_point->name(),
                   toString(zero_point->dtype()));
  Attributes attrs = granularityAttrs("quantize", x, scale, zero_point, g);
  attrs.set("dtype", dtype);
  std::vector<Val*> inputs{x, scale};
  if (zero_point != nullptr) inputs.push_back(zero_point);
  TensorView* result = newTensorLike(x->fusion(), dtype, x->logical());
  x->fusion()->newExpr(OpKind::Quantize, std::move(inputs), {result}, std::move(attrs));
  return result;
}

TensorView* dequantize(TensorView* q, TensorView* scale, TensorView* zero_point, DataType dtype, const QuantAxis& g) {
  BRAZE_CHECK(q != nullptr, "dequantize: operand is None");
  BRAZE_TYPE_CHECK(isIntegral(q->dtype()) || isFloat8(q->dtype()),
                   "dequantize: {} must be an integer or Float8 tensor, got {}", q->name(), toString(q->dtype()));
  BRAZE_TYPE_CHECK(isFloating(dtype), "dequantize: the output dtype must be floating, got {}", toString(dtype));
  Attributes attrs = granularityAttrs("dequantize", q, scale, zero_point, g);
  attrs.set("dtype", dtype);
  std::vector<Val*> inputs{q, scale};
  if (zero_point != nullptr) inputs.push_back(zero_point);
  TensorView* result = newTensorLike(q->fusion(), dtype, q->logical());
  q->fusion()->newExpr(OpKind::Dequantize, std::move(inputs), {result}, std::move(attrs));
  return result;
}

}  // namespace braze
