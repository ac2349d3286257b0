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
// The full index of element `at` of the walk's line.
std::vector<Idx> lineIndex(const LineWalk& walk, ExprId at);
// for (step = 0; step < extent; ++step) body(chunk, step), in order, each step one chunk of one lane.
void walkSteps(KernelBuilder& kb, ValueBuilder& vb, int64_t extent, const std::function<void(Chunk&, ExprId)>& body);

}  // namespace braze::scheduler
