#include "scheduler/scan/line_walk.h"

#include "scheduler/reduction/reduce_values.h"
#include "scheduler/scan/entry.h"

#include <algorithm>

namespace braze::scheduler {

std::vector<int64_t> lineSizesOf(const std::vector<int64_t>& sizes, size_t dim) {
  std::vector<int64_t> line_sizes = sizes;
  if (!sizes.empty()) line_sizes.erase(line_sizes.begin() + static_cast<int64_t>(dim));
  return line_sizes;
}

namespace {

// A walk along `dim` of `sizes`, a line per thread (in `if (line < lines)`, which the caller closes) or per
// block: the kernel's launch shape and summary set, the line's position over the other dims bound.
LineWalk startWalk(Kernel& k, KernelBuilder& kb, ValueBuilder& vb, const ScanParams& params,
                   const std::vector<int64_t>& sizes, size_t dim, bool block_per_line) {
  LineWalk walk;
  walk.dim = dim;
  walk.has_dim = !sizes.empty();
  const std::vector<int64_t> line_sizes = lineSizesOf(sizes, dim);
  for (int64_t s : line_sizes) walk.lines *= s;
  k.grid = {block_per_line ? walk.lines : params.grid, 1};
  k.block = {params.block, 1};
  k.summary = params.toString();
  walk.line = kb.letValue("line", block_per_line ? kb.blockIdx(0)
                                                 : kb.add(kb.mul(kb.blockIdx(0), kb.index(params.block)), kb.threadIdx(0)));
  if (!block_per_line) kb.openIf(kb.lt(walk.line, kb.index(walk.lines)));
  walk.position = vb.unflatten(walk.line, false, line_sizes);
  return walk;
}

}  // namespace

LineWalk openLineWalk(Kernel& k, KernelBuilder& kb, ValueBuilder& vb, const ScanParams& params,
                      const std::vector<int64_t>& sizes, size_t dim) {
  return startWalk(k, kb, vb, params, sizes, dim, /*block_per_line=*/false);
}

LineWalk openBlockLineWalk(Kernel& k, KernelBuilder& kb, ValueBuilder& vb, const ScanParams& params,
                           const std::vector<int64_t>& sizes, size_t dim) {
  return startWalk(k, kb, vb, params, sizes, dim, /*block_per_line=*/true);
}

std::vector<Idx> lineIndex(const LineWalk& walk, ExprId at) {
  std::vector<Idx> index = walk.position;
  if (walk.has_dim) index.insert(index.begin() + static_cast<int64_t>(walk.dim), Idx{at, false});
  return index;
}

void LineInvariants::place() {
  vb_.setHoistTarget(nullptr);
  std::vector<Stmt>& block = kb_.current();
  block.insert(block.begin() + static_cast<std::ptrdiff_t>(at_), std::make_move_iterator(values_.begin()),
               std::make_move_iterator(values_.end()));
  values_.clear();
}

namespace {
bool isReduction(const Expr* e) {
  const OpCategory category = opInfo(e->kind()).category;
  return category == OpCategory::Reduction || category == OpCategory::Normalization;
}
}  // namespace

bool walksEachLine(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs, const Expr& op) {
  const std::vector<const Expr*> later = exprsAfter(exprs, op);
  return std::any_of(exprs.begin(), exprs.end(), isReduction) || !later.empty() ||
         !linePrologueOutputs(outputs, op, later).empty();
}

std::vector<const Expr*> reductionsBefore(const std::vector<const Expr*>& exprs, const std::vector<const Expr*>& later) {
  std::vector<const Expr*> reductions;
  for (const Expr* e : exprs) {
    if (isReduction(e) && std::find(later.begin(), later.end(), e) == later.end()) reductions.push_back(e);
  }
  return reductions;
}

std::vector<const Expr*> reductionsAmong(const std::vector<const Expr*>& later) {
  std::vector<const Expr*> reductions;
  std::copy_if(later.begin(), later.end(), std::back_inserter(reductions), isReduction);
  return reductions;
}

void reduceAlongLine(KernelBuilder& kb, ValueBuilder& vb, const LineWalk& walk, const std::vector<const Expr*>& reductions,
                     int64_t extent, const std::function<void(ExprId step)>& at_step) {
  for (const Expr* e : reductions) {
    const Val* in = e->input(0);
    const DataType out = e->output(0)->dtype();
    const DataType acc_type = accumulatorType(out);
    const ReduceOp op = reduceOpOf(e->kind());
    LineInvariants invariants(kb, vb);  // of the results before this one
    const VarId acc = kb.scalarVar("line_acc", acc_type);
    kb.let(acc, identity(kb, op, acc_type));
    walkSteps(kb, vb, extent, [&](Chunk& c, ExprId step) {
      if (at_step) at_step(step);
      const ExprId v = vb.valueAt(in, lineIndex(walk, step));
      const ExprId value = reducedElement(kb, v, in->dtype(), out);
      kb.pushTarget(&c.pre);
      kb.assign(acc, kb.elementwise(combineOf(op), acc_type, {kb.ref(acc), value}));
      kb.popTarget();
    });
    invariants.place();
    vb.setResult(e->output(0), kb.letValue("line_result", kb.cast(kb.ref(acc), out)));
  }
}

void walkSteps(KernelBuilder& kb, ValueBuilder& vb, int64_t extent, const std::function<void(Chunk&, ExprId)>& body) {
  walkRange(kb, vb, kb.index(0), kb.index(extent), body);
}

void walkRange(KernelBuilder& kb, ValueBuilder& vb, ExprId begin, ExprId end, const std::function<void(Chunk&, ExprId)>& body) {
  const VarId step = kb.scalarVar("k", DataType::Int64, /*is_index=*/true);
  const VarId lane = kb.scalarVar("lane", DataType::Int64, /*is_index=*/true);
  kb.openFor(step, begin, end, kb.index(1), /*unroll=*/false);
  emitChunk(kb, vb, kb.boolean(true), 1, lane, [&](Chunk& c) { body(c, kb.ref(step)); });
  kb.close();
}

}  // namespace braze::scheduler
