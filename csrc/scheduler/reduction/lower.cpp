// The row lowering's kernel structure (row_lowering.h): the walk of a row's elements, the kept rows,
// the epilogue, and the inner persistent, reduction and inner-outer kernels built from them.
#include "support/error.h"
#include "scheduler/access_probe.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/row_inputs.h"
#include "scheduler/reduction/row_launch.h"
#include "scheduler/reduction/row_lowering.h"
#include "scheduler/reduction/row_totals.h"
#include "scheduler/inner_outer/entry.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_set>
#include <vector>

namespace braze::scheduler {

RowLowering::RowLowering(LoweringContext& ctx, bool inner_outer)
    : ctx_(ctx), bound_(ctx.bound), kb_(ctx.kernel), vb_(kb_, bound_, ctx.segment.exprs, ctx.inputs) {
  Candidate candidate{ctx.segment.exprs, ctx.segment.inputs, ctx.segment.outputs};
  facts_ = analyzeCandidate(candidate);
  if (inner_outer) {
    const InnerOuterSplit split = splitInnerOuter(facts_, ctx.segment.exprs, bound_);
    facts_.reductions = split.inner;
    outer_ = split.outer;
    after_outer_ = split.after_outer;
  } else if (ctx.segment.scheduler == SchedulerKind::InnerPersistent || ctx.segment.scheduler == SchedulerKind::Reduction) {
    RowTotals split = splitRowTotals(facts_, ctx.segment.exprs, bound_);
    std::erase_if(facts_.reductions, [&](const Expr* r) {
      return std::find(split.totals.begin(), split.totals.end(), r) != split.totals.end();
    });
    totals_ = std::move(split.totals);
    after_totals_ = std::move(split.after);
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
  } else {  // the persistent ones' (the inner persistent check takes them)
    std::unordered_set<const Val*> produced;
    for (const Expr* e : ctx.segment.exprs) produced.insert(e->outputs().begin(), e->outputs().end());
    slices_ = findRowSlices(ctx.segment.exprs, ctx.segment.outputs, domain_.input_sizes, domain_.dims,
                            [&](const Val* v) { return produced.count(v) != 0; }, bound_);
  }
  // Outputs of the domain's elements (or rows) in another order of the kept dims: stored where they hold
  // each one. The row checks of the inner persistent and inner-outer schedulers took them (the inner-outer
  // one through canScheduleRowsWithout); the reduction check refuses them, so its groups have none.
  misalignedWithDomain(candidate, facts_, domain_, bound_, &permuted_);
  // Outer reductions of other tensors over the same rows: walked after the row groups.
  std::erase_if(outer_, [&](const Expr* r) {
    if (bound_.sizesOf(r->input(0)) == domain_.input_sizes) return false;
    extra_.push_back(r);
    return true;
  });
  // Reductions over some of the row dims: summed per item of their own walk of the rows.
  std::erase_if(outer_, [&](const Expr* r) {
    const std::optional<RowGrouping> grouping = rowGroupingOf(*r, domain_, bound_);
    if (!grouping) return false;
    grouping_ = *grouping;
    grouped_.push_back(r);
    return true;
  });
}

void RowLowering::lower(const ReductionParams& params) {
  params_ = params;
  // Totals over the rows: the blocks walk the row groups (as many blocks as the SMs hold), each adding up
  // its rows' values, so the last block has few partials to combine.
  if (params_.staged || !totals_.empty()) {
    lowerRowGroupWalk();
    return;
  }
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
  finishKernel(declarations, passes, {params_.grid, params_.splits}, params_.toString());
}

void RowLowering::lowerInnerOuter(const InnerOuterParams& io) {
  params_ = io.inner;
  Kernel& k = ctx_.kernel;
  beginRowGroupWalk();
  const int64_t vec = params_.vectorize;
  std::vector<Stmt> declarations, passes;
  if (params_.staged) {
    declareStages(&declarations);
  } else if (params_.persistent) {
    keepRows(&declarations);
  }
  kb_.pushTarget(&passes);
  for (const Expr* e : outer_) {
    const Plain p = plainOf(*e);
    const VarId acc = kb_.arrayVar("outer", p.acc, params_.chunks * vec);
    kb_.declare(acc);
    for (int64_t i = 0; i < params_.chunks * vec; ++i) kb_.localWrite(acc, kb_.index(i), identity(kb_, p.op, p.acc));
    outer_acc_.push_back(acc);
  }
  // The grouped reductions' item sums, their workspaces (named after the outer and extra ones'; none where
  // the items write the outputs of the grouped results themselves), and the arrays their thread rows add up in.
  const std::vector<const Val*> item_outputs = grouped_.empty() ? std::vector<const Val*>{}
                                                                : groupedOutputsWrittenByItems(io);
  std::vector<ThreadPartials> item_sums;
  for (size_t g = 0; g < grouped_.size(); ++g) {
    const Plain p = plainOf(*grouped_[g]);
    const VarId acc = kb_.arrayVar("grouped", p.acc, params_.chunks * vec);
    kb_.declare(acc);
    grouped_acc_.push_back(acc);
    TensorId ws = -1;
    if (item_outputs.empty()) {
      const int64_t numel = io.group_slices * grouping_.groups * row_length_;
      ws = kb_.addTensor(
          workspaceParam(innerOuterPartialsName(outer_.size() + extra_.size() + g), p.acc, numel, false));
      k.tensors[ws].shared = true;
    }
    item_sums.push_back({acc, ws, p.acc, p.op});
  }
  std::vector<VarId> item_shared;
  if (!grouped_.empty() && params_.threads_y > 1) {
    kb_.pushTarget(&declarations);
    item_shared = declareCombineArrays(kb_, item_sums, params_, row_length_);
    kb_.popTarget();
  }
  if (grouped_.empty()) {
    openRowGroupWalk(io.blocks);
  } else {
    openGroupedWalk(io);
  }
  prefetchRows();
  for (const Expr* e : facts_.reductions) reduce(*e);
  epilogue();
  if (grouped_.empty()) {
    kb_.close();
  } else if (item_outputs.empty()) {
    closeGroupedItem(item_sums, item_shared);
  } else {
    kb_.close();  // the item's rows
    writeGroupedOutputs(item_outputs, item_sums, item_shared);
    kb_.close();  // the items
  }
  std::vector<OuterPartials> partials;
  for (const Expr* e : outer_) partials.push_back({e, row_length_, io.partial_rows, "partial_rows"});
  for (size_t x = 0; x < extra_.size(); ++x) {
    walkExtraRows(kb_, vb_, ctx_, bound_, {extra_[x], io.extras[x], params_, io.blocks, partials.size()}, lane_);
    partials.push_back({extra_[x], io.extras[x].columns, io.blocks, "blocks"});
  }
  for (const Expr* e : item_outputs.empty() ? grouped_ : std::vector<const Expr*>{}) {
    partials.push_back({e, grouping_.groups * row_length_, io.group_slices, "group_slices"});
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
  finishKernel(declarations, passes, {io.blocks, 1}, io.toString());
  if (partials.empty()) return;  // the items wrote every outer result's outputs
  // The finish writes what is computed from its partial sums: not the outputs the items wrote.
  ValSet finished;
  for (const Expr* e : ctx_.segment.exprs) {
    for (const Val* v : e->outputs()) {
      const bool by_items = std::find(item_outputs.begin(), item_outputs.end(), v) != item_outputs.end();
      if (after_outer_.count(v) != 0 && !by_items) finished.insert(v);
    }
  }
  ctx_.follow_ups.push_back(lowerInnerOuterFinish(ctx_, partials, finished, io));
}

void RowLowering::beginRowGroupWalk() {
  kb_.fixBlock(params_.threads_x, params_.threads_y);
  lane_ = kb_.scalarVar("lane", DataType::Int64, true);
  chunk_var_ = kb_.scalarVar("c", DataType::Int64, true);
  lanes_ = 1;
  member_ = kb_.threadIdx(0);
  split_ = kb_.index(0);
}

void RowLowering::finishKernel(std::vector<Stmt>& declarations, std::vector<Stmt>& passes,
                               std::array<int64_t, 2> grid, std::string summary) {
  auto& target = kb_.current();
  target.insert(target.end(), std::make_move_iterator(declarations.begin()),
                std::make_move_iterator(declarations.end()));
  target.insert(target.end(), std::make_move_iterator(passes.begin()), std::make_move_iterator(passes.end()));
  Kernel& k = ctx_.kernel;
  k.grid = grid;
  k.vectorize = params_.vectorize;
  k.summary = std::move(summary);
}

InnerOuterParams RowLowering::chooseInnerOuter() {
  InnerOuterProblem problem{rowProblem(true), static_cast<int64_t>(outer_.size()), {}, 4, {}};
  for (const auto* list : {&outer_, &grouped_}) {
    for (const Expr* e : *list) {
      problem.accumulator_bytes = std::max<int64_t>(problem.accumulator_bytes, sizeOf(plainOf(*e).acc));
    }
  }
  if (!grouped_.empty()) {
    problem.grouped = {static_cast<int64_t>(grouped_.size()), grouping_.groups, grouping_.group_rows};
  }
  for (const Expr* r : extra_) {
    // Vectors along the columns, as wide as every tensor of the extra operand's shape allows.
    const ExtraOuterShape shape = *extraOuterShape(*r, bound_);
    const int64_t columns = shape.columns;
    VectorizeInput vin;
    vin.widest_dtype_bytes = 1;
    // One column ([rows, 1] summed over the rows): no vectors, whose lanes would run down the rows.
    vin.inner_extent = columns == 1 ? 1 : innerExtent(bound_.sizesOf(r->input(0)));
    size_t input = 0;
    for (const TensorParam& t : ctx_.kernel.tensors) {
      if (t.output) continue;
      if (t.val != nullptr && bound_.sizesOf(t.val) == bound_.sizesOf(r->input(0))) {
        vin.tensor_factors.push_back(ctx_.input_factors[input]);
        vin.widest_dtype_bytes = std::max(vin.widest_dtype_bytes, sizeOf(t.dtype));
      }
      ++input;
    }
    problem.extras.push_back({columns, kernelVectorize(vin), vin.widest_dtype_bytes, shape.rows == rows_ ? 0 : shape.rows});
  }
  return innerOuterHeuristics(ctx_.device, problem);
}

ReductionProblem RowLowering::rowProblem(bool persistent_wanted) {
  ReductionProblem problem;
  problem.rows = rows_;
  problem.row_length = row_length_;
  problem.inner = domain_.inner;
  problem.wants_persistent = persistent_wanted;
  problem.widest_dtype_bytes = ctx_.widest_dtype_bytes;
  int64_t cached = 0, value_bytes = 0;
  for (const Val* in : ctx_.segment.inputs) {
    if (!isRowData(in)) continue;
    ++cached;
    value_bytes = std::max(value_bytes, keptValueBytes(in->dtype()));
  }
  if (value_bytes > 0) problem.cached_value_bytes = value_bytes;
  problem.cached_tensors = std::max<int64_t>(cached, 1);
  // (Totals over the rows take a partial per block of whole rows.)
  problem.splittable = !persistent_wanted && totals_.empty() && splittable();
  problem.row_totals = static_cast<int64_t>(totals_.size());
  // The vector is as wide as the tensors the lanes walk allow: a [rows, 1] float statistic read once
  // per row (or written once per row) does not narrow a bf16 row's vectors.
  VectorizeInput vin;
  vin.tensor_factors = walkedInputFactors(&vin.widest_dtype_bytes);
  // Inner: lanes walk the row; outer: lanes walk the kept dims (the innermost in memory).
  vin.inner_extent = innerExtent(domain_.inner ? reduced_sizes_ : kept_sizes_);
  for (const Val* out : ctx_.segment.outputs) {
    // The finish writes it, or the per-row stores of a join do, one element a lane whatever the vector.
    if (after_outer_.count(out) != 0 || after_totals_.count(out) != 0 || isRowCat(out)) continue;
    const bool full = bound_.numel(out) == domain_.full_numel && rows_ != domain_.full_numel;
    if (full || !domain_.inner) {
      vin.inner_extent = std::gcd(vin.inner_extent, innerExtent(bound_.sizesOf(out)));
      vin.widest_dtype_bytes = std::max(vin.widest_dtype_bytes, sizeOf(out->dtype()));
    }
  }
  problem.max_vectorize = kernelVectorize(vin);
  if (problem.inner) {
    for (const Val* in : stagedRowInputs(problem.max_vectorize)) {
      const int64_t bytes = sizeOf(kb_.kernel().tensors[ctx_.inputs.at(in)].dtype);
      problem.row_data_bytes += bytes;
      problem.row_data_min_bytes = problem.row_data_min_bytes == 0 ? bytes : std::min(problem.row_data_min_bytes, bytes);
    }
  }
  return problem;
}

std::vector<int64_t> RowLowering::walkedInputFactors(int64_t* widest_bytes) const {
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
    if (val != nullptr && (isExtraShaped(val) || readPerRowOnly(val))) {  // walked apart, or never
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

bool RowLowering::splittable() const {
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

bool RowLowering::isRowData(const Val* val) const {
  if (!val->isTensor() || isExtraShaped(val)) return false;
  return bound_.numel(val) >= domain_.full_numel && domain_.full_numel > domain_.outer_numel;
}

bool RowLowering::readPerRowOnly(const Val* val) const {
  if (!domain_.inner || !extra_.empty() || !after_outer_.empty() || domain_.full_numel <= domain_.outer_numel) return false;
  // A tensor with more elements than rows is read along them (a reduction's operand yields a per-row value).
  if (bound_.numel(val) > domain_.outer_numel) return false;
  std::vector<const Val*> work{val};
  std::unordered_set<const Val*> reached{val};
  bool read = false;
  while (!work.empty()) {
    const Val* v = work.back();
    work.pop_back();
    for (const Expr* e : ctx_.segment.exprs) {
      if (std::find(e->inputs().begin(), e->inputs().end(), v) == e->inputs().end()) continue;
      read = true;
      for (const Val* out : e->outputs()) {
        if (!out->isTensor()) continue;
        if (bound_.numel(out) > domain_.outer_numel) return false;  // an element of the row: walked
        if (reached.insert(out).second) work.push_back(out);
      }
    }
  }
  return read;
}

bool RowLowering::isExtraShaped(const Val* val) const {
  return std::any_of(extra_.begin(), extra_.end(),
                     [&](const Expr* r) { return bound_.sizesOf(r->input(0)) == bound_.sizesOf(val); });
}

std::vector<Idx> RowLowering::domainIndex(ExprId reduced_base, bool reduced_lane) {
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

ExprId RowLowering::domainLinear(const std::vector<Idx>& index) {
  ExprId linear = kb_.index(0);
  int64_t stride = 1;
  for (size_t d = index.size(); d-- > 0;) {
    linear = kb_.add(linear, kb_.mul(index[d].base, kb_.index(stride)));
    stride *= std::max<int64_t>(domain_.input_sizes[d], 1);
  }
  return linear;
}

void RowLowering::forEachElement(const std::function<void(Chunk&, const std::vector<Idx>&)>& body) {
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
    staged_col_ = col;  // where a staged read finds the chunk in its stage
    emitChunk(kb_, vb_, whole_chunks ? in_row : kb_.land(row_ok_, in_row), vec, lane_,
              [&](Chunk& c) { body(c, domainIndex(col, vec > 1)); });
    staged_col_ = -1;
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

void RowLowering::keepRows(std::vector<Stmt>* declarations) {
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

std::vector<const Val*> RowLowering::keptRowInputs(bool per_row) const {
  std::vector<const Expr*> reductions = facts_.reductions;
  reductions.insert(reductions.end(), outer_.begin(), outer_.end());
  reductions.insert(reductions.end(), grouped_.begin(), grouped_.end());
  std::vector<const Val*> taken;
  for (const Val* val : ctx_.segment.inputs) {  // in the segment's order: the same source every time
    if (ctx_.inputs.count(val) == 0 || !val->isTensor()) continue;
    if (!readAtDomainIndex(val, ctx_.segment.exprs, reductions, domain_, bound_)) continue;
    const bool wanted = per_row ? row_length_ > 1 && isPerRowInput(val, domain_, bound_)
                                : isRowData(val) && bound_.sizesOf(val) == domain_.input_sizes;
    if (wanted) taken.push_back(val);
  }
  return taken;
}

void RowLowering::prefetchRows() {
  if (!params_.persistent || params_.shared_cache) return;
  for (const Val* val : keptRowInputs(true)) {
    const DataType dtype = kb_.kernel().tensors[ctx_.inputs.at(val)].dtype;
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
  // A staged kernel's rows are in shared memory already.
  const std::vector<const Val*> rows = params_.staged ? std::vector<const Val*>{} : keptRowInputs(false);
  if (rows.empty()) return;
  forEachElement([&](Chunk&, const std::vector<Idx>& index) {
    for (const Val* val : rows) vb_.valueAt(val, index);
  });
}

std::vector<const Val*> RowLowering::prologueOutputs() const {
  std::vector<const Val*> outs;
  if (params_.persistent || !outer_.empty() || !grouped_.empty()) return outs;
  for (const Val* out : ctx_.segment.outputs) {
    if (isFullOutput(out) && facts_.after_reduction.count(out) == 0) outs.push_back(out);
  }
  return outs;
}

void RowLowering::storeFullOutputs(Chunk& c, const std::vector<Idx>& index, const std::vector<const Val*>& outs) {
  if (outs.empty()) return;
  const ExprId linear = domainLinear(index);
  const bool lane = params_.vectorize > 1;
  for (const Val* out : outs) {
    // Same shape as the domain: the same index, so loads match the cached ones of earlier passes.
    const bool same = bound_.sizesOf(out) == domain_.input_sizes;
    const auto at = permutedIndex(out, index, false, same ? index : vb_.unflatten(linear, lane, bound_.sizesOf(out)));
    storeOutput(kb_, vb_, c, ctx_.outputs.at(out), at, vb_.valueAt(out, at));
  }
}

std::vector<Idx> RowLowering::permutedIndex(const Val* out, const std::vector<Idx>& index, bool per_row,
                                            std::vector<Idx> fallback) {
  const auto p = permuted_.find(out);
  if (p == permuted_.end()) return fallback;
  const std::vector<int64_t>& dims = p->second;
  // A per-row index has the kept dims alone: a domain dim's place among them.
  const auto is_reduced = [&](size_t d) {
    return std::find(domain_.dims.begin(), domain_.dims.end(), static_cast<int64_t>(d)) != domain_.dims.end();
  };
  std::vector<size_t> place(domain_.input_sizes.size(), 0);
  for (size_t d = 0, kept = 0; d < place.size(); ++d) {
    place[d] = per_row ? kept : d;
    if (!is_reduced(d)) ++kept;
  }
  std::vector<Idx> at(dims.size(), Idx{kb_.index(0), false});
  std::vector<size_t> spread_dims;  // the output's kFlattened dims
  std::vector<int64_t> spread_sizes;
  for (size_t q = 0; q < dims.size(); ++q) {
    if (dims[q] >= 0) at[q] = index.at(place[static_cast<size_t>(dims[q])]);
    if (dims[q] != kFlattened) continue;
    spread_dims.push_back(q);
    spread_sizes.push_back(bound_.sizesOf(out)[q]);
  }
  if (spread_dims.empty()) return at;
  // The domain's dims that no output dim names, flattened in their order and spread over the kFlattened dims.
  std::vector<Idx> rest;
  std::vector<int64_t> rest_sizes;
  int64_t lane_dim = -1;
  for (size_t d = 0; d < domain_.input_sizes.size(); ++d) {
    if (domain_.input_sizes[d] == 1 || (per_row && is_reduced(d)) ||
        std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end()) {
      continue;
    }
    Idx i = index.at(place[d]);
    if (i.lane) lane_dim = static_cast<int64_t>(rest.size());
    i.lane = false;
    rest.push_back(i);
    rest_sizes.push_back(domain_.input_sizes[d]);
  }
  int64_t unused = 0;
  const StridedLayout layout = StridedLayout::rowMajor(rest_sizes);
  const ExprId first = vb_.flatOffset(layout, rest, &unused);
  std::vector<Idx> spread;
  if (lane_dim < 0) {
    spread = vb_.unflatten(first, false, spread_sizes);
  } else if (lane_dim + 1 == static_cast<int64_t>(rest.size()) && spread_sizes.back() % vb_.width() == 0) {
    spread = vb_.unflatten(first, true, spread_sizes);  // a chunk stays within the innermost dim
  } else {  // each lane's element of its own
    const ExprId lane = kb_.mul(vb_.lane(), kb_.index(layout.strides[static_cast<size_t>(lane_dim)]));
    spread = vb_.unflatten(kb_.add(first, lane), false, spread_sizes);
  }
  for (size_t k = 0; k < spread_dims.size(); ++k) at[spread_dims[k]] = spread[k];
  return at;
}

void RowLowering::accumulateOuter(Chunk& c, const std::vector<Idx>& index, const Expr& e, VarId sums) {
  const Plain p = plainOf(e);
  const ExprId v = reducedElement(kb_, vb_.valueAt(e.input(0), index), e.input(0)->dtype(), p.out);
  const int64_t vec = params_.vectorize;
  kb_.pushTarget(vec > 1 ? &c.body : &c.pre);
  ExprId slot = kb_.mul(kb_.ref(chunk_var_), kb_.index(vec));
  if (vec > 1) slot = kb_.add(slot, kb_.ref(lane_));
  const ExprId combined = kb_.elementwise(combineOf(p.op), p.acc, {kb_.localRead(sums, slot), v});
  kb_.localWrite(sums, slot, combined);
  kb_.popTarget();
}

void RowLowering::epilogue() {
  std::vector<const Val*> full, per_row;
  for (const Val* out : ctx_.segment.outputs) {
    // The finish, the last block (totals), the per-row stores or the row slices' stores write it.
    const bool sliced = std::any_of(slices_.begin(), slices_.end(), [&](const RowSlice& s) { return s.output == out; });
    if (after_outer_.count(out) != 0 || after_totals_.count(out) != 0 || isRowCat(out) || sliced) continue;
    const int64_t n = bound_.numel(out);
    (n == rows_ ? per_row : full).push_back(out);
  }
  const std::vector<const Val*> prologue = prologueOutputs();
  std::erase_if(full,
                [&](const Val* out) { return std::find(prologue.begin(), prologue.end(), out) != prologue.end(); });
  if (!full.empty() || !outer_.empty() || !grouped_.empty() || !slices_.empty()) {
    vb_.setLastPass();
    forEachElement([&](Chunk& c, const std::vector<Idx>& index) {
      for (size_t o = 0; o < outer_.size(); ++o) accumulateOuter(c, index, *outer_[o], outer_acc_[o]);
      for (size_t g = 0; g < grouped_.size(); ++g) accumulateOuter(c, index, *grouped_[g], grouped_acc_[g]);
      storeFullOutputs(c, index, full);
      for (const RowSlice& s : slices_) storeRowSlice(kb_, vb_, c, bound_, s, ctx_.outputs.at(s.output), index);
    });
  }
  if (!per_row.empty() || !cats_.empty() || !totals_.empty()) {
    vb_.clearLoadCache();  // per-row values are computed once per row, outside the chunk loop
    const ExprId leader = kb_.eq(member_, kb_.index(0));
    emitChunk(kb_, vb_, kb_.land(row_ok_, leader), lanes_, lane_, [&](Chunk& c) {
      for (const Val* out : per_row) {
        const auto at = permuted_.count(out) == 0
                            ? vb_.unflatten(kept_base_, lanes_ > 1, bound_.sizesOf(out))
                            : permutedIndex(out, vb_.unflatten(kept_base_, lanes_ > 1, kept_sizes_), true, {});
        storeOutput(kb_, vb_, c, ctx_.outputs.at(out), at, vb_.valueAt(out, at));
      }
      const ExprId kept = lanes_ > 1 ? kb_.add(kept_base_, kb_.ref(lane_)) : kept_base_;
      for (const RowCat& cat : cats_) storeRowCat(kb_, vb_, c, bound_, cat, ctx_.outputs.at(cat.output), kept);
      accumulateTotals(c);
    });
  }
}

// Heuristics of the row lowering; inner persistent segments want their rows kept (they may still not
// fit: the heuristics then say why and stream them).
InnerOuterParams innerOuterRowHeuristics(LoweringContext& ctx) { return RowLowering(ctx, true).chooseInnerOuter(); }

void lowerInnerOuterRows(LoweringContext& ctx, const InnerOuterParams& params) {
  RowLowering(ctx, true).lowerInnerOuter(params);
}

}  // namespace braze::scheduler
