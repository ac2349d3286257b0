// The inner-outer persistent scheduler's heuristics: the per-row part is the inner persistent
// scheduler's (threads per row, rows per block, the row kept in registers or shared memory), with the
// per-thread partial sums of the outer reductions counted as kept values; then how many blocks walk
// the rows (enough to fill the GPU, few enough that the partial sums stay small next to the rows),
// and the block of the kernel that finishes the partial sums.
#pragma once

#include "scheduler/reduction/heuristics.h"

#include <cstdint>
#include <string>

namespace braze {

struct InnerOuterProblem {
  ReductionProblem rows;         // the inner reductions' problem (rows, row length, vectorize, kept tensors)
  int64_t outer_reductions = 1;  // reductions over the rows, each a value per row element
};

struct InnerOuterParams {
  ReductionParams inner;      // the per-row part; its grid is unused
  int64_t blocks = 1;         // the grid: block b walks row groups b, b + blocks, ...
  int64_t partial_rows = 1;   // blocks x rows per block: partial sums each outer reduction leaves per column
  int64_t finish_threads_x = 32;  // the finishing kernel's block: columns ...
  int64_t finish_threads_y = 8;   // ... x partial rows summed by each column's threads
  std::string toString() const;   // without the grid (the kernel source's heading)
};
InnerOuterParams innerOuterHeuristics(const DeviceInfo& device, const InnerOuterProblem& problem);

}  // namespace braze
