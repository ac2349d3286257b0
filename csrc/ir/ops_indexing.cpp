// Indexing builders (index_select, gather, take_along_axis) and matmul/linear.
#include "support/error.h"
#include "ir/ops.h"
#include "ir/ops_util.h"

namespace braze {

using detail::newTensorLike;
using detail::shapeString;

namespace {
void checkIndex(TensorView* x, TensorView* index, std::string_view op) {
  BRAZE_CHECK(x != nullptr && index != nullptr, "{}: an operand is None", op);
  BRAZE_TYPE_CHECK(isIntegral(index->dtype()), "{}: the index {} must be an integer tensor, got {}", op, index->name(),
                   toString(index->dtype()));
}
}  // namespace

TensorView* indexSelect(TensorView* x, TensorView* index, int64_t dim) {
  checkIndex(x, index, "index_select");
  dim = x->normalizeAxis(dim, "index_select");
  // torch and nvFuser take a 0-D index as a one-element 1-D one: the dim stays, with extent 1.
  if (index->rank() == 0) index = broadcast(index, {true});
  BRAZE_CHECK(index->rank() == 1, "index_select: the index {} must be 0-D or 1-D, got rank {}", index->name(),
              index->rank());
  auto dims = x->logical();
  const IterDomain idx = index->logical()[0];
  // A broadcast index selects one row; an expanded one (stride 0) selects its length of rows.
  dims[dim] = idx.type == IterType::Broadcast ? IterDomain{1, IterType::Broadcast}
                                              : IterDomain{idx.extent, IterType::Iteration};
  TensorView* result = newTensorLike(x->fusion(), x->dtype(), std::move(dims));
  x->fusion()->newExpr(OpKind::IndexSelect, {x, index}, {result}, {{"dim", dim}});
  return result;
}

namespace {
TensorView* gatherLike(OpKind kind, TensorView* x, TensorView* index, int64_t dim) {
  const std::string_view op = opName(kind);
  checkIndex(x, index, op);
  dim = x->normalizeAxis(dim, op);
  BRAZE_CHECK(index->rank() == x->rank(), "{}: the index {} must have the rank {} of {}, got {}", op, index->name(),
              x->rank(), x->name(), index->rank());
  auto in = x->logical();
  auto dims = index->logical();
  for (int64_t d = 0; d < x->rank(); ++d) {
    if (d == dim) continue;
    const int64_t a = in[d].extent;
    const int64_t b = dims[d].extent;
    if (kind == OpKind::Gather) {
      // torch.gather: the index may be smaller than the input on the other dims.
      BRAZE_CHECK(a < 0 || b < 0 || in[d].isBroadcast() || b <= a,
                  "gather: index {} {} is larger than {} {} on dim {}", index->name(), shapeString(index), x->name(),
                  shapeString(x), d);
    } else {
      BRAZE_CHECK(a < 0 || b < 0 || in[d].isBroadcast() || dims[d].isBroadcast() || a == b,
                  "take_along_axis: index {} {} and {} {} differ on dim {} (only dim {} may differ)", index->name(),
                  shapeString(index), x->name(), shapeString(x), d, dim);
      // The index's broadcast dim takes x's; its expanded one (a length, stride 0) stays where x's is 1.
      const IterType index_type = dims[d].type;
      if (index_type == IterType::Broadcast || (index_type == IterType::Expanded && in[d].type != IterType::Broadcast)) {
        dims[d] = in[d];
      } else if (index_type == IterType::Iteration && in[d].type == IterType::Iteration) {
        dims[d].extent = detail::broadcastExtent(a, b);  // a static 1 of either broadcasts at execute time
      }
    }
  }
  TensorView* result = newTensorLike(x->fusion(), x->dtype(), std::move(dims));
  x->fusion()->newExpr(kind, {x, index}, {result}, {{"dim", dim}});
  return result;
}
}  // namespace

TensorView* gather(TensorView* x, TensorView* index, int64_t dim) { return gatherLike(OpKind::Gather, x, index, dim); }
TensorView* takeAlongAxis(TensorView* x, TensorView* index, int64_t dim) {
  return gatherLike(OpKind::TakeAlongAxis, x, index, dim);
}

namespace {
DataType matmulType(TensorView* a, TensorView* b, DataType dtype, std::string_view op) {
  BRAZE_TYPE_CHECK(!isBool(a->dtype()) && !isBool(b->dtype()), "{}: Bool operands are not supported ({} and {})", op,
                   toString(a->dtype()), toString(b->dtype()));
  BRAZE_TYPE_CHECK(isFloating(a->dtype()) == isFloating(b->dtype()),
                   "{}: operands must both be floating or both be integer, got {} ({}) and {} ({})", op, a->name(),
                   toString(a->dtype()), b->name(), toString(b->dtype()));
  if (dtype != DataType::Null) return dtype;
  const DataType promoted = promoteTypes(a->dtype(), b->dtype());
  // Integer products accumulate exactly; narrow types default to Int32 (see ops.h).
  if (isIntegral(promoted)) return promoted == DataType::Int64 ? DataType::Int64 : DataType::Int32;
  // fp8 x fp8 has no fp8 accumulator: the result defaults to Float.
  if (isFloat8(promoted) || promoted == DataType::Float) return DataType::Float;
  return promoted;
}

void checkInner(const IterDomain& k_a, const IterDomain& k_b, TensorView* a, TensorView* b, std::string_view op) {
  BRAZE_CHECK(k_a.extent < 0 || k_b.extent < 0 || k_a.extent == k_b.extent,
              "{}: inner dims differ: {} {} has K = {} but {} {} has K = {}", op, a->name(), shapeString(a), k_a.extent,
              b->name(), shapeString(b), k_b.extent);
}
}  // namespace

TensorView* matmul(TensorView* a, TensorView* b, DataType dtype) {
  BRAZE_CHECK(a != nullptr && b != nullptr, "matmul: an operand is None");
  BRAZE_CHECK(a->rank() >= 1 && b->rank() >= 1, "matmul: operands need rank >= 1, got {} and {}", a->rank(), b->rank());
  const DataType out_type = matmulType(a, b, dtype, "matmul");
  auto da = a->logical();
  auto db = b->logical();
  checkInner(da.back(), b->rank() == 1 ? db[0] : db[db.size() - 2], a, b, "matmul");
  std::vector<IterDomain> out;
  // Batch dims broadcast like elementwise ops, aligned from the right.
  const int64_t batch_a = std::max<int64_t>(a->rank() - 2, 0);
  const int64_t batch_b = std::max<int64_t>(b->rank() - 2, 0);
  const int64_t batch = std::max(batch_a, batch_b);
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t ia = i - (batch - batch_a);
    const int64_t ib = i - (batch - batch_b);
    IterDomain x = ia >= 0 ? da[ia] : IterDomain{1, IterType::Broadcast};
    IterDomain y = ib >= 0 ? db[ib] : IterDomain{1, IterType::Broadcast};
    // a's broadcast dim takes b's; a's expanded one takes b's unless b's is a plain broadcast (1), which
    // it outlasts.
    if (x.type == IterType::Broadcast || (x.type == IterType::Expanded && y.type != IterType::Broadcast)) {
      out.push_back(y);
      continue;
    }
    BRAZE_CHECK(y.isBroadcast() || x.extent < 0 || y.extent < 0 || x.extent == y.extent || x.extent == 1 ||
                    y.extent == 1,
                "matmul: batch dim {} differs: {} in {} and {} in {}", i, x.extent, a->name(), y.extent, b->name());
    if (!y.isBroadcast()) x.extent = detail::broadcastExtent(x.extent, y.extent);
    out.push_back(x);
  }
  if (a->rank() >= 2) out.push_back(da[da.size() - 2]);
  if (b->rank() >= 2) out.push_back(db.back());
  TensorView* result = newTensorLike(a->fusion(), out_type, std::move(out));
  a->fusion()->newExpr(OpKind::Matmul, {a, b}, {result}, {{"dtype", out_type}});
  return result;
}

TensorView* linear(TensorView* a, TensorView* weight, TensorView* bias, DataType dtype) {
  BRAZE_CHECK(a != nullptr && weight != nullptr, "linear: an operand is None");
  BRAZE_CHECK(a->rank() >= 1, "linear: the input {} needs rank >= 1", a->name());
  BRAZE_CHECK(weight->rank() == 1 || weight->rank() == 2, "linear: the weight {} must be 1-D or 2-D [out, in], got rank {}",
              weight->name(), weight->rank());
  const DataType out_type = matmulType(a, weight, dtype, "linear");
  auto da = a->logical();
  auto dw = weight->logical();
  checkInner(da.back(), dw.back(), a, weight, "linear");
  std::vector<IterDomain> out(da.begin(), da.end() - 1);
  if (weight->rank() == 2) out.push_back(dw[0]);
  std::vector<Val*> inputs{a, weight};
  if (bias != nullptr) {
    BRAZE_CHECK(bias->rank() <= 1, "linear: the bias {} must be 0-D or 1-D, got rank {}", bias->name(), bias->rank());
    // An integer linear accumulates exactly in an integer type, which a floating bias does not fit (torch
    // refuses the mix too).
    BRAZE_TYPE_CHECK(isFloating(a->dtype()) || !isFloating(bias->dtype()),
                     "linear: the bias {} is {} but the operands are {}: give an integer bias, or cast the operands",
                     bias->name(), toString(bias->dtype()), toString(a->dtype()));
    if (bias->rank() == 1 && weight->rank() == 2) {
      const int64_t n = dw[0].extent;
      const int64_t nb = bias->logical()[0].extent;
      BRAZE_CHECK(n < 0 || nb < 0 || n == nb, "linear: the bias {} has {} entries but the weight has {} outputs",
                  bias->name(), nb, n);
    }
    inputs.push_back(bias);
  }
  TensorView* result = newTensorLike(a->fusion(), out_type, std::move(out));
  a->fusion()->newExpr(OpKind::Linear, std::move(inputs), {result}, {{"dtype", out_type}});
  return result;
}

}  // namespace braze
