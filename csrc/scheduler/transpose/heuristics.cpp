#include "scheduler/transpose/heuristics.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace braze {
namespace {

// Threads per transpose block: eight warps, so a 32x32 tile is four points per thread in each phase.
constexpr int64_t kTransposeThreads = 256;
// Staged tiles per block: at most a quarter of an SM's shared memory (four blocks stay resident to
// hide the barrier), and never more than the 48 KiB a block gets without opting in.
constexpr int64_t kTransposeSharedCap = 48 * 1024;

// A staged tile in shared memory: 16-byte aligned, as the kernel IR lays shared arrays out.
int64_t tileBytes(int64_t tile_a, int64_t tile_b, int64_t element_bytes) {
  return ceilDiv(tile_a * tile_b * element_bytes, 16) * 16;
}

}  // namespace

std::string TransposeParams::toString() const {
  std::vector<std::string> parts;
  for (const TransposeGroupParams& g : groups) {
    const std::string dims =
        g.dim_a >= 0 ? fmt::format("a={}, b={}", g.dim_a, g.dim_b) : fmt::format("b={}", g.dim_b);
    parts.push_back(fmt::format("tile {}x{}, dims ({}), {} staged input{}{}", g.tile_a, g.tile_b, dims, g.staged,
                                g.staged == 1 ? "" : "s", g.tiles_as_stored ? " (tiles as stored)" : ""));
  }
  return fmt::format("transpose: {}; vectorize {}, block {}, shared {} B{}", fmt::join(parts, "; "), vectorize, threads,
                     shared_bytes, beside ? "; then " + beside->toString() : "");
}

TransposeParams transposeHeuristics(const DeviceInfo& device, const TransposeProblem& problem) {
  TransposeParams p;
  p.vectorize = std::max<int64_t>(problem.max_vectorize, 1);
  p.threads = kTransposeThreads;
  const int64_t vec = p.vectorize;
  const int64_t budget = std::min<int64_t>(kTransposeSharedCap, device.smem_per_sm / 4);
  const int64_t resident_blocks = static_cast<int64_t>(device.sm_count) * (device.max_threads_per_sm / p.threads);
  for (const TransposeGroupProblem& gp : problem.groups) {
    TransposeGroupParams g;
    g.dim_a = gp.dim_a;
    g.dim_b = gp.dim_b;
    int64_t numel = 1;
    for (int64_t s : gp.sizes) numel *= s;
    if (gp.dim_b < 0 || numel == 0) {
      p.groups.push_back(g);
      continue;
    }
    const int64_t sb = gp.sizes[gp.dim_b];
    const int64_t sa = gp.dim_a >= 0 ? gp.sizes[gp.dim_a] : 1;
    const int64_t others = numel / (sa * sb);
    // Phase 2 stores rows of tile_b elements: 8 threads of 16-byte vectors or 32 threads of scalars
    // make at least 128 contiguous bytes per row; small extents shrink the tile instead of idling.
    const int64_t row = std::max(vec, nextPow2(sb));
    if (gp.dim_a < 0) {
      g.tile_b = std::min(p.threads * vec, row);
    } else if (gp.candidate_bytes.empty()) {
      // Nothing to stage (another group of the kernel is transposed): a tile of a whole block's
      // worth of points, each thread one chunk.
      g.tile_b = std::min(std::max<int64_t>(32, 8 * vec), row);
      g.tile_a = std::min(nextPow2(sa), std::max<int64_t>(p.threads * vec / g.tile_b, 1));
    } else {
      g.tile_a = std::min<int64_t>(32, nextPow2(sa));
      g.tile_b = std::min(std::max<int64_t>(32, 8 * vec), row);
      // Large problems: 64-point tiles give each thread four times the loads in flight and halve
      // the blocks, worth it while the bigger tiles still fill every SM twice over.
      const bool big = sa >= 64 && sb >= 64 && ceilDiv(sa, 64) * ceilDiv(sb, 64) * others >= 2 * resident_blocks;
      auto fits = [&](int64_t tile_a, int64_t tile_b, const std::vector<int64_t>& candidates) {
        int64_t n = 0, bytes = p.shared_bytes;
        for (int64_t b : candidates) {
          if (bytes + tileBytes(tile_a, tile_b, b) > budget) break;
          bytes += tileBytes(tile_a, tile_b, b);
          ++n;
        }
        return n;
      };
      const auto all = static_cast<int64_t>(gp.candidate_bytes.size());
      if (big && fits(64, std::max<int64_t>(64, 8 * vec), gp.candidate_bytes) == all) {
        g.tile_a = 64;
        g.tile_b = std::max<int64_t>(64, 8 * vec);
      }
      g.staged = fits(g.tile_a, g.tile_b, gp.candidate_bytes);
      // Tiles of values as stored hold twice the bf16 loads, each converted once more on its way through.
      if (g.staged < all && !gp.stored_bytes.empty() && fits(g.tile_a, g.tile_b, gp.stored_bytes) > g.staged) {
        g.tiles_as_stored = true;
        g.staged = fits(g.tile_a, g.tile_b, gp.stored_bytes);
      }
      const std::vector<int64_t>& bytes = g.tiles_as_stored ? gp.stored_bytes : gp.candidate_bytes;
      for (int64_t i = 0; i < g.staged; ++i) p.shared_bytes += tileBytes(g.tile_a, g.tile_b, bytes[i]);
    }
    g.blocks = ceilDiv(sa, g.tile_a) * ceilDiv(sb, g.tile_b) * others;
    p.grid += g.blocks;
    p.groups.push_back(g);
  }
  return p;
}

}  // namespace braze
