#include "passes/alias_analysis.h"

#include "support/error.h"
#include "ir/shape_rules.h"
#include "ir/val.h"

#include <algorithm>

namespace braze {
namespace {

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t>& sizes) { return StridedLayout::rowMajor(sizes).strides; }

ViewResult notAView(std::vector<int64_t> sizes, std::string reason) {
  ViewResult r;
  r.layout = StridedLayout::rowMajor(std::move(sizes));
  r.is_view = false;
  r.reason = std::move(reason);
  return r;
}

// Reshape is a view when the new dims can be carved out of runs of input dims that are contiguous
// with each other in memory (a "chunk": stride[d] == stride[d+1] * size[d+1]). Walk the input from
// the innermost dim, closing a chunk where contiguity breaks, and hand the new dims from the
// innermost outwards to the current chunk until their product equals the chunk's. Size-1 dims have
// no meaningful stride: they are dropped from the input and get any stride in the output.
ViewResult reshapeView(const Expr& expr, const StridedLayout& given, std::vector<int64_t> shape) {
  if (given.numel() == 0) return {StridedLayout{shape, rowMajorStrides(shape), given.offset}, true, ""};
  StridedLayout in{{}, {}, given.offset};  // size-1 dims address nothing: drop them first
  for (size_t d = 0; d < given.sizes.size(); ++d) {
    if (given.sizes[d] == 1) continue;
    in.sizes.push_back(given.sizes[d]);
    in.strides.push_back(given.strides[d]);
  }
  const int64_t in_rank = static_cast<int64_t>(in.sizes.size());
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t out_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_stride = in_rank > 0 ? in.strides.back() : 1;
  int64_t chunk_numel = 1;
  int64_t out_numel = 1;
  for (int64_t d = in_rank - 1; d >= 0; --d) {
    chunk_numel *= in.sizes[d];
    const bool chunk_ends = d == 0 || in.strides[d - 1] != chunk_numel * chunk_stride;
    if (!chunk_ends) continue;
    while (out_d >= 0 && (out_numel < chunk_numel || shape[out_d] == 1)) {
      strides[out_d] = out_numel * chunk_stride;
      out_numel *= shape[out_d];
      --out_d;
    }
    if (out_numel != chunk_numel) {
      std::string reason = fmt::format(
          "reshape of {} to [{}] merges dims that are not contiguous in memory (sizes [{}], strides [{}])",
          expr.input(0)->name(), fmt::join(shape, ", "), fmt::join(given.sizes, ", "), fmt::join(given.strides, ", "));
      return notAView(std::move(shape), std::move(reason));
    }
    if (d > 0) {
      chunk_stride = in.strides[d - 1];
      chunk_numel = 1;
      out_numel = 1;
    }
  }
  // Trailing new size-1 dims (all input dims consumed): any stride will do.
  for (; out_d >= 0; --out_d) strides[out_d] = 1;
  return {StridedLayout{std::move(shape), std::move(strides), in.offset}, true, ""};
}

}  // namespace

ViewResult viewThrough(const Expr& expr, const StridedLayout& in, const std::vector<int64_t>& scalars) {
  const int64_t rank = static_cast<int64_t>(in.sizes.size());
  StridedLayout out{{}, {}, in.offset};
  switch (expr.kind()) {
    case OpKind::Set:
    case OpKind::SegmentSet: return {in, true, ""};
    case OpKind::Broadcast: {
      int64_t next = 0;
      for (int64_t flag : expr.attrs().getInts("is_broadcast_dim")) {
        out.sizes.push_back(flag ? 1 : in.sizes[next]);
        out.strides.push_back(flag ? 0 : in.strides[next]);
        next += flag ? 0 : 1;
      }
      return {out, true, ""};
    }
    case OpKind::BroadcastInDim: {
      checkBroadcastInDim(expr, in.sizes, scalars);
      out.sizes = scalars;
      out.strides.assign(scalars.size(), 0);  // new dims and expanded size-1 dims: stride 0
      const auto& bdims = expr.attrs().getInts("broadcast_dims");
      for (size_t i = 0; i < bdims.size(); ++i) {
        if (in.sizes[i] == scalars[bdims[i]]) out.strides[bdims[i]] = in.strides[i];
      }
      return {out, true, ""};
    }
    case OpKind::Expand: {
      out.sizes = expandSizes(expr, in.sizes, scalars);
      out.strides = in.strides;
      for (int64_t d = 0; d < rank; ++d) {
        if (out.sizes[d] != in.sizes[d]) out.strides[d] = 0;
      }
      return {out, true, ""};
    }
    case OpKind::Reshape: return reshapeView(expr, in, reshapeSizes(expr, in.sizes, scalars));
    case OpKind::Permute:
      for (int64_t d : expr.attrs().getInts("dims")) {
        out.sizes.push_back(in.sizes[d]);
        out.strides.push_back(in.strides[d]);
      }
      return {out, true, ""};
    case OpKind::Squeeze: {
      const auto& dims = expr.attrs().getInts("dims");
      for (int64_t d = 0; d < rank; ++d) {
        if (std::find(dims.begin(), dims.end(), d) != dims.end()) {
          BRAZE_CHECK(in.sizes[d] == 1 || in.strides[d] == 0, "squeeze: dim {} of {} has size {}, not 1", d,
                      expr.input(0)->name(), in.sizes[d]);
          continue;
        }
        out.sizes.push_back(in.sizes[d]);
        out.strides.push_back(in.strides[d]);
      }
      return {out, true, ""};
    }
    case OpKind::Slice: {
      const auto dims = sliceDims(expr, in.sizes, scalars);
      for (int64_t d = 0; d < rank; ++d) {
        out.sizes.push_back(dims[d].size);
        out.strides.push_back(in.strides[d] * dims[d].step);
        out.offset += dims[d].start * in.strides[d];
      }
      return {out, true, ""};
    }
    default: BRAZE_UNREACHABLE("viewThrough: {} is not a meta op", expr.name());
  }
}

const Val* inputViewRoot(const Val* tensor) {
  while (!tensor->isFusionInput()) {
    const Expr* def = tensor->definition();
    if (def == nullptr || !isMetaOp(def->kind()) || def->kind() == OpKind::SegmentSet) return nullptr;
    tensor = def->input(0);
  }
  return tensor;
}

std::vector<const Expr*> inputViewChain(const Val* tensor) {
  std::vector<const Expr*> chain;
  while (!tensor->isFusionInput()) {
    const Expr* def = tensor->definition();
    BRAZE_ASSERT(def != nullptr && isMetaOp(def->kind()), "{} is not an input view", tensor->name());
    chain.push_back(def);
    tensor = def->input(0);
  }
  return {chain.rbegin(), chain.rend()};
}

}  // namespace braze
