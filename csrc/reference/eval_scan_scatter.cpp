// cumsum, topk, argsort, scatter, index_put_accumulate and the random tensors on the reference evaluator.
#include "support/error.h"
#include "ir/numerics.h"
#include "ir/random_numbers.h"
#include "reference/eval_ops.h"

#include <algorithm>
#include <cmath>

namespace braze::reference {
namespace {

bool floating(const HostTensor& t) { return isFloating(t.dtype()); }

// Every element of `out` (row-major, fresh) set from `in` (same shape, any layout).
void copyAll(HostTensor& out, const HostTensor& in) {
  int64_t linear = 0;
  forEachIndex(in.sizes(), [&](const std::vector<int64_t>& i) { copyElement(out, linear++, in, in.offsetOf(i)); });
}

HostTensor cumsum(const Expr& expr, const HostTensor& x) {
  const int64_t dim = expr.attrs().getInt("dim");
  HostTensor out = HostTensor::empty(expr.output(0)->dtype(), x.sizes());
  const bool is_float = floating(x);
  // One running sum per line along dim, kept in double (floating) or wrapping Int64 (integers), and
  // rounded to the output type at each element: torch's CPU kernel for float and double (it sums
  // half and bfloat16 in float, which may differ in the last bit).
  std::vector<int64_t> line_shape = x.sizes();
  if (line_shape.empty()) line_shape = {1};
  const int64_t extent = x.rank() == 0 ? 1 : x.sizes()[dim];
  if (x.rank() > 0) line_shape[dim] = 1;
  const HostTensor& o = out;
  forEachIndex(line_shape, [&](const std::vector<int64_t>& start) {
    double sum = 0;
    uint64_t isum = 0;
    std::vector<int64_t> at = start;
    for (int64_t k = 0; k < extent; ++k) {
      if (x.rank() > 0) at[dim] = k;
      const int64_t src = x.rank() > 0 ? x.offsetOf(at) : 0;
      const int64_t dst = x.rank() > 0 ? o.offsetOf(at) : 0;
      if (is_float) {
        sum += x.readDouble(src);
        out.writeDouble(dst, sum);
      } else {
        isum += static_cast<uint64_t>(x.readInt(src));
        out.writeInt(dst, static_cast<int64_t>(isum));
      }
    }
  });
  return out;
}

// Each line of x along dim sorted (descending: largest first), stably: equal values keep their order,
// and NaN counts as larger than every number (torch's sort and topk order). The first `keep` of each
// line are written: their values (when `values` is given) and their Int64 indices.
void sortLines(const HostTensor& x, int64_t dim, bool descending, int64_t keep, HostTensor* values,
               HostTensor& indices) {
  std::vector<int64_t> line_shape = x.sizes();
  const int64_t extent = line_shape[dim];
  line_shape[dim] = 1;
  const bool is_float = floating(x);
  struct Entry {
    double f;
    int64_t i;
    int64_t at;
  };
  // a before b: a larger (descending) or smaller (ascending); NaN above every number.
  auto before = [&](const Entry& a, const Entry& b) {
    if (is_float) {
      const bool a_nan = std::isnan(a.f), b_nan = std::isnan(b.f);
      if (a_nan || b_nan) return descending ? (a_nan && !b_nan) : (b_nan && !a_nan);
      return descending ? a.f > b.f : a.f < b.f;
    }
    return descending ? a.i > b.i : a.i < b.i;
  };
  std::vector<Entry> line(static_cast<size_t>(extent));
  forEachIndex(line_shape, [&](const std::vector<int64_t>& start) {
    std::vector<int64_t> at = start;
    for (int64_t k = 0; k < extent; ++k) {
      at[dim] = k;
      const int64_t offset = x.offsetOf(at);
      line[k] = {is_float ? x.readDouble(offset) : 0.0, is_float ? 0 : x.readInt(offset), k};
    }
    std::stable_sort(line.begin(), line.end(), before);
    for (int64_t k = 0; k < keep; ++k) {
      at[dim] = k;
      const int64_t out = indices.offsetOf(at);
      indices.writeInt(out, line[k].at);
      if (values == nullptr) continue;
      if (is_float) {
        values->writeDouble(out, line[k].f);
      } else {
        values->writeInt(out, line[k].i);
      }
    }
  });
}

std::vector<HostValue> topk(const Expr& expr, const HostTensor& x, int64_t k) {
  const int64_t dim = expr.attrs().getInt("dim");
  std::vector<int64_t> sizes = x.sizes();
  sizes[dim] = k;
  HostTensor values = HostTensor::empty(x.dtype(), sizes);
  HostTensor indices = HostTensor::empty(DataType::Int64, sizes);
  sortLines(x, dim, expr.attrs().getBool("largest"), k, &values, indices);
  return {values, indices};
}

HostTensor argsort(const Expr& expr, const HostTensor& x) {
  const int64_t dim = expr.attrs().getInt("dim");
  HostTensor indices = HostTensor::empty(DataType::Int64, x.sizes());
  sortLines(x, dim, expr.attrs().getBool("descending"), x.sizes()[dim], nullptr, indices);
  return indices;
}

HostTensor scatter(const Expr& expr, const HostTensor& x, const HostTensor& index, const HostTensor& src) {
  const int64_t dim = expr.attrs().getInt("dim");
  HostTensor out = HostTensor::empty(x.dtype(), x.sizes());
  copyAll(out, x);
  const HostTensor& o = out;
  forEachIndex(index.sizes(), [&](const std::vector<int64_t>& i) {
    const int64_t to = index.readInt(index.offsetOf(i));
    BRAZE_INDEX_CHECK(to >= 0 && to < x.sizes()[dim], "scatter: index {} is out of bounds for dim {} of {} (size {})",
                      to, dim, expr.input(0)->name(), x.sizes()[dim]);
    std::vector<int64_t> dst = i;
    dst[dim] = to;
    copyElement(out, o.offsetOf(dst), src, src.offsetOf(i));
  });
  return out;
}

HostTensor indexPutAccumulate(const Expr& expr, const HostTensor& acc, const HostTensor& index,
                              const HostTensor& value) {
  const int64_t rows = acc.sizes()[0];
  // torch's accumulate=True: each row of value adds into its row of acc in order, in acc's dtype (a
  // rounding per add, as its CPU loop and a GPU's atomics do; integers wrap).
  HostTensor out = HostTensor::empty(acc.dtype(), acc.sizes());
  copyAll(out, acc);
  const bool is_float = floating(acc);
  const int64_t row_elements = rows == 0 ? 0 : out.numel() / rows;
  forEachIndex(value.sizes(), [&](const std::vector<int64_t>& i) {
    int64_t row = index.readInt(index.offsetOf({i[0]}));
    BRAZE_INDEX_CHECK(row >= -rows && row < rows,
                      "index_put_accumulate: index {} is out of bounds for dim 0 of {} (size {})", row,
                      expr.input(0)->name(), rows);
    if (row < 0) row += rows;  // torch's index_put counts negative indices from the end
    int64_t within = 0;
    for (int64_t d = 1; d < acc.rank(); ++d) within = within * acc.sizes()[d] + i[d];
    const int64_t slot = row * row_elements + within;
    const int64_t from = value.offsetOf(i);
    if (is_float) {
      out.writeDouble(slot, out.readDouble(slot) + value.readDouble(from));
    } else {
      out.writeInt(slot, static_cast<int64_t>(static_cast<uint64_t>(out.readInt(slot)) +
                                              static_cast<uint64_t>(value.readInt(from))));
    }
  });
  return out;
}

HostTensor random(const Expr& expr, const Operands& operands) {
  const double a = toDouble(scalarOf(*operands[0]));
  const double b = toDouble(scalarOf(*operands[1]));
  const auto seed = static_cast<uint64_t>(intOf(*operands[2]));
  const auto offset = static_cast<uint64_t>(intOf(*operands[3]));
  std::vector<int64_t> shape;
  for (size_t i = 4; i < operands.size(); ++i) shape.push_back(intOf(*operands[i]));
  const bool is_uniform = expr.kind() == OpKind::Uniform;
  HostTensor out = HostTensor::empty(expr.attrs().getDataType("dtype"), shape);
  const double max_in_dtype = numerics::roundToType(b, out.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    const auto n = static_cast<uint64_t>(i);
    if (!is_uniform) {
      out.writeDouble(i, a + b * standardNormal(seed, offset, n));
      continue;
    }
    out.writeDouble(i, a + (b - a) * uniformUnit(seed, offset, n));
    // [minval, maxval): a value that rounds up to maxval in the dtype (maxval as the dtype holds it, as
    // torch's uniform_ compares) becomes minval (kernels do the same).
    if (out.readDouble(i) >= max_in_dtype) out.writeDouble(i, a);
  }
  return out;
}

}  // namespace

std::vector<HostValue> evalScanScatter(const Expr& expr, const Operands& operands) {
  switch (expr.kind()) {
    case OpKind::Cumsum: return {cumsum(expr, tensorOf(*operands[0]))};
    case OpKind::TopK: return topk(expr, tensorOf(*operands[0]), intOf(*operands[1]));
    case OpKind::Argsort: return {argsort(expr, tensorOf(*operands[0]))};
    case OpKind::Scatter:
      return {scatter(expr, tensorOf(*operands[0]), tensorOf(*operands[1]), tensorOf(*operands[2]))};
    case OpKind::IndexPutAccumulate:
      return {indexPutAccumulate(expr, tensorOf(*operands[0]), tensorOf(*operands[1]), tensorOf(*operands[2]))};
    case OpKind::Uniform:
    case OpKind::Normal: return {random(expr, operands)};
    default: break;
  }
  BRAZE_UNREACHABLE("evalScanScatter({})", expr.name());
}

}  // namespace braze::reference
