// The reduction and inner-persistent lowerings: one loop structure over (row, reduced element).
// Inner: threads in x walk a row in vector chunks, a block holds threads_y rows; every reduction is a
// pass over the row followed by a block reduction across x; with `persistent`, loads are kept in
// registers (arrays indexed by the unrolled chunk), or in shared memory for larger rows, so only the
// first pass reads memory. Outer: threads in x own (vectors of) kept elements, threads in y split the
// reduced ones, a block reduction across y combines. Statistics (var, var_mean, welford) take two
// passes: the mean, then squared deviations.
// Grid reduction (few rows): blocks in grid y each reduce a split of every row and write a partial;
// the last block of a row to arrive (an atomic counter) combines the partials and writes the results.
#include "support/error.h"
#include "scheduler/access_probe.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/reduce_values.h"
#include "scheduler/reduction/reduction_domain.h"
#include "scheduler/reduction/row_launch.h"
#include "scheduler/reduction/row_inputs.h"
#include "scheduler/reduction/row_cats.h"
#include "scheduler/inner_outer/entry.h"

#include <limits>
#include <numeric>
#include <unordered_set>

namespace braze::scheduler {
namespace {

// A row value as the lowering holds it: a scalar variable, or (outer reductions vectorized over the
// kept dims) a local array with one value per lane.
struct RowVar {
  VarId var = -1;
  int64_t lanes = 1;  // 1: a scalar
};

class RowLowering {
 public:
  // `inner_outer`: the segment also reduces over the rows (the inner-outer persistent scheduler): those
  // reductions are kept apart (outer_), their results and what is computed from them left to the finish.
  explicit RowLowering(LoweringContext& ctx, bool inner_outer = false)
      : ctx_(ctx), bound_(ctx.bound), kb_(ctx.kernel), vb_(kb_, bound_, ctx.segment.exprs, ctx.inputs) {
    Candidate candidate{ctx.segment.exprs, ctx.segment.inputs, ctx.segment.outputs};
    facts_ = analyzeCandidate(candidate);
    if (inner_outer) {
      const InnerOuterSplit split = splitInnerOuter(facts_, ctx.segment.exprs, bound_);
      facts_.reductions = split.inner;
      outer_ = split.outer;
      after_outer_ = split.after_outer;
    }
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
    if (ctx.segment.scheduler == SchedulerKind::Reduction) {  // the one whose check takes them
      cats_ = findRowCats(ctx.segment.exprs, ctx.segment.outputs, [&](const Val* v) {
        return facts_.after_reduction.count(v) != 0 && bound_.numel(v) == rows_;
      }, bound_);
    }
    // Outer reductions of other tensors over the same rows: walked after the row groups.
    std::erase_if(outer_, [&](const Expr* r) {
      if (bound_.sizesOf(r->input(0)) == domain_.input_sizes) return false;
      extra_.push_back(r);
      return true;
    });
  }

  void lower(const ReductionParams& params) {
    params_ = params;
    Kernel& k = ctx_.kernel;
    kb_.fixBlock(params_.threads_x, params_.threads_y);  // a row's elements that always fit take no test
    lane_ = kb_.scalarVar("lane", DataType::Int64, true);
    chunk_var_ = kb_.scalarVar("c", DataType::Int64, true);
    lanes_ = params_.inner ? 1 : params_.vectorize;
    if (params_.inner) {
      row_ = kb_.letValue("row", kb_.add(kb_.mul(kb_.blockIdx(0), kb_.index(params_.threads_y)), kb_.threadIdx(1)));
      kept_base_ = row_;
    } else {
      row_ = kb_.letValue("k", kb_.add(kb_.mul(kb_.blockIdx(0), kb_.index(params_.threads_x)), kb_.threadIdx(0)));
      kept_base_ = kb_.mul(row_, kb_.index(lanes_));
    }
    // Inner: the row count is a launch argument, so every batch size that keeps the heuristics' choice
    // runs one compiled kernel (row offsets of contiguous rows are row * length, whatever the dims).
    row_ok_ = kb_.lt(kept_base_, params_.inner ? kb_.extent("rows", params_.problem.rows) : kb_.index(rows_));
    member_ = kb_.threadIdx(params_.inner ? 0 : 1);
    split_ = params_.splits > 1 ? kb_.blockIdx(1) : kb_.index(0);
    std::vector<Stmt> declarations, passes;
    if (params_.persistent) keepRows(&declarations);
    kb_.pushTarget(&passes);
    if (params_.splits > 1) {
      gridReduce();
    } else {
      prefetchRows();
      for (const Expr* e : facts_.reductions) reduce(*e);
      epilogue();
    }
    kb_.popTarget();
    auto& target = kb_.current();
    target.insert(target.end(), std::make_move_iterator(declarations.begin()),
                  std::make_move_iterator(declarations.end()));
    target.insert(target.end(), std::make_move_iterator(passes.begin()), std::make_move_iterator(passes.end()));
    k.grid = {params_.grid, params_.splits};
    k.vectorize = params_.vectorize;
    k.summary = params_.toString();
  }

  // Inner-outer: every block walks row groups blockIdx.x, + blocks, ... as the inner persistent
  // kernel walks its one row group, and each thread also sums, per outer reduction, the values of its
  // row elements (the same columns in every row) over the rows it walks. After the walk the sums go to a
  // shared workspace of partial_rows x row_length partials (a row per block, its thread rows added in
  // shared memory, or a row per thread row: inner_outer/partials.cpp), which the follow-up kernel
  // (inner_outer/finish) sums per column into the outer results.
  void lowerInnerOuter(const InnerOuterParams& io) {
    params_ = io.inner;
    Kernel& k = ctx_.kernel;
    kb_.fixBlock(params_.threads_x, params_.threads_y);
    lane_ = kb_.scalarVar("lane", DataType::Int64, true);
    chunk_var_ = kb_.scalarVar("c", DataType::Int64, true);
    lanes_ = 1;
    member_ = kb_.threadIdx(0);
    split_ = kb_.index(0);
    const int64_t vec = params_.vectorize;
    std::vector<Stmt> declarations, passes;
    if (params_.persistent) keepRows(&declarations);
    kb_.pushTarget(&passes);
    for (const Expr* e : outer_) {
      const Plain p = plainOf(*e);
      const VarId acc = kb_.arrayVar("outer", p.acc, params_.chunks * vec);
      kb_.declare(acc);
      for (int64_t i = 0; i < params_.chunks * vec; ++i) kb_.localWrite(acc, kb_.index(i), identity(kb_, p.op, p.acc));
      outer_acc_.push_back(acc);
    }
    // The row groups and the grid are launch arguments: another row count runs the same kernel.
    const VarId group = kb_.scalarVar("group", DataType::Int64, true);
    kb_.openFor(group, kb_.blockIdx(0), kb_.extent("row_groups", rowGroups(params_)), kb_.extent("blocks", io.blocks),
                false);
    row_ = kb_.letValue("row", kb_.add(kb_.mul(kb_.ref(group), kb_.index(params_.threads_y)), kb_.threadIdx(1)));
    kept_base_ = row_;
    row_ok_ = kb_.lt(kept_base_, kb_.extent("rows", params_.problem.rows));
    prefetchRows();
    for (const Expr* e : facts_.reductions) reduce(*e);
    epilogue();
    kb_.close();
    std::vector<OuterPartials> partials;
    for (const Expr* e : outer_) partials.push_back({e, row_length_, io.partial_rows, "partial_rows"});
    for (size_t x = 0; x < extra_.size(); ++x) {
      walkExtraRows(kb_, vb_, ctx_, bound_, {extra_[x], io.extras[x], params_, io.blocks, partials.size()}, lane_);
      partials.push_back({extra_[x], io.extras[x].columns, io.blocks, "blocks"});
    }
    // Each thread's partial sums: its columns of every row it walked.
    std::vector<ThreadPartials> sums;
    for (size_t o = 0; o < outer_.size(); ++o) {
      const Plain p = plainOf(*outer_[o]);
      const TensorId ws = kb_.addTensor(workspaceParam(innerOuterPartialsName(o), p.acc, io.partial_rows * row_length_,
                                                       false));
      k.tensors[ws].shared = true;
      sums.push_back({outer_acc_[o], ws, p.acc, p.op});
    }
    storePartialRows(kb_, sums, io, row_length_, chunk_var_);
    kb_.popTarget();
    auto& target = kb_.current();
    target.insert(target.end(), std::make_move_iterator(declarations.begin()),
                  std::make_move_iterator(declarations.end()));
    target.insert(target.end(), std::make_move_iterator(passes.begin()), std::make_move_iterator(passes.end()));
    k.grid = {io.blocks, 1};
    k.vectorize = vec;
    k.summary = io.toString();
    ctx_.follow_ups.push_back(lowerInnerOuterFinish(ctx_, partials, after_outer_, io));
  }

  InnerOuterParams chooseInnerOuter() {
    InnerOuterProblem problem{rowProblem(true), static_cast<int64_t>(outer_.size()), {}};
    for (const Expr* e : outer_) {
      problem.accumulator_bytes = std::max<int64_t>(problem.accumulator_bytes, sizeOf(plainOf(*e).acc));
    }
    for (const Expr* r : extra_) {
      // Vectors along the columns, as wide as every tensor of the extra operand's shape allows.
      VectorizeInput vin;
      vin.widest_dtype_bytes = 1;
      vin.inner_extent = innerExtent(bound_.sizesOf(r->input(0)));
      size_t input = 0;
      for (const TensorParam& t : ctx_.kernel.tensors) {
        if (t.output) continue;
        if (t.val != nullptr && bound_.sizesOf(t.val) == bound_.sizesOf(r->input(0))) {
          vin.tensor_factors.push_back(ctx_.input_factors[input]);
          vin.widest_dtype_bytes = std::max(vin.widest_dtype_bytes, sizeOf(t.dtype));
        }
        ++input;
      }
      problem.extras.push_back({*extraOuterColumns(*r, rows_, bound_), kernelVectorize(vin), vin.widest_dtype_bytes});
    }
    return innerOuterHeuristics(ctx_.device, problem);
  }

  ReductionParams choose(bool persistent_wanted) {
    return reductionHeuristics(ctx_.device, rowProblem(persistent_wanted));
  }

  ReductionProblem rowProblem(bool persistent_wanted) {
    ReductionProblem problem;
    problem.rows = rows_;
    problem.row_length = row_length_;
    problem.inner = domain_.inner;
    problem.wants_persistent = persistent_wanted;
    problem.widest_dtype_bytes = ctx_.widest_dtype_bytes;
    int64_t cached = 0;
    for (const Val* in : ctx_.segment.inputs) {
      if (!isRowData(in)) continue;
      ++cached;
      if (in->dtype() == DataType::Double || in->dtype() == DataType::Int64) problem.cached_value_bytes = 8;
    }
    problem.cached_tensors = std::max<int64_t>(cached, 1);
    problem.splittable = !persistent_wanted && splittable();
    // The vector is as wide as the tensors the lanes walk allow: a [rows, 1] float statistic read once
    // per row (or written once per row) does not narrow a bf16 row's vectors.
    VectorizeInput vin;
    vin.tensor_factors = walkedInputFactors(&vin.widest_dtype_bytes);
    // Inner: lanes walk the row; outer: lanes walk the kept dims (the innermost in memory).
    vin.inner_extent = innerExtent(domain_.inner ? reduced_sizes_ : kept_sizes_);
    for (const Val* out : ctx_.segment.outputs) {
      // The finish writes it, or the per-row stores of a join do, one element a lane whatever the vector.
      if (after_outer_.count(out) != 0 || isRowCat(out)) continue;
      const bool full = bound_.numel(out) == domain_.full_numel && rows_ != domain_.full_numel;
      if (full || !domain_.inner) {
        vin.inner_extent = std::gcd(vin.inner_extent, innerExtent(bound_.sizesOf(out)));
        vin.widest_dtype_bytes = std::max(vin.widest_dtype_bytes, sizeOf(out->dtype()));
      }
    }
    problem.max_vectorize = kernelVectorize(vin);
    return problem;
  }

 private:
  // The vector factors of the inputs the lanes walk (inner: along the row; outer: along the kept
  // elements), as the load probe sees them in the reductions' operands: an input read once per lane
  // group (a [rows, 1] mean or rstd in an inner reduction) is a scalar load before the lanes, and its
  // own layout (an odd row count) does not limit the vector. Inputs no probe sees count; a tensor seen
  // in no probe at all (every reduction fed by another) leaves every input counting.
  std::vector<int64_t> walkedInputFactors(int64_t* widest_bytes) const {
    *widest_bytes = 1;
    // Per tensor parameter: seen with a stride along the walked dim of 0 only (false), or not (true).
    std::vector<std::optional<std::vector<int64_t>>> seen(ctx_.kernel.tensors.size());
    std::vector<bool> walks(ctx_.kernel.tensors.size(), false);
    std::unordered_set<const Val*> probed;
    for (const Expr* reduction : facts_.reductions) {
      // An operand computed from another reduction's result (softmax's exp(x - max)) has no value per
      // element without that reduction: not probed, its tensors count.
      if (facts_.after_reduction.count(reduction->input(0)) != 0) continue;
      if (!probed.insert(reduction->input(0)).second) continue;
      const std::vector<InputAccess> access = probeInputAccess(ctx_, reduction->input(0));
      for (size_t t = 0; t < access.size(); ++t) {
        if (access[t].strides && !seen[t]) seen[t] = access[t].strides;
        if (access[t].strides && seen[t] != access[t].strides) walks[t] = true;  // read two ways: count it
      }
    }
    int64_t walked = -1;
    for (auto d = static_cast<int64_t>(domain_.input_sizes.size()); d-- > 0 && walked < 0;) {
      const bool reduced = std::find(domain_.dims.begin(), domain_.dims.end(), d) != domain_.dims.end();
      if (reduced == domain_.inner && domain_.input_sizes[d] > 1) walked = d;
    }
    std::vector<int64_t> factors;
    size_t input = 0;
    for (size_t t = 0; t < ctx_.kernel.tensors.size(); ++t) {
      if (ctx_.kernel.tensors[t].output) continue;
      const Val* val = ctx_.kernel.tensors[t].val;
      if (val != nullptr && isExtraShaped(val)) {  // walked apart, with vectors of its own
        ++input;
        continue;
      }
      if (walked < 0 || walks[t] || !seen[t] || (*seen[t])[static_cast<size_t>(walked)] != 0) {
        factors.push_back(ctx_.input_factors[input]);
        *widest_bytes = std::max(*widest_bytes, sizeOf(ctx_.kernel.tensors[t].dtype));
      }
      ++input;
    }
    return factors;
  }

  // Whether blocks may reduce parts of a row: plain reductions only (statistics need the whole row's
  // mean first), none fed by another's result, and every output a per-row value or an element that
  // needs no reduction result.
  bool splittable() const {
    std::unordered_set<const Val*> after_reduction;
    for (const Expr* e : ctx_.segment.exprs) {
      const bool is_reduction = std::find(facts_.reductions.begin(), facts_.reductions.end(), e) !=
                                facts_.reductions.end();
      bool fed = false;
      for (const Val* in : e->inputs()) fed = fed || after_reduction.count(in) != 0;
      if (is_reduction && (fed || opInfo(e->kind()).category != OpCategory::Reduction)) return false;
      if (is_reduction || fed) {
        for (const Val* out : e->outputs()) after_reduction.insert(out);
      }
    }
    // Outputs before any reduction are written by whichever block walks their element (prologueOutputs).
    for (const Val* out : ctx_.segment.outputs) {
      if (bound_.numel(out) != rows_ && !isRowCat(out) && (!isFullOutput(out) || after_reduction.count(out) != 0)) {
        return false;
      }
    }
    return !facts_.reductions.empty();
  }

  // A tensor with an element per element of the domain (x, not a weight broadcast over the rows): what
  // a persistent kernel keeps in registers. Others are small and stay in L1/L2.
  bool isRowData(const Val* val) const {
    if (!val->isTensor() || isExtraShaped(val)) return false;
    return bound_.numel(val) >= domain_.full_numel && domain_.full_numel > domain_.outer_numel;
  }
  // A tensor of an extra reduction's shape (another tensor's rows, walked apart from the domain's).
  bool isExtraShaped(const Val* val) const {
    return std::any_of(extra_.begin(), extra_.end(),
                       [&](const Expr* r) { return bound_.sizesOf(r->input(0)) == bound_.sizesOf(val); });
  }

  // The input index of the reduction domain for this thread's kept element(s) and a reduced element.
  std::vector<Idx> domainIndex(ExprId reduced_base, bool reduced_lane) {
    const auto kept = vb_.unflatten(kept_base_, lanes_ > 1, kept_sizes_);
    const auto red = vb_.unflatten(reduced_base, reduced_lane, reduced_sizes_);
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

  // An outer reduction takes its reduced element count (the rows it sums: a batch times a sequence) and
  // each split's share of them at launch, so another batch size runs the same kernel. An inner one's
  // count is the row length, which its chunks and unrolling are built on: a constant.
  ExprId reducedCount() { return params_.inner ? kb_.index(row_length_) : kb_.extent("row_length", row_length_); }
  ExprId splitLength() {
    return params_.inner ? kb_.index(params_.split_length) : kb_.extent("split_length", params_.split_length);
  }

  // Runs `body(index)` for every reduced element this thread handles (of its split), in chunks of lanes.
  void forEachElement(const std::function<void(Chunk&, const std::vector<Idx>&)>& body) {
    const int64_t vec = params_.vectorize;
    const ExprId split_begin = params_.splits > 1 ? kb_.mul(split_, splitLength()) : kb_.index(0);
    if (params_.inner) {
      const int64_t row_chunks = (row_length_ + vec - 1) / vec;
      const int64_t chunks = params_.persistent || params_.splits > 1
                                 ? params_.chunks
                                 : (row_chunks + params_.threads_x - 1) / params_.threads_x;
      const bool unroll = params_.persistent && !params_.shared_cache;
      // Values every element of the pass shares are computed once, before the loop (pure arithmetic on
      // per-row results and scalars: safe for threads past the last row too).
      std::vector<Stmt> hoisted;
      vb_.setHoistTarget(&hoisted);
      // Where the threads' chunks never pass the row's end, one test of the row guards them all: a test
      // per chunk would be a branch per chunk, each with that chunk's loads behind it.
      const bool whole_chunks = params_.splits == 1 && chunks * params_.threads_x * vec <= row_length_;
      if (whole_chunks) kb_.openIf(row_ok_);
      kb_.openFor(chunk_var_, kb_.index(0), kb_.index(chunks), kb_.index(1), unroll);
      const ExprId step = kb_.add(kb_.mul(kb_.ref(chunk_var_), kb_.index(params_.threads_x)), kb_.threadIdx(0));
      const ExprId col = kb_.add(split_begin, kb_.mul(step, kb_.index(vec)));
      const ExprId in_row = kb_.lt(col, kb_.index(row_length_));
      emitChunk(kb_, vb_, whole_chunks ? in_row : kb_.land(row_ok_, in_row), vec, lane_,
                [&](Chunk& c) { body(c, domainIndex(col, vec > 1)); });
      kb_.close();
      vb_.setHoistTarget(nullptr);
      auto& target = kb_.current();
      target.insert(target.end() - 1, std::make_move_iterator(hoisted.begin()), std::make_move_iterator(hoisted.end()));
      if (whole_chunks) kb_.close();
      return;
    }
    ExprId end = reducedCount();
    if (params_.splits > 1) end = kb_.min(end, kb_.add(split_begin, splitLength()));
    kb_.openFor(chunk_var_, kb_.add(split_begin, kb_.threadIdx(1)), end, kb_.index(params_.threads_y), false);
    emitChunk(kb_, vb_, row_ok_, lanes_, lane_, [&](Chunk& c) { body(c, domainIndex(kb_.ref(chunk_var_), false)); });
    kb_.close();
  }

  // A persistent kernel's loads of row data are kept (registers, or shared memory) in arrays declared
  // in `declarations`, for the passes after the first.
  void keepRows(std::vector<Stmt>* declarations) {
    LoadCache cache{declarations, kb_.ref(chunk_var_), params_.chunks, {}};
    for (const auto& [val, tensor] : ctx_.inputs) {
      if (isRowData(val)) cache.tensors.insert(tensor);
    }
    if (params_.shared_cache) {
      cache.shared = true;
      cache.threads = params_.threads_x * params_.threads_y;
      cache.thread = kb_.add(kb_.mul(kb_.threadIdx(1), kb_.index(params_.threads_x)), kb_.threadIdx(0));
    }
    vb_.setLoadCache(cache);
  }

  // A row kept in registers is read from memory once, and all of it at once: a pass of loads alone
  // precedes the first reduction. Left to the reduction's pass, each chunk's loads sit in a guarded block
  // with that chunk's arithmetic, which the compiler keeps in order: a round trip to memory per chunk
  // instead of one per row. An input with a value per row (a norm backward's mean and rstd) is loaded
  // once per row there too, instead of in every chunk of every pass. Only inputs that the passes read at
  // the domain's own index are taken (readAtDomainIndex), so the passes find each of them loaded.
  void prefetchRows() {
    if (!params_.persistent || params_.shared_cache) return;
    std::vector<const Expr*> reductions = facts_.reductions;
    reductions.insert(reductions.end(), outer_.begin(), outer_.end());
    std::vector<const Val*> rows;
    std::vector<std::pair<const Val*, DataType>> per_row;
    for (const Val* val : ctx_.segment.inputs) {  // in the segment's order: the same source every time
      const auto param = ctx_.inputs.find(val);
      if (param == ctx_.inputs.end() || !val->isTensor()) continue;
      if (!readAtDomainIndex(val, ctx_.segment.exprs, reductions, domain_, bound_)) continue;
      if (isRowData(val) && bound_.sizesOf(val) == domain_.input_sizes) rows.push_back(val);
      if (row_length_ > 1 && isPerRowInput(val, domain_, bound_)) {
        per_row.emplace_back(val, kb_.kernel().tensors[param->second].dtype);
      }
    }
    for (const auto& [val, dtype] : per_row) {
      const std::vector<Idx> first = domainIndex(kb_.index(0), false);
      const VarId var = kb_.scalarVar("row_value", dtype);
      kb_.let(var, kb_.constant(0.0, dtype));
      emitChunk(kb_, vb_, row_ok_, 1, lane_, [&](Chunk& c) {
        const ExprId value = vb_.valueAt(val, first);
        kb_.pushTarget(&c.pre);
        kb_.assign(var, value);
        kb_.popTarget();
      });
      vb_.setResult(val, kb_.ref(var));
    }
    if (rows.empty()) return;
    forEachElement([&](Chunk&, const std::vector<Idx>& index) {
      for (const Val* val : rows) vb_.valueAt(val, index);
    });
  }

  // The outputs with an element per domain element that depend on no reduction (a GELU backward's
  // grad_in next to its bias grad): a kernel that streams the rows writes them in its first pass over
  // the elements, instead of reading the inputs again after the reductions. A persistent kernel keeps
  // its rows, so it writes every output in its last pass.
  std::vector<const Val*> prologueOutputs() const {
    std::vector<const Val*> outs;
    if (params_.persistent || !outer_.empty()) return outs;
    for (const Val* out : ctx_.segment.outputs) {
      if (isFullOutput(out) && facts_.after_reduction.count(out) == 0) outs.push_back(out);
    }
    return outs;
  }
  bool isFullOutput(const Val* out) const {
    return bound_.numel(out) == domain_.full_numel && domain_.full_numel != rows_;
  }

  // Stores `outs` (each with an element per domain element) at the domain element `index`.
  void storeFullOutputs(Chunk& c, const std::vector<Idx>& index, const std::vector<const Val*>& outs) {
    if (outs.empty()) return;
    const ExprId linear = domainLinear(index);
    const bool lane = params_.vectorize > 1;
    for (const Val* out : outs) {
      // Same shape as the domain: the same index, so loads match the cached ones of earlier passes.
      const bool same = bound_.sizesOf(out) == domain_.input_sizes;
      const auto at = same ? index : vb_.unflatten(linear, lane, bound_.sizesOf(out));
      storeOutput(kb_, vb_, c, ctx_.outputs.at(out), at, vb_.valueAt(out, at));
    }
  }

  // Adds outer reduction `o`'s value at `index` (this thread's element of its current row) to the
  // thread's partial sum of that column.
  void accumulateOuter(Chunk& c, const std::vector<Idx>& index, size_t o) {
    const Expr& e = *outer_[o];
    const Plain p = plainOf(e);
    const bool cast_first = isFloating(p.out) && isFloating(e.input(0)->dtype());
    const ExprId in = vb_.valueAt(e.input(0), index);
    const ExprId v = kb_.cast(cast_first ? kb_.cast(in, p.out) : in, p.acc);
    const int64_t vec = params_.vectorize;
    kb_.pushTarget(vec > 1 ? &c.body : &c.pre);
    ExprId slot = kb_.mul(kb_.ref(chunk_var_), kb_.index(vec));
    if (vec > 1) slot = kb_.add(slot, kb_.ref(lane_));
    const ExprId combined = kb_.elementwise(combineOf(p.op), p.acc, {kb_.localRead(outer_acc_[o], slot), v});
    kb_.localWrite(outer_acc_[o], slot, combined);
    kb_.popTarget();
  }

  // The row value as an expression: the scalar, or the array's element for the current lane.
  ExprId rowValue(const RowVar& v) {
    return v.lanes == 1 ? kb_.ref(v.var) : kb_.localRead(v.var, kb_.ref(lane_));
  }
  ExprId laneValue(const RowVar& v, int64_t l) {
    return v.lanes == 1 ? kb_.ref(v.var) : kb_.localRead(v.var, kb_.index(l));
  }
  // Binds a per-row value once (scalars), or leaves a lane's expression to be evaluated where used.
  ExprId rowLet(const char* prefix, ExprId value) { return lanes_ == 1 ? kb_.letValue(prefix, value) : value; }

  RowVar newRowVar(DataType dtype, ExprId init) {
    RowVar v{-1, lanes_};
    if (lanes_ == 1) {
      v.var = kb_.scalarVar("acc", dtype);
      kb_.let(v.var, init);
      return v;
    }
    v.var = kb_.arrayVar("acc", dtype, lanes_);
    kb_.declare(v.var);
    for (int64_t l = 0; l < lanes_; ++l) kb_.localWrite(v.var, kb_.index(l), init);
    return v;
  }

  // Combines the lanes' values across the threads of the reduce axis (one block reduction per lane).
  void blockReduce(const RowVar& v, DataType dtype, ReduceOp op) {
    const int axis = params_.inner ? 0 : 1;
    if (v.lanes == 1) {
      kb_.blockReduce(v.var, op, axis);
      return;
    }
    for (int64_t l = 0; l < v.lanes; ++l) {
      const VarId t = kb_.scalarVar("part", dtype);
      kb_.let(t, kb_.localRead(v.var, kb_.index(l)));
      kb_.blockReduce(t, op, axis);
      kb_.localWrite(v.var, kb_.index(l), kb_.ref(t));
    }
  }

  using ValueAt = std::function<ExprId(const std::vector<Idx>&)>;
  // acc = combine over this thread's elements of value(index), then across the threads of a row.
  RowVar accumulate(DataType acc_type, ReduceOp op, const ValueAt& value) {
    return accumulateAll(acc_type, op, {value}).front();
  }
  // The same for several values in one pass over the elements, each into its own accumulator.
  std::vector<RowVar> accumulateAll(DataType acc_type, ReduceOp op, const std::vector<ValueAt>& values) {
    std::vector<RowVar> accs;
    for (size_t i = 0; i < values.size(); ++i) accs.push_back(newRowVar(acc_type, identity(kb_, op, acc_type)));
    // The first pass over the elements also writes the outputs that need no reduction result.
    const std::vector<const Val*> prologue = prologue_written_ ? std::vector<const Val*>{} : prologueOutputs();
    prologue_written_ = true;
    forEachElement([&](Chunk& c, const std::vector<Idx>& index) {
      if (!prologue.empty()) storeFullOutputs(c, index, prologue);
      for (size_t i = 0; i < values.size(); ++i) {
        const RowVar& acc = accs[i];
        const ExprId v = kb_.cast(values[i](index), acc_type);
        kb_.pushTarget(params_.vectorize > 1 ? &c.body : &c.pre);
        const ExprId combined = kb_.elementwise(combineOf(op), acc_type, {rowValue(acc), v});
        if (acc.lanes == 1) {
          kb_.assign(acc.var, combined);
        } else {
          kb_.localWrite(acc.var, kb_.ref(lane_), combined);
        }
        kb_.popTarget();
      }
    });
    for (const RowVar& acc : accs) blockReduce(acc, acc_type, op);
    return accs;
  }

  // A plain reduction's accumulation: its output dtype, and the value accumulated at an index.
  struct Plain {
    DataType out, acc;
    ReduceOp op;
  };
  Plain plainOf(const Expr& e) const {
    const DataType out = e.output(0)->dtype();
    return {out, accumulatorType(out), reduceOpOf(e.kind())};
  }
  RowVar accumulatePlain(const Expr& e) {
    const Val* in = e.input(0);
    const Plain p = plainOf(e);
    const bool cast_first = isFloating(p.out) && isFloating(in->dtype());
    return accumulate(p.acc, p.op, [&](const std::vector<Idx>& index) {
      const ExprId v = vb_.valueAt(in, index);
      return cast_first ? kb_.cast(v, p.out) : v;
    });
  }

  void reduce(const Expr& e) {
    const Val* in = e.input(0);
    if (opInfo(e.kind()).category == OpCategory::Reduction) {
      const RowVar total = accumulatePlain(e);
      vb_.setResult(e.output(0), rowLet("r", kb_.cast(rowValue(total), plainOf(e).out)));
      return;
    }
    // Statistics: a first mean (the sum of x / n, which stays finite where the sum of x would not), then
    // the deviations from it and their squares, accumulated in float (double for double outputs); n is
    // the reduced element count.
    const DataType acc = e.output(0)->dtype() == DataType::Double ? DataType::Double : DataType::Float;
    const ExprId n = params_.inner ? kb_.constant(static_cast<double>(row_length_), acc)
                                   : kb_.indexToValue(reducedCount(), acc);
    const ExprId zero = kb_.constant(0.0, acc);
    const ExprId inverse_n =
        params_.inner ? kb_.constant(row_length_ > 0 ? 1.0 / static_cast<double>(row_length_) : 0.0, acc)
                      : rowLet("inverse_n", kb_.elementwise(OpKind::TrueDiv, acc, {kb_.constant(1.0, acc), n}));
    const RowVar sum = accumulate(acc, ReduceOp::Sum, [&](const std::vector<Idx>& index) {
      return kb_.elementwise(OpKind::Mul, acc, {kb_.cast(vb_.valueAt(in, index), acc), inverse_n});
    });
    const ExprId first_mean = rowLet("mean", rowValue(sum));
    const ValueAt deviation = [&](const std::vector<Idx>& index) {
      return kb_.elementwise(OpKind::Sub, acc, {kb_.cast(vb_.valueAt(in, index), acc), first_mean});
    };
    const std::vector<RowVar> deviations = accumulateAll(acc, ReduceOp::Sum, {deviation, [&](const std::vector<Idx>& index) {
      const ExprId d = deviation(index);
      return vb_.bind("d2", kb_.elementwise(OpKind::Mul, acc, {d, d}));
    }});
    // The sum of the deviations corrects the rounding of the first mean (a row of equal values sums to
    // another value, leaving that mean an ulp or so off them): with shift = sum(d)/n, mean + shift and
    // sum(d^2) - sum(d) shift give such a row its value back and a variance of 0, exactly while those
    // sums are (short of some 2^24 elements), as torch's Welford does. shift is NaN where n is 0 (the
    // mean too, the squares' sum 0).
    const ExprId d_sum = rowValue(deviations[0]);
    const ExprId shift = rowLet("shift", kb_.elementwise(OpKind::TrueDiv, acc, {d_sum, n}));
    // Where the deviations overflowed (values near the float limit) or the first mean is not finite, the
    // first mean stands; where n is 0, the NaN shift.
    const ExprId nonempty = kb_.elementwise(OpKind::Gt, DataType::Bool, {n, zero});
    const ExprId corrected = kb_.elementwise(OpKind::Add, acc, {first_mean, shift});
    const ExprId fallback = params_.inner ? (row_length_ > 0 ? first_mean : shift) : kb_.select(nonempty, first_mean, shift);
    const ExprId mean =
        rowLet("mean", kb_.select(kb_.elementwise(OpKind::IsFinite, DataType::Bool, {corrected}), corrected, fallback));
    const ExprId shifted = kb_.elementwise(OpKind::Mul, acc, {d_sum, shift});
    const ExprId removed = params_.inner ? (row_length_ > 0 ? shifted : zero) : kb_.select(nonempty, shifted, zero);
    // (sum d)^2 / n is at most sum(d^2): where that is infinite, so is the result, whatever the other rounds to.
    const ExprId square_sum = rowValue(deviations[1]);
    const ExprId squares =
        kb_.select(kb_.elementwise(OpKind::IsFinite, DataType::Bool, {square_sum}),
                   kb_.elementwise(OpKind::Sub, acc, {square_sum, removed}), square_sum);
    // Rounding may leave a variance of 0 a little below it; NaN stays NaN.
    const ExprId m2 = rowLet("m2", kb_.elementwise(OpKind::Maximum, acc, {squares, zero}));
    auto result = [&](size_t i, ExprId value) {
      vb_.setResult(e.output(i), rowLet("stat", kb_.cast(value, e.output(i)->dtype())));
    };
    if (e.kind() == OpKind::Welford) {
      result(0, mean);
      result(1, m2);
      result(2, n);
      return;
    }
    // n - correction, at least 0 (a variance of fewer elements than the correction divides by 0); an
    // outer reduction's n comes at launch.
    const double correction = e.attrs().getDouble("correction");
    const ExprId divisor =
        params_.inner ? kb_.constant(std::max(static_cast<double>(row_length_) - correction, 0.0), acc)
                      : kb_.elementwise(OpKind::Maximum, acc,
                                        {kb_.elementwise(OpKind::Sub, acc, {n, kb_.constant(correction, acc)}), zero});
    const ExprId var = kb_.elementwise(OpKind::TrueDiv, acc, {m2, divisor});
    result(0, var);
    if (e.kind() == OpKind::VarMean) result(1, mean);
  }

  TensorId addWorkspace(const std::string& name, DataType dtype, int64_t numel, bool zeroed) {
    return kb_.addTensor(workspaceParam(name, dtype, numel, zeroed));
  }

  // Every block reduces its split of each row to a partial per reduction; the last block of a row
  // group to arrive (counted by an atomic per blockIdx.x) combines all splits' partials, resets the
  // counter for the next launch, and writes the per-row outputs.
  void gridReduce() {
    const int64_t splits = params_.splits;
    const ExprId leader = kb_.eq(member_, kb_.index(0));
    std::vector<std::pair<RowVar, TensorId>> partials;
    for (const Expr* e : facts_.reductions) {
      const Plain p = plainOf(*e);
      const RowVar acc = accumulatePlain(*e);
      // Bool partials (any/all) travel as int32: the workspace loads go through L2 (__ldcg).
      const DataType stored = p.acc == DataType::Bool ? DataType::Int32 : p.acc;
      const std::string name = partials.empty() ? "partials" : fmt::format("partials{}", partials.size());
      const TensorId ws = addWorkspace(name, stored, rows_ * splits, false);
      kb_.openIf(kb_.land(leader, row_ok_));
      for (int64_t l = 0; l < lanes_; ++l) {
        const ExprId slot = kb_.add(kb_.mul(kb_.add(kept_base_, kb_.index(l)), kb_.index(splits)), split_);
        kb_.store(ws, slot, kb_.cast(laneValue(acc, l), stored));
      }
      kb_.close();
      partials.emplace_back(acc, ws);
    }
    // Publish the partials, then count this block in; thread 0 learns whether it came last.
    const TensorId semaphore = addWorkspace("arrived", DataType::Int32, params_.grid, true);
    kb_.fence();
    kb_.barrier();
    const VarId flag = kb_.arrayVar("last_block", DataType::Bool, 1, VarKind::SharedArray);
    kb_.declare(flag);
    const ExprId first_thread = kb_.land(kb_.eq(kb_.threadIdx(0), kb_.index(0)), kb_.eq(kb_.threadIdx(1), kb_.index(0)));
    kb_.openIf(first_thread);
    const VarId before = kb_.scalarVar("arrived_before", DataType::Int64, true);
    kb_.atomicAdd(before, semaphore, kb_.blockIdx(0), kb_.index(1));
    kb_.localWrite(flag, kb_.index(0), kb_.eq(kb_.ref(before), kb_.index(splits - 1)));
    kb_.close();
    kb_.barrier();
    kb_.openIf(kb_.letValue("is_last", kb_.localRead(flag, kb_.index(0))));
    for (size_t r = 0; r < partials.size(); ++r) {
      const Expr& e = *facts_.reductions[r];
      const Plain p = plainOf(e);
      const TensorId ws = partials[r].second;
      const RowVar total = newRowVar(p.acc, identity(kb_, p.op, p.acc));
      for (int64_t l = 0; l < lanes_; ++l) {
        const VarId j = kb_.scalarVar("j", DataType::Int64, true);
        kb_.openFor(j, member_, kb_.index(splits), kb_.index(params_.inner ? params_.threads_x : params_.threads_y),
                    false);
        kb_.openIf(row_ok_);
        const ExprId slot = kb_.add(kb_.mul(kb_.add(kept_base_, kb_.index(l)), kb_.index(splits)), kb_.ref(j));
        const ExprId part = kb_.cast(kb_.load(ws, slot), p.acc);
        const ExprId combined = kb_.elementwise(combineOf(p.op), p.acc, {laneValue(total, l), part});
        if (lanes_ == 1) {
          kb_.assign(total.var, combined);
        } else {
          kb_.localWrite(total.var, kb_.index(l), combined);
        }
        kb_.close();
        kb_.close();
      }
      blockReduce(total, p.acc, p.op);
      vb_.setResult(e.output(0), rowLet("r", kb_.cast(rowValue(total), p.out)));
    }
    kb_.openIf(first_thread);
    kb_.store(semaphore, kb_.blockIdx(0), kb_.constantInt(0, DataType::Int32));
    kb_.close();
    epilogue();
    kb_.close();
  }

  void epilogue() {
    std::vector<const Val*> full, per_row;
    for (const Val* out : ctx_.segment.outputs) {
      if (after_outer_.count(out) != 0 || isRowCat(out)) continue;  // the finish, or the per-row stores, write it
      const int64_t n = bound_.numel(out);
      (n == rows_ ? per_row : full).push_back(out);
    }
    const std::vector<const Val*> prologue = prologueOutputs();
    std::erase_if(full,
                  [&](const Val* out) { return std::find(prologue.begin(), prologue.end(), out) != prologue.end(); });
    if (!full.empty() || !outer_.empty()) {
      vb_.setLastPass();
      forEachElement([&](Chunk& c, const std::vector<Idx>& index) {
        for (size_t o = 0; o < outer_.size(); ++o) accumulateOuter(c, index, o);
        storeFullOutputs(c, index, full);
      });
    }
    if (!per_row.empty() || !cats_.empty()) {
      vb_.clearLoadCache();  // per-row values are computed once per row, outside the chunk loop
      const ExprId leader = kb_.eq(member_, kb_.index(0));
      emitChunk(kb_, vb_, kb_.land(row_ok_, leader), lanes_, lane_, [&](Chunk& c) {
        for (const Val* out : per_row) {
          const auto at = vb_.unflatten(kept_base_, lanes_ > 1, bound_.sizesOf(out));
          storeOutput(kb_, vb_, c, ctx_.outputs.at(out), at, vb_.valueAt(out, at));
        }
        const ExprId kept = lanes_ > 1 ? kb_.add(kept_base_, kb_.ref(lane_)) : kept_base_;
        for (const RowCat& cat : cats_) storeRowCat(kb_, vb_, c, ctx_, cat, kept);
      });
    }
  }
  bool isRowCat(const Val* out) const {
    return std::any_of(cats_.begin(), cats_.end(), [&](const RowCat& cat) { return cat.output == out; });
  }

  LoweringContext& ctx_;
  const BoundShapes& bound_;
  KernelBuilder kb_;
  ValueBuilder vb_;
  CandidateFacts facts_;
  std::vector<const Expr*> outer_;              // inner-outer: the reductions over the rows
  std::vector<const Expr*> extra_;              // and over the same rows of other tensors
  std::unordered_set<const Val*> after_outer_;  // their results and what is computed from them
  std::vector<RowCat> cats_;                    // outputs that concatenate per-row results (row_cats.h)
  std::vector<VarId> outer_acc_;                // per outer reduction: this thread's partial sums
  bool prologue_written_ = false;               // a pass over the elements has stored prologueOutputs()
  ReductionDomain domain_;
  std::vector<int64_t> kept_sizes_, reduced_sizes_;
  int64_t rows_ = 0, row_length_ = 0;
  ReductionParams params_;
  int64_t lanes_ = 1;  // kept elements per thread: the vectorize of an outer reduction, else 1
  VarId lane_ = -1, chunk_var_ = -1;
  ExprId row_ = -1, row_ok_ = -1, kept_base_ = -1, member_ = -1, split_ = -1;
};

}  // namespace

// Heuristics of the row lowering; inner persistent segments want their rows kept (they may still not
// fit: the heuristics then say why and stream them).
SegmentHeuristics rowHeuristics(LoweringContext& ctx, bool persistent_wanted, const SchedulerEntry& entry) {
  return heuristicsOf(entry, RowLowering(ctx).choose(persistent_wanted));
}

void lowerRows(LoweringContext& ctx, const SegmentHeuristics& heuristics) {
  RowLowering(ctx).lower(paramsOf<ReductionParams>(heuristics));
}

InnerOuterParams innerOuterRowHeuristics(LoweringContext& ctx) { return RowLowering(ctx, true).chooseInnerOuter(); }

void lowerInnerOuterRows(LoweringContext& ctx, const InnerOuterParams& params) {
  RowLowering(ctx, true).lowerInnerOuter(params);
}

}  // namespace braze::scheduler
