// Meta-op builders (views of memory): broadcast, broadcast_in_dim, expand, reshape, permute, squeeze,
// slice, set, segment_set.
#include "support/error.h"
#include "ir/ops.h"
#include "ir/ops_util.h"

#include <algorithm>
#include <numeric>
#include <set>

namespace braze {
namespace {

using detail::checkShapeScalar;
using detail::newTensorLike;
using detail::shapeString;
using detail::staticValueOr;

TensorView* checked(TensorView* x, std::string_view op) {
  BRAZE_CHECK(x != nullptr, "{}: operand is None", op);
  return x;
}

std::vector<Val*> withOperand(TensorView* x, const std::vector<Val*>& rest) {
  std::vector<Val*> inputs{x};
  inputs.insert(inputs.end(), rest.begin(), rest.end());
  return inputs;
}

}  // namespace

TensorView* broadcast(TensorView* x, const std::vector<bool>& is_broadcast_dim) {
  checked(x, "broadcast");
  const auto in = x->logical();
  const int64_t added = std::count(is_broadcast_dim.begin(), is_broadcast_dim.end(), true);
  BRAZE_CHECK(static_cast<int64_t>(is_broadcast_dim.size()) - added == x->rank(),
              "broadcast: is_broadcast_dim has {} False entries but {} has rank {} (one False per existing dim)",
              is_broadcast_dim.size() - added, x->name(), x->rank());
  std::vector<IterDomain> out;
  size_t next = 0;
  std::vector<int64_t> flags;
  for (bool b : is_broadcast_dim) {
    out.push_back(b ? IterDomain{1, IterType::Broadcast} : in[next++]);
    flags.push_back(b ? 1 : 0);
  }
  TensorView* result = newTensorLike(x->fusion(), x->dtype(), std::move(out));
  x->fusion()->newExpr(OpKind::Broadcast, {x}, {result}, {{"is_broadcast_dim", flags}});
  return result;
}

TensorView* broadcastInDim(TensorView* x, std::vector<Val*> shape, const std::vector<int64_t>& broadcast_dims) {
  checked(x, "broadcast_in_dim");
  const auto in = x->logical();
  const int64_t out_rank = static_cast<int64_t>(shape.size());
  BRAZE_CHECK(static_cast<int64_t>(broadcast_dims.size()) == x->rank(),
              "broadcast_in_dim: broadcast_dims has {} entries but {} has rank {} (one output dim per input dim) "
              "[nvFuser: The broadcast dimensions should match the input dimensions.]",
              broadcast_dims.size(), x->name(), x->rank());
  BRAZE_CHECK(out_rank >= x->rank(),
              "broadcast_in_dim: output rank {} is smaller than the rank {} of {} [nvFuser: The new shape is expected "
              "to be greater-then-or-equal to the input]",
              out_rank, x->rank(), x->name());
  for (Val* s : shape) checkShapeScalar(s, "broadcast_in_dim", "shape");
  std::vector<IterDomain> out(out_rank);
  std::vector<bool> mapped(out_rank, false);
  int64_t previous = -1;
  for (size_t i = 0; i < broadcast_dims.size(); ++i) {
    const int64_t d = broadcast_dims[i];
    BRAZE_INDEX_CHECK(d >= 0 && d < out_rank,
                      "broadcast_in_dim: broadcast_dims[{}] = {} is out of range for output rank {} [nvFuser: Invalid "
                      "broadcast_dims value.]",
                      i, d, out_rank);
    BRAZE_CHECK(d > previous,
                "broadcast_in_dim: broadcast_dims must be strictly increasing, got [{}] [nvFuser: Broadcast dimension "
                "is not greater than the previous value.]",
                fmt::join(broadcast_dims, ", "));
    previous = d;
    mapped[d] = true;
    // A constant -1 keeps the input dim's extent, as nvFuser's broadcast_in_dim (an expand) takes it:
    // Lightning Thunder's index_put writes broadcast_in_dim(index, [-1, ...], [0]).
    if (staticValueOr(shape[d], 0) == -1) shape[d] = size(x, static_cast<int64_t>(i));
    const int64_t target = staticValueOr(shape[d], IterDomain::kSymbolic);
    if (in[i].isBroadcast()) {
      // A size-1 input dim may be expanded to the requested extent.
      out[d] = (target == 1) ? IterDomain{1, IterType::Broadcast} : IterDomain{target, IterType::Expanded};
      if (in[i].type == IterType::Expanded && target == IterDomain::kSymbolic) out[d] = in[i];
    } else {
      BRAZE_CHECK(target == IterDomain::kSymbolic || in[i].extent == IterDomain::kSymbolic || target == in[i].extent,
                  "broadcast_in_dim: input dim {} of {} has extent {} but shape[{}] is {}", i, x->name(), in[i].extent,
                  d, target);
      out[d] = in[i];
      if (out[d].extent == IterDomain::kSymbolic) out[d].extent = target;
    }
  }
  for (int64_t d = 0; d < out_rank; ++d) {
    if (mapped[d]) continue;
    if (staticValueOr(shape[d], 0) == -1) shape[d] = x->fusion()->constant(int64_t{1}, DataType::Int64);  // a new dim
    const int64_t target = staticValueOr(shape[d], IterDomain::kSymbolic);
    out[d] = (target == 1) ? IterDomain{1, IterType::Broadcast} : IterDomain{target, IterType::Expanded};
  }
  TensorView* result = newTensorLike(x->fusion(), x->dtype(), std::move(out));
  x->fusion()->newExpr(OpKind::BroadcastInDim, withOperand(x, shape), {result}, {{"broadcast_dims", broadcast_dims}});
  return result;
}

TensorView* expand(TensorView* x, const std::vector<Val*>& shape) {
  checked(x, "expand");
  auto dims = x->logical();
  BRAZE_CHECK(shape.size() == dims.size(), "expand: shape has {} entries but {} has rank {}", shape.size(), x->name(),
              dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    checkShapeScalar(shape[d], "expand", "shape");
    const int64_t target = staticValueOr(shape[d], IterDomain::kSymbolic - 1);  // -2: symbolic, -1: keep
    if (target == -1) continue;
    if (!dims[d].isBroadcast()) {
      BRAZE_CHECK(target < 0 || dims[d].extent < 0 || target == dims[d].extent,
                  "expand: dim {} of {} {} is not a broadcast dim and cannot be expanded from {} to {}", d, x->name(),
                  shapeString(x), dims[d].extent, target);
      continue;
    }
    if (target == 1) continue;
    dims[d] = {target < 0 ? IterDomain::kSymbolic : target, IterType::Expanded};
  }
  TensorView* result = newTensorLike(x->fusion(), x->dtype(), std::move(dims));
  x->fusion()->newExpr(OpKind::Expand, withOperand(x, shape), {result});
  return result;
}

TensorView* reshape(TensorView* x, const std::vector<Val*>& new_shape) {
  checked(x, "reshape");
  std::vector<IterDomain> dims;
  int64_t inferred = 0;
  int64_t known_product = 1;
  for (size_t i = 0; i < new_shape.size(); ++i) {
    checkShapeScalar(new_shape[i], "reshape", "new_shape");
    const int64_t extent = staticValueOr(new_shape[i], IterDomain::kSymbolic - 1);
    BRAZE_CHECK(extent >= -2, "reshape: new_shape[{}] = {} is negative (only -1, inferred, is allowed)", i, extent);
    if (extent == -1) ++inferred;
    if (extent >= 0) known_product *= extent;
    if (extent == 1) {
      dims.push_back({1, IterType::Broadcast});
    } else {
      dims.push_back({extent < 0 ? IterDomain::kSymbolic : extent, IterType::Iteration});
    }
  }
  BRAZE_CHECK(inferred <= 1, "reshape: at most one new_shape entry may be -1, got {} [nvFuser: A maximum of one value of -1]",
              inferred);
  // With a fully static input, check the element count now rather than at execute time.
  const auto in = x->logical();
  const bool input_static = std::all_of(in.begin(), in.end(), [](const IterDomain& id) { return id.extent >= 0; });
  const bool all_static_targets =
      std::all_of(new_shape.begin(), new_shape.end(), [](Val* v) { return staticValueOr(v, -2) >= -1; });
  if (input_static && all_static_targets) {
    const int64_t numel =
        std::accumulate(in.begin(), in.end(), int64_t{1}, [](int64_t p, const IterDomain& id) { return p * id.extent; });
    if (inferred == 1) {
      BRAZE_CHECK(known_product != 0 && numel % known_product == 0,
                  "reshape: cannot infer the -1 entry: {} {} has {} elements, not a multiple of {}", x->name(),
                  shapeString(x), numel, known_product);
      for (IterDomain& id : dims) {
        if (id.extent == IterDomain::kSymbolic) id = numel / known_product == 1 ? IterDomain{1, IterType::Broadcast}
                                                                              : IterDomain{numel / known_product};
      }
    } else {
      BRAZE_CHECK(numel == known_product,
                  "reshape: {} {} has {} elements but new_shape has {} [nvFuser: Total element counts across view "
                  "operation must match]",
                  x->name(), shapeString(x), numel, known_product);
    }
  }
  TensorView* result = newTensorLike(x->fusion(), x->dtype(), std::move(dims));
  x->fusion()->newExpr(OpKind::Reshape, withOperand(x, new_shape), {result});
  return result;
}

TensorView* permute(TensorView* x, const std::vector<int64_t>& dims) {
  checked(x, "permute");
  const auto in = x->logical();
  BRAZE_CHECK(static_cast<int64_t>(dims.size()) == x->rank(),
              "permute: dims [{}] has {} entries but {} has rank {} [nvFuser: argument to have the same length as input]",
              fmt::join(dims, ", "), dims.size(), x->name(), x->rank());
  std::vector<int64_t> normalized;
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    const int64_t n = x->normalizeAxis(d, "permute");
    BRAZE_CHECK(seen.insert(n).second, "permute: dims [{}] is not a permutation (dim {} repeats) [nvFuser: duplicated "
                "dimension entries]", fmt::join(dims, ", "), n);
    normalized.push_back(n);
  }
  std::vector<IterDomain> out;
  for (int64_t d : normalized) out.push_back(in[d]);
  TensorView* result = newTensorLike(x->fusion(), x->dtype(), std::move(out));
  x->fusion()->newExpr(OpKind::Permute, {x}, {result}, {{"dims", normalized}});
  return result;
}

TensorView* squeeze(TensorView* x, const std::vector<int64_t>& dims, bool squeeze_expanded) {
  checked(x, "squeeze");
  const auto in = x->logical();
  std::set<int64_t> removed;
  BRAZE_CHECK(static_cast<int64_t>(dims.size()) <= x->rank(),
              "squeeze: {} dims to squeeze but {} has rank {} [nvFuser: The dims to squeeze must be <= the number of "
              "dims of the input tensor]",
              dims.size(), x->name(), x->rank());
  for (int64_t d : dims) {
    const int64_t n = x->normalizeAxis(d, "squeeze");
    const IterDomain& id = in[n];
    const bool size_one = id.type == IterType::Broadcast || id.extent == 1;
    BRAZE_CHECK(size_one || (squeeze_expanded && id.type == IterType::Expanded),
                "squeeze: dim {} of {} {} is not of size 1{}", n, x->name(), shapeString(x),
                id.type == IterType::Expanded ? " (it is expanded; pass squeeze_expanded=True)" : "");
    BRAZE_CHECK(removed.insert(n).second, "squeeze: dim {} appears twice", n);
  }
  std::vector<IterDomain> out;
  for (int64_t d = 0; d < x->rank(); ++d) {
    if (!removed.count(d)) out.push_back(in[d]);
  }
  TensorView* result = newTensorLike(x->fusion(), x->dtype(), std::move(out));
  x->fusion()->newExpr(OpKind::Squeeze, {x}, {result},
                       {{"dims", std::vector<int64_t>(removed.begin(), removed.end())},
                        {"squeeze_expanded", squeeze_expanded}});
  return result;
}

TensorView* slice(TensorView* x, const std::vector<Val*>& starts, const std::vector<Val*>& ends,
                  const std::vector<Val*>& strides, bool manual_normalization) {
  checked(x, "slice");
  const int64_t rank = x->rank();
  // nvFuser's phrase for each mismatch: starts vs strides, starts vs ends, then all vs the rank.
  const char* nvfuser = !strides.empty() && strides.size() != starts.size() ? "Slice start_indices and strides don't match!"
                        : starts.size() != ends.size() ? "Slice indexing attribute dimensions don't match!"
                                                       : "Number of tensor dimensions does not match slice dimensions!";
  BRAZE_CHECK(static_cast<int64_t>(starts.size()) == rank && static_cast<int64_t>(ends.size()) == rank,
              "slice: start_indices ({}) and end_indices ({}) need one entry per dim of {} (rank {}) [nvFuser: {}]",
              starts.size(), ends.size(), x->name(), rank, nvfuser);
  BRAZE_CHECK(strides.empty() || static_cast<int64_t>(strides.size()) == rank,
              "slice: strides has {} entries but {} has rank {} [nvFuser: {}]", strides.size(), x->name(), rank, nvfuser);
  Fusion* fusion = x->fusion();
  std::vector<Val*> steps = strides;
  if (steps.empty()) steps.assign(rank, fusion->constant(int64_t{1}));
  const auto in = x->logical();
  std::vector<IterDomain> out;
  for (int64_t d = 0; d < rank; ++d) {
    checkShapeScalar(starts[d], "slice", "start_indices");
    checkShapeScalar(ends[d], "slice", "end_indices");
    checkShapeScalar(steps[d], "slice", "strides");
    const int64_t step = staticValueOr(steps[d], 1);
    BRAZE_CHECK(step >= 1, "slice: stride {} of dim {} must be positive", step, d);
    int64_t start = staticValueOr(starts[d], IterDomain::kSymbolic - 100);
    int64_t end = staticValueOr(ends[d], IterDomain::kSymbolic - 100);
    const int64_t extent = in[d].extent;
    int64_t result = IterDomain::kSymbolic;
    const bool all_static = start > -100 && end > -100 && extent >= 0 && staticValueOr(steps[d], 0) > 0;
    if (all_static) {
      if (!manual_normalization) {
        if (start < 0) start += extent;
        if (end < 0) end += extent;
        start = std::clamp<int64_t>(start, 0, extent);
        end = std::clamp<int64_t>(end, start, extent);
      }
      BRAZE_CHECK(start >= 0 && end <= extent && start <= end,
                  "slice: dim {} of {}: [{}, {}) is not within [0, {}]", d, x->name(), start, end, extent);
      result = (end - start + step - 1) / step;
    }
    IterDomain id = in[d];
    if (result == 1) {
      id = {1, IterType::Broadcast};
    } else if (in[d].type == IterType::Expanded && result != 0) {
      id = {result, IterType::Expanded};  // part of an expanded dim: still one value repeated, `result` times
    } else {
      id = {result, IterType::Iteration};
    }
    out.push_back(id);
  }
  std::vector<Val*> inputs{x};
  inputs.insert(inputs.end(), starts.begin(), starts.end());
  inputs.insert(inputs.end(), ends.begin(), ends.end());
  inputs.insert(inputs.end(), steps.begin(), steps.end());
  TensorView* result = newTensorLike(fusion, x->dtype(), std::move(out));
  fusion->newExpr(OpKind::Slice, std::move(inputs), {result}, {{"manual_normalization", manual_normalization}});
  return result;
}

namespace {
TensorView* copyOp(OpKind kind, TensorView* x) {
  checked(x, opName(kind));
  TensorView* result = newTensorLike(x->fusion(), x->dtype(), x->logical());
  x->fusion()->newExpr(kind, {x}, {result});
  return result;
}
}  // namespace

TensorView* set(TensorView* x) { return copyOp(OpKind::Set, x); }
TensorView* segmentSet(TensorView* x) { return copyOp(OpKind::SegmentSet, x); }

Scalar* size(TensorView* x, int64_t dim) {
  checked(x, "size");
  dim = x->normalizeAxis(dim, "size");
  const IterDomain id = x->logical()[dim];
  Fusion* fusion = x->fusion();
  if (id.extent >= 0) return fusion->constant(id.extent);  // static: no need to ask at execute time
  Scalar* out = fusion->newScalar(DataType::Int64);
  fusion->newExpr(OpKind::Size, {x}, {out}, {{"dim", dim}});
  return out;
}

std::vector<Val*> shape(TensorView* x) {
  std::vector<Val*> sizes;
  for (int64_t d = 0; d < x->rank(); ++d) sizes.push_back(size(x, d));
  return sizes;
}

}  // namespace braze
