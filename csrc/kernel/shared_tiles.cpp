#include "kernel/shared_tiles.h"

#include <algorithm>

namespace braze::kernel {

// A (16 x K of one mma) as four 8 x 8 (16-bit) or 8 x 16 (8-bit) matrices in fragment order: a0-a1
// rows 0-7 of the first K half, a2-a3 rows 8-15, then the second half. B (K x 8) as two: the K halves.
LdmatrixPattern ldmatrixPatternA(TileOrder order) {
  // k-major: matrix j is rows 8 (j % 2) .., chunk j / 2. mn-major (rows are k): rows 8 (j / 2) .., chunk j % 2.
  return order == TileOrder::KMajor ? LdmatrixPattern{4, 8, 0, 0, 1, false} : LdmatrixPattern{4, 0, 8, 1, 0, true};
}

LdmatrixPattern ldmatrixPatternB(TileOrder order) {
  // k-major (rows are n): matrix j is rows 0-7, chunk j. mn-major (rows are k): rows 8 j .., chunk 0.
  return order == TileOrder::KMajor ? LdmatrixPattern{2, 0, 0, 1, 0, false} : LdmatrixPattern{2, 8, 0, 0, 0, true};
}

LdmatrixPattern ldmatrixPatternBPair(TileOrder order) {
  // Two n-tiles: matrices 0 and 1 are the first tile's two k halves (as ldmatrixPatternB), 2 and 3 the
  // second's, 8 n further (k-major: 8 rows; mn-major: the next chunk).
  return order == TileOrder::KMajor ? LdmatrixPattern{4, 0, 8, 1, 0, false} : LdmatrixPattern{4, 8, 0, 0, 1, true};
}

TilePlace ldmatrixSource(KernelBuilder& kb, const LdmatrixPattern& p, ExprId lane) {
  const ExprId j = kb.mod(kb.div(lane, kb.index(8)), kb.index(p.matrices));
  const ExprId i = kb.mod(lane, kb.index(8));
  const ExprId j_mod = kb.mod(j, kb.index(2)), j_div = kb.div(j, kb.index(2));
  auto pick = [&](int mod_coefficient, int div_coefficient) {
    return kb.add(kb.mul(j_mod, kb.index(mod_coefficient)), kb.mul(j_div, kb.index(div_coefficient)));
  };
  return {kb.add(pick(p.row_mod, p.row_div), i), pick(p.chunk_mod, p.chunk_div)};
}

int64_t rowsPerRotation(int64_t chunks) { return std::max<int64_t>(1, 8 / chunks); }

int64_t rotatedChunk(int64_t row, int64_t chunk, int64_t chunks) {
  return (chunk + row / rowsPerRotation(chunks)) % chunks;
}

}  // namespace braze::kernel
