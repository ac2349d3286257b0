// Meta ops evaluate to views of their operand's storage (strides and offset, no copy), as bookending
// will do on the GPU; pad and cat build new tensors; size reads a shape.
#include "support/error.h"
#include "ir/shape_rules.h"
#include "reference/eval_ops.h"
#include "reference/pointwise_math.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace braze::reference {
namespace {

std::vector<int64_t> intsOf(const Operands& operands, size_t first, size_t count) {
  std::vector<int64_t> values;
  for (size_t i = first; i < first + count; ++i) values.push_back(intOf(*operands[i]));
  return values;
}

HostTensor broadcastInDim(const Expr& expr, const HostTensor& in, const Operands& operands) {
  const auto shape = intsOf(operands, 1, operands.size() - 1);
  checkBroadcastInDim(expr, in.sizes(), shape);
  const auto& bdims = expr.attrs().getInts("broadcast_dims");
  std::vector<int64_t> strides(shape.size(), 0);  // unmapped dims are new: stride 0
  for (size_t i = 0; i < bdims.size(); ++i) {
    const int64_t d = bdims[i];
    strides[d] = (in.sizes()[i] == 1 && shape[d] != 1) ? 0 : in.strides()[i];
  }
  return in.view(shape, strides, in.offset());
}

HostTensor expand(const Expr& expr, const HostTensor& in, const Operands& operands) {
  const auto shape = expandSizes(expr, in.sizes(), intsOf(operands, 1, operands.size() - 1));
  std::vector<int64_t> strides = in.strides();
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (shape[d] != in.sizes()[d]) strides[d] = 0;
  }
  return in.view(shape, strides, in.offset());
}

HostTensor reshape(const Expr& expr, const HostTensor& in, const Operands& operands) {
  const auto shape = reshapeSizes(expr, in.sizes(), intsOf(operands, 1, operands.size() - 1));
  // The reference copies to row-major and views that; whether the GPU can view instead is the alias
  // analysis' question, not the oracle's.
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * std::max<int64_t>(shape[d + 1], 1);
  const HostTensor flat = in.contiguous();
  return flat.view(shape, strides, flat.offset());
}

HostTensor permute(const Expr& expr, const HostTensor& in) {
  const auto& dims = expr.attrs().getInts("dims");
  std::vector<int64_t> sizes, strides;
  for (int64_t d : dims) {
    sizes.push_back(in.sizes()[d]);
    strides.push_back(in.strides()[d]);
  }
  return in.view(sizes, strides, in.offset());
}

HostTensor squeeze(const Expr& expr, const HostTensor& in) {
  const auto& dims = expr.attrs().getInts("dims");
  std::vector<int64_t> sizes, strides;
  for (int64_t d = 0; d < in.rank(); ++d) {
    const bool removed = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (removed) {
      // An expanded dim (stride 0) holds one value however long it is: dropping it loses nothing.
      BRAZE_CHECK(in.sizes()[d] == 1 || in.strides()[d] == 0, "squeeze: dim {} of {} has size {}, not 1", d,
                  expr.input(0)->name(), in.sizes()[d]);
      continue;
    }
    sizes.push_back(in.sizes()[d]);
    strides.push_back(in.strides()[d]);
  }
  return in.view(sizes, strides, in.offset());
}

HostTensor slice(const Expr& expr, const HostTensor& in, const Operands& operands) {
  const auto dims = sliceDims(expr, in.sizes(), intsOf(operands, 1, operands.size() - 1));
  std::vector<int64_t> sizes, strides;
  int64_t offset = in.offset();
  for (int64_t d = 0; d < in.rank(); ++d) {
    sizes.push_back(dims[d].size);
    strides.push_back(in.strides()[d] * dims[d].step);
    offset += dims[d].start * in.strides()[d];
  }
  return in.view(sizes, strides, offset);
}

HostTensor copy(const HostTensor& in) { return in.contiguous(); }

HostTensor pad(const HostTensor& in, const Operands& operands) {
  const auto widths = intsOf(operands, 2, operands.size() - 2);
  const ScalarValue value = scalarOf(*operands[1]);
  std::vector<int64_t> left(in.rank(), 0), shape = in.sizes();
  for (size_t pair = 0; pair < widths.size() / 2; ++pair) {
    const int64_t d = in.rank() - 1 - static_cast<int64_t>(pair);
    left[d] = widths[2 * pair];
    shape[d] += widths[2 * pair] + widths[2 * pair + 1];
  }
  HostTensor out = HostTensor::empty(in.dtype(), shape);
  HostTensor fill = HostTensor::empty(in.dtype(), {1});
  if (isFloating(in.dtype())) {
    fill.writeDouble(0, toDouble(value));
  } else {
    fill.writeInt(0, std::holds_alternative<double>(value) ? floatToInt(toDouble(value), in.dtype()) : toInt(value));
  }
  int64_t linear = 0;
  forEachIndex(shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> src(index.size());
    bool inside = true;
    for (size_t d = 0; d < index.size(); ++d) {
      src[d] = index[d] - left[d];
      inside = inside && src[d] >= 0 && src[d] < in.sizes()[d];
    }
    if (inside) {
      copyElement(out, linear++, in, in.offsetOf(src));
    } else {
      copyElement(out, linear++, fill, 0);
    }
  });
  return out;
}

HostTensor cat(const Expr& expr, const Operands& operands) {
  const int64_t dim = expr.attrs().getInt("dim");
  const HostTensor& first = tensorOf(*operands[0]);
  std::vector<int64_t> shape = first.sizes();
  shape[dim] = 0;
  for (const HostValue* v : operands) shape[dim] += tensorOf(*v).sizes()[dim];
  HostTensor out = HostTensor::empty(first.dtype(), shape);
  int64_t base = 0;
  for (const HostValue* v : operands) {
    const HostTensor& t = tensorOf(*v);
    forEachIndex(t.sizes(), [&](const std::vector<int64_t>& index) {
      std::vector<int64_t> dst = index;
      dst[dim] += base;
      copyElement(out, out.offsetOf(dst), t, t.offsetOf(index));
    });
    base += t.sizes()[dim];
  }
  return out;
}

}  // namespace

std::vector<HostValue> evalShapeOp(const Expr& expr, const Operands& operands) {
  const HostTensor& in = tensorOf(*operands[0]);
  switch (expr.kind()) {
    case OpKind::Broadcast: {
      const auto& flags = expr.attrs().getInts("is_broadcast_dim");
      std::vector<int64_t> sizes, strides;
      int64_t next = 0;
      for (int64_t f : flags) {
        sizes.push_back(f ? 1 : in.sizes()[next]);
        strides.push_back(f ? 0 : in.strides()[next]);
        next += f ? 0 : 1;
      }
      return {in.view(sizes, strides, in.offset())};
    }
    case OpKind::BroadcastInDim: return {broadcastInDim(expr, in, operands)};
    case OpKind::Expand: return {expand(expr, in, operands)};
    case OpKind::Reshape: return {reshape(expr, in, operands)};
    case OpKind::Permute: return {permute(expr, in)};
    case OpKind::Squeeze: return {squeeze(expr, in)};
    case OpKind::Slice: return {slice(expr, in, operands)};
    case OpKind::Set:
    case OpKind::SegmentSet:
    case OpKind::StrideOrder: return {copy(in)};
    case OpKind::Pad: return {pad(in, operands)};
    case OpKind::Cat: return {cat(expr, operands)};
    case OpKind::Size: return {ScalarValue{in.sizes()[expr.attrs().getInt("dim")]}};
    default: BRAZE_UNREACHABLE("evalShapeOp({})", expr.name());
  }
}

std::vector<HostValue> evalCreation(const Expr& expr, const Operands& operands) {
  const DataType dtype = expr.output(0)->dtype();
  auto write = [&](HostTensor& t, int64_t i, double f, int64_t n, bool is_float) {
    if (isFloating(dtype)) {
      t.writeDouble(i, is_float ? f : static_cast<double>(n));
    } else {
      t.writeInt(i, is_float ? floatToInt(f, dtype) : n);
    }
  };
  if (expr.kind() == OpKind::Full) {
    const auto shape = intsOf(operands, 1, operands.size() - 1);
    const ScalarValue fill = scalarOf(*operands[0]);
    const bool is_float = std::holds_alternative<double>(fill);
    HostTensor out = HostTensor::empty(dtype, shape);
    for (int64_t i = 0; i < out.numel(); ++i) write(out, i, toDouble(fill), toInt(fill), is_float);
    return {out};
  }
  BRAZE_ASSERT(expr.kind() == OpKind::Iota, "evalCreation({})", expr.name());
  const int64_t length = intOf(*operands[0]);
  const ScalarValue start = scalarOf(*operands[1]);
  const ScalarValue step = scalarOf(*operands[2]);
  const bool is_float = isFloating(dtype);
  HostTensor out = HostTensor::empty(dtype, {length});
  for (int64_t i = 0; i < length; ++i) {
    const auto n = static_cast<int64_t>(static_cast<uint64_t>(toInt(start)) + static_cast<uint64_t>(i) * toInt(step));
    write(out, i, toDouble(start) + static_cast<double>(i) * toDouble(step), n, is_float);
  }
  return {out};
}

}  // namespace braze::reference
