// The transpose scheduler's heuristics: tiles staged through shared memory.
#pragma once

#include "scheduler/heuristics.h"
#include "scheduler/pointwise/heuristics.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace braze {

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
  // Per stageable load, best first: bytes per element in shared memory, held in its compute type. None:
  // the group is tiled without staging (another group of the kernel is the transposed one).
  std::vector<int64_t> candidate_bytes;
  // The same loads' bytes held as stored (a bf16 or half value in two bytes, exactly); empty: as above.
  std::vector<int64_t> stored_bytes;
};

struct TransposeProblem {
  std::vector<TransposeGroupProblem> groups;
  int64_t max_vectorize = 1;  // kernelVectorize along b (staged loads excluded: they come from shared memory)
};

struct TransposeGroupParams {
  int64_t dim_a = -1, dim_b = -1;
  int64_t tile_a = 1, tile_b = 1;  // powers of two; tile_b a multiple of the vectorize factor
  int64_t staged = 0;              // the first `staged` candidate loads go through shared memory
  // The tiles hold values as stored: where tiles of compute values would leave loads unstaged and tiles
  // of stored ones stage more (GQA's backward reads 12 to 24 tiles of keys' gradient an element).
  bool tiles_as_stored = false;
  int64_t blocks = 0;              // tiles of (a, b) times the product of the other dims
  bool operator==(const TransposeGroupParams&) const = default;
};

struct TransposeParams {
  int64_t vectorize = 1;  // along b, for the phase that computes and stores the outputs
  int64_t threads = 256;  // per block (one dimension: each phase maps the threads onto the tile its own way)
  std::vector<TransposeGroupParams> groups;
  int64_t grid = 0;
  int64_t shared_bytes = 0;  // the staged tiles of all groups
  // Independent parts that stage nothing, in blocks of their own after the tiles (one-dimensional, of
  // `threads` threads), with their own vectors.
  std::optional<PointwiseParams> beside = std::nullopt;
  std::string toString() const;  // the kernel's structure, not its grid: it heads the kernel's source
  bool operator==(const TransposeParams&) const = default;
};
TransposeParams transposeHeuristics(const DeviceInfo& device, const TransposeProblem& problem);

}  // namespace braze
