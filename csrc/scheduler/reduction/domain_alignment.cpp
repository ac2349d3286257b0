#include "scheduler/reduction/domain_alignment.h"

#include "support/by_id.h"

#include <algorithm>
#include <optional>
#include <span>

namespace braze {
namespace {

// Per dim of a value computed from a reduction result: the domain dim it stands for (a kept dim of the
// result, carried through the ops after it), kAny where the value is the same all along it (a size-1,
// broadcast or expanded dim) or it comes from values read through index maps, kUnknown where an op this
// analysis does not follow moved it or two operands disagree on it.
constexpr int64_t kAny = -1;
constexpr int64_t kUnknown = -2;
using DimIds = std::vector<int64_t>;

int64_t combine(int64_t a, int64_t b) {
  if (a == kAny) return b;
  if (b == kAny || a == b) return a;
  return kUnknown;
}

// The DimIds of the values computed from a reduction result, by val id, all in one array (a check walks
// every value of a group: a map of vectors made a few allocations per value).
class IdsTable {
 public:
  // `v`'s ids, or null where `v` is not computed from a reduction result.
  std::optional<std::span<const int64_t>> find(const Val* v) const {
    const auto id = static_cast<size_t>(v->id());
    if (id >= spans_.size() || spans_[id].first < 0) return std::nullopt;
    return std::span<const int64_t>(words_.data() + spans_[id].first, spans_[id].second);
  }
  void add(const Val* v, const DimIds& ids) {
    entryAt(spans_, static_cast<size_t>(v->id()), {-1, 0}) = {static_cast<int64_t>(words_.size()), ids.size()};
    words_.insert(words_.end(), ids.begin(), ids.end());
  }

 private:
  std::vector<int64_t> words_;
  std::vector<std::pair<int64_t, size_t>> spans_;  // per val id: where its ids start (-1: none), how many
};

// A reduction's output: its kept dims in order (the reduced ones kAny where kept as size 1), into `ids`.
void reducedIds(const Expr& r, const Val* out, const BoundShapes& bound, DimIds& ids) {
  const size_t in_rank = bound.sizesOf(r.input(0)).size(), out_rank = bound.sizesOf(out).size();
  const std::vector<int64_t>& dims = r.attrs().getInts("dims");
  const auto reduced = [&](size_t d) { return std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end(); };
  ids.clear();
  for (size_t d = 0; d < in_rank; ++d) {
    if (!reduced(d)) {
      ids.push_back(static_cast<int64_t>(d));
    } else if (out_rank == in_rank) {
      ids.push_back(kAny);
    }
  }
  if (ids.size() != out_rank) ids.assign(out_rank, kUnknown);
}

// What `e`'s output stands for, from its operands' (those not computed from a reduction result count as
// kAny: they are read at whatever index is asked), into `result`; `in` is scratch.
void forwardIds(const Expr& e, const IdsTable& ids, const BoundShapes& bound, DimIds& result, DimIds& in) {
  const Val* out = e.output(0);
  const size_t rank = bound.sizesOf(out).size();
  const auto idsOf = [&](const Val* v, DimIds& of) {
    const std::vector<int64_t>& sizes = bound.sizesOf(v);
    if (const auto found = ids.find(v)) {
      of.assign(found->begin(), found->end());
    } else {
      of.assign(sizes.size(), kAny);
    }
    for (size_t d = 0; d < of.size(); ++d) {
      if (sizes[d] == 1) of[d] = kAny;
    }
  };
  result.assign(rank, kUnknown);
  if (isElementwise(e.kind())) {
    // idsOf(in) combined dim by dim, without making it.
    result.assign(rank, kAny);
    for (const Val* operand : e.inputs()) {
      if (!operand->isTensor()) continue;
      const std::vector<int64_t>& sizes = bound.sizesOf(operand);
      const auto found = ids.find(operand);
      if (sizes.size() != rank || (found && found->size() != rank)) {
        result.assign(rank, kUnknown);
        return;
      }
      for (size_t d = 0; d < rank; ++d) result[d] = combine(result[d], sizes[d] == 1 || !found ? kAny : (*found)[d]);
    }
    return;
  }
  idsOf(e.input(0), in);
  switch (e.kind()) {
    case OpKind::Set:
    case OpKind::SegmentSet:
    case OpKind::StrideOrder:
    case OpKind::Expand:
      if (in.size() == rank) result = in;
      break;
    case OpKind::Permute: {
      const std::vector<int64_t>& dims = e.attrs().getInts("dims");
      for (size_t d = 0; d < rank && d < dims.size(); ++d) result[d] = in.at(static_cast<size_t>(dims[d]));
      break;
    }
    case OpKind::Broadcast: {
      const std::vector<int64_t>& flags = e.attrs().getInts("is_broadcast_dim");
      size_t next = 0;
      for (size_t d = 0; d < rank && d < flags.size(); ++d) result[d] = flags[d] ? kAny : in.at(next++);
      break;
    }
    case OpKind::BroadcastInDim: {
      const std::vector<int64_t>& dims = e.attrs().getInts("broadcast_dims");
      result.assign(rank, kAny);
      for (size_t i = 0; i < dims.size() && i < in.size(); ++i) result.at(static_cast<size_t>(dims[i])) = in[i];
      break;
    }
    case OpKind::Squeeze: {
      const std::vector<int64_t>& dims = e.attrs().getInts("dims");
      DimIds kept;
      for (size_t d = 0; d < in.size(); ++d) {
        if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end()) kept.push_back(in[d]);
      }
      if (kept.size() == rank) result = kept;
      break;
    }
    case OpKind::Reshape: {
      // Adding or removing size-1 dims only: the others keep their order.
      const std::vector<int64_t>& in_sizes = bound.sizesOf(e.input(0));
      const std::vector<int64_t>& out_sizes = bound.sizesOf(out);
      if (withoutOnes(in_sizes) != withoutOnes(out_sizes)) break;
      size_t next = 0;
      for (size_t d = 0; d < rank; ++d) {
        if (out_sizes[d] == 1) {
          result[d] = kAny;
          continue;
        }
        while (in_sizes[next] == 1) ++next;
        result[d] = in[next++];
      }
      break;
    }
    case OpKind::TakeAlongAxis:  // the Indexing ops
    case OpKind::Gather:
    case OpKind::IndexSelect: {
      // Every dim but the picked one is the source's (and the index's, for the element-wise picks); the
      // picked one is the same all along it where it has one element, and unknown otherwise.
      const auto dim = static_cast<size_t>(e.attrs().getInt("dim"));
      if (in.size() != rank || dim >= rank) break;
      DimIds index(rank, kAny);
      if (e.kind() != OpKind::IndexSelect) idsOf(e.input(1), index);
      if (index.size() != rank) break;
      for (size_t d = 0; d < rank; ++d) result[d] = d == dim ? kUnknown : combine(in[d], index[d]);
      // A pick of one element is the same all along its dim, unless the source's dim stands for a kept
      // dim of the domain: then the index picks another row's value.
      if (bound.sizesOf(out)[dim] == 1 && in[dim] == kAny) result[dim] = kAny;
      break;
    }
    default: break;
  }
}

// The domain dims a value of `n` elements has, in order, size-1 dims aside: all of them for a row's
// size, the kept ones for a reduction result's. Both lists, made once per check.
struct ExpectedDims {
  std::vector<int64_t> full, kept;
  explicit ExpectedDims(const ReductionDomain& domain) {
    for (size_t d = 0; d < domain.input_sizes.size(); ++d) {
      if (domain.input_sizes[d] == 1) continue;
      full.push_back(static_cast<int64_t>(d));
      if (!std::binary_search(domain.dims.begin(), domain.dims.end(), static_cast<int64_t>(d))) {
        kept.push_back(static_cast<int64_t>(d));
      }
    }
  }
  const std::vector<int64_t>& of(int64_t n, const ReductionDomain& domain) const {
    return n == domain.full_numel ? full : kept;
  }
};

// Whether `v` (of sizes `sizes`, with `ids` where it is computed from a reduction result) lies as the
// domain's dims for its element count do: the same sizes in the same order, each dim standing for its
// own domain dim or for none.
bool aligned(const std::vector<int64_t>& sizes, const DimIds* ids, const ReductionDomain& domain,
             const ExpectedDims& expected_dims, int64_t n) {
  // A row-sized value has the domain's size-1 dims too where the reduced dims are not the innermost: the
  // walk indexes it as the domain (a copy of the reduced tensor with a size-1 dim added or dropped was
  // written in part). Rows walked whole (an inner domain) index it by its linear position: a size-1 dim
  // more or less (Thunder's batch of 1 squeezed) is the same element.
  if (n == domain.full_numel && n != domain.outer_numel && sizes != domain.input_sizes &&
      (!domain.inner || withoutOnes(sizes) != withoutOnes(domain.input_sizes))) {
    return false;
  }
  const std::vector<int64_t>& expected = expected_dims.of(n, domain);
  size_t k = 0;
  for (size_t q = 0; q < sizes.size(); ++q) {
    if (sizes[q] == 1) continue;
    if (k == expected.size()) return false;
    const auto d = static_cast<size_t>(expected[k++]);
    if (sizes[q] != domain.input_sizes[d]) return false;
    if (ids != nullptr && (*ids)[q] != kAny && (*ids)[q] != static_cast<int64_t>(d)) return false;
  }
  return k == expected.size();
}

}  // namespace

bool keepsRowPositions(const Expr& expr, const BoundShapes& bound) {
  if (isElementwise(expr.kind())) return true;
  switch (expr.kind()) {
    case OpKind::Broadcast:
    case OpKind::BroadcastInDim:
    case OpKind::Expand:
    case OpKind::Set:
    case OpKind::StrideOrder:  // a copy at the same index; only the output's strides differ
    case OpKind::Squeeze: return true;
    case OpKind::Reshape:  // only adding or removing size-1 dims
      return withoutOnes(bound.sizesOf(expr.input(0))) == withoutOnes(bound.sizesOf(expr.output(0)));
    default: return false;
  }
}

std::string misalignedWithDomain(const Candidate& candidate, const CandidateFacts& facts,
                                 const ReductionDomain& domain, const BoundShapes& bound) {
  IdsTable ids;  // of the values computed from a reduction result
  const ExpectedDims expected(domain);
  DimIds of, scratch;
  for (const Expr* e : candidate.exprs) {
    const OpCategory category = opInfo(e->kind()).category;
    const bool reduction = category == OpCategory::Reduction || category == OpCategory::Normalization;
    for (const Val* out : e->outputs()) {
      if (!out->isTensor() || facts.after_reduction.count(out) == 0) continue;
      if (reduction) {
        reducedIds(*e, out, bound, of);
      } else {
        forwardIds(*e, ids, bound, of, scratch);
      }
      const int64_t n = bound.numel(out);
      const bool walked = n == domain.full_numel || n == domain.outer_numel;
      if (walked && !aligned(bound.sizesOf(out), &of, domain, expected, n)) {
        return fmt::format("{} gives [{}], computed from a reduction result with its dims not where the reduction "
                           "domain [{}] has them (a kernel over the domain would read the result at another row)",
                           exprLabel(*e), fmt::join(bound.sizesOf(out), ", "), fmt::join(domain.input_sizes, ", "));
      }
      ids.add(out, of);
    }
  }
  for (const Val* out : candidate.outputs) {
    if (!out->isTensor()) continue;
    const int64_t n = bound.numel(out);
    const bool walked = n == domain.full_numel || n == domain.outer_numel;
    if (walked && !aligned(bound.sizesOf(out), nullptr, domain, expected, n)) {
      return fmt::format("output {} is [{}]: not the reduction domain [{}] or its kept dims in their order (a kernel "
                         "over the domain writes each element where the domain has it)",
                         out->name(), fmt::join(bound.sizesOf(out), ", "), fmt::join(domain.input_sizes, ", "));
    }
  }
  return "";
}

}  // namespace braze
