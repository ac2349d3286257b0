// The pointwise scheduler's heuristics: 1D vector chunks, or 2D tiles when an input is broadcast along rows.
#pragma once

#include "scheduler/heuristics.h"

#include <cstdint>
#include <string>
#include <vector>

namespace braze {

struct PointwiseProblem {
  std::vector<int64_t> sizes;       // the largest output's sizes
  int64_t total_elements = 0;       // over all outputs
  int64_t max_vectorize = 1;        // kernelVectorize
  int64_t bytes_per_element = 0;    // traffic per output element (every input and output, once)
  // Element strides of each input along each output dim (0: broadcast along it), for the inputs read
  // at one offset per output element; empty when the outputs differ in shape (no 2D tiling then).
  std::vector<std::vector<int64_t>> input_strides{};
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
  // Independent parts of other shapes beside this one (scheduler/independent_parts.h), each with its own
  // parameters, in blocks of its own after this one's: one-dimensional blocks of as many threads.
  std::vector<PointwiseParams> more_parts{};
  std::string toString() const;  // the kernel's structure, not its grid: it heads the kernel's source
  bool operator==(const PointwiseParams&) const = default;
};
PointwiseParams pointwiseHeuristics(const DeviceInfo& device, const PointwiseProblem& problem);

// One kernel of independent parts, each with the parameters it has alone (`parts`, in the kernel's order):
// the first keeps its own (2D tiles included), every other runs in one-dimensional blocks of as many
// threads as the first's 2D tiles, else as the most any part's blocks have, keeping its vectors and chunks per thread (one vector chunk
// where it had 2D tiles). Two ops of unrelated shapes cost one launch, each keeping its own vectors.
PointwiseParams joinPointwiseParts(std::vector<PointwiseParams> parts);

// The same parts in one-dimensional blocks of `threads` threads, beside another kernel's blocks of as
// many (kernel/joined_kernel.h): each keeps its vectors and chunks per thread (one chunk where it had 2D
// tiles).
PointwiseParams inBlocksOf(PointwiseParams params, int64_t threads);

}  // namespace braze
