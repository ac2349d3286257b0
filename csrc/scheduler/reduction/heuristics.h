// The reduction and inner-persistent schedulers' heuristics: inner or outer, persistent or not, split across blocks or not.
#pragma once

#include "scheduler/heuristics.h"
#include "scheduler/pointwise/heuristics.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace braze {

struct ReductionProblem {
  int64_t rows = 1;             // kept elements (outer_numel)
  int64_t row_length = 1;       // reduced elements per row
  bool inner = true;            // the reduced dims are the innermost
  bool wants_persistent = false;// a result is broadcast back over the row (inner persistent scheduler)
  int64_t max_vectorize = 1;    // kernelVectorize along the row (inner) or the kept dims (outer)
  int64_t cached_tensors = 1;   // tensors a persistent kernel keeps per row element
  int64_t cached_value_bytes = 4;  // bytes of one value kept in shared memory, the most of the kept tensors' (keptValueBytes)
  int64_t widest_dtype_bytes = 4;
  // The row data a staged kernel copies into shared memory (every input with an element per row
  // element): its bytes per row element, all inputs together, and the narrowest input's element.
  int64_t row_data_bytes = 0;
  int64_t row_data_min_bytes = 0;
  // The results need no pass after the reduction over the whole row (plain reductions, none feeding
  // another, only per-row outputs): blocks may each reduce part of a row and combine partials.
  bool splittable = false;
  // Totals over the rows the kernel also computes (row_totals.h): the last block combines a partial per
  // block, so the rows are not split among blocks, and the blocks walk the row groups, as many as the SMs
  // hold at once.
  int64_t row_totals = 0;
};

// A part beside the first one in a kernel of parts side by side (reduction_parts.h): an outer reduction,
// with its vectors along the kept elements, its blocks in x and its problem; or a part without reductions
// (a GELU backward's grad_in beside the next linear's bias grad), with the pointwise scheduler's
// parameters for one-dimensional blocks of as many threads as the kernel's.
struct ReductionPart {
  int64_t vectorize = 1;
  int64_t grid = 1;
  ReductionProblem problem;
  std::optional<PointwiseParams> pointwise = std::nullopt;
};

struct ReductionParams {
  bool inner = true;
  bool persistent = false;      // the row is read from HBM once and kept (registers or shared memory)
  bool shared_cache = false;    // persistent in shared memory: the row is too large for registers
  // Staged (inner persistent): blocks walk row groups blockIdx.x, + grid, ...; each thread copies its
  // chunks of the next group's row data into shared memory (cp.async, two stages of `stage_bytes`)
  // while the passes read the current group's from there, so loads stay in flight during the reductions.
  bool staged = false;
  int64_t stage_bytes = 0;
  int64_t vectorize = 1;
  int64_t threads_x = 32;       // inner: threads per row; outer: threads over kept elements (vectorize each)
  int64_t threads_y = 1;        // inner: rows per block; outer: threads splitting the reduced dims
  int64_t chunks = 1;           // inner: vector chunks per thread per row (persistent: exact)
  int64_t grid = 1;             // blocks over the rows (grid x); staged: blocks walking the row groups
  // Grid reduction: each row's reduced elements are split among `splits` blocks (grid y) of
  // `split_length` elements each; the last block to finish a row combines the partial results.
  int64_t splits = 1;
  int64_t split_length = 0;
  std::string why;              // one sentence: why persistent, split or neither
  // The problem they were chosen for. Its row count reaches the kernel only as a launch argument (an
  // inner reduction's "rows"), so a kernel lowered for another row count takes these parameters' launch
  // values, and another row count's parameters are those of this problem with its rows replaced
  // (row_launch.h).
  ReductionProblem problem;
  // Outer reductions over as many rows beside this one, each in its own blocks after these, with this
  // block shape and split (reduction_parts.h).
  std::vector<ReductionPart> more_parts;
  std::string toString() const;  // the kernel's structure, not its grid: it heads the kernel's source
};
ReductionParams reductionHeuristics(const DeviceInfo& device, const ReductionProblem& problem);
// Outer reductions side by side, over the same rows or rows of their own (a ViT's bias grad over its
// tokens beside the class token's): the widest part's threads in x and the longest part's in y for all,
// each part's own vectors and blocks, and one count of splits of the rows (the longest part's) where every
// part may be split and the blocks of all together leave most SMs idle; each part's split length is its
// own rows over that count (partSplitLength). The first part's parameters, the others' in more_parts.
// The block has at least `min_threads` threads (for parts without reductions).
ReductionParams outerReductionParts(const DeviceInfo& device, const std::vector<ReductionProblem>& problems,
                                    int64_t min_threads = 1);
// A part's rows per split in a kernel of outer reductions split `splits` ways (0 where unsplit).
int64_t partSplitLength(const ReductionProblem& part, int64_t splits);

}  // namespace braze
