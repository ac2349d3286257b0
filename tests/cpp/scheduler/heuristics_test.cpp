// The heuristics as pure functions of a described device and a problem summary: no GPU, no fusion.
#include "support/error.h"
#include "scheduler/pointwise/heuristics.h"
#include "scheduler/reduction/heuristics.h"
#include "scheduler/value_builder.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace braze {
namespace {

TEST(Heuristics, VectorizeIsLimitedByEveryTensorTheWidestDtypeAndTheExtent) {
  EXPECT_EQ(kernelVectorize({.widest_dtype_bytes = 2, .inner_extent = 1600, .tensor_factors = {8, 8, 8}}), 8);
  EXPECT_EQ(kernelVectorize({.widest_dtype_bytes = 4, .inner_extent = 1600, .tensor_factors = {8, 8}}), 4);
  EXPECT_EQ(kernelVectorize({.widest_dtype_bytes = 2, .inner_extent = 1600, .tensor_factors = {8, 2}}), 2);
  EXPECT_EQ(kernelVectorize({.widest_dtype_bytes = 2, .inner_extent = 37, .tensor_factors = {8}}), 1);
  EXPECT_EQ(kernelVectorize({.widest_dtype_bytes = 2, .inner_extent = 12, .tensor_factors = {8}}), 4);
}

TEST(Heuristics, PointwiseUnrollsOnlyWhenTheGpuIsFullSeveralTimesOver) {
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  const PointwiseParams small = pointwiseHeuristics(h100, {.sizes = {7}, .total_elements = 7, .max_vectorize = 1});
  EXPECT_EQ(small.block, 32);
  EXPECT_EQ(small.unroll, 1);
  EXPECT_EQ(small.grid, 1);
  const int64_t big_n = int64_t{1} << 28;
  const PointwiseParams big = pointwiseHeuristics(h100, {.sizes = {big_n}, .total_elements = big_n, .max_vectorize = 8});
  EXPECT_EQ(big.vectorize, 8);
  EXPECT_GT(big.unroll, 1);
  EXPECT_EQ(big.grid * big.block * big.unroll * big.vectorize, big_n);
}

TEST(Heuristics, JoinedPointwisePartsKeepTheirVectorsInBlocksOfTheMostThreads) {
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  // A wide bf16 sum (8 lanes, unrolled), a small negation of odd width (1 lane, one warp alone) and a bias add
  // tiled in 2D alone.
  const int64_t big_n = int64_t{1} << 28;
  const PointwiseParams wide = pointwiseHeuristics(h100, {.sizes = {big_n}, .total_elements = big_n, .max_vectorize = 8});
  const PointwiseParams small = pointwiseHeuristics(h100, {.sizes = {3, 7}, .total_elements = 21, .max_vectorize = 1});
  PointwiseProblem bias_add{.sizes = {256, 1600}, .total_elements = 256 * 1600, .max_vectorize = 4};
  bias_add.input_strides = {{1600, 1}, {0, 1}};
  const PointwiseParams tiled = pointwiseHeuristics(h100, bias_add);
  ASSERT_EQ(tiled.break_point, 1);
  ASSERT_LT(small.block, wide.block);

  const PointwiseParams joined = joinPointwiseParts({small, wide, tiled});
  EXPECT_EQ(joined.vectorize, 1);
  EXPECT_EQ(joined.block, h100.tuning.block_threads);  // the most threads of any part's blocks
  ASSERT_EQ(joined.more_parts.size(), 2u);
  EXPECT_EQ(joined.more_parts[0].vectorize, 8);
  EXPECT_EQ(joined.more_parts[0].unroll, wide.unroll);
  EXPECT_EQ(joined.more_parts[0].block, joined.block);
  // A later part tiled in 2D alone walks one-dimensional chunks of its own vectors.
  EXPECT_EQ(joined.more_parts[1].break_point, 0);
  EXPECT_EQ(joined.more_parts[1].vectorize, tiled.vectorize);
  EXPECT_EQ(joined.more_parts[1].block, joined.block);
  EXPECT_NE(joined.toString().find("; then pointwise: vectorize 8"), std::string::npos) << joined.toString();

  // The first part keeps its 2D tiles; the others take as many threads.
  const PointwiseParams first_tiled = joinPointwiseParts({tiled, small});
  EXPECT_EQ(first_tiled.break_point, 1);
  EXPECT_EQ(first_tiled.more_parts.at(0).block, tiled.threads_x * tiled.threads_y);
  EXPECT_EQ(joinPointwiseParts({wide}).more_parts.size(), 0u);

  // Beside a transpose's 256-thread blocks: every part one-dimensional, its vectors kept.
  const PointwiseParams beside = inBlocksOf(joinPointwiseParts({tiled, small}), 256);
  EXPECT_EQ(beside.break_point, 0);
  EXPECT_EQ(beside.vectorize, tiled.vectorize);
  EXPECT_EQ(beside.block, 256);
  EXPECT_EQ(beside.more_parts.at(0).block, 256);
  EXPECT_EQ(beside.more_parts.at(0).vectorize, 1);
}

ReductionProblem layerNormRows(int64_t rows, int64_t hidden, int64_t vectorize) {
  return {.rows = rows, .row_length = hidden, .inner = true, .wants_persistent = true, .max_vectorize = vectorize,
          .cached_tensors = 1, .widest_dtype_bytes = 2};
}

TEST(Heuristics, ABf16VocabularyRowFitsSharedMemoryAsStoredButNotAsFloats) {
  // Cross entropy over GPT-2's 50304 logits a row: 1024 threads x 7 chunks x 8 values. As bf16 (2 bytes a
  // value, keptValueBytes) the row is 112 KiB and stays; as floats it is 224 KiB and is read again.
  ReductionProblem row = layerNormRows(8192, 50304, 8);
  row.cached_value_bytes = scheduler::keptValueBytes(DataType::BFloat16);
  const ReductionParams bf16 = reductionHeuristics(DeviceInfo::h100Sxm(), row);
  EXPECT_TRUE(bf16.persistent && bf16.shared_cache) << bf16.toString();
  EXPECT_NE(bf16.why.find("112 KiB"), std::string::npos) << bf16.why;
  row.cached_value_bytes = scheduler::keptValueBytes(DataType::Float);
  const ReductionParams f32 = reductionHeuristics(DeviceInfo::h100Sxm(), row);
  EXPECT_FALSE(f32.persistent) << f32.toString();
  EXPECT_EQ(scheduler::keptValueBytes(DataType::Half), 2);
  EXPECT_EQ(scheduler::keptValueBytes(DataType::Double), 8);
  EXPECT_EQ(scheduler::keptValueBytes(DataType::Int32), 8);  // integers are kept in their compute type
}

TEST(Heuristics, TotalsOverTheRowsTakeAsManyBlocksAsTheSmsHoldEachWalkingRowGroups) {
  // A router's z-loss over a million tokens of 64 experts: without totals a block per row group; with them
  // as many blocks as run at once (the last block reads a partial per block), each walking the same number
  // of row groups but the last, and every row group walked.
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  ReductionProblem router = layerNormRows(int64_t{1} << 20, 64, 8);
  const ReductionParams rows = reductionHeuristics(h100, router);
  const int64_t groups = ceilDiv(router.rows, rows.threads_y);
  EXPECT_EQ(rows.grid, groups);
  router.row_totals = 1;
  const ReductionParams totals = reductionHeuristics(h100, router);
  EXPECT_EQ(totals.threads_x, rows.threads_x);
  EXPECT_EQ(totals.threads_y, rows.threads_y);
  // At most the blocks the threads allow per SM, and fewer where the kept row's registers (32 values and
  // the kernel's own 32: 64 a thread, 8 blocks of 128) allow fewer; a block per SM at least.
  const int64_t by_threads = h100.max_threads_per_sm / (totals.threads_x * totals.threads_y);
  const int64_t by_registers = h100.regs_per_sm / (totals.threads_x * totals.threads_y * 64);
  EXPECT_LE(totals.grid, std::min(by_threads, by_registers) * h100.sm_count) << totals.toString();
  EXPECT_GT(totals.grid, (std::min(by_threads, by_registers) - 1) * h100.sm_count) << totals.toString();
  const int64_t per_block = ceilDiv(groups, totals.grid);
  EXPECT_GE(totals.grid * per_block, groups);
  EXPECT_LT((totals.grid - 1) * per_block, groups);
  EXPECT_NE(totals.toString().find("then 1 total over the rows"), std::string::npos) << totals.toString();
  // Few rows: a block per row group still.
  router.rows = 300;
  EXPECT_EQ(reductionHeuristics(h100, router).grid, ceilDiv(300, reductionHeuristics(h100, router).threads_y));
  // A row kept in shared memory (GPT-2's vocabulary): the blocks its shared memory lets run at once.
  ReductionProblem logits = layerNormRows(65536, 50304, 8);
  logits.cached_value_bytes = 2;
  logits.row_totals = 2;
  const ReductionParams ce = reductionHeuristics(h100, logits);
  ASSERT_TRUE(ce.shared_cache) << ce.toString();
  EXPECT_EQ(ce.grid, h100.sm_count * (h100.smem_per_sm / (112 * 1024 + 1024)));
}

TEST(Heuristics, LayerNormRowsStayInRegistersWithinTheRegisterFile) {
  const ReductionParams p = reductionHeuristics(DeviceInfo::h100Sxm(), layerNormRows(2048, 1600, 8));
  EXPECT_TRUE(p.persistent);
  EXPECT_FALSE(p.shared_cache);
  EXPECT_EQ(p.vectorize, 8);
  EXPECT_EQ(p.threads_x * p.chunks * p.vectorize >= 1600, true);
  EXPECT_EQ(p.splits, 1);
}

TEST(Heuristics, AThousandThreadBlockKeepsFewerValuesPerThreadThanASmallBlock) {
  // 1024 threads share 64K registers: 64 each, so 40 values per thread must leave registers.
  const ReductionParams p = reductionHeuristics(DeviceInfo::h100Sxm(), layerNormRows(4, 40960, 8));
  EXPECT_EQ(p.threads_x, 1024);
  EXPECT_EQ(p.chunks, 5);
  EXPECT_TRUE(p.persistent);
  EXPECT_TRUE(p.shared_cache) << p.toString();
  // A row no block can keep: re-read.
  const ReductionParams huge = reductionHeuristics(DeviceInfo::h100Sxm(), layerNormRows(4, 1 << 20, 8));
  EXPECT_FALSE(huge.persistent) << huge.toString();
  EXPECT_NE(huge.why.find("re-read"), std::string::npos);
}

// Staging (persistent_staged=1): a bf16 [16384, 4096] layer_norm's x, 8 KiB per row, two stages per
// block; the grid is what 132 SMs hold at once: 16 by threads, 13 by shared memory (16 KiB and a reserve
// per block), 8 by registers counted as if the row's 32 values were still kept (64 each), so 1056
// blocks, each walking 16 rows. Nothing is staged where it is off, on an AMD GPU, before sm_80, for a
// row leaving registers or for 2-byte chunks.
TEST(Heuristics, StagedRowsFillTheSmsOnceAndWalkTheRest) {
  ReductionProblem norm = layerNormRows(16384, 4096, 8);
  norm.row_data_bytes = norm.row_data_min_bytes = 2;
  DeviceInfo h100 = DeviceInfo::h100Sxm();
  const ReductionParams kept = reductionHeuristics(h100, norm);
  EXPECT_FALSE(kept.staged);
  EXPECT_EQ(kept.grid, 16384);
  h100.tuning.persistent_staged = 1;
  const ReductionParams staged = reductionHeuristics(h100, norm);
  ASSERT_TRUE(staged.staged && staged.persistent && !staged.shared_cache) << staged.toString();
  EXPECT_EQ(staged.threads_x * staged.threads_y, 128);
  EXPECT_EQ(staged.stage_bytes, 8192);
  EXPECT_EQ(staged.grid, 1024);  // 16384 rows over at most 8 x 132 blocks: 16 each
  EXPECT_NE(staged.toString().find("staged in shared memory"), std::string::npos);
  // Another row count: the same kernel (the text heads its source), another grid.
  norm.rows = 100;
  const ReductionParams few = reductionHeuristics(h100, norm);
  EXPECT_EQ(few.toString(), staged.toString());
  EXPECT_EQ(few.grid, 100);
  norm.rows = 16384;

  DeviceInfo mi300x = DeviceInfo::mi300x();
  mi300x.tuning.persistent_staged = 1;
  EXPECT_FALSE(reductionHeuristics(mi300x, norm).staged);
  DeviceInfo v100 = h100;
  v100.major = 7;
  EXPECT_FALSE(reductionHeuristics(v100, norm).staged);
  DeviceInfo a100 = DeviceInfo::a100();
  a100.tuning.persistent_staged = 1;
  EXPECT_TRUE(reductionHeuristics(a100, norm).staged);
  ReductionProblem odd = layerNormRows(16384, 4095, 1);  // vectors of one bf16: 2-byte copies
  odd.row_data_bytes = odd.row_data_min_bytes = 2;
  EXPECT_FALSE(reductionHeuristics(h100, odd).staged);
  // bf16 beside a float input: 8 x (2 + 4) bytes per chunk, two stages of 24 KiB; 4 blocks per SM by
  // shared memory (5 by registers: 64 values and 32 more each).
  ReductionProblem mixed = norm;
  mixed.cached_tensors = 2;
  mixed.row_data_bytes = 6;
  const ReductionParams both = reductionHeuristics(h100, mixed);
  EXPECT_TRUE(both.staged) << both.toString();
  EXPECT_EQ(both.stage_bytes, 4096 * 6);
  EXPECT_EQ(both.grid, ceilDiv(int64_t{16384}, ceilDiv(int64_t{16384}, int64_t{228 * 1024 / (2 * 4096 * 6 + 1024)} * 132)));
  // A row too long for registers stays in the shared-memory cache, unstaged.
  ReductionProblem long_row = layerNormRows(64, 40960, 8);
  long_row.row_data_bytes = long_row.row_data_min_bytes = 2;
  const ReductionParams shared = reductionHeuristics(h100, long_row);
  EXPECT_TRUE(shared.shared_cache && !shared.staged) << shared.toString();
  // No row data to stage (a problem that names none).
  EXPECT_FALSE(reductionHeuristics(h100, layerNormRows(16384, 4096, 8)).staged);
}

TEST(Heuristics, FewLongRowsAreSplitUntilTheGpuIsFull) {
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  ReductionProblem sum{.rows = 4, .row_length = 1 << 22, .inner = true, .max_vectorize = 4, .splittable = true};
  const ReductionParams p = reductionHeuristics(h100, sum);
  EXPECT_GT(p.splits, 1);
  EXPECT_GE(p.grid * p.splits, h100.sm_count);
  EXPECT_LE(p.grid * p.splits, 4 * h100.sm_count);
  EXPECT_GE(p.splits * p.split_length, sum.row_length);
  EXPECT_EQ(p.split_length % (p.threads_x * p.vectorize), 0);
  // Many rows fill the GPU by themselves; a statistic (not splittable) never splits.
  sum.rows = 16384;
  EXPECT_EQ(reductionHeuristics(h100, sum).splits, 1);
  sum.rows = 4;
  sum.splittable = false;
  EXPECT_EQ(reductionHeuristics(h100, sum).splits, 1);
  // A short row is not worth splitting.
  const ReductionProblem short_rows{.rows = 4, .row_length = 512, .inner = true, .max_vectorize = 4, .splittable = true};
  EXPECT_EQ(reductionHeuristics(h100, short_rows).splits, 1);
}

TEST(Heuristics, OuterReductionsVectorizeTheKeptDimAndSplitLongColumns) {
  const DeviceInfo a100 = DeviceInfo::a100();
  const ReductionProblem column_sum{
      .rows = 4096, .row_length = 16384, .inner = false, .max_vectorize = 4, .splittable = true};
  const ReductionParams p = reductionHeuristics(a100, column_sum);
  EXPECT_FALSE(p.inner);
  EXPECT_EQ(p.vectorize, 4);
  EXPECT_EQ(p.threads_x, 32);
  EXPECT_EQ(p.grid, 4096 / (32 * 4));
  EXPECT_GT(p.splits, 1) << p.toString();
  EXPECT_GE(p.grid * p.splits, a100.sm_count);
  EXPECT_NE(p.toString().find("split over"), std::string::npos);
  // A bias grad over a few thousand rows (GELU backward's, 3072 wide in bf16): 12 column blocks alone
  // would leave most SMs idle, so the rows are split until two waves fill an H100, each thread in y
  // still walking several rows per split.
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  const ReductionProblem bias_grad{
      .rows = 3072, .row_length = 2048, .inner = false, .max_vectorize = 8, .splittable = true};
  const ReductionParams bias = reductionHeuristics(h100, bias_grad);
  EXPECT_EQ(bias.grid, 3072 / (32 * 8));
  EXPECT_GE(bias.grid * bias.splits, 2 * h100.sm_count) << bias.toString();
  EXPECT_GE(bias.split_length, 8 * bias.threads_y) << bias.toString();
  EXPECT_GE(bias.splits * bias.split_length, bias_grad.row_length);
  // An MI300X's wavefront spans 64 kept vectors.
  const ReductionParams amd = reductionHeuristics(DeviceInfo::mi300x(), column_sum);
  EXPECT_EQ(amd.threads_x, 64);
  EXPECT_EQ(amd.grid, 4096 / (64 * 4));
}

TEST(Heuristics, OuterReductionsSideBySideShareOneBlockAndOneSplitOfTheRows) {
  // A GELU backward's bias grad (3072 wide) and the next linear's (768 wide, in f32: vectors of 4) over
  // the same 2048 rows, with a narrow third: the widest part's block for all, each part its own blocks,
  // and the rows split for the blocks of all parts together.
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  const ReductionProblem gelu{.rows = 3072, .row_length = 2048, .inner = false, .max_vectorize = 8, .splittable = true};
  const ReductionProblem next{.rows = 768, .row_length = 2048, .inner = false, .max_vectorize = 4, .splittable = true};
  const ReductionProblem narrow{.rows = 5, .row_length = 2048, .inner = false, .max_vectorize = 1, .splittable = true};
  const ReductionParams p = outerReductionParts(h100, {narrow, gelu, next});
  EXPECT_EQ(p.threads_x, 32) << p.toString();  // gelu's 384 vectors, not narrow's 5
  EXPECT_EQ(p.vectorize, 1);
  EXPECT_EQ(p.grid, 1);
  ASSERT_EQ(p.more_parts.size(), 2u);
  EXPECT_EQ(p.more_parts[0].vectorize, 8);
  EXPECT_EQ(p.more_parts[0].grid, 3072 / (32 * 8));
  EXPECT_EQ(p.more_parts[1].vectorize, 4);
  EXPECT_EQ(p.more_parts[1].grid, 768 / (32 * 4));
  const int64_t blocks = 1 + 12 + 6;
  EXPECT_GE(blocks * p.splits, 2 * h100.sm_count) << p.toString();
  EXPECT_GE(p.split_length, 8 * p.threads_y) << p.toString();
  EXPECT_GE(p.splits * p.split_length, gelu.row_length);
  EXPECT_NE(p.toString().find("2 more over the same rows (vectorize 8, 4)"), std::string::npos) << p.toString();
  // One part that may not be split (a statistic's two passes): no part is.
  ReductionProblem statistic = next;
  statistic.splittable = false;
  EXPECT_EQ(outerReductionParts(h100, {gelu, statistic}).splits, 1);
}

TEST(Heuristics, OuterReductionsOverRowsOfTheirOwnSplitByTheLongestPart) {
  // A ViT's class-token bias grad (2 rows) first, its tokens' bias grad (16384 rows of 768) beside it: the
  // block's threads in y and the split count are the long part's; each part's split length is its rows over
  // that count, so the short part's last splits are empty.
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  const ReductionProblem cls{.rows = 768, .row_length = 2, .inner = false, .max_vectorize = 8, .splittable = true};
  const ReductionProblem tokens{.rows = 768, .row_length = 16384, .inner = false, .max_vectorize = 8, .splittable = true};
  const ReductionParams p = outerReductionParts(h100, {cls, tokens});
  const ReductionParams alone = reductionHeuristics(h100, tokens);
  EXPECT_EQ(p.threads_y, alone.threads_y) << p.toString();
  EXPECT_GT(p.threads_y, 2) << p.toString();
  ASSERT_GT(p.splits, 2) << p.toString();
  EXPECT_EQ(p.split_length, 1) << p.toString();  // the first part's: 2 rows over more splits than that
  EXPECT_EQ(partSplitLength(tokens, p.splits), (16384 + p.splits - 1) / p.splits);
  EXPECT_GE(partSplitLength(tokens, p.splits), 8 * p.threads_y);
  EXPECT_EQ(partSplitLength(tokens, 1), 0);
  EXPECT_NE(p.toString().find("1 more over rows of their own (vectorize 8)"), std::string::npos) << p.toString();
}

}  // namespace
}  // namespace braze

namespace braze {
namespace {

TEST(Heuristics, PointwiseTilesIn2DWhenAnInputIsBroadcastAlongTheLeadingDims) {
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  PointwiseProblem bias_add{.sizes = {16, 128, 1600}, .total_elements = 16 * 128 * 1600, .max_vectorize = 8};
  bias_add.input_strides = {{204800, 1600, 1}, {0, 0, 1}};
  const PointwiseParams p = pointwiseHeuristics(h100, bias_add);
  EXPECT_EQ(p.break_point, 2);
  EXPECT_EQ(p.outer, 16 * 128);
  EXPECT_EQ(p.inner, 1600);
  EXPECT_EQ(p.threads_x, 128);
  EXPECT_GE(p.grid * p.threads_x * p.vectorize, 1600);
  EXPECT_GE(p.grid_y * p.threads_y * p.unroll, 16 * 128);
  EXPECT_LE(p.grid_y, 65535);
  // No broadcast: 1D.
  bias_add.input_strides = {{204800, 1600, 1}, {204800, 1600, 1}};
  EXPECT_EQ(pointwiseHeuristics(h100, bias_add).break_point, 0);
  // Very many rows: rows per thread grow until grid y fits.
  PointwiseProblem tall{.sizes = {1 << 26, 4}, .total_elements = int64_t{1} << 28, .max_vectorize = 4};
  tall.input_strides = {{4, 1}, {0, 1}};
  const PointwiseParams t = pointwiseHeuristics(h100, tall);
  EXPECT_EQ(t.break_point, 1);
  EXPECT_LE(t.grid_y, 65535);
  EXPECT_GE(t.grid_y * t.threads_y * t.unroll, int64_t{1} << 26);
  // Past the cap the rows per thread are a power of two: 600k and 700k rows of 4096 share a kernel.
  auto rowsPerThread = [&](int64_t rows) {
    PointwiseProblem p{.sizes = {rows, 4096}, .total_elements = rows * 4096, .max_vectorize = 8};
    p.input_strides = {{4096, 1}, {0, 1}};
    return pointwiseHeuristics(h100, p).unroll;
  };
  EXPECT_EQ(rowsPerThread(600000), rowsPerThread(700000));
  EXPECT_EQ(rowsPerThread(600000) & (rowsPerThread(600000) - 1), 0);
}

// The tuning a DeviceInfo carries steers the choices it names, and only those: what compare.py --sweep
// varies on a GPU.
TEST(Heuristics, TuningStepsTheChoicesItNames) {
  DeviceInfo tuned = DeviceInfo::h100Sxm();
  const ReductionProblem norm = layerNormRows(16384, 4096, 8);
  const ReductionParams base = reductionHeuristics(tuned, norm);
  EXPECT_EQ(base.chunks, 4);
  EXPECT_EQ(base.threads_x * base.threads_y, 128);

  tuned.tuning.max_chunks_per_thread = 2;
  const ReductionParams two = reductionHeuristics(tuned, norm);
  EXPECT_EQ(two.chunks, 2);
  EXPECT_EQ(two.threads_x, 2 * base.threads_x);
  EXPECT_TRUE(two.persistent);

  tuned.tuning = HeuristicTuning::parse("block_threads=512, max_chunks_per_thread=8");
  const ReductionParams wide = reductionHeuristics(tuned, norm);
  EXPECT_EQ(wide.chunks, 8);
  EXPECT_EQ(wide.threads_x * wide.threads_y, 512);

  // 32 values per thread no longer fit: the row is spread over twice the threads (16 values each)...
  tuned.tuning = HeuristicTuning::parse("persistent_values=16");
  const ReductionParams spread = reductionHeuristics(tuned, norm);
  EXPECT_EQ(spread.threads_x, 2 * base.threads_x);
  EXPECT_TRUE(spread.persistent && !spread.shared_cache) << spread.why;
  // ... until one chunk per thread still does not fit (8 values of each of two kept tensors): then
  // shared memory.
  tuned.tuning = HeuristicTuning::parse("persistent_values=8");
  ReductionProblem two_tensors = norm;
  two_tensors.cached_tensors = 2;
  const ReductionParams shared = reductionHeuristics(tuned, two_tensors);
  EXPECT_EQ(shared.chunks, 1);
  EXPECT_TRUE(shared.persistent && shared.shared_cache) << shared.why;

  const int64_t n = int64_t{1} << 28;
  const PointwiseProblem big{.sizes = {n}, .total_elements = n, .max_vectorize = 8};
  EXPECT_EQ(pointwiseHeuristics(DeviceInfo::h100Sxm(), big).unroll, 4);
  tuned.tuning = HeuristicTuning::parse("max_unroll=1,block_threads=256");
  const PointwiseParams flat = pointwiseHeuristics(tuned, big);
  EXPECT_EQ(flat.unroll, 1);
  EXPECT_EQ(flat.block, 256);
  EXPECT_EQ(flat.grid * flat.block * flat.vectorize, n);

  // 2D tiles: rows per thread grow (up to 8) while the GPU stays full; the tuning caps them.
  PointwiseProblem bias{.sizes = {1 << 15, 4096}, .total_elements = int64_t{1} << 27, .max_vectorize = 8};
  bias.input_strides = {{4096, 1}, {0, 1}};
  EXPECT_EQ(pointwiseHeuristics(DeviceInfo::h100Sxm(), bias).unroll, 8);
  tuned.tuning = HeuristicTuning::parse("max_rows_per_thread=1");
  EXPECT_EQ(pointwiseHeuristics(tuned, bias).unroll, 1);

  // Outer reductions may take twice the tuned block, but never more threads than a block can have.
  tuned.tuning = HeuristicTuning::parse("block_threads=1024");
  const ReductionParams columns = reductionHeuristics(
      tuned, {.rows = 4096, .row_length = 8192, .inner = false, .max_vectorize = 4, .widest_dtype_bytes = 4});
  EXPECT_LE(columns.threads_x * columns.threads_y, 1024);
}

TEST(Heuristics, TuningTextIsCheckedAndPrintsWhatDiffersFromTheDefaults) {
  EXPECT_EQ(HeuristicTuning().toString(), "defaults");
  const HeuristicTuning t = HeuristicTuning::parse(" max_unroll = 2 ,block_threads=256,");
  EXPECT_EQ(t.toString(), "block_threads=256, max_unroll=2");
  EXPECT_EQ(HeuristicTuning::parse("max_chunks_per_thread=3", t).toString(),
            "block_threads=256, max_chunks_per_thread=3, max_unroll=2");
  DeviceInfo tuned;
  tuned.tuning = t;
  EXPECT_NE(tuned.toString().find("tuning: block_threads=256"), std::string::npos);
  EXPECT_EQ(DeviceInfo::h100Sxm().toString().find("tuning"), std::string::npos);
  for (const char* bad : {"block_threads=100", "block_threads=2048", "max_unroll=0", "max_chunks_per_thread=x",
                          "max_rows_per_thread", "unroll=2"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(HeuristicTuning::parse(bad), Error);
  }
}

}  // namespace
}  // namespace braze
