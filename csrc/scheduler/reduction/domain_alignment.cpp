#include "scheduler/reduction/domain_alignment.h"

#include "ir/shape_rules.h"
#include "support/by_id.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <span>

namespace braze {
namespace {

// Per dim of a value computed from a reduction result: the domain dim it stands for (a kept dim of the
// result, carried through the ops after it), kAny where the value is the same all along it (a size-1,
// broadcast or expanded dim) or it comes from values read through index maps, kUnknown where an op this
// analysis does not follow moved it or two operands disagree on it, kLinear where a value of an inner
// domain's size holds the domain's elements in its row-major order under other dims (a reshape that merges a
// kept dim with reduced ones: a group norm's [b, g, c / g, h, w] viewed as [b, c, h, w]).
constexpr int64_t kAny = -1;
constexpr int64_t kUnknown = -2;
constexpr int64_t kLinear = -4;
using DimIds = std::vector<int64_t>;

int64_t elementsOf(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

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
      if (std::find(in.begin(), in.end(), kLinear) != in.end()) break;  // the row-major order is gone
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
      // Dims grouped where their sizes' products meet: a group of one dim each way keeps its id (size-1 dims
      // added or dropped); a group that splits or merges dims along which the value is the same all along
      // is so too (OLMo-2's normed projection viewed as heads); any other is unknown.
      const std::vector<int64_t>& in_sizes = bound.sizesOf(e.input(0));
      const std::vector<int64_t>& out_sizes = bound.sizesOf(out);
      if (std::find(in_sizes.begin(), in_sizes.end(), 0) != in_sizes.end() || in.size() != in_sizes.size()) break;
      size_t i = 0, o = 0;
      while (o < rank) {
        if (out_sizes[o] == 1) {
          result[o++] = kAny;
          continue;
        }
        while (i < in_sizes.size() && in_sizes[i] == 1) ++i;
        if (i == in_sizes.size()) break;
        const size_t i0 = i, o0 = o;
        int64_t in_product = in_sizes[i++], out_product = out_sizes[o++];
        while (in_product != out_product) {
          if (in_product < out_product && i < in_sizes.size()) {
            in_product *= in_sizes[i++];
          } else if (out_product < in_product && o < rank) {
            out_product *= out_sizes[o++];
          } else {
            break;
          }
        }
        if (in_product != out_product) break;
        int64_t id = kAny;
        size_t in_dims = 0, out_dims = 0;
        for (size_t d = i0; d < i; ++d) {
          if (in_sizes[d] == 1) continue;
          ++in_dims;
          if (in[d] != kAny) id = in[d];
        }
        for (size_t d = o0; d < o; ++d) out_dims += out_sizes[d] == 1 ? 0 : 1;
        const bool kept = in_dims == 1 && out_dims == 1;
        for (size_t d = o0; d < o; ++d) result[d] = out_sizes[d] == 1 ? kAny : kept || id == kAny ? id : kUnknown;
      }
      break;
    }
    // Moves along a dim where the value is the same all along (kAny: the reduced dims of a row, where a
    // row's statistic is broadcast) stay in the row: a slice of a normed head's halves, RoPE's rotate-half
    // cat of them. A kept dim stays only where it is kept whole.
    case OpKind::Slice: {
      const std::vector<int64_t>& in_sizes = bound.sizesOf(e.input(0));
      const std::vector<SliceDim> dims = sliceDims(e, in_sizes, bound.intOperands(e));
      if (in.size() != rank || dims.size() != rank) break;
      for (size_t d = 0; d < rank; ++d) {
        const bool whole = dims[d].start == 0 && dims[d].size == in_sizes[d] && dims[d].step == 1;
        result[d] = in[d] == kAny || whole ? in[d] : kUnknown;
      }
      break;
    }
    case OpKind::Pad: {
      const std::vector<int64_t> widths = bound.intOperands(e);  // [value, low, high of the last dim, ...]
      if (in.size() != rank || widths.empty()) break;
      result = in;
      for (size_t pair = 0; pair < (widths.size() - 1) / 2 && pair < rank; ++pair) {
        const size_t d = rank - 1 - pair;
        if ((widths[1 + 2 * pair] != 0 || widths[2 + 2 * pair] != 0) && in[d] != kAny) result[d] = kUnknown;
      }
      break;
    }
    case OpKind::Cat: {
      const auto dim = static_cast<size_t>(e.attrs().getInt("dim"));
      result.assign(rank, kAny);
      DimIds of;
      for (const Val* operand : e.inputs()) {
        idsOf(operand, of);
        if (of.size() != rank || dim >= rank) {
          result.assign(rank, kUnknown);
          break;
        }
        for (size_t d = 0; d < rank; ++d) result[d] = combine(result[d], d == dim && of[d] != kAny ? kUnknown : of[d]);
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

// Whether a value of `sizes` with `ids` holds an inner domain's elements in their row-major order: its
// dims each the domain's own (aligned) or all kLinear. Rows walked whole index it by its linear position.
bool linearOrder(const std::vector<int64_t>& sizes, std::span<const int64_t> ids, const ReductionDomain& domain,
                 const ExpectedDims& expected_dims) {
  if (!domain.inner || domain.full_numel == domain.outer_numel || elementsOf(sizes) != domain.full_numel) return false;
  const DimIds copy(ids.begin(), ids.end());
  if (aligned(sizes, &copy, domain, expected_dims, domain.full_numel)) return true;
  for (size_t q = 0; q < sizes.size(); ++q) {
    if (sizes[q] != 1 && ids[q] != kLinear) return false;
  }
  return true;
}

// The domain dim each dim of a value of `sizes` and `ids` (`n` elements, a row's or a per-row result's)
// stands for, -1 for its size-1 dims, where every kept dim of the domain is the id of one of its dims of
// that size. Its other dims (kAny: the value is the same all along them as far as the reduction results
// go) hold the domain's remaining dims: each its own where their sizes agree one to one, else all of them
// kFlattened, their elements in the order of the remaining dims' (OLMo-2's normed [b, t, h * d] viewed as
// [b, t, h, d]). Each element is then computed from the results of the row its kept dims name, and the
// map is one to one: the kernel at a domain element computes and stores the value's element at the mapped
// index. Nullopt where that does not hold, or where a row-sized value's innermost dim does not walk the
// domain's innermost (its chunks would not be stored as vectors: a transpose's job).
std::optional<std::vector<int64_t>> permutedDims(const std::vector<int64_t>& sizes, const DimIds& ids,
                                                 const ReductionDomain& domain, const ExpectedDims& expected_dims,
                                                 int64_t n) {
  const std::vector<int64_t>& expected = expected_dims.of(n, domain);
  std::vector<int64_t> dims(sizes.size(), -1);
  std::vector<bool> used(domain.input_sizes.size(), false);
  for (size_t q = 0; q < sizes.size(); ++q) {
    if (sizes[q] == 1 || ids[q] == kAny) continue;
    const auto d = static_cast<size_t>(ids[q]);
    if (ids[q] == kUnknown || std::find(expected.begin(), expected.end(), ids[q]) == expected.end() || used[d] ||
        sizes[q] != domain.input_sizes[d]) {
      return std::nullopt;
    }
    dims[q] = ids[q];
    used[d] = true;
  }
  for (int64_t d : expected_dims.kept) {
    if (!used[static_cast<size_t>(d)]) return std::nullopt;  // some row coordinate the value does not name
  }
  std::vector<int64_t> rest, free;  // the domain's remaining dims, the value's dims left
  for (int64_t d : expected) {
    if (!used[static_cast<size_t>(d)]) rest.push_back(d);
  }
  for (size_t q = 0; q < sizes.size(); ++q) {
    if (sizes[q] != 1 && dims[q] < 0) free.push_back(static_cast<int64_t>(q));
  }
  bool one_to_one = rest.size() == free.size();
  int64_t rest_elements = 1, free_elements = 1;
  for (size_t k = 0; k < rest.size(); ++k) rest_elements *= domain.input_sizes[static_cast<size_t>(rest[k])];
  for (size_t k = 0; k < free.size(); ++k) {
    free_elements *= sizes[static_cast<size_t>(free[k])];
    one_to_one = one_to_one && sizes[static_cast<size_t>(free[k])] == domain.input_sizes[static_cast<size_t>(rest[k])];
  }
  if (rest_elements != free_elements) return std::nullopt;
  for (size_t k = 0; k < free.size(); ++k) dims[static_cast<size_t>(free[k])] = one_to_one ? rest[k] : kFlattened;
  if (n == domain.full_numel && n != domain.outer_numel) {
    for (size_t q = sizes.size(); q-- > 0;) {
      if (sizes[q] == 1) continue;
      const bool walks_innermost = dims[q] == expected.back() || (dims[q] == kFlattened && !rest.empty() &&
                                                                  rest.back() == expected.back());
      if (!walks_innermost) return std::nullopt;
      break;
    }
  }
  return dims;
}

// Where a reshape of a value in an inner domain's row-major order (aligned, or kLinear already) merges a kept
// dim with others (`of` has unknown dims): each element stays at its linear position, so `of` becomes kLinear.
// A kLinear dim that reaches a value of another size (an expand) becomes unknown.
void linearIds(const Expr& e, const Val* out, const IdsTable& ids, const BoundShapes& bound,
               const ReductionDomain& domain, const ExpectedDims& expected, DimIds& of) {
  const std::vector<int64_t>& sizes = bound.sizesOf(out);
  const bool full = domain.inner && domain.full_numel != domain.outer_numel && elementsOf(sizes) == domain.full_numel;
  if (!full) {
    std::replace(of.begin(), of.end(), kLinear, kUnknown);
    return;
  }
  // Ids the reshape keeps (each dim its own domain dim, or the same all along) say more than kLinear does.
  if (e.kind() != OpKind::Reshape || std::find(of.begin(), of.end(), kUnknown) == of.end()) return;
  const auto in = ids.find(e.input(0));
  if (!in || !linearOrder(bound.sizesOf(e.input(0)), *in, domain, expected)) return;
  // Viewed as the domain again (size-1 dims aside), its dims are the domain's own: reductions may read it.
  const bool as_domain = withoutOnes(sizes) == withoutOnes(domain.input_sizes);
  for (size_t q = 0, k = 0; q < sizes.size(); ++q) of[q] = sizes[q] == 1 ? kAny : as_domain ? expected.full[k++] : kLinear;
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
    case OpKind::Permute: {  // only moving size-1 dims (or none: the identity)
      const std::vector<int64_t>& in = bound.sizesOf(expr.input(0));
      int64_t last = -1;
      for (int64_t d : expr.attrs().getInts("dims")) {
        if (in.at(static_cast<size_t>(d)) == 1) continue;
        if (d < last) return false;
        last = d;
      }
      return true;
    }
    default: return false;
  }
}

std::string misalignedWithDomain(const Candidate& candidate, const CandidateFacts& facts,
                                 const ReductionDomain& domain, const BoundShapes& bound, PermutedOutputs* permuted) {
  IdsTable ids;  // of the values computed from a reduction result
  const ExpectedDims expected(domain);
  DimIds of, scratch;
  const auto is_output = [&](const Val* v) {
    return std::find(candidate.outputs.begin(), candidate.outputs.end(), v) != candidate.outputs.end();
  };
  for (const Expr* e : candidate.exprs) {
    const OpCategory category = opInfo(e->kind()).category;
    const bool reduction = category == OpCategory::Reduction || category == OpCategory::Normalization;
    if (permuted != nullptr && reduction && facts.after_reduction.count(e->input(0)) != 0) {
      // A reduction walks its input at the domain's index: it lies as the domain does.
      const Val* in = e->input(0);
      const int64_t n = bound.numel(in);
      const auto found = ids.find(in);
      if (found) of.assign(found->begin(), found->end());
      if ((n != domain.full_numel && n != domain.outer_numel) || !found ||
          !aligned(bound.sizesOf(in), &of, domain, expected, n)) {
        return fmt::format("{} reduces [{}], a value computed from a reduction result that does not lie as the "
                           "reduction domain [{}] does", exprLabel(*e), fmt::join(bound.sizesOf(in), ", "),
                           fmt::join(domain.input_sizes, ", "));
      }
    }
    for (const Val* out : e->outputs()) {
      if (!out->isTensor() || facts.after_reduction.count(out) == 0) continue;
      const int64_t n = bound.numel(out);
      if (reduction) {
        reducedIds(*e, out, bound, of);
      } else {
        forwardIds(*e, ids, bound, of, scratch);
        linearIds(*e, out, ids, bound, domain, expected, of);
      }
      ids.add(out, of);
      const bool walked = n == domain.full_numel || n == domain.outer_numel;
      if (!walked || aligned(bound.sizesOf(out), &of, domain, expected, n)) continue;
      if (linearOrder(bound.sizesOf(out), of, domain, expected)) continue;
      // Values the kernel reads only through index maps may lie in any order; outputs are stored where
      // their dims put each domain element.
      if (permuted != nullptr && !is_output(out)) continue;
      if (permuted != nullptr) {
        if (auto dims = permutedDims(bound.sizesOf(out), of, domain, expected, n)) {
          (*permuted)[out] = std::move(*dims);
          continue;
        }
      }
      return fmt::format("{} gives [{}], computed from a reduction result with its dims not where the reduction "
                         "domain [{}] has them (a kernel over the domain would read the result at another row)",
                         exprLabel(*e), fmt::join(bound.sizesOf(out), ", "), fmt::join(domain.input_sizes, ", "));
    }
  }
  for (const Val* out : candidate.outputs) {
    if (!out->isTensor() || (permuted != nullptr && permuted->count(out) != 0)) continue;
    const int64_t n = bound.numel(out);
    // A value not computed from a reduction result is computed at its own index of the element the walk
    // stores it at: in an inner domain, the domain's linear position, whatever its dims.
    const auto found = ids.find(out);
    if (domain.inner && n == domain.full_numel && n != domain.outer_numel &&
        (!found || linearOrder(bound.sizesOf(out), *found, domain, expected))) {
      continue;
    }
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
