#include "ir/size_rules.h"

#include "ir/fusion.h"
#include "ir/shape_rules.h"
#include "ir/val.h"
#include "support/error.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace braze {

std::string sizesString(const Sizes& sizes) { return fmt::format("[{}]", fmt::join(sizes, ", ")); }

std::string operandName(const Val* tensor) {
  const Val* origin = tensor;
  while (!origin->isFusionInput() && origin->definition() != nullptr) {
    const Expr& def = *origin->definition();
    const Val* only = nullptr;
    int tensors = 0;
    for (const Val* in : def.inputs()) {
      if (in->isTensor()) {
        only = in;
        ++tensors;
      }
    }
    if (tensors != 1 || !(isElementwise(def.kind()) || isMetaOp(def.kind()))) break;
    origin = only;
  }
  if (origin == tensor || !origin->isFusionInput()) return tensor->name();
  const auto& inputs = origin->fusion()->inputs();
  const auto position = std::find(inputs.begin(), inputs.end(), origin) - inputs.begin();
  return fmt::format("{} (from input {}, {})", tensor->name(), position, origin->name());
}

namespace {

using SizesOf = std::function<const Sizes&(size_t)>;
using ScalarOf = std::function<int64_t(size_t)>;

int64_t numelOf(const Sizes& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// "T3 [2, 5]": an operand as messages name it.
std::string operandString(const Expr& expr, size_t i, const Sizes& sizes) {
  return fmt::format("{} {}", operandName(expr.input(i)), sizesString(sizes));
}

// Elementwise operands (equal ranks, or 0-D): each dim takes the size that is not 1 (a broadcast dim).
Sizes broadcastSizes(const Expr& expr, const SizesOf& operand) {
  Sizes shape;
  size_t from = 0;  // the operand that set a dim's size, for the message
  for (size_t i = 0; i < expr.inputs().size(); ++i) {
    if (!expr.input(i)->isTensor()) continue;
    const Sizes& s = operand(i);
    if (shape.empty() && !s.empty()) {
      shape = s;
      from = i;
      continue;
    }
    for (size_t d = 0; d < s.size() && d < shape.size(); ++d) {
      if (s[d] == shape[d] || s[d] == 1) continue;
      BRAZE_CHECK(shape[d] == 1, "{}: dim {} has size {} in {} but {} in {} (sizes must match, or be 1 on a broadcast "
                  "dim)", expr.name(), d, shape[d], operandString(expr, from, operand(from)), s[d],
                  operandString(expr, i, s));
      shape[d] = s[d];
      from = i;
    }
  }
  return shape;
}

Sizes reducedSizes(const Expr& expr, const Sizes& in) {
  const auto& dims = expr.attrs().getInts("dims");
  const bool keepdim = expr.attrs().has("keepdim") && expr.attrs().getBool("keepdim");
  Sizes shape;
  int64_t reduced_count = 1;
  for (size_t d = 0; d < in.size(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    if (reduced) reduced_count *= in[d];
    if (!reduced) shape.push_back(in[d]);
    if (reduced && keepdim) shape.push_back(1);
  }
  const bool is_minmax = expr.kind() == OpKind::Max || expr.kind() == OpKind::Min;
  BRAZE_CHECK(!is_minmax || reduced_count > 0 || numelOf(shape) == 0,
              "{}: cannot reduce {} {} over an empty dim (no identity for {})", expr.name(), expr.input(0)->name(),
              sizesString(in), expr.name());
  return shape;
}

Sizes catSizes(const Expr& expr, const SizesOf& operand) {
  const auto dim = static_cast<size_t>(expr.attrs().getInt("dim"));
  const Sizes& first = operand(0);
  Sizes shape = first;
  shape[dim] = 0;
  for (size_t i = 0; i < expr.inputs().size(); ++i) {
    const Sizes& s = operand(i);
    BRAZE_CHECK(s.size() == first.size(), "cat: {} has rank {} but {} has rank {}", operandString(expr, i, s), s.size(),
                operandString(expr, 0, first), first.size());
    for (size_t d = 0; d < s.size(); ++d) {
      BRAZE_CHECK(d == dim || s[d] == first[d], "cat: {} has size {} on dim {} but {} has {} (only dim {} may differ)",
                  operandString(expr, i, s), s[d], d, operandString(expr, 0, first), first[d], dim);
    }
    BRAZE_CHECK(!__builtin_add_overflow(shape[dim], s[dim], &shape[dim]),
                "cat: the result's dim {} would have more elements than a 64-bit count holds ({} after {} inputs)", dim,
                s[dim], i);
  }
  checkElementCount("cat", shape);
  return shape;
}

Sizes padSizes(const Expr& expr, const Sizes& in, const ScalarOf& scalar) {
  Sizes shape = in;  // inputs x, value, then (left, right) pairs from the last dim
  for (size_t pair = 0; 2 * pair + 4 <= expr.inputs().size(); ++pair) {
    const size_t d = shape.size() - 1 - pair;
    const int64_t left = scalar(2 + 2 * pair), right = scalar(3 + 2 * pair);
    // In 128 bits: widths near the int64 limits must not wrap into a plausible size.
    const __int128 size = static_cast<__int128>(in[d]) + left + right;
    BRAZE_CHECK(size >= 0, "pad: dim {} of {} would have negative size {} (widths {} and {})", d,
                operandString(expr, 0, in), static_cast<int64_t>(std::max<__int128>(size, INT64_MIN)), left, right);
    BRAZE_CHECK(size <= INT64_MAX, "pad: dim {} of {} with widths {} and {} would have more elements than a 64-bit "
                "count holds", d, operandString(expr, 0, in), left, right);
    shape[d] = static_cast<int64_t>(size);
  }
  checkElementCount("pad", shape);
  return shape;
}

Sizes shapeOperands(const Expr& expr, size_t first, const ScalarOf& scalar) {
  Sizes shape;
  for (size_t i = first; i < expr.inputs().size(); ++i) shape.push_back(scalar(i));
  for (int64_t s : shape) BRAZE_CHECK(s >= 0, "{}: shape {} has a negative size", expr.name(), sizesString(shape));
  checkElementCount(expr.name(), shape);
  return shape;
}

// An index op whose indexed dim of x is empty while the result is not: every index is out of range.
void checkIndexedExtent(const Expr& expr, const Sizes& x, int64_t dim, const Sizes& result) {
  BRAZE_INDEX_CHECK(x[dim] > 0 || numelOf(result) == 0,
                    "{}: dim {} of {} is empty, so every index is out of bounds (the result {} is not empty)",
                    expr.name(), dim, operandString(expr, 0, x), sizesString(result));
}

Sizes indexingSizes(const Expr& expr, const Sizes& x, const Sizes& index) {
  const int64_t dim = expr.attrs().getInt("dim");
  if (expr.kind() == OpKind::IndexSelect) {
    BRAZE_CHECK(index.size() <= 1, "index_select: the index {} must be 0-D or 1-D", operandString(expr, 1, index));
    Sizes shape = x;
    shape[dim] = index.empty() ? 1 : index[0];
    checkIndexedExtent(expr, x, dim, shape);
    return shape;
  }
  BRAZE_CHECK(index.size() == x.size(), "{}: the index {} must have the rank of {}", expr.name(),
              operandString(expr, 1, index), operandString(expr, 0, x));
  Sizes shape = index;
  for (size_t d = 0; d < x.size(); ++d) {
    if (static_cast<int64_t>(d) == dim) continue;
    if (expr.kind() == OpKind::TakeAlongAxis) {
      // The index broadcasts its size-1 dims against x, and x its size-1 dims against the index.
      if (shape[d] == 1) shape[d] = x[d];
      BRAZE_CHECK(shape[d] == x[d] || x[d] == 1, "take_along_axis: index {} has size {} on dim {} but {} has {} (only "
                  "dim {} may differ)", operandString(expr, 1, index), index[d], d, operandString(expr, 0, x), x[d], dim);
    } else {
      BRAZE_CHECK(index[d] <= x[d], "gather: index {} has size {} on dim {}, larger than {} ({})",
                  operandString(expr, 1, index), index[d], d, operandString(expr, 0, x), x[d]);
    }
  }
  checkIndexedExtent(expr, x, dim, shape);
  return shape;
}

// torch.matmul (b_is_nk: linear, whose weight is [n, k] or [k]): batch dims broadcast, a 1-D operand
// loses its dim in the result, and K must agree.
Sizes matmulSizes(const Expr& expr, const SizesOf& operand) {
  const bool linear = expr.kind() == OpKind::Linear;
  const Sizes& a = operand(0);
  const Sizes& b = operand(1);
  const int64_t ka = a.back();
  const int64_t kb = linear || b.size() == 1 ? b.back() : b[b.size() - 2];
  BRAZE_CHECK(ka == kb, "{}: inner sizes differ: {} has K = {} but {} has K = {}", expr.name(),
              operandString(expr, 0, a), ka, operandString(expr, 1, b), kb);
  Sizes shape;
  if (linear) {
    shape.assign(a.begin(), a.end() - 1);
    if (b.size() == 2) shape.push_back(b[0]);
    if (expr.inputs().size() > 2 && expr.input(2)->isTensor()) {
      const Sizes& bias = operand(2);
      const int64_t n = b.size() == 2 ? b[0] : (shape.empty() ? 1 : shape.back());
      BRAZE_CHECK(bias.empty() || bias[0] == n || (b.size() == 1 && bias[0] == 1),
                  "linear: the bias {} has {} entries but the weight {} has {} outputs", operandString(expr, 2, bias),
                  bias.empty() ? 1 : bias[0], operandString(expr, 1, b), n);
    }
    return shape;
  }
  const size_t a_batch = a.size() > 2 ? a.size() - 2 : 0;
  const size_t b_batch = b.size() > 2 ? b.size() - 2 : 0;
  const size_t batch = std::max(a_batch, b_batch);
  for (size_t i = 0; i < batch; ++i) {
    const int64_t sa = i + a_batch >= batch ? a[i + a_batch - batch] : 1;
    const int64_t sb = i + b_batch >= batch ? b[i + b_batch - batch] : 1;
    BRAZE_CHECK(sa == sb || sa == 1 || sb == 1, "matmul: batch dim {} differs: {} has {} but {} has {} (batch sizes "
                "must match, or be 1)", i, operandString(expr, 0, a), sa, operandString(expr, 1, b), sb);
    shape.push_back(sa == 1 ? sb : sa);
  }
  if (a.size() >= 2) shape.push_back(a[a.size() - 2]);
  if (b.size() >= 2) shape.push_back(b.back());
  return shape;
}

// quantize / dequantize: the scale (and zero point) per tensor, per channel or per block of x.
void checkScaleSizes(const Expr& expr, const SizesOf& operand) {
  const Sizes& x = operand(0);
  const Sizes& scale = operand(1);
  const std::string& granularity = expr.attrs().getString("granularity");
  if (granularity == "tensor") {
    BRAZE_CHECK(numelOf(scale) == 1, "{}: a per-tensor scale needs one element, got {}", expr.name(),
                operandString(expr, 1, scale));
  } else if (granularity == "channel") {
    const int64_t axis = expr.attrs().getInt("axis");
    BRAZE_CHECK(scale.size() == 1 && scale[0] == x[axis], "{}: the per-channel scale {} needs {} entries, one per "
                "index of axis {} of {}", expr.name(), operandString(expr, 1, scale), x[axis], axis,
                operandString(expr, 0, x));
  } else {
    const auto& block = expr.attrs().getInts("block_shape");
    BRAZE_CHECK(scale.size() == x.size(), "{}: the per-block scale {} needs the rank of {}", expr.name(),
                operandString(expr, 1, scale), operandString(expr, 0, x));
    for (size_t d = 0; d < x.size(); ++d) {
      const int64_t blocks = (x[d] + block[d] - 1) / block[d];
      BRAZE_CHECK(scale[d] == blocks, "{}: the per-block scale {} has {} blocks on dim {}, expected ceil({} / {}) = {} "
                  "for {}", expr.name(), operandString(expr, 1, scale), scale[d], d, x[d], block[d], blocks,
                  operandString(expr, 0, x));
    }
  }
  if (expr.inputs().size() > 2 && expr.input(2)->isTensor()) {
    const Sizes& zero_point = operand(2);
    BRAZE_CHECK(zero_point == scale, "{}: the zero point {} and the scale {} differ in shape", expr.name(),
                operandString(expr, 2, zero_point), operandString(expr, 1, scale));
  }
}

// scatter (x, index, src) and index_put_accumulate (acc, index, value): no write or read falls outside
// a tensor (the index values themselves are checked as they are read).
Sizes scatterSizes(const Expr& expr, const Sizes& x, const Sizes& index, const Sizes& src) {
  if (expr.kind() == OpKind::Scatter) {
    const auto dim = static_cast<size_t>(expr.attrs().getInt("dim"));
    for (size_t d = 0; d < x.size(); ++d) {
      BRAZE_CHECK(index[d] <= src[d], "scatter: index {} is larger than src {} on dim {}", operandString(expr, 1, index),
                  operandString(expr, 2, src), d);
      BRAZE_CHECK(d == dim || index[d] <= x[d], "scatter: index {} is larger than {} on dim {}",
                  operandString(expr, 1, index), operandString(expr, 0, x), d);
    }
    return x;
  }
  BRAZE_CHECK(src[0] == index[0], "{}: index {} has {} entries but value {} has {} rows", expr.name(),
              operandString(expr, 1, index), index[0], operandString(expr, 2, src), src[0]);
  for (size_t d = 1; d < x.size(); ++d) {
    BRAZE_CHECK(src[d] == x[d], "{}: value {} and acc {} differ on dim {}", expr.name(), operandString(expr, 2, src),
                operandString(expr, 0, x), d);
  }
  return x;
}

}  // namespace

std::optional<Sizes> resultSizes(const Expr& expr, const SizesOf& operand, const ScalarOf& scalar) {
  switch (opInfo(expr.kind()).category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: return broadcastSizes(expr, operand);
    case OpCategory::Reduction:
    case OpCategory::Normalization: return reducedSizes(expr, operand(0));
    case OpCategory::Meta:
    case OpCategory::ScalarQuery: return std::nullopt;
    case OpCategory::Data:
      if (expr.kind() == OpKind::StrideOrder) return operand(0);
      if (expr.kind() == OpKind::Cat) return catSizes(expr, operand);
      return padSizes(expr, operand(0), scalar);
    case OpCategory::Creation: {
      if (expr.kind() == OpKind::Iota) {
        const int64_t length = scalar(0);
        BRAZE_CHECK(length >= 0, "iota: length {} is negative", length);
        return Sizes{length};
      }
      return shapeOperands(expr, 1, scalar);  // full: the fill value, then the shape
    }
    case OpCategory::Indexing: return indexingSizes(expr, operand(0), operand(1));
    case OpCategory::Matmul: return matmulSizes(expr, operand);
    case OpCategory::Quantize: checkScaleSizes(expr, operand); return operand(0);
    case OpCategory::Scan: {
      if (expr.kind() != OpKind::TopK) return operand(0);
      Sizes sizes = operand(0);
      const int64_t k = scalar(1);
      const auto dim = static_cast<size_t>(expr.attrs().getInt("dim"));
      BRAZE_CHECK(k >= 0 && k <= sizes[dim],
                  "topk: k = {} is not in [0, {}], the size of dim {} of {} [nvFuser: selected index k out of range]", k,
                  sizes[dim], dim, operandString(expr, 0, sizes));
      sizes[dim] = k;
      return sizes;
    }
    case OpCategory::Scatter: return scatterSizes(expr, operand(0), operand(1), operand(2));
    case OpCategory::Random: return shapeOperands(expr, 4, scalar);  // the bounds, the seed and the offset first
  }
  BRAZE_UNREACHABLE("resultSizes({})", expr.name());
}

}  // namespace braze
