// The inner-outer persistent scheduler's heuristics: the per-row part is the inner persistent
// scheduler's (threads per row, rows per block, the row kept in registers or shared memory), with the
// per-thread partial sums of the outer reductions counted as kept values; then how many blocks walk
// the rows (enough to fill the GPU, few enough that the partial sums stay small next to the rows),
// whether a block adds up its thread rows' partial sums before storing them,
// the share of each extra reduction (over the same rows of another tensor) a thread sums, and the block
// of the kernel that finishes the partial sums.
#pragma once

#include "scheduler/reduction/heuristics.h"

#include <cstdint>
#include <string>
#include <vector>

namespace braze {

// A reduction over the same rows of another tensor (the bias grad of the linear next to a norm):
// `columns` sums, its operand read with vectors of up to `max_vectorize` along them.
struct ExtraOuterProblem {
  int64_t columns = 1;
  int64_t max_vectorize = 1;
  int64_t element_bytes = 4;  // of its widest operand
  int64_t own_rows = 0;       // its rows where they are not the norm's (0: the norm's)
};

// Reductions over some of the rows' dims that keep the others (a learned position embedding's grad: the
// rows' grad summed over the batch, kept per position): `groups` results per column (the kept dims'
// elements), each over the `group_rows` rows that share them.
struct GroupedOuterProblem {
  int64_t reductions = 0;
  int64_t groups = 1;
  int64_t group_rows = 1;
};

struct InnerOuterProblem {
  ReductionProblem rows;         // the inner reductions' problem (rows, row length, vectorize, kept tensors)
  int64_t outer_reductions = 1;  // reductions over the rows, each a value per row element
  std::vector<ExtraOuterProblem> extras;
  int64_t accumulator_bytes = 4;  // of the outer reductions' partial sums (the widest)
  GroupedOuterProblem grouped;
};

// How a block walks an extra reduction's rows after its own row groups: all its threads across the
// columns, `chunks` vectors of `vectorize` each per thread, the same columns in every row, and the loads
// of `rows_in_flight` rows issued together (a row at a time, each row is a round trip to memory, and a
// block walks a dozen rows or more).
struct ExtraOuterParams {
  int64_t columns = 1;
  int64_t vectorize = 1;
  int64_t chunks = 1;
  int64_t rows_in_flight = 1;
  int64_t own_rows = 0;  // as ExtraOuterProblem's
};

struct InnerOuterParams {
  ReductionParams inner;      // the per-row part; its grid is unused
  int64_t blocks = 1;         // the grid: block b walks row groups b, b + blocks, ...
  // The block's thread rows add up their partial sums in shared memory (`combine_bytes` of it) and the
  // block stores one partial row, in vectors: a row per thread row would be as many bytes again as the
  // rows themselves at nanoGPT's widths, written and then read by the finish.
  bool combine_in_block = false;
  int64_t combine_bytes = 0;
  int64_t partial_rows = 1;   // blocks (combined), or blocks x rows per block: the partial sums per column
  int64_t finish_threads_x = 32;  // the finishing kernel's block: columns ...
  int64_t finish_threads_y = 8;   // ... x partial rows summed by each column's threads
  std::vector<ExtraOuterParams> extras;  // per extra reduction (a partial row per block each)
  // With grouped reductions the blocks walk items instead of row groups: item i is slice i % group_slices
  // of group i / group_slices, `slice_rows` of the group's rows (a multiple of the block's thread rows).
  // At an item's end the block adds up its thread rows' sums of the item (in shared memory,
  // `group_combine_bytes`, where it has several thread rows) and stores them as the item's partial row
  // (group_slices x groups x row length); the finish adds the slices. One slice where there are groups
  // enough to fill the GPU: every block then owns whole groups and writes their outputs itself.
  int64_t group_slices = 1;
  int64_t slice_rows = 1;
  int64_t group_combine_bytes = 0;
  int64_t groupItems() const { return problem.grouped.groups * group_slices; }
  // Parts that share nothing with the rows (a conditioning tensor's cast beside a norm backward): pointwise
  // kernels in one-dimensional blocks of the rows' threads, after the rows' blocks (parts.cpp).
  std::vector<PointwiseParams> parts;
  InnerOuterProblem problem;  // what they were chosen for (another row count's: row_launch.h)
  std::string toString() const;   // without the grid (the kernel source's heading)
};
InnerOuterParams innerOuterHeuristics(const DeviceInfo& device, const InnerOuterProblem& problem);

}  // namespace braze
