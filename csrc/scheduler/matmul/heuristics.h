// The matmul scheduler's parameters: a block of warps_m x warps_n warps, each computing a warp tile of
// tiles_m x tiles_n mma tiles (16 x 8 each) of one batch's output, walking K an mma's depth at a time;
// or, for a few rows (HeuristicTuning::matmul_gemv, matmul_gemv_mma) times a B read along K (a linear's
// [N, K] weights), the GEMV schedule, on tensor cores or not.
// A pure function of (DeviceInfo, problem), unit-tested with described GPUs.
#pragma once

#include "kernel/mma_fragments.h"
#include "kernel/shared_tiles.h"
#include "target/device_info.h"

#include <cstdint>
#include <optional>
#include <string>

namespace braze {

struct MatmulProblem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  DataType operand = DataType::BFloat16;
  // How B is read: whether every tensor it loads moves one element per step along K (a linear's
  // row-major [N, K] weights, with or without a dequantize), and the element size of the largest of
  // them (1 for int8 weights under a dequantize to bf16).
  bool b_k_contiguous = false;
  int64_t b_element_bytes = 2;
  // How each operand can be copied into shared memory as it is stored (cp.async of 16-byte chunks): the
  // order of its tile rows, or nullopt where it cannot (ops between the input and the matmul, a stride
  // or address not a multiple of 16 bytes, an 8-bit operand that is not k-major).
  std::optional<kernel::TileOrder> a_tile = std::nullopt, b_tile = std::nullopt;
  // Both operands' tiles can be loaded by TMA: each the matrices of a tensor of its own, with a 2D tensor
  // map or a 3D one for a batch (scheduler/matmul/operands.h's tmaMatrix).
  bool tma_maps = false;
  // A linear whose weight has no batch dims: A's and the output's batch dims are more rows of one matrix
  // against the same weights (a decoding step's [batch, 1, K] activations), which the GEMV schedules
  // read as such: the weights stream once, not once per batch.
  bool batch_rows = false;
};

struct MatmulParams {
  kernel::MmaShape shape = kernel::MmaShape::M16N8K16;
  int64_t warps_m = 2, warps_n = 2;  // warps per block along M and N
  int64_t tiles_m = 2, tiles_n = 4;  // mma tiles per warp along M and N
  int64_t blocks_m = 1, blocks_n = 1, grid = 1;  // grid 0: the output is empty
  int64_t raster_group = 1;  // block rows that consecutive blocks walk along N together
  // Staged, or the GEMV on tensor cores: K split among split_k blocks per output tile, the last to finish
  // summing their accumulators (in split order) before the epilogue.
  int64_t split_k = 1;
  // The GEMV schedule, without tensor cores: a block of gemv_warps warps, each summing gemv_cols output
  // columns over all of K for every row, its lanes reading gemv_vector consecutive K elements at a time
  // (16 bytes of B's largest input, so every weight byte is read once with 128-bit loads); the lanes'
  // sums meet in a warp reduction; gemv_unroll chunks per lane are loaded together. blocks_n counts the
  // blocks along N.
  bool gemv = false;
  int64_t gemv_warps = 4, gemv_cols = 1, gemv_vector = 1, gemv_unroll = 4;
  int64_t gemv_split = 1;  // blocks per column group, each taking a part of K (too few columns for the SMs)
  // The GEMV on tensor cores: A and B swapped (B's columns are the mma's rows, A's rows its columns), a
  // block takes tiles_m * 16 of B's columns against all rows of A (tiles_n tiles of 8) and its gemv_warps
  // warps split K; a lane reads gemv_vector consecutive K elements of each of its two columns of a tile
  // (16 bytes of the weights) and of its row of A, and the mma's K order is permuted to match, so every
  // load is a vector load and no shared memory holds an operand. gemv_unroll groups of 4 x gemv_vector K
  // elements per warp are loaded together; the warps' sums meet in shared memory, in warp order.
  bool gemv_mma = false;
  // With batch_rows: the GEMV reads A's batch dims and its rows as batch x m rows (grid and rows count
  // them so).
  bool batch_rows = false;
  // Staging (stages >= 2): each block tile's A and B slices of block_k K elements go into a ring of
  // `stages` shared tiles, stages - 1 slices ahead of the mmas, which read their fragments with ldmatrix.
  // An operand copied as stored goes by cp.async (a_async, b_async); any other (a prologue computes it,
  // or its layout does not allow 16-byte copies) is loaded and computed in registers and stored k-major
  // when its stage is refilled (those loads are not asynchronous: the ring only holds their results).
  // 0: fragments are loaded from global memory.
  int64_t stages = 0, block_k = 0;
  kernel::TileOrder a_order = kernel::TileOrder::KMajor, b_order = kernel::TileOrder::KMajor;
  bool a_async = true, b_async = true;
  // An operand through registers whose tiles are whole loads its next slice before this slice's mmas and
  // writes it after them (its loads in flight meanwhile).
  bool loads_ahead = true;
  // Two sets of fragment registers: each k step's mmas run while the next step's fragments load, and the
  // last step's while the block waits for the next slice and loads its first fragments (needs an even
  // number of k steps per slice).
  bool fragments_ahead = false;
  // With fragments ahead, the parts a slice's refill copies are issued in (after the mmas of k steps 0,
  // 1, ...): at most the k steps before the last; 0 means that many.
  int64_t copy_parts = 0;
  // Warpgroup mmas (sm_90): warps_m / 4 warpgroups, each a 64 x blockCols() tile by one wgmma per k step
  // (32 bytes of K), A and B read from 128-byte swizzled shared tiles (no ldmatrix, no fragments): warps_n = tiles_m = 1, tiles_n = N / 8 (each warp's 16 rows hold the
  // accumulators of tiles_n mma tiles, in their layout). Each slice's wgmmas stay in flight while the
  // next slice's are issued, so a refill takes the stage of the slice before last.
  bool wgmma = false;
  // wgmma's slices loaded by TMA: one thread issues a stage's boxes of both operands (128-byte swizzled,
  // as wgmma reads them) and announces their bytes on the stage's mbarrier, which every thread waits on
  // before the stage's wgmmas; instead of every thread's cp.asyncs.
  bool tma = false;
  // With TMA, warp-specialized: one more warpgroup, the producer, whose thread issues each stage's boxes
  // once the compute warpgroups have released the stage on its `empty` mbarrier, while the compute
  // warpgroups wait on the stage's `full` mbarrier, issue its wgmmas and release the stage before last;
  // no block barrier in the main loop. Each role runs a loop of its own (scheduler/matmul/wgmma_loop.cpp).
  bool warp_specialized = false;
  // Warp-specialized with two compute warpgroups or more: the registers per thread each role asks for
  // (setmaxnreg), the producer few, the compute warpgroups what it gave back; 0: as launched.
  int64_t producer_registers = 0, consumer_registers = 0;
  // Warp-specialized, persistent: a grid of at most one block per SM (or the tuned number), each walking
  // the output tiles blockIdx.x, + grid, ... (grid counts the blocks, not the tiles). Both roles walk them:
  // the producer fills the next tile's stages while the compute warpgroups run this tile's epilogue, and
  // the stages' mbarrier phases run on across tiles.
  bool persistent = false;
  // Persistent, in clusters of cluster_m blocks (sm_90): the blocks of a cluster take tiles next to each other
  // along M, which read the same B tiles; each block loads 1 / cluster_m of every B box and multicasts it into
  // the shared memory of all of them, so B is read from L2 once per cluster instead of once per block. A
  // stage is refilled once every block's compute warpgroups released it (each arrives on every block's
  // `empty` mbarrier). 1: no clusters.
  int64_t cluster_m = 1;
  int64_t threads() const { return 32 * warps_m * warps_n + (warp_specialized ? 128 : 0); }
  bool fragmentsAhead() const { return fragments_ahead && stages >= 2 && (block_k / kernel::mmaDims(shape).k) % 2 == 0; }
  int64_t blockRows() const { return warps_m * tiles_m * 16; }
  int64_t blockCols() const { return warps_n * tiles_n * 8; }
  std::string toString() const;  // heads the kernel's source
};

// Whether `device` runs mma.sync for `operand`: an NVIDIA GPU of sm_80 on (sm_89 for fp8). Empty when it
// does, else why not.
std::string mmaUnavailable(const DeviceInfo& device, DataType operand);

// Whether `device` runs wgmma for a problem's operands (sm_90 exactly; bf16, f16, s8, u8, e4m3fn or e5m2);
// empty when it does, else why not.
std::string wgmmaUnavailable(const DeviceInfo& device, const MatmulProblem& problem);

MatmulParams matmulHeuristics(const DeviceInfo& device, const MatmulProblem& problem);

}  // namespace braze
