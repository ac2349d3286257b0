// The reduction and inner-persistent lowerings: one loop structure over (row, reduced element).
// Inner: threads in x walk a row in vector chunks, a block holds threads_y rows; every reduction is a
// pass over the row followed by a block reduction across x; with `persistent`, loads are kept in
// registers (arrays indexed by the unrolled chunk) so only the first pass reads memory. Outer: threads
// in x own kept elements, threads in y split the reduced ones, a block reduction across y combines.
// Statistics (var, var_mean, welford) take two passes: the mean, then squared deviations.
#include "ir/error.h"
#include "kernel/lower.h"
#include "scheduler/reduction_domain.h"

#include <limits>
#include <numeric>

namespace braze::kernel {
namespace {

DataType accumulatorType(DataType out) {
  if (isFloating(out)) return out == DataType::Double ? DataType::Double : DataType::Float;
  return out;
}

ReduceOp reduceOpOf(OpKind kind) {
  switch (kind) {
    case OpKind::Sum: return ReduceOp::Sum;
    case OpKind::Prod: return ReduceOp::Prod;
    case OpKind::Max: return ReduceOp::Max;
    case OpKind::Min: return ReduceOp::Min;
    case OpKind::Any: return ReduceOp::Any;
    case OpKind::All: return ReduceOp::All;
    default: BRAZE_UNREACHABLE("reduceOpOf({})", opName(kind));
  }
}

ExprId identity(KernelBuilder& kb, ReduceOp op, DataType acc) {
  const double inf = std::numeric_limits<double>::infinity();
  const bool f = isFloating(acc);
  switch (op) {
    case ReduceOp::Sum: return kb.constantInt(0, acc);
    case ReduceOp::Prod: return kb.constantInt(1, acc);
    case ReduceOp::Max: return f ? kb.constant(-inf, acc) : kb.constantInt(integerMin(acc), acc);
    case ReduceOp::Min: return f ? kb.constant(inf, acc) : kb.constantInt(integerMax(acc), acc);
    case ReduceOp::Any: return kb.boolean(false);
    case ReduceOp::All: return kb.boolean(true);
  }
  return -1;
}

class RowLowering {
 public:
  RowLowering(LoweringContext& ctx, bool persistent_wanted)
      : ctx_(ctx), bound_(ctx.plan.bound), kb_(ctx.kernel), vb_(kb_, bound_, ctx.segment.exprs, ctx.inputs) {
    Candidate candidate{ctx.segment.exprs, ctx.segment.inputs, ctx.segment.outputs};
    facts_ = analyzeCandidate(candidate);
    auto domain = commonReductionDomain(facts_, bound_);
    BRAZE_ASSERT(std::holds_alternative<ReductionDomain>(domain), "segment {}: {}", ctx.segment.id,
                 std::get<std::string>(domain));
    domain_ = std::get<ReductionDomain>(domain);
    for (int64_t d = 0; d < static_cast<int64_t>(domain_.input_sizes.size()); ++d) {
      const bool reduced = std::find(domain_.dims.begin(), domain_.dims.end(), d) != domain_.dims.end();
      (reduced ? reduced_sizes_ : kept_sizes_).push_back(domain_.input_sizes[d]);
    }
    rows_ = domain_.outer_numel;
    row_length_ = domain_.outer_numel == 0 ? 0 : domain_.full_numel / domain_.outer_numel;
    choose(persistent_wanted);
  }

  void lower() {
    Kernel& k = ctx_.kernel;
    lane_ = kb_.scalarVar("lane", DataType::Int64, true);
    chunk_var_ = kb_.scalarVar("c", DataType::Int64, true);
    if (params_.inner) {
      row_ = kb_.letValue("row", kb_.add(kb_.mul(kb_.blockIdx(0), kb_.index(params_.threads_y)), kb_.threadIdx(1)));
    } else {
      row_ = kb_.letValue("k", kb_.add(kb_.mul(kb_.blockIdx(0), kb_.index(params_.threads_x)), kb_.threadIdx(0)));
    }
    row_ok_ = kb_.lt(row_, kb_.index(rows_));
    std::vector<Stmt> declarations, passes;
    if (params_.persistent) {
      LoadCache cache{&declarations, kb_.ref(chunk_var_), params_.chunks, {}};
      for (const auto& [val, tensor] : ctx_.inputs) {
        if (isRowData(val)) cache.tensors.insert(tensor);
      }
      vb_.setLoadCache(cache);
    }
    kb_.pushTarget(&passes);
    for (const Expr* e : facts_.reductions) reduce(*e);
    epilogue();
    kb_.popTarget();
    auto& target = kb_.current();
    target.insert(target.end(), std::make_move_iterator(declarations.begin()),
                  std::make_move_iterator(declarations.end()));
    target.insert(target.end(), std::make_move_iterator(passes.begin()), std::make_move_iterator(passes.end()));
    k.grid = {params_.grid, 1};
    k.block = {params_.threads_x, params_.threads_y};
    k.vectorize = params_.vectorize;
    k.summary = params_.toString();
  }

 private:
  void choose(bool persistent_wanted) {
    ReductionProblem problem;
    problem.rows = rows_;
    problem.row_length = row_length_;
    problem.inner = domain_.inner;
    problem.wants_persistent = persistent_wanted;
    problem.widest_dtype_bytes = ctx_.widest_dtype_bytes;
    int64_t cached = 0;
    for (const Val* in : ctx_.segment.inputs) cached += isRowData(in) ? 1 : 0;
    problem.cached_tensors = std::max<int64_t>(cached, 1);
    VectorizeInput vin;
    vin.widest_dtype_bytes = ctx_.widest_dtype_bytes;
    vin.tensor_factors = ctx_.input_factors;
    vin.inner_extent = innerExtent(reduced_sizes_);
    for (const Val* out : ctx_.segment.outputs) {
      if (bound_.numel(out) == domain_.full_numel && rows_ != domain_.full_numel) {
        vin.inner_extent = std::gcd(vin.inner_extent, innerExtent(bound_.sizesOf(out)));
      }
    }
    problem.max_vectorize = kernelVectorize(vin);
    params_ = reductionHeuristics(ctx_.device, problem);
  }

  // A tensor with an element per element of the domain (x, not a weight broadcast over the rows): what
  // a persistent kernel keeps in registers. Others are small and stay in L1/L2.
  bool isRowData(const Val* val) const {
    return val->isTensor() && bound_.numel(val) >= domain_.full_numel && domain_.full_numel > domain_.outer_numel;
  }

  // The input index of the reduction domain for (row, reduced-element base [+ lane]).
  std::vector<Idx> domainIndex(ExprId reduced_base, bool lane) {
    const auto kept = vb_.unflatten(row_, false, kept_sizes_);
    const auto red = vb_.unflatten(reduced_base, lane, reduced_sizes_);
    std::vector<Idx> index;
    size_t ki = 0, ri = 0;
    for (int64_t d = 0; d < static_cast<int64_t>(domain_.input_sizes.size()); ++d) {
      const bool reduced = std::find(domain_.dims.begin(), domain_.dims.end(), d) != domain_.dims.end();
      index.push_back(reduced ? red[ri++] : kept[ki++]);
    }
    return index;
  }

  // The row-major linear index of the domain element: how full-size outputs are indexed.
  ExprId domainLinear(const std::vector<Idx>& index) {
    ExprId linear = kb_.index(0);
    int64_t stride = 1;
    for (size_t d = index.size(); d-- > 0;) {
      linear = kb_.add(linear, kb_.mul(index[d].base, kb_.index(stride)));
      stride *= std::max<int64_t>(domain_.input_sizes[d], 1);
    }
    return linear;
  }

  // Runs `body(index)` for every reduced element this thread handles, in chunks of lanes.
  void forEachElement(const std::function<void(Chunk&, const std::vector<Idx>&)>& body) {
    const int64_t vec = params_.vectorize;
    if (params_.inner) {
      const int64_t row_chunks = (row_length_ + vec - 1) / vec;
      const int64_t chunks = params_.persistent ? params_.chunks
                                                : (row_chunks + params_.threads_x - 1) / params_.threads_x;
      kb_.openFor(chunk_var_, kb_.index(0), kb_.index(chunks), kb_.index(1), params_.persistent);
      const ExprId col = kb_.mul(kb_.add(kb_.mul(kb_.ref(chunk_var_), kb_.index(params_.threads_x)), kb_.threadIdx(0)),
                                 kb_.index(vec));
      emitChunk(kb_, vb_, kb_.land(row_ok_, kb_.lt(col, kb_.index(row_length_))), vec, lane_,
                [&](Chunk& c) { body(c, domainIndex(col, vec > 1)); });
      kb_.close();
      return;
    }
    kb_.openFor(chunk_var_, kb_.threadIdx(1), kb_.index(row_length_), kb_.index(params_.threads_y), false);
    emitChunk(kb_, vb_, row_ok_, 1, lane_, [&](Chunk& c) { body(c, domainIndex(kb_.ref(chunk_var_), false)); });
    kb_.close();
  }

  // acc = combine over this thread's elements of value(index), then across the threads of a row.
  ExprId accumulate(DataType acc_type, ReduceOp op, const std::function<ExprId(const std::vector<Idx>&)>& value) {
    const VarId acc = kb_.scalarVar("acc", acc_type);
    kb_.let(acc, identity(kb_, op, acc_type));
    forEachElement([&](Chunk& c, const std::vector<Idx>& index) {
      const ExprId v = kb_.cast(value(index), acc_type);
      kb_.pushTarget(params_.vectorize > 1 ? &c.body : &c.pre);
      kb_.assign(acc, kb_.elementwise(combineOf(op), acc_type, {kb_.ref(acc), v}));
      kb_.popTarget();
    });
    kb_.blockReduce(acc, op, params_.inner ? 0 : 1);
    return kb_.ref(acc);
  }

  void reduce(const Expr& e) {
    const Val* in = e.input(0);
    if (opInfo(e.kind()).category == OpCategory::Reduction) {
      const DataType out = e.output(0)->dtype();
      const bool cast_first = isFloating(out) && isFloating(in->dtype());
      const ExprId total = accumulate(accumulatorType(out), reduceOpOf(e.kind()), [&](const std::vector<Idx>& index) {
        const ExprId v = vb_.valueAt(in, index);
        return cast_first ? kb_.cast(v, out) : v;
      });
      vb_.setResult(e.output(0), kb_.letValue("r", kb_.cast(total, out)));
      return;
    }
    // Statistics: mean, then the sum of squared deviations from it, accumulated in float (double for
    // double outputs); n is the reduced element count.
    const DataType acc = e.output(0)->dtype() == DataType::Double ? DataType::Double : DataType::Float;
    const ExprId n = kb_.constant(static_cast<double>(row_length_), acc);
    const ExprId sum = accumulate(acc, ReduceOp::Sum,
                                  [&](const std::vector<Idx>& index) { return vb_.valueAt(in, index); });
    const ExprId mean = kb_.letValue("mean", kb_.elementwise(OpKind::TrueDiv, acc, {sum, n}));
    const ExprId m2 = accumulate(acc, ReduceOp::Sum, [&](const std::vector<Idx>& index) {
      const ExprId d = kb_.elementwise(OpKind::Sub, acc, {kb_.cast(vb_.valueAt(in, index), acc), mean});
      return vb_.bind("d2", kb_.elementwise(OpKind::Mul, acc, {d, d}));
    });
    auto result = [&](size_t i, ExprId value) {
      vb_.setResult(e.output(i), kb_.letValue("stat", kb_.cast(value, e.output(i)->dtype())));
    };
    if (e.kind() == OpKind::Welford) {
      result(0, mean);
      result(1, m2);
      result(2, n);
      return;
    }
    const double divisor = static_cast<double>(row_length_) - e.attrs().getDouble("correction");
    const ExprId var = kb_.elementwise(OpKind::TrueDiv, acc, {m2, kb_.constant(std::max(divisor, 0.0), acc)});
    result(0, var);
    if (e.kind() == OpKind::VarMean) result(1, mean);
  }

  void epilogue() {
    std::vector<const Val*> full, per_row;
    for (const Val* out : ctx_.segment.outputs) {
      const int64_t n = bound_.numel(out);
      (n == rows_ ? per_row : full).push_back(out);
    }
    if (!full.empty()) {
      forEachElement([&](Chunk& c, const std::vector<Idx>& index) {
        const ExprId linear = domainLinear(index);
        const bool lane = params_.vectorize > 1;
        for (const Val* out : full) {
          // Same shape as the domain: the same index, so loads match the cached ones of earlier passes.
          const bool same = bound_.sizesOf(out) == domain_.input_sizes;
          const auto at = same ? index : vb_.unflatten(linear, lane, bound_.sizesOf(out));
          storeOutput(kb_, vb_, c, ctx_.outputs.at(out), at, vb_.valueAt(out, at));
        }
      });
    }
    if (!per_row.empty()) {
      vb_.clearLoadCache();  // per-row values are computed once per row, outside the chunk loop
      const ExprId leader = kb_.eq(kb_.threadIdx(params_.inner ? 0 : 1), kb_.index(0));
      emitChunk(kb_, vb_, kb_.land(row_ok_, leader), 1, lane_, [&](Chunk& c) {
        for (const Val* out : per_row) {
          const auto at = vb_.unflatten(row_, false, bound_.sizesOf(out));
          storeOutput(kb_, vb_, c, ctx_.outputs.at(out), at, vb_.valueAt(out, at));
        }
      });
    }
  }

  LoweringContext& ctx_;
  const BoundShapes& bound_;
  KernelBuilder kb_;
  ValueBuilder vb_;
  CandidateFacts facts_;
  ReductionDomain domain_;
  std::vector<int64_t> kept_sizes_, reduced_sizes_;
  int64_t rows_ = 0, row_length_ = 0;
  ReductionParams params_;
  VarId lane_ = -1, chunk_var_ = -1;
  ExprId row_ = -1, row_ok_ = -1;
};

}  // namespace

void lowerReduction(LoweringContext& ctx, bool persistent_wanted) { RowLowering(ctx, persistent_wanted).lower(); }

}  // namespace braze::kernel
