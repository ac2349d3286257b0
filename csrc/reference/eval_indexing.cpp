// index_select, gather, take_along_axis, matmul and linear on the reference evaluator.
#include "support/error.h"
#include "reference/eval_ops.h"
#include "reference/pointwise_math.h"

#include <cstring>

namespace braze::reference {
namespace {

int64_t checkedIndex(const Expr& expr, int64_t value, int64_t extent, int64_t dim) {
  BRAZE_INDEX_CHECK(value >= 0 && value < extent, "{}: index {} is out of bounds for dim {} of {} (size {})", expr.name(),
                    value, dim, expr.input(0)->name(), extent);
  return value;
}

}  // namespace

std::vector<HostValue> evalIndexing(const Expr& expr, const Operands& operands) {
  const HostTensor& x = tensorOf(*operands[0]);
  const HostTensor& index = tensorOf(*operands[1]);
  const int64_t dim = expr.attrs().getInt("dim");
  if (expr.kind() == OpKind::IndexSelect) {
    std::vector<int64_t> shape = x.sizes();
    shape[dim] = index.sizes()[0];
    HostTensor out = HostTensor::empty(x.dtype(), shape);
    int64_t linear = 0;
    forEachIndex(shape, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> src = i;
      src[dim] = checkedIndex(expr, index.readInt(index.offsetOf({i[dim]})), x.sizes()[dim], dim);
      copyElement(out, linear++, x, x.offsetOf(src));
    });
    return {out};
  }
  // gather / take_along_axis: the output has the index's shape (take_along_axis broadcasts the
  // index's size-1 dims against x; ir/size_rules.cpp checks the sizes).
  std::vector<int64_t> shape = index.sizes();
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != dim && expr.kind() == OpKind::TakeAlongAxis && shape[d] == 1) shape[d] = x.sizes()[d];
  }
  HostTensor out = HostTensor::empty(x.dtype(), shape);
  int64_t linear = 0;
  forEachIndex(shape, [&](const std::vector<int64_t>& i) {
    std::vector<int64_t> at_index = i;
    std::vector<int64_t> src = i;
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (index.sizes()[d] == 1) at_index[d] = 0;
      if (d != dim && x.sizes()[d] == 1) src[d] = 0;
    }
    src[dim] = checkedIndex(expr, index.readInt(index.offsetOf(at_index)), x.sizes()[dim], dim);
    copyElement(out, linear++, x, x.offsetOf(src));
  });
  return {out};
}

namespace {

// out[b..., m, n] = sum_k a[b..., m, k] * b[b..., k, n] with torch.matmul's shape rules; `b_is_nk`
// reads b as [n, k] (linear's weight). Accumulates exactly (float64 or wrapping int64).
HostTensor matmulCore(const HostTensor& a_in, const HostTensor& b_in, bool b_is_nk, DataType out_dtype) {
  // Give 1-D operands their matrix dims, remembered so they can be dropped from the result.
  const bool a_vec = a_in.rank() == 1;
  const bool b_vec = b_in.rank() == 1;
  HostTensor a = a_vec ? a_in.view({1, a_in.sizes()[0]}, {0, a_in.strides()[0]}, a_in.offset()) : a_in;
  HostTensor b = b_in;
  if (b_vec) b = b_is_nk ? b_in.view({1, b_in.sizes()[0]}, {0, b_in.strides()[0]}, b_in.offset())
                         : b_in.view({b_in.sizes()[0], 1}, {b_in.strides()[0], 0}, b_in.offset());
  if (b_is_nk) b = b.view({b.sizes()[1], b.sizes()[0]}, {b.strides()[1], b.strides()[0]}, b.offset());  // as [k, n]
  const int64_t m = a.sizes()[a.rank() - 2], k = a.sizes()[a.rank() - 1];
  const int64_t kb = b.sizes()[b.rank() - 2], n = b.sizes()[b.rank() - 1];
  BRAZE_ASSERT(k == kb, "matmul: inner sizes differ: {} vs {} (the size rules let it through)", k, kb);
  const int64_t batch_rank = std::max(a.rank(), b.rank()) - 2;
  std::vector<int64_t> batch(batch_rank, 1);
  auto batchSize = [&](const HostTensor& t, int64_t i) {
    const int64_t j = i - (batch_rank - (t.rank() - 2));
    return j >= 0 ? t.sizes()[j] : 1;
  };
  for (int64_t i = 0; i < batch_rank; ++i) {
    const int64_t sa = batchSize(a, i), sb = batchSize(b, i);
    batch[i] = sa == 1 ? sb : sa;  // a size-1 batch dim broadcasts, an empty one stays empty
  }
  std::vector<int64_t> shape = batch;
  if (!a_vec) shape.push_back(m);
  if (!(b_vec && !b_is_nk)) shape.push_back(n);
  if (b_vec && b_is_nk) shape.pop_back();
  HostTensor out = HostTensor::empty(out_dtype, shape);
  const bool in_float = isFloating(a.dtype());
  int64_t linear = 0;
  auto offsetIn = [&](const HostTensor& t, const std::vector<int64_t>& bi, int64_t r, int64_t c) {
    int64_t off = 0;
    const int64_t lead = t.rank() - 2;
    for (int64_t j = 0; j < lead; ++j) {
      const int64_t i = j + (batch_rank - lead);
      off += (t.sizes()[j] == 1 ? 0 : bi[i]) * t.strides()[j];
    }
    return off + r * t.strides()[lead] + c * t.strides()[lead + 1];
  };
  forEachIndex(batch.empty() ? std::vector<int64_t>{} : batch, [&](const std::vector<int64_t>& bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double fsum = 0.0;
        uint64_t isum = 0;
        for (int64_t p = 0; p < k; ++p) {
          const int64_t oa = offsetIn(a, bi, i, p), ob = offsetIn(b, bi, p, j);
          if (in_float) {
            fsum += a.readDouble(oa) * b.readDouble(ob);
          } else {
            isum += static_cast<uint64_t>(a.readInt(oa)) * static_cast<uint64_t>(b.readInt(ob));
          }
        }
        if (isFloating(out_dtype)) {
          out.writeDouble(linear++, in_float ? fsum : static_cast<double>(static_cast<int64_t>(isum)));
        } else {
          out.writeInt(linear++, in_float ? floatToInt(fsum, out_dtype) : static_cast<int64_t>(isum));
        }
      }
    }
  });
  return out;
}

}  // namespace

std::vector<HostValue> evalMatmul(const Expr& expr, const Operands& operands) {
  const DataType out_dtype = expr.output(0)->dtype();
  const HostTensor& a = tensorOf(*operands[0]);
  const HostTensor& b = tensorOf(*operands[1]);
  if (expr.kind() == OpKind::Matmul) return {matmulCore(a, b, /*b_is_nk=*/false, out_dtype)};
  if (operands.size() < 3) return {matmulCore(a, b, /*b_is_nk=*/true, out_dtype)};
  // linear with bias: accumulate in float64 and add the bias before the one rounding to out_dtype.
  const DataType exact = isFloating(out_dtype) ? DataType::Double : DataType::Int64;
  HostTensor acc = matmulCore(a, b, /*b_is_nk=*/true, exact);
  const HostTensor& bias = tensorOf(*operands[2]);
  HostTensor out = HostTensor::empty(out_dtype, acc.sizes());
  const int64_t n = acc.rank() == 0 ? 1 : acc.sizes().back();
  for (int64_t i = 0; i < acc.numel(); ++i) {
    const int64_t bias_off = bias.rank() == 0 ? 0 : (i % n) * bias.strides()[0];
    if (isFloating(out_dtype)) {
      out.writeDouble(i, acc.readDouble(i) + bias.readDouble(bias_off));
    } else {
      out.writeInt(i, static_cast<int64_t>(static_cast<uint64_t>(acc.readInt(i)) + bias.readInt(bias_off)));
    }
  }
  return {out};
}

}  // namespace braze::reference
