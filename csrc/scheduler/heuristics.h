// The schedulers' heuristics: pure functions of a device description and a summary of the segment's
// shapes, strides, dtypes and alignment, so they are unit-tested with a described H100 or A100 and
// no GPU. The kernel lowering turns their parameters into loops; explain and BRAZE_DUMP=heuristics
// print them.
#pragma once

#include "scheduler/device_info.h"

#include <cstdint>
#include <string>
#include <vector>

namespace braze {

// Vectorization of a whole kernel: the largest power of two that every tensor accessed along the
// vectorized dim allows (vectorizeFactor of each, in elements), capped at 16 bytes for the widest
// dtype the kernel moves, and dividing the vectorized extent.
struct VectorizeInput {
  int64_t widest_dtype_bytes = 4;
  int64_t inner_extent = 1;                // the extent the lanes walk along (output's last dim, or the row)
  std::vector<int64_t> tensor_factors;     // vectorizeFactor(...) of each tensor read or written
};
int64_t kernelVectorize(const VectorizeInput& input);

struct PointwiseProblem {
  std::vector<int64_t> sizes;       // the largest output's sizes
  int64_t total_elements = 0;       // over all outputs
  int64_t max_vectorize = 1;        // kernelVectorize
  int64_t bytes_per_element = 0;    // traffic per output element (every input and output, once)
  // Element strides of each input along each output dim (0: broadcast along it), for the inputs read
  // at one offset per output element; empty when the outputs differ in shape (no 2D tiling then).
  std::vector<std::vector<int64_t>> input_strides;
};

struct PointwiseParams {
  int64_t vectorize = 1;
  int64_t unroll = 1;         // vector chunks per thread (2D: rows per thread)
  int64_t block = 128;        // threads per block
  int64_t grid = 1;           // blocks (for the whole kernel; the lowering splits them among output groups)
  // 2D tiling (break_point > 0): dims [0, break_point) are rows walked by threads_y and grid y, the
  // others the columns walked by threads_x in vectors; an input broadcast along every row dim is read
  // once per column and reused by a thread for all its rows.
  int64_t break_point = 0;
  int64_t threads_x = 0, threads_y = 0;
  int64_t grid_y = 1;
  int64_t outer = 1, inner = 1;  // elements: rows and columns
  std::string toString() const;  // the kernel's structure, not its grid: it heads the kernel's source
};
PointwiseParams pointwiseHeuristics(const DeviceInfo& device, const PointwiseProblem& problem);

struct ReductionProblem {
  int64_t rows = 1;             // kept elements (outer_numel)
  int64_t row_length = 1;       // reduced elements per row
  bool inner = true;            // the reduced dims are the innermost
  bool wants_persistent = false;// a result is broadcast back over the row (inner persistent scheduler)
  int64_t max_vectorize = 1;    // kernelVectorize along the row (inner) or the kept dims (outer)
  int64_t cached_tensors = 1;   // tensors a persistent kernel keeps per row element
  int64_t cached_value_bytes = 4;  // bytes of one kept value (its compute type: float, or double)
  int64_t widest_dtype_bytes = 4;
  // The results need no pass after the reduction over the whole row (plain reductions, none feeding
  // another, only per-row outputs): blocks may each reduce part of a row and combine partials.
  bool splittable = false;
};

struct ReductionParams {
  bool inner = true;
  bool persistent = false;      // the row is read from HBM once and kept (registers or shared memory)
  bool shared_cache = false;    // persistent in shared memory: the row is too large for registers
  int64_t vectorize = 1;
  int64_t threads_x = 32;       // inner: threads per row; outer: threads over kept elements (vectorize each)
  int64_t threads_y = 1;        // inner: rows per block; outer: threads splitting the reduced dims
  int64_t chunks = 1;           // inner: vector chunks per thread per row (persistent: exact)
  int64_t grid = 1;             // blocks over the rows (grid x)
  // Grid reduction: each row's reduced elements are split among `splits` blocks (grid y) of
  // `split_length` elements each; the last block to finish a row combines the partial results.
  int64_t splits = 1;
  int64_t split_length = 0;
  std::string why;              // one sentence: why persistent, split or neither
  std::string toString() const;  // the kernel's structure, not its grid: it heads the kernel's source
};
ReductionParams reductionHeuristics(const DeviceInfo& device, const ReductionProblem& problem);

// Transpose: the output's index space is cut into tiles of tile_a x tile_b points over two of its
// dims, a (the dim the transposed inputs are contiguous along) and b (the output's inner dim), and
// one block per tile and value of the other dims. Each staged load (a transposed input read at every
// point of the tile) is first read coalesced along a into a shared tile, then the outputs are
// computed and stored coalesced along b. Outputs of different shapes each get their own tiling
// (a group) and block range in the one launch.
struct TransposeGroupProblem {
  std::vector<int64_t> sizes;              // the group's output sizes
  int64_t dim_a = -1;                      // -1: b is the only dim of size > 1 (tiles along b only)
  int64_t dim_b = -1;                      // the output's inner dim (last of size > 1)
  // Per stageable load, best first: bytes per element in shared memory. None: the group is tiled
  // without staging (another group of the kernel is the transposed one).
  std::vector<int64_t> candidate_bytes;
};

struct TransposeProblem {
  std::vector<TransposeGroupProblem> groups;
  int64_t max_vectorize = 1;  // kernelVectorize along b (staged loads excluded: they come from shared memory)
};

struct TransposeGroupParams {
  int64_t dim_a = -1, dim_b = -1;
  int64_t tile_a = 1, tile_b = 1;  // powers of two; tile_b a multiple of the vectorize factor
  int64_t staged = 0;              // the first `staged` candidate loads go through shared memory
  int64_t blocks = 0;              // tiles of (a, b) times the product of the other dims
  bool operator==(const TransposeGroupParams&) const = default;
};

struct TransposeParams {
  int64_t vectorize = 1;  // along b, for the phase that computes and stores the outputs
  int64_t threads = 256;  // per block (one dimension: each phase maps the threads onto the tile its own way)
  std::vector<TransposeGroupParams> groups;
  int64_t grid = 0;
  int64_t shared_bytes = 0;  // the staged tiles of all groups
  std::string toString() const;  // the kernel's structure, not its grid: it heads the kernel's source
  bool operator==(const TransposeParams&) const = default;
};
TransposeParams transposeHeuristics(const DeviceInfo& device, const TransposeProblem& problem);

}  // namespace braze
