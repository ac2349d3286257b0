// The scan heuristics as a pure function of (DeviceInfo, lines, extent).
#include "scheduler/scan/heuristics.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

TEST(ScanHeuristics, OneThreadPerLineInBlocksNoWiderThanTheLinesNeed) {
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  const ScanParams many = scanHeuristics(h100, {.lines = 4096, .extent = 4096});
  EXPECT_EQ(many.block, h100.tuning.block_threads);
  EXPECT_EQ(many.grid * many.block, 4096);
  const ScanParams few = scanHeuristics(h100, {.lines = 7, .extent = 100000});
  EXPECT_EQ(few.block, h100.warp_size);  // a warp at least
  EXPECT_EQ(few.grid, 1);
  const ScanParams none = scanHeuristics(DeviceInfo::a100(), {.lines = 0, .extent = 0});
  EXPECT_EQ(none.grid, 1);
  const ScanParams odd = scanHeuristics(DeviceInfo::a100(), {.lines = 129, .extent = 3});
  EXPECT_EQ(odd.grid, 2);
}

// topk and argsort: a block sort where a line keeps a block busy and fits shared memory, else a walk.
TEST(ScanHeuristics, LongSortLinesAreBlockSortsShortOnesLineWalks) {
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  // Top 50 of a 50257-token vocabulary, one line (sampling at decode): the line split into parts of
  // one pass each, 2048 slots (twice the kept elements, two per thread of a 1024-thread block), on
  // blocks of their own, then a merge of the parts' best 50.
  const ScanParams vocab = scanHeuristics(h100, {.lines = 1, .extent = 50257, .keep = 50, .key_bytes = 4});
  EXPECT_EQ(vocab.sort_slots, 2048);
  EXPECT_EQ(vocab.sort_passes, 1);
  EXPECT_EQ(vocab.block, 1024);
  EXPECT_EQ(vocab.sort_parts, 25);  // 25 x 2048 >= 50257
  EXPECT_EQ(vocab.grid, 25);
  EXPECT_EQ(vocab.merge_slots, 2048);  // 25 x 50 candidates in one pass
  EXPECT_EQ(vocab.merge_passes, 1);
  EXPECT_EQ(vocab.merge_grid, 1);
  // 64 lines of a 128256-token vocabulary: parts on every SM, and a merge of 63 x 50 candidates in two
  // passes of 2048.
  const ScanParams batch = scanHeuristics(h100, {.lines = 64, .extent = 128256, .keep = 50, .key_bytes = 4});
  EXPECT_EQ(batch.sort_parts, 63);
  EXPECT_EQ(batch.grid % h100.sm_count, 0);
  EXPECT_EQ(batch.merge_slots, 2048);
  EXPECT_EQ(batch.merge_passes, 2);
  EXPECT_EQ(batch.merge_grid, 64);
  // A topk too wide to split (k near half the line): one block per line, in passes.
  const ScanParams wide = scanHeuristics(h100, {.lines = 3, .extent = 3001, .keep = 700, .key_bytes = 4});
  EXPECT_EQ(wide.sort_slots, 2048);
  EXPECT_EQ(wide.sort_parts, 1);
  EXPECT_EQ(wide.sort_passes, 2);
  // MoE routing: the top 2 of 8 experts for each of 16384 tokens stays one thread per line.
  const ScanParams moe = scanHeuristics(h100, {.lines = 16384, .extent = 8, .keep = 2, .key_bytes = 4});
  EXPECT_EQ(moe.sort_slots, 0);
  EXPECT_EQ(moe.grid * moe.block, 16384);
  // argsort of 4096 lines of 1024: the whole line in one pass, a block per line at a time.
  const ScanParams rows = scanHeuristics(h100, {.lines = 4096, .extent = 1024, .keep = 1024, .key_bytes = 4});
  EXPECT_EQ(rows.sort_slots, 1024);
  EXPECT_EQ(rows.sort_passes, 1);
  EXPECT_LE(rows.grid, 4096);
  EXPECT_EQ(rows.grid % h100.sm_count, 0);
  // A line that does not fit shared memory whole cannot be argsorted by a block: it is walked. A topk
  // of it can, as long as twice k fits.
  const ScanParams huge = scanHeuristics(h100, {.lines = 2, .extent = 1 << 20, .keep = 1 << 20, .key_bytes = 4});
  EXPECT_EQ(huge.sort_slots, 0);
  const ScanParams big_k = scanHeuristics(h100, {.lines = 2, .extent = 1 << 20, .keep = 4000, .key_bytes = 4});
  EXPECT_EQ(big_k.sort_slots, 8192);
  EXPECT_LE(blockSortBytes(big_k.sort_slots, 4 + 8), h100.smem_per_block_optin);
  // An A100's smaller shared memory halves what fits of double keys.
  const ScanParams a100 = scanHeuristics(DeviceInfo::a100(), {.lines = 1, .extent = 16384, .keep = 16384, .key_bytes = 8});
  EXPECT_EQ(a100.sort_slots, 0);
  const ScanParams a100_half = scanHeuristics(DeviceInfo::a100(), {.lines = 1, .extent = 8192, .keep = 8192, .key_bytes = 8});
  EXPECT_EQ(a100_half.sort_slots, 8192);
  EXPECT_LE(blockSortBytes(8192, 8 + 8), DeviceInfo::a100().smem_per_block_optin);
  // Most of a line kept (1100 of 1300, above half its power of two): the whole line in one pass of 2048
  // slots, fewer than twice the kept ones.
  const ScanParams most = scanHeuristics(h100, {.lines = 4096, .extent = 1300, .keep = 1100, .key_bytes = 4});
  EXPECT_EQ(most.sort_slots, 2048);
  EXPECT_EQ(most.sort_passes, 1);
  // Not a sort (cumsum): always a walk.
  EXPECT_EQ(scanHeuristics(h100, {.lines = 1, .extent = 50000}).sort_slots, 0);
}

// topk of float keys: a radix select where a line is much longer than k.
TEST(ScanHeuristics, FloatKeysTakeARadixSelectWhereTheLineIsLongAgainstK) {
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  auto floats = [&](int64_t lines, int64_t extent, int64_t keep) {
    return scanHeuristics(h100, {.lines = lines, .extent = extent, .keep = keep, .key_bytes = 4, .rank_keys = true});
  };
  // 64 lines of a 128256-token vocabulary, the top 50: parts of 512 x 8 elements (32 per line, the last
  // one shorter) on blocks of their own, then a radix select of each line's 32 x 50 candidates.
  const ScanParams batch = floats(64, 128256, 50);
  EXPECT_EQ(batch.radix_per_thread, 8);
  EXPECT_EQ(batch.block, 512);
  EXPECT_EQ(batch.sort_parts, 32);
  EXPECT_EQ(batch.sort_slots, 64);  // the 50 survivors' sort
  EXPECT_GE(batch.merge_per_thread * batch.merge_block, 32 * 50);
  EXPECT_LE(batch.merge_per_thread, 8);
  EXPECT_EQ(batch.merge_grid, 64);
  EXPECT_EQ(batch.grid % h100.sm_count, 0);
  // The same lines of float64 keys keep the block sort.
  const ScanParams doubles = scanHeuristics(h100, {.lines = 64, .extent = 128256, .keep = 50, .key_bytes = 8});
  EXPECT_EQ(doubles.radix_per_thread, 0);
  EXPECT_GT(doubles.sort_slots, 0);
  // The top 8 of lines of 1024: one block per line, 8 elements a thread.
  const ScanParams rows = floats(4096, 1024, 8);
  EXPECT_EQ(rows.sort_parts, 1);
  EXPECT_GE(rows.radix_per_thread * rows.block, 1024);
  EXPECT_EQ(rows.sort_slots, 8);
  // MoE routing (2 of 8) stays one thread per line; most of a line kept stays a block sort; a merge of
  // more candidates than a block holds (128 parts x 4000) is not a radix select.
  const ScanParams moe = floats(16384, 8, 2);
  EXPECT_EQ(moe.radix_per_thread, 0);
  EXPECT_EQ(moe.sort_slots, 0);
  EXPECT_EQ(floats(4096, 1300, 1100).radix_per_thread, 0);
  const ScanParams big_k = floats(2, 1 << 20, 4000);
  EXPECT_EQ(big_k.radix_per_thread, 0);
  EXPECT_GT(big_k.sort_slots, 0);
  // Each pass takes 8 bits of the rank: the key's 32 and the position's in the item.
  EXPECT_EQ(radixPasses(128256), 7);  // 32 + 17 bits
  EXPECT_EQ(radixPasses(4096), 6);    // 32 + 12: a part of a split line
  EXPECT_EQ(radixPasses(256), 5);     // 32 + 8
  EXPECT_EQ(radixPasses(2), 5);       // 32 + 1
  EXPECT_EQ(positionBits(1), 1);
  EXPECT_EQ(positionBits(1024), 10);
  EXPECT_EQ(positionBits(1025), 11);
  EXPECT_EQ(positionBits(INT64_MAX), 63);
}

// Float keys are sorted as 64-bit ranks, 8 bytes a slot against 12 for a key and its position: an argsort
// line that does not fit an A100's shared memory as pairs fits as ranks.
TEST(ScanHeuristics, FloatKeysTakeEightBytesASlot) {
  const DeviceInfo a100 = DeviceInfo::a100();
  const ScanProblem pairs{.lines = 1, .extent = 16384, .keep = 16384, .key_bytes = 4};
  ScanProblem ranks = pairs;
  ranks.rank_keys = true;
  EXPECT_EQ(sortSlotBytes(pairs, 16384), 12);
  EXPECT_EQ(sortSlotBytes(ranks, 16384), kRankBytes);
  EXPECT_GT(blockSortBytes(16384, sortSlotBytes(pairs, 16384)), a100.smem_per_block_optin);
  EXPECT_LE(blockSortBytes(16384, sortSlotBytes(ranks, 16384)), a100.smem_per_block_optin);
  // Positions past 31 bits do not fit a rank: such items keep (key, position) slots.
  EXPECT_TRUE(rankSlots(true, int64_t{1} << 31));
  EXPECT_FALSE(rankSlots(true, (int64_t{1} << 31) + 1));
  EXPECT_FALSE(rankSlots(false, 16));
  // The top 600 of a line of 9e9 halves: parts of 2048 slots, then a merge of 2.6e9 candidates, whose
  // positions take 32 bits: pairs.
  const ScanParams long_line = scanHeuristics(DeviceInfo::h100Sxm(), {.lines = 1, .extent = 9'000'000'000, .keep = 600,
                                                                      .key_bytes = 4, .rank_keys = true});
  EXPECT_GT(long_line.sort_parts, 1);
  EXPECT_GT(long_line.sort_parts * 600, int64_t{1} << 31);
  EXPECT_EQ(scanHeuristics(a100, pairs).sort_slots, 0);
  EXPECT_EQ(scanHeuristics(a100, ranks).sort_slots, 16384);
  EXPECT_EQ(scanHeuristics(a100, ranks).radix_per_thread, 0);  // argsort: every element kept
  EXPECT_EQ(scanHeuristics(a100, ranks).block, 16384 / kRanksPerThread);
  // Rank slots take kRanksPerThread a thread (a warp at least), pairs of slots one: argsort of 4096
  // lines of 1024 on an H100.
  const ScanProblem rows{.lines = 4096, .extent = 1024, .keep = 1024, .key_bytes = 4, .rank_keys = true};
  EXPECT_EQ(scanHeuristics(DeviceInfo::h100Sxm(), rows).sort_slots, 1024);
  EXPECT_EQ(scanHeuristics(DeviceInfo::h100Sxm(), rows).block, 1024 / kRanksPerThread);
  // 26 blocks of 64 threads fit an SM's 228 KiB with the padding (1088 ranks of 8 bytes each), not 28.
  EXPECT_EQ(scanHeuristics(DeviceInfo::h100Sxm(), rows).grid, 26 * DeviceInfo::h100Sxm().sm_count);
  ScanProblem row_pairs = rows;
  row_pairs.rank_keys = false;
  EXPECT_EQ(scanHeuristics(DeviceInfo::h100Sxm(), row_pairs).block, 512);
  // Keys of 32 order bits: floats compared as float, integers of 32 bits or fewer.
  for (DataType d : {DataType::Float, DataType::Half, DataType::BFloat16, DataType::Float8_e4m3fn, DataType::Int8,
                     DataType::UInt8, DataType::Int16, DataType::Int32}) {
    EXPECT_TRUE(rankKeys(d)) << toString(d);
  }
  for (DataType d : {DataType::Double, DataType::Int64, DataType::Bool}) EXPECT_FALSE(rankKeys(d)) << toString(d);
}

// A cumsum: a block per line (its threads each a chunk) where lines are few and long, a thread per line
// where they are many or short; never for a segment that walks each line (block_scan false).
TEST(ScanHeuristics, FewLongCumsumLinesAreBlockScans) {
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  // Position ids of 4 sequences of 4096 tokens: a thread per line would walk 4096 elements alone.
  const ScanParams ids = scanHeuristics(h100, {.lines = 4, .extent = 4096, .block_scan = true});
  EXPECT_GT(ids.scan_chunk, 0);
  EXPECT_EQ(ids.grid, 4);
  EXPECT_GE(ids.block * ids.scan_chunk, 4096);
  EXPECT_LT((ids.block - 1) * ids.scan_chunk, 4096);  // no thread past the line's end but the last ones
  EXPECT_EQ(ids.block % h100.warp_size, 0);
  // Many short lines: a thread each.
  EXPECT_EQ(scanHeuristics(h100, {.lines = 1 << 20, .extent = 8, .block_scan = true}).scan_chunk, 0);
  EXPECT_EQ(scanHeuristics(h100, {.lines = 4096, .extent = 16, .block_scan = true}).scan_chunk, 0);
  // Many long lines: a block each still shortens the longest chain more than the lanes it costs.
  EXPECT_GT(scanHeuristics(h100, {.lines = 512, .extent = 4096, .block_scan = true}).scan_chunk, 0);
  // Not allowed, or nothing to scan.
  EXPECT_EQ(scanHeuristics(h100, {.lines = 4, .extent = 4096}).scan_chunk, 0);
  EXPECT_EQ(scanHeuristics(h100, {.lines = 0, .extent = 4096, .block_scan = true}).scan_chunk, 0);
  EXPECT_EQ(scanHeuristics(h100, {.lines = 4, .extent = 1, .block_scan = true}).scan_chunk, 0);
}
}  // namespace
}  // namespace braze
