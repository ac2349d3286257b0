// The matmul scheduler's heuristics and device check, as pure functions of described GPUs.
#include "scheduler/matmul/heuristics.h"
#include "support/error.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

TEST(MatmulHeuristics, ASquareBf16ProblemTakesFourWarpsOf32x32Outputs) {
  const MatmulParams p = matmulHeuristics(DeviceInfo::h100Sxm(), {1, 1024, 1024, 1024, DataType::BFloat16});
  EXPECT_EQ(p.shape, kernel::MmaShape::M16N8K16);
  EXPECT_EQ(p.warps_m * p.warps_n, 4);
  EXPECT_EQ(p.blockRows(), 64);
  EXPECT_EQ(p.blockCols(), 64);
  EXPECT_EQ(p.grid, 16 * 16);
}

TEST(MatmulHeuristics, IntegerOperandsTakeTheK32Shape) {
  const MatmulParams p = matmulHeuristics(DeviceInfo::a100(), {16, 1024, 1024, 1024, DataType::Int8});
  EXPECT_EQ(p.shape, kernel::MmaShape::M16N8K32);
  EXPECT_EQ(p.grid, 16 * 4 * 8);  // batch x row blocks x column blocks of 256 x 128
}

TEST(MatmulHeuristics, SkinnyProblemsTakeNoMoreTilesThanTheyFill) {
  // One row whose B is not read along K (a row-major [K, N] B): one mma tile of rows, one warp along M.
  const MatmulParams gemv = matmulHeuristics(DeviceInfo::h100Sxm(), {1, 1, 11008, 4096, DataType::BFloat16});
  EXPECT_EQ(gemv.tiles_m, 1);
  EXPECT_EQ(gemv.warps_m, 1);
  EXPECT_EQ(gemv.blocks_m, 1);
  // Seven columns: one tile of 8 along N, one warp.
  const MatmulParams narrow = matmulHeuristics(DeviceInfo::h100Sxm(), {1, 100, 7, 33, DataType::Half});
  EXPECT_EQ(narrow.tiles_n, 1);
  EXPECT_EQ(narrow.warps_n, 1);
  EXPECT_EQ(narrow.blocks_n, 1);
  EXPECT_EQ(narrow.blocks_m * narrow.blockRows() >= 100, true);
}

MatmulProblem weightOnly(int64_t m, int64_t n, int64_t k, int64_t weight_bytes) {
  MatmulProblem problem{1, m, n, k, DataType::BFloat16};
  problem.b_k_contiguous = true;
  problem.b_element_bytes = weight_bytes;
  return problem;
}

TEST(MatmulHeuristics, AFewRowsTimesWeightsReadAlongKTakeTheGemv) {
  // Seed 003: int8 weights, 16 of them per 16-byte load; two columns per warp for one row.
  const MatmulParams int8 = matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(1, 11008, 4096, 1));
  EXPECT_TRUE(int8.gemv);
  EXPECT_EQ(int8.gemv_vector, 16);
  EXPECT_EQ(int8.gemv_cols, 2);
  EXPECT_EQ(int8.blocks_n, 11008 / (int8.gemv_warps * 2));
  EXPECT_EQ(int8.grid, int8.blocks_n);
  EXPECT_NE(int8.toString().find("matmul gemv"), std::string::npos);
  // bf16 weights: 8 per load. Sixteen rows without mma.sync (an AMD GPU): one column per warp (a sum per
  // row and column per lane).
  const MatmulParams bf16 = matmulHeuristics(DeviceInfo::mi300x(), weightOnly(16, 4096, 4096, 2));
  EXPECT_TRUE(bf16.gemv);
  EXPECT_FALSE(bf16.gemv_mma);
  EXPECT_EQ(bf16.gemv_vector, 8);
  EXPECT_EQ(bf16.gemv_cols, 1);
  // Seventeen rows without mma.sync, 65 with it, or a B strided along K: the tiled schedules.
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::mi300x(), weightOnly(17, 4096, 4096, 1)).gemv);
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(65, 4096, 4096, 1)).gemv);
  MatmulProblem strided = weightOnly(1, 4096, 4096, 1);
  strided.b_k_contiguous = false;
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::h100Sxm(), strided).gemv);
}

TEST(MatmulHeuristics, TwoToSixtyFourRowsTakeTheGemvOnTensorCores) {
  // Seed 003 at 16 rows: 688 blocks of 16 weight columns against 16 rows (2 tiles of 8), 4 warps splitting
  // K in groups of 64 (16 int8 weights a lane per column), 4 groups in flight.
  const MatmulParams p = matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(16, 11008, 4096, 1));
  EXPECT_TRUE(p.gemv && p.gemv_mma);
  EXPECT_EQ(p.shape, kernel::MmaShape::M16N8K16);
  EXPECT_EQ(p.gemv_vector, 16);
  EXPECT_EQ(p.tiles_m, 1);
  EXPECT_EQ(p.tiles_n, 2);
  EXPECT_EQ(p.blocks_n, 688);
  EXPECT_EQ(p.grid, 688);
  EXPECT_EQ(p.gemv_warps, 4);
  EXPECT_EQ(p.gemv_unroll, 4);
  EXPECT_EQ(p.split_k, 1);
  EXPECT_NE(p.toString().find("matmul gemv on tensor cores: mma.m16n8k16"), std::string::npos) << p.toString();
  // 64 rows: 32 weight columns a block (halving the reads of A's rows), two groups in flight.
  const MatmulParams wide = matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(64, 11008, 4096, 1));
  EXPECT_TRUE(wide.gemv_mma);
  EXPECT_EQ(wide.tiles_m, 2);
  EXPECT_EQ(wide.tiles_n, 8);
  EXPECT_EQ(wide.grid, 344);
  EXPECT_EQ(wide.gemv_unroll, 2);
  // One row keeps the scalar GEMV; two take the tensor cores; bf16 weights load 8 a lane.
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(1, 11008, 4096, 1)).gemv_mma);
  EXPECT_TRUE(matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(2, 11008, 4096, 1)).gemv_mma);
  EXPECT_EQ(matmulHeuristics(DeviceInfo::a100(), weightOnly(16, 4096, 4096, 2)).gemv_vector, 8);
  // 8-bit operands: mma.m16n8k32, runs of 4 K a lane. fp8 on an sm_80 GPU (no fp8 mma): the scalar GEMV.
  MatmulProblem s8 = weightOnly(16, 4096, 4096, 1);
  s8.operand = DataType::Int8;
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), s8).shape, kernel::MmaShape::M16N8K32);
  MatmulProblem fp8 = weightOnly(16, 4096, 4096, 1);
  fp8.operand = DataType::Float8_e4m3fn;
  EXPECT_TRUE(matmulHeuristics(DeviceInfo::h100Sxm(), fp8).gemv_mma);
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::a100(), fp8).gemv_mma);
  EXPECT_TRUE(matmulHeuristics(DeviceInfo::a100(), fp8).gemv);
}

TEST(MatmulHeuristics, TheGemvOnTensorCoresSplitsKWhereItsBlocksAreFew) {
  // A GQA key projection, N = 1024: 64 blocks for 132 SMs take 8 warps and split K among 4 blocks (64
  // groups of 64 K: each warp of each split keeps two).
  const MatmulParams p = matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(16, 1024, 4096, 1));
  EXPECT_EQ(p.gemv_warps, 8);
  EXPECT_EQ(p.split_k, 4);
  EXPECT_EQ(p.grid, 64 * 4);
  EXPECT_EQ(p.gemv_unroll, 2);
  EXPECT_NE(p.toString().find("8 warps splitting K, K split among 4 blocks"), std::string::npos) << p.toString();
  // A short K: no split that would leave a warp under two groups.
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(16, 1024, 512, 1)).split_k, 1);
}

TEST(MatmulHeuristics, ALinearsBatchDimsAreGemvRows) {
  // A decoding step of batch 16: [16, 1, 4096] activations against [11008, 4096] weights are 16 rows of
  // one pass over the weights (688 blocks), not 16 passes of one row (16 x 1376 blocks).
  MatmulProblem decode = weightOnly(1, 11008, 4096, 1);
  decode.batch = 16;
  decode.batch_rows = true;
  const MatmulParams p = matmulHeuristics(DeviceInfo::h100Sxm(), decode);
  EXPECT_TRUE(p.gemv_mma && p.batch_rows);
  EXPECT_EQ(p.tiles_n, 2);
  EXPECT_EQ(p.grid, 688);
  EXPECT_NE(p.toString().find("batch dims read as rows"), std::string::npos);
  decode.batch_rows = false;  // a batched weight: one pass per batch
  const MatmulParams per_batch = matmulHeuristics(DeviceInfo::h100Sxm(), decode);
  EXPECT_FALSE(per_batch.gemv_mma || per_batch.batch_rows);
  EXPECT_EQ(per_batch.grid, 16 * per_batch.blocks_n);
  // Past 64 rows with the batch: a GEMV per batch.
  decode.batch_rows = true;
  decode.m = 5;
  const MatmulParams batches = matmulHeuristics(DeviceInfo::h100Sxm(), decode);
  EXPECT_TRUE(batches.gemv_mma);
  EXPECT_FALSE(batches.batch_rows);
  EXPECT_EQ(batches.grid, 16 * batches.blocks_n);
}

TEST(MatmulHeuristics, TheGemvTuningMovesItsRowLimit) {
  // Off: tensor cores even for one row. On: the GEMV up to 64 rows (B still read along K), not past them.
  DeviceInfo off = DeviceInfo::h100Sxm();
  off.tuning = HeuristicTuning::parse("matmul_gemv=0");
  EXPECT_FALSE(matmulHeuristics(off, weightOnly(1, 11008, 4096, 1)).gemv);
  EXPECT_FALSE(matmulHeuristics(off, weightOnly(16, 11008, 4096, 1)).gemv);
  DeviceInfo on = DeviceInfo::h100Sxm();
  on.tuning = HeuristicTuning::parse("matmul_gemv=1");
  EXPECT_TRUE(matmulHeuristics(on, weightOnly(32, 11008, 4096, 1)).gemv);
  EXPECT_TRUE(matmulHeuristics(on, weightOnly(64, 11008, 4096, 1)).gemv);
  EXPECT_FALSE(matmulHeuristics(on, weightOnly(65, 11008, 4096, 1)).gemv);
  MatmulProblem strided = weightOnly(32, 4096, 4096, 1);
  strided.b_k_contiguous = false;
  EXPECT_FALSE(matmulHeuristics(on, strided).gemv);
  EXPECT_EQ(on.tuning.toString(), "matmul_gemv=1");
  EXPECT_FALSE(matmulHeuristics(on, weightOnly(32, 11008, 4096, 1)).gemv_mma);  // the scalar GEMV, tuned on
  // The GEMV on tensor cores: off, the scalar GEMV to 16 rows; on, from one row.
  DeviceInfo mma_off = DeviceInfo::h100Sxm();
  mma_off.tuning = HeuristicTuning::parse("matmul_gemv_mma=0");
  EXPECT_FALSE(matmulHeuristics(mma_off, weightOnly(16, 11008, 4096, 1)).gemv_mma);
  EXPECT_TRUE(matmulHeuristics(mma_off, weightOnly(16, 11008, 4096, 1)).gemv);
  EXPECT_FALSE(matmulHeuristics(mma_off, weightOnly(17, 11008, 4096, 1)).gemv);
  DeviceInfo mma_on = DeviceInfo::h100Sxm();
  mma_on.tuning = HeuristicTuning::parse("matmul_gemv_mma=1");
  EXPECT_TRUE(matmulHeuristics(mma_on, weightOnly(1, 11008, 4096, 1)).gemv_mma);
  // Warpgroup mmas tuned on: the tiles, for 40 rows as for 400.
  DeviceInfo wgmma = DeviceInfo::h100Sxm();
  wgmma.tuning = HeuristicTuning::parse("matmul_wgmma=1");
  EXPECT_TRUE(matmulHeuristics(wgmma, weightOnly(40, 11008, 4096, 1)).wgmma);
}

TEST(MatmulHeuristics, AGemvOfFewColumnsSplitsK) {
  // 40 columns: 10 blocks of 4 warps for 132 SMs. K = 8192 int8 is 512 chunks of 16: splits of at least
  // two unrolled steps (256 chunks): 2 splits, 20 blocks.
  const MatmulParams p = matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(1, 40, 8192, 1));
  EXPECT_EQ(p.gemv_split, 2);
  EXPECT_EQ(p.grid, 20);
  EXPECT_NE(p.toString().find("K split among 2 blocks"), std::string::npos);
  // A longer K: more splits (at most 16), each a whole number of 32-chunk steps, none empty.
  const MatmulParams longer = matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(1, 40, 65536, 1));
  EXPECT_EQ(longer.gemv_split, 16);
  // Enough columns (seed 003's 11008) or a short K: no split.
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(1, 11008, 4096, 1)).gemv_split, 1);
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(1, 40, 1024, 1)).gemv_split, 1);
}

// matmul_gemv_cols and matmul_gemv_unroll set the scalar GEMV's columns per warp and chunks in flight
// (for the GPU's sweep of the one-row weight-only linear); 0 leaves the heuristic's.
TEST(MatmulHeuristics, TheScalarGemvTakesTunedColumnsAndUnroll) {
  DeviceInfo h100 = DeviceInfo::h100Sxm();
  h100.tuning = HeuristicTuning::parse("matmul_gemv_cols=8, matmul_gemv_unroll=8");
  const MatmulParams tuned = matmulHeuristics(h100, weightOnly(1, 11008, 4096, 1));
  EXPECT_TRUE(tuned.gemv && !tuned.gemv_mma);
  EXPECT_EQ(tuned.gemv_cols, 8);
  EXPECT_EQ(tuned.gemv_unroll, 8);
  EXPECT_EQ(tuned.blocks_n, (11008 + tuned.gemv_warps * 8 - 1) / (tuned.gemv_warps * 8));
  h100.tuning = HeuristicTuning::parse("matmul_gemv_cols=0, matmul_gemv_unroll=0");
  const MatmulParams heuristic = matmulHeuristics(h100, weightOnly(1, 11008, 4096, 1));
  EXPECT_EQ(heuristic.gemv_cols, 2);
  EXPECT_EQ(heuristic.gemv_unroll, 4);
  EXPECT_THROW(HeuristicTuning::parse("matmul_gemv_cols=3"), Error);
}

TEST(MatmulHeuristics, TheGemvKeepsTwoBlocksPerSmBeforeTwoColumnsPerWarp) {
  // 1024 columns in 4-warp blocks: 128 blocks at two columns per warp, under 2 x 132 SMs; one column
  // gives 256 blocks. On an L4 (58 SMs) two columns still leave 128 >= 116 blocks.
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(1, 1024, 4096, 1)).gemv_cols, 1);
  EXPECT_EQ(matmulHeuristics(DeviceInfo::l4(), weightOnly(1, 1024, 4096, 1)).gemv_cols, 2);
  // Every column is in some block (of the scalar GEMV's warps, or of the tensor cores' tiles of 16), and
  // an empty output launches nothing.
  for (int64_t n : {1, 7, 33, 257}) {
    const MatmulParams p = matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(1, n, 100, 1));
    EXPECT_GE(p.blocks_n * p.gemv_warps * p.gemv_cols, n);
    const MatmulParams mma = matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(40, n, 100, 1));
    EXPECT_GE(mma.blocks_n * mma.tiles_m * 16, n);
  }
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(1, 0, 100, 1)).grid, 0);
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), weightOnly(9, 0, 100, 1)).grid, 0);
}

TEST(MatmulHeuristics, OperandsAreStagedInAThreeStagePipelineOf64ByteSlices) {
  MatmulProblem bf16{1, 1024, 1024, 1024, DataType::BFloat16};
  bf16.a_tile = kernel::TileOrder::KMajor;
  bf16.b_tile = kernel::TileOrder::MnMajor;
  const MatmulParams p = matmulHeuristics(DeviceInfo::h100Sxm(), bf16);
  EXPECT_EQ(p.stages, 3);
  EXPECT_EQ(p.block_k, 32);
  EXPECT_EQ(p.b_order, kernel::TileOrder::MnMajor);
  EXPECT_NE(p.toString().find("3-stage cp.async pipeline"), std::string::npos);
  // Three stages of A and B tiles stay under the 48 KiB a launch gets without opting in.
  EXPECT_LE(p.stages * p.block_k * 2 * (p.blockRows() + p.blockCols()), 48 * 1024);
  // 1024 x 1024 in 128 x 128 tiles is 64 blocks, under an H100's 132 SMs: 64 x 64 tiles. 4096 x 4096 fills
  // them with 512 blocks of 256 x 128 (4 x 2 warps of 64 x 64) where mma.sync computes them (wgmma, which
  // an H100 takes by default, is tested below), four stages of 128-byte slices (192 KiB, opted into); on an
  // A100, whose blocks opt into 163 KiB, 1024 blocks of 128 x 128 in four 64-byte stages.
  EXPECT_EQ(p.blockRows() * p.blockCols(), 64 * 64);
  MatmulProblem large = bf16;
  large.m = large.n = 4096;
  DeviceInfo mma_h100 = DeviceInfo::h100Sxm();
  mma_h100.tuning = HeuristicTuning::parse("matmul_wgmma=0");
  const MatmulParams big = matmulHeuristics(mma_h100, large);
  EXPECT_EQ(big.blockRows(), 256);
  EXPECT_EQ(big.blockCols(), 128);
  EXPECT_EQ(big.warps_m, 4);
  EXPECT_EQ(big.warps_n, 2);
  EXPECT_TRUE(big.fragmentsAhead());
  EXPECT_EQ(big.grid, 16 * 32);
  EXPECT_EQ(big.stages, 4);
  EXPECT_EQ(big.block_k, 64);
  EXPECT_LE(big.stages * big.block_k * 2 * (big.blockRows() + big.blockCols()), DeviceInfo::h100Sxm().smem_per_block_optin);
  const MatmulParams a100 = matmulHeuristics(DeviceInfo::a100(), large);
  EXPECT_EQ(a100.blockRows(), 128);
  EXPECT_EQ(a100.blockCols(), 128);
  EXPECT_EQ(a100.grid, 32 * 32);
  EXPECT_EQ(a100.stages, 4);
  EXPECT_EQ(a100.block_k, 32);
  // 512 or 1024 block tiles, far more than run at once: blocks walk N in groups of 8 block rows. 64 x 64
  // tiles of a 1024^2 output are 256 blocks, under two per SM: row by row.
  EXPECT_EQ(big.raster_group, 8);
  EXPECT_EQ(a100.raster_group, 8);
  EXPECT_EQ(p.raster_group, 1);
  // A K of under 16 large slices keeps 128 x 128 tiles (seed 000's K = 768 measured faster so), and no
  // more stages than K has slices.
  MatmulProblem short_k = large;
  short_k.k = 768;
  EXPECT_EQ(matmulHeuristics(mma_h100, short_k).blockRows(), 128);
  // One set of fragments there (two would halve its blocks per SM), unless tuned.
  EXPECT_FALSE(matmulHeuristics(mma_h100, short_k).fragmentsAhead());
  DeviceInfo forced = DeviceInfo::h100Sxm();
  forced.tuning = HeuristicTuning::parse("matmul_wgmma=0, matmul_fragments_ahead=1");
  EXPECT_TRUE(matmulHeuristics(forced, short_k).fragmentsAhead());
  short_k.k = 64;
  EXPECT_EQ(matmulHeuristics(mma_h100, short_k).stages, 2);
  MatmulProblem s8{16, 1024, 1024, 1024, DataType::Int8};
  s8.a_tile = s8.b_tile = kernel::TileOrder::KMajor;
  // 8-bit operands: 128-byte slices where four stages of them fit (an H100's 227 KiB), else 64-byte ones
  // (an A100's 163 KiB).
  EXPECT_EQ(matmulHeuristics(DeviceInfo::a100(), s8).block_k, 64);
  EXPECT_EQ(matmulHeuristics(mma_h100, s8).block_k, 128);
  // Both copied as stored: two sets of fragments and three stages (measured faster than four).
  EXPECT_TRUE(matmulHeuristics(mma_h100, s8).fragmentsAhead());
  EXPECT_EQ(matmulHeuristics(mma_h100, s8).stages, 3);
  EXPECT_TRUE(matmulHeuristics(DeviceInfo::a100(), s8).b_async);
  // An operand that cannot be copied as stored (a dequantize prologue, an 8-bit B stored n-major): staged
  // through registers, k-major. 8-bit operands keep the large tiles (measured faster); 16-bit ones keep
  // them for operands copied as stored.
  s8.b_tile.reset();
  const MatmulParams registers = matmulHeuristics(DeviceInfo::a100(), s8);
  EXPECT_EQ(registers.stages, 4);
  EXPECT_EQ(registers.blockRows(), 256);
  EXPECT_FALSE(registers.b_async);
  EXPECT_EQ(registers.b_order, kernel::TileOrder::KMajor);
  EXPECT_NE(registers.toString().find("B k-major through registers"), std::string::npos);
  large.b_tile.reset();
  EXPECT_EQ(matmulHeuristics(mma_h100, large).blockRows(), 64);
}

// $BRAZE_TUNING's matmul fields replace the staged schedule's choices, with no more stages than the block's
// shared memory holds (an A100 opts into 163 KiB: three 48 KiB stages of 128 x 256 tiles of 128-byte slices).
TEST(MatmulHeuristics, TuningSetsTilesSlicesAndStagesWithinSharedMemory) {
  MatmulProblem bf16{1, 4096, 4096, 4096, DataType::BFloat16};
  bf16.a_tile = bf16.b_tile = kernel::TileOrder::KMajor;
  DeviceInfo a100 = DeviceInfo::a100();
  a100.tuning = HeuristicTuning::parse("matmul_stages=8, matmul_slice_bytes=128, matmul_block_n=256");
  const MatmulParams p = matmulHeuristics(a100, bf16);
  EXPECT_EQ(p.blockRows(), 128);
  EXPECT_EQ(p.blockCols(), 256);
  EXPECT_EQ(p.block_k, 64);
  EXPECT_EQ(p.stages, 3);
  EXPECT_EQ(p.grid, 32 * 16);
  EXPECT_LE(p.stages * p.block_k * 2 * (p.blockRows() + p.blockCols()), a100.smem_per_block_optin);
  EXPECT_TRUE(p.loads_ahead);
  a100.tuning = HeuristicTuning::parse("matmul_loads_ahead=0");
  EXPECT_FALSE(matmulHeuristics(a100, bf16).loads_ahead);
  // A slice is at least one mma's K.
  a100.tuning = HeuristicTuning::parse("matmul_slice_bytes=16");
  EXPECT_EQ(matmulHeuristics(a100, bf16).block_k, 16);
  EXPECT_THROW(HeuristicTuning::parse("matmul_slice_bytes=48"), Error);
  // Warps: 4 x 4 warps of 64 x 32 outputs share the H100's 256 x 128 tile; alone, the warp fields keep
  // the heuristic's tile.
  DeviceInfo h100 = DeviceInfo::h100Sxm();
  h100.tuning = HeuristicTuning::parse("matmul_wgmma=0, matmul_warps_m=4, matmul_warps_n=4");
  const MatmulParams warps = matmulHeuristics(h100, bf16);
  EXPECT_EQ(warps.blockRows(), 256);
  EXPECT_EQ(warps.blockCols(), 128);
  EXPECT_EQ(warps.warps_m * warps.warps_n, 16);
  EXPECT_EQ(warps.tiles_m, 4);
  EXPECT_EQ(warps.tiles_n, 4);
  // A tile narrower than its warps keeps one mma tile per warp: 32 columns hold 4 warps, not 8.
  h100.tuning = HeuristicTuning::parse("matmul_wgmma=0, matmul_block_n=32, matmul_warps_m=1, matmul_warps_n=8");
  const MatmulParams narrow = matmulHeuristics(h100, bf16);
  EXPECT_EQ(narrow.warps_n, 4);
  EXPECT_EQ(narrow.blockCols(), 32);
}

TEST(MatmulHeuristics, FewTilesAndALongKSplitK) {
  // One 64 x 64 tile, 32 slices of 32: 8 splits of 4 slices (at least 4 each), 8 blocks.
  MatmulProblem p{1, 64, 64, 1024, DataType::BFloat16};
  p.a_tile = p.b_tile = kernel::TileOrder::KMajor;
  const MatmulParams one = matmulHeuristics(DeviceInfo::h100Sxm(), p);
  EXPECT_EQ(one.split_k, 8);
  EXPECT_EQ(one.grid, 8);
  EXPECT_NE(one.toString().find("K split among 8 blocks per tile"), std::string::npos);
  // 33 slices into at most 8 splits of 5: 7 splits, none empty.
  p.k = 1040;
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), p).split_k, 7);
  // Enough tiles for the SMs, or a short K: no split.
  p.m = p.n = 1024;
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), p).split_k, 1);
  p.m = p.n = 64;
  p.k = 128;
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), p).split_k, 1);
}

TEST(MatmulHeuristics, EveryOutputIsInSomeBlock) {
  for (int64_t m : {1, 7, 33, 100, 257}) {
    for (int64_t n : {1, 7, 33, 100, 257}) {
      const MatmulParams p = matmulHeuristics(DeviceInfo::h100Sxm(), {3, m, n, 64, DataType::BFloat16});
      EXPECT_GE(p.blocks_m * p.blockRows(), m);
      EXPECT_GE(p.blocks_n * p.blockCols(), n);
      EXPECT_LT((p.blocks_m - 1) * p.blockRows(), m) << "a block of rows with no output";
      EXPECT_LT((p.blocks_n - 1) * p.blockCols(), n) << "a block of columns with no output";
      EXPECT_EQ(p.grid, 3 * p.blocks_m * p.blocks_n);
    }
  }
}

TEST(MatmulHeuristics, MmaNeedsAnNvidiaGpuOfSm80AndSm89ForFp8) {
  EXPECT_EQ(mmaUnavailable(DeviceInfo::h100Sxm(), DataType::BFloat16), "");
  EXPECT_EQ(mmaUnavailable(DeviceInfo::a100(), DataType::Int8), "");
  EXPECT_NE(mmaUnavailable(DeviceInfo::a100(), DataType::Float8_e4m3fn).find("needs sm_89 or newer"), std::string::npos);
  EXPECT_EQ(mmaUnavailable(DeviceInfo::l4(), DataType::Float8_e4m3fn), "");
  EXPECT_NE(mmaUnavailable(DeviceInfo::mi300x(), DataType::BFloat16).find("not an NVIDIA GPU"), std::string::npos);
  DeviceInfo turing = DeviceInfo::a100();
  turing.major = 7;
  turing.minor = 5;
  EXPECT_NE(mmaUnavailable(turing, DataType::Half).find("needs sm_80 or newer"), std::string::npos);
}

// Warpgroup mmas on sm_90: 128 x 256 tiles of two warpgroups for a large bf16 problem, four stages of
// 128-byte slices (192 KiB); 16-bit operands staged through registers and 8-bit ones copied as stored too;
// never on sm_80, for fnuz fp8 operands, or when tuned off.
TEST(MatmulHeuristics, LargeProblemsTakeWgmmaOnSm90Only) {
  MatmulProblem problem{1, 4096, 4096, 4096, DataType::BFloat16};
  problem.a_tile = kernel::TileOrder::KMajor;
  problem.b_tile = kernel::TileOrder::MnMajor;
  const MatmulParams h100 = matmulHeuristics(DeviceInfo::h100Sxm(), problem);
  EXPECT_TRUE(h100.wgmma);
  EXPECT_EQ(h100.blockRows(), 128);
  EXPECT_EQ(h100.blockCols(), 256);
  EXPECT_EQ(h100.stages, 4);
  EXPECT_EQ(h100.block_k, 64);
  EXPECT_EQ(h100.raster_group, 8);
  EXPECT_NE(h100.toString().find("wgmma.m64n256k16, 2 warpgroups"), std::string::npos) << h100.toString();
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::a100(), problem).wgmma);
  EXPECT_NE(wgmmaUnavailable(DeviceInfo::a100(), problem).find("needs sm_90"), std::string::npos);
  DeviceInfo off = DeviceInfo::h100Sxm();
  off.tuning = HeuristicTuning::parse("matmul_wgmma=0");
  EXPECT_FALSE(matmulHeuristics(off, problem).wgmma);
  // A K of one slice keeps three stages (the copies run stages - 2 slices ahead), two slices four.
  MatmulProblem one_slice = problem;
  one_slice.k = 64;
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), one_slice).stages, 3);
  one_slice.k = 128;
  EXPECT_EQ(matmulHeuristics(DeviceInfo::h100Sxm(), one_slice).stages, 4);
  // B through registers (a dequantize): stored k-major.
  problem.b_tile = std::nullopt;
  const MatmulParams registers = matmulHeuristics(DeviceInfo::h100Sxm(), problem);
  EXPECT_TRUE(registers.wgmma);
  EXPECT_FALSE(registers.b_async);
  EXPECT_EQ(registers.b_order, kernel::TileOrder::KMajor);
  // int8: k = 32, 128-element slices.
  MatmulProblem s8{16, 1024, 1024, 1024, DataType::Int8};
  s8.a_tile = s8.b_tile = kernel::TileOrder::KMajor;
  const MatmulParams int8 = matmulHeuristics(DeviceInfo::h100Sxm(), s8);
  EXPECT_TRUE(int8.wgmma);
  EXPECT_EQ(int8.block_k, 128);
  EXPECT_EQ(int8.shape, kernel::MmaShape::M16N8K32);
  EXPECT_NE(int8.toString().find("wgmma.m64n256k32"), std::string::npos) << int8.toString();
  // 8-bit operands computed in registers keep mma.sync (measured slower with wgmma), unless tuned on: seed
  // 000's scores (N = 384) then take two column blocks of 192 rather than 256 + 128.
  s8.b_tile.reset();
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::h100Sxm(), s8).wgmma);
  MatmulProblem scores{768, 384, 384, 64, DataType::Float8_e4m3fn};
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::h100Sxm(), scores).wgmma);
  DeviceInfo on = DeviceInfo::h100Sxm();
  on.tuning = HeuristicTuning::parse("matmul_wgmma=1");
  EXPECT_EQ(matmulHeuristics(on, scores).blockCols(), 192);
  // 16-bit operands with a quarter of the SMs given a block: the weight-only int8 linear at M = 64 (43
  // blocks of 128 x 256) takes wgmma; 1024^2 bf16 (32 blocks) does not.
  MatmulProblem linear64{1, 64, 11008, 4096, DataType::BFloat16};
  linear64.a_tile = kernel::TileOrder::KMajor;
  EXPECT_TRUE(matmulHeuristics(DeviceInfo::h100Sxm(), linear64).wgmma);
  MatmulProblem small{1, 1024, 1024, 1024, DataType::BFloat16};
  small.a_tile = small.b_tile = kernel::TileOrder::KMajor;
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::h100Sxm(), small).wgmma);
  scores.operand = DataType::Float8_e4m3fnuz;
  EXPECT_NE(wgmmaUnavailable(DeviceInfo::h100Sxm(), scores).find("not Float8_e4m3fnuz"), std::string::npos)
      << wgmmaUnavailable(DeviceInfo::h100Sxm(), scores);
}

TEST(MatmulHeuristics, PersistentWarpSpecializedGridIsOneBlockPerSm) {
  MatmulProblem problem{1, 4096, 4096, 4096, DataType::BFloat16};
  problem.a_tile = kernel::TileOrder::KMajor;
  problem.b_tile = kernel::TileOrder::KMajor;
  problem.tma_maps = true;
  DeviceInfo device = DeviceInfo::h100Sxm();
  device.tuning = HeuristicTuning::parse("matmul_warp_specialized=1, matmul_persistent=1");
  const MatmulParams p = matmulHeuristics(device, problem);
  ASSERT_TRUE(p.warp_specialized);
  EXPECT_TRUE(p.persistent);
  // 32 x 16 tiles of 128 x 256 walked by 132 blocks, in raster groups of 8 block rows as before.
  EXPECT_EQ(p.blocks_m * p.blocks_n, 512);
  EXPECT_EQ(p.grid, 132);
  EXPECT_EQ(p.raster_group, 8);
  EXPECT_NE(p.toString().find("persistent: 132 blocks walking the output tiles"), std::string::npos) << p.toString();
  // Fewer tiles than SMs: a block per tile.
  MatmulProblem small{1, 1024, 2048, 4096, DataType::BFloat16};
  small.a_tile = small.b_tile = kernel::TileOrder::KMajor;
  small.tma_maps = true;
  const MatmulParams few = matmulHeuristics(device, small);
  EXPECT_TRUE(few.persistent);
  EXPECT_EQ(few.grid, 64);
  // A batch counts its tiles too.
  MatmulProblem batched = small;
  batched.batch = 3;
  EXPECT_EQ(matmulHeuristics(device, batched).grid, 132);
  // A K of one slice: three stages a block per tile (a slice in flight, one computed and one arriving),
  // four walking tiles (the next tile's slices fill the stages).
  MatmulProblem short_k = problem;
  short_k.k = 64;
  DeviceInfo per_tile = DeviceInfo::h100Sxm();
  per_tile.tuning = HeuristicTuning::parse("matmul_warp_specialized=1");
  EXPECT_EQ(matmulHeuristics(per_tile, short_k).stages, 3);
  EXPECT_EQ(matmulHeuristics(device, short_k).stages, 4);
  // Fewer blocks where tuned so.
  device.tuning = HeuristicTuning::parse("matmul_warp_specialized=1, matmul_persistent=1, matmul_persistent_blocks=100");
  EXPECT_EQ(matmulHeuristics(device, problem).grid, 100);
  // Only warp-specialized, and only where tuned on.
  device.tuning = HeuristicTuning::parse("matmul_persistent=1");
  EXPECT_FALSE(matmulHeuristics(device, problem).persistent);
  EXPECT_EQ(matmulHeuristics(device, problem).grid, 512);
  device.tuning = HeuristicTuning::parse("matmul_warp_specialized=1");
  EXPECT_FALSE(matmulHeuristics(device, problem).persistent);
  // An empty output launches nothing.
  MatmulProblem empty = problem;
  empty.m = 0;
  device.tuning = HeuristicTuning::parse("matmul_wgmma=1, matmul_warp_specialized=1, matmul_persistent=1");
  const MatmulParams none = matmulHeuristics(device, empty);
  ASSERT_TRUE(none.warp_specialized);
  EXPECT_FALSE(none.persistent);
  EXPECT_EQ(none.grid, 0);
}

TEST(MatmulHeuristics, WgmmaSlicesComeByTmaWhereBothOperandsHaveTensorMaps) {
  MatmulProblem problem{1, 4096, 4096, 4096, DataType::BFloat16};
  problem.a_tile = kernel::TileOrder::KMajor;
  problem.b_tile = kernel::TileOrder::MnMajor;
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::h100Sxm(), problem).tma);  // no tensor maps (an expanded batch, say)
  problem.tma_maps = true;
  const MatmulParams tma = matmulHeuristics(DeviceInfo::h100Sxm(), problem);
  EXPECT_TRUE(tma.wgmma);
  EXPECT_TRUE(tma.tma);
  EXPECT_EQ(tma.stages, 4);  // four 48 KiB stages and their mbarriers fit in 227 KiB
  EXPECT_NE(tma.toString().find("4-stage TMA pipeline"), std::string::npos) << tma.toString();
  EXPECT_FALSE(tma.warp_specialized);  // until measured on a GPU
  EXPECT_EQ(tma.threads(), 256);
  DeviceInfo specialized = DeviceInfo::h100Sxm();
  specialized.tuning = HeuristicTuning::parse("matmul_warp_specialized=1");
  const MatmulParams ws = matmulHeuristics(specialized, problem);
  EXPECT_TRUE(ws.tma && ws.warp_specialized);
  EXPECT_EQ(ws.threads(), 384);  // two compute warpgroups and the producer's
  EXPECT_NE(ws.toString().find("4-stage warp-specialized TMA pipeline"), std::string::npos) << ws.toString();
  // Launched with 168 registers a thread (65536 / 384, a multiple of 8), the producer keeps 40 and the
  // compute warpgroups take what it gives back: (65536 - 40 x 128) / 256 = 236, 232 in multiples of 8.
  EXPECT_EQ(ws.producer_registers, 40);
  EXPECT_EQ(ws.consumer_registers, 232);
  EXPECT_NE(ws.toString().find("2 warpgroups of 232 registers per thread and a producer warpgroup of 40"),
            std::string::npos)
      << ws.toString();
  // Four compute warpgroups (256-row tiles): 96 a thread at launch, 112 after.
  DeviceInfo four = specialized;
  four.tuning = HeuristicTuning::parse("matmul_warp_specialized=1, matmul_block_m=256, matmul_block_n=64");
  const MatmulParams wide = matmulHeuristics(four, problem);
  ASSERT_TRUE(wide.warp_specialized);
  ASSERT_EQ(wide.threads(), 640);
  EXPECT_EQ(wide.producer_registers, 40);
  EXPECT_EQ(wide.consumer_registers, 112);
  // Tuned off: cp.async.
  DeviceInfo off = DeviceInfo::h100Sxm();
  off.tuning = HeuristicTuning::parse("matmul_tma=0");
  const MatmulParams copies = matmulHeuristics(off, problem);
  EXPECT_TRUE(copies.wgmma);
  EXPECT_FALSE(copies.tma);
  specialized.tuning = HeuristicTuning::parse("matmul_tma=0, matmul_warp_specialized=1");  // needs TMA
  EXPECT_FALSE(matmulHeuristics(specialized, problem).warp_specialized);
  EXPECT_NE(copies.toString().find("4-stage cp.async pipeline"), std::string::npos) << copies.toString();
  // An operand computed in registers (a dequantize) is stored by the threads: no TMA for either.
  MatmulProblem registers = problem;
  registers.b_tile.reset();
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::h100Sxm(), registers).tma);
  // Without wgmma (an A100, or tuned off) there is no TMA.
  EXPECT_FALSE(matmulHeuristics(DeviceInfo::a100(), problem).tma);
  DeviceInfo no_wgmma = DeviceInfo::h100Sxm();
  no_wgmma.tuning = HeuristicTuning::parse("matmul_wgmma=0, matmul_tma=1");
  EXPECT_FALSE(matmulHeuristics(no_wgmma, problem).tma);
  // Stages that would leave no room for their mbarriers are one fewer: 128 x 256 tiles of 64-element bf16
  // slices are 48 KiB a stage.
  DeviceInfo tight = DeviceInfo::h100Sxm();
  tight.smem_per_block_optin = 4 * 48 * 1024;
  EXPECT_EQ(matmulHeuristics(tight, problem).stages, 3);
  // 8-bit operands take TMA too (k-major, 128-element slices).
  MatmulProblem s8{1, 4096, 4096, 4096, DataType::Int8};
  s8.a_tile = s8.b_tile = kernel::TileOrder::KMajor;
  s8.tma_maps = true;
  const MatmulParams int8 = matmulHeuristics(DeviceInfo::h100Sxm(), s8);
  EXPECT_TRUE(int8.wgmma && int8.tma);
  EXPECT_EQ(int8.block_k, 128);
}

}  // namespace
}  // namespace braze
