// What the scan scheduler's lowerings share: thread t of the grid takes line t, a position of every dim
// of the operand but the walked one, and walks that dim.
#pragma once

#include "scheduler/lowering_context.h"
#include "scheduler/scan/heuristics.h"

#include <functional>

namespace braze::scheduler {

struct LineWalk {
  ExprId line = -1;            // this thread's line
  std::vector<Idx> position;   // its index over the other dims
  size_t dim = 0;
  bool has_dim = true;         // false for a 0-dim operand: one line of one element
  int64_t lines = 1;
};

// The sizes of the dims other than `dim` (none for a 0-dim operand): the lines' index space.
std::vector<int64_t> lineSizesOf(const std::vector<int64_t>& sizes, size_t dim);

// Sets `k`'s launch shape and summary from `params`, and opens `if (line < lines)` for an operand of
// `sizes` walked along `dim` (the caller closes it).
LineWalk openLineWalk(Kernel& k, KernelBuilder& kb, ValueBuilder& vb, const ScanParams& params,
                      const std::vector<int64_t>& sizes, size_t dim);
// The same with one block per line (a block scan): line blockIdx.x, the grid the lines; no test.
LineWalk openBlockLineWalk(Kernel& k, KernelBuilder& kb, ValueBuilder& vb, const ScanParams& params,
                           const std::vector<int64_t>& sizes, size_t dim);
// The full index of element `at` of the walk's line.
std::vector<Idx> lineIndex(const LineWalk& walk, ExprId at);
// Values every element of a thread's line shares (the reciprocal a division by the line's sum multiplies
// by, a scalar's cast): from construction on, computed once where the object was made, before the walks
// that read them, once place() has put them there (in the same block, before it closes). One at a time.
class LineInvariants {
 public:
  LineInvariants(KernelBuilder& kb, ValueBuilder& vb) : kb_(kb), vb_(vb), at_(kb.current().size()) {
    vb.setHoistTarget(&values_);
  }
  LineInvariants(const LineInvariants&) = delete;
  LineInvariants& operator=(const LineInvariants&) = delete;
  ~LineInvariants() { vb_.setHoistTarget(nullptr); }  // never left pointing at values_
  void place();

 private:
  KernelBuilder& kb_;
  ValueBuilder& vb_;
  size_t at_;
  std::vector<Stmt> values_;
};

// Where a segment's ops need each line walked by its own thread (not a block sort): reductions along the
// lines before `op`, ops of its results, or outputs computed before it (check.cpp takes no others).
bool walksEachLine(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs, const Expr& op);
// The reductions of `exprs` that come before the scan op: those not among `later` (exprsAfter's).
std::vector<const Expr*> reductionsBefore(const std::vector<const Expr*>& exprs, const std::vector<const Expr*>& later);
// The reductions among `later`: over a topk's kept elements.
std::vector<const Expr*> reductionsAmong(const std::vector<const Expr*>& later);
// Each of `reductions` in order (softmax's sum reads its max), by a walk of `extent` elements of the
// thread's line: its result is then known to `vb` wherever the line's values read it. `at_step`, if any,
// runs first at each step (binding the values the step's element reads).
void reduceAlongLine(KernelBuilder& kb, ValueBuilder& vb, const LineWalk& walk, const std::vector<const Expr*>& reductions,
                     int64_t extent, const std::function<void(ExprId step)>& at_step = nullptr);
// for (step = 0; step < extent; ++step) body(chunk, step), in order, each step one chunk of one lane.
void walkSteps(KernelBuilder& kb, ValueBuilder& vb, int64_t extent, const std::function<void(Chunk&, ExprId)>& body);
// The same over [begin, end).
void walkRange(KernelBuilder& kb, ValueBuilder& vb, ExprId begin, ExprId end, const std::function<void(Chunk&, ExprId)>& body);

}  // namespace braze::scheduler
