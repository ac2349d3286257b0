// mma operands staged in shared memory: how a tile is laid out there and where each lane points
// ldmatrix so that the registers it receives are the lane's mma fragment (mma_fragments.h).
//
// A tile holds rows of 16-byte chunks. Its rows run along K ("k-major": a row per m of A or per n of
// B) or along M / N ("mn-major": a row per k; read with ldmatrix.trans, 16-bit operands only).
// Chunk c of row r is stored at chunk position (c + r / R) % C of its row, C chunks per row, R = 8 / C
// rows per 128 bytes. When C is a power of two, the eight rows one ldmatrix phase reads (same chunk,
// consecutive rows) then fall in eight distinct 16-byte bank groups, so the read is conflict-free; other
// C (an mn-major tile 24 columns wide) stay correct (the rotation is a bijection of each row) but may
// share bank groups.
#pragma once

#include "kernel/kernel_ir.h"

#include <cstdint>

namespace braze::kernel {

enum class TileOrder : uint8_t { KMajor, MnMajor };

// Where ldmatrix lane l reads: matrix j = (l / 8) % matrices, row i = l % 8 of it, at tile row
// (j % 2) * row_mod + (j / 2) * row_div + i and chunk (j % 2) * chunk_mod + (j / 2) * chunk_div,
// relative to the fragment's first row and chunk.
struct LdmatrixPattern {
  int matrices;  // A: 4 (16 x one mma's K), B: 2 (one mma's K x 8)
  int row_mod, row_div, chunk_mod, chunk_div;
  bool transpose;
};
LdmatrixPattern ldmatrixPatternA(TileOrder order);
LdmatrixPattern ldmatrixPatternB(TileOrder order);
// Two adjacent n-tiles' B fragments at once (an ldmatrix.x4), into one array of both.
LdmatrixPattern ldmatrixPatternBPair(TileOrder order);

// The tile row and chunk lane `lane` gives ldmatrix, relative to the fragment's first row and chunk.
struct TilePlace {
  ExprId row, chunk;
};
TilePlace ldmatrixSource(KernelBuilder& kb, const LdmatrixPattern& pattern, ExprId lane);

// The stored chunk position of chunk `chunk` of row `row`, `chunks` per row.
int64_t rotatedChunk(int64_t row, int64_t chunk, int64_t chunks);
// How many consecutive rows share one rotation: 8 / chunks (at least 1).
int64_t rowsPerRotation(int64_t chunks);

}  // namespace braze::kernel
