// transposeHeuristics as a pure function of a described device and a problem: tile sizes follow the
// extents and the vector width, big problems on a GPU they fill get 64-point tiles, and the staged
// tiles stay within the shared-memory budget of the device.
#include "scheduler/transpose/heuristics.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

TransposeProblem oneGroup(std::vector<int64_t> sizes, int64_t a, int64_t b, std::vector<int64_t> candidates,
                          int64_t vectorize) {
  TransposeProblem p;
  p.groups.push_back({std::move(sizes), a, b, std::move(candidates)});
  p.max_vectorize = vectorize;
  return p;
}

TEST(TransposeHeuristics, SmallFloatTransposeUses32x32TilesAndPrintsThem) {
  const auto p = transposeHeuristics(DeviceInfo::h100Sxm(), oneGroup({1024, 1024}, 0, 1, {4}, 4));
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].tile_a, 32);
  EXPECT_EQ(p.groups[0].tile_b, 32);
  EXPECT_EQ(p.groups[0].staged, 1);
  EXPECT_EQ(p.grid, 32 * 32);
  EXPECT_EQ(p.shared_bytes, 32 * 32 * 4);
  // The grid is not in it: the summary heads the kernel's source, which launches of other grids share.
  EXPECT_EQ(p.toString(), "transpose: tile 32x32, dims (a=0, b=1), 1 staged input; vectorize 4, block 256, shared 4096 B");
}

TEST(TransposeHeuristics, SixteenByteVectorsWidenTheTileAlongB) {
  // bf16 by 8: 8 threads of 16 bytes make a 128-byte row of the output.
  const auto p = transposeHeuristics(DeviceInfo::h100Sxm(), oneGroup({8, 512, 512}, 1, 2, {4}, 8));
  EXPECT_EQ(p.vectorize, 8);
  EXPECT_EQ(p.groups[0].tile_b, 64);
  EXPECT_EQ(p.groups[0].tile_a, 32);
}

TEST(TransposeHeuristics, SmallExtentsShrinkTheTile) {
  const auto p = transposeHeuristics(DeviceInfo::h100Sxm(), oneGroup({5, 7}, 0, 1, {4}, 1));
  EXPECT_EQ(p.groups[0].tile_a, 8);
  EXPECT_EQ(p.groups[0].tile_b, 8);
  EXPECT_EQ(p.grid, 1);
}

TEST(TransposeHeuristics, BigProblemsGet64PointTilesWhereTheyStillFillTheGpuTwice) {
  // 7 x 1024 x 1024: 1792 tiles of 64x64, two waves of an A100 (108 SMs x 8 blocks) but not of an
  // H100 (132 SMs x 8 blocks).
  const auto problem = oneGroup({7, 1024, 1024}, 1, 2, {4}, 1);
  const auto a100 = transposeHeuristics(DeviceInfo::a100(), problem);
  const auto h100 = transposeHeuristics(DeviceInfo::h100Sxm(), problem);
  EXPECT_EQ(a100.groups[0].tile_a, 64);
  EXPECT_EQ(a100.groups[0].tile_b, 64);
  EXPECT_EQ(a100.grid, 7 * 16 * 16);
  EXPECT_EQ(h100.groups[0].tile_a, 32);
  EXPECT_EQ(h100.grid, 7 * 32 * 32);
}

TEST(TransposeHeuristics, StagedTilesStayWithinTheDevicesSharedBudget) {
  // Ten double tiles of 32x32 (8 KiB each): an H100 stages 6 (48 KiB cap), an A100 5 (164/4 KiB),
  // an L4 3 (100/4 KiB); the rest are read directly.
  const auto problem = oneGroup({256, 256}, 0, 1, std::vector<int64_t>(10, 8), 1);
  EXPECT_EQ(transposeHeuristics(DeviceInfo::h100Sxm(), problem).groups[0].staged, 6);
  EXPECT_EQ(transposeHeuristics(DeviceInfo::a100(), problem).groups[0].staged, 5);
  EXPECT_EQ(transposeHeuristics(DeviceInfo::l4(), problem).groups[0].staged, 3);
}

TEST(TransposeHeuristics, Bf16TilesHoldValuesAsStoredWhereFloatTilesWouldLeaveLoadsUnstaged) {
  // GQA's backward at 8 query heads a KV head: 24 transposed bf16 loads an element of the keys' input. Float
  // tiles of 32 x 64 points (8 KiB) fit 6 in the 48 KiB budget; tiles of bf16 as stored (4 KiB) fit 12.
  TransposeProblem many;
  many.groups.push_back({{2, 128, 1280}, 1, 2, std::vector<int64_t>(24, 4), std::vector<int64_t>(24, 2)});
  many.max_vectorize = 8;
  const auto p = transposeHeuristics(DeviceInfo::h100Sxm(), many);
  EXPECT_TRUE(p.groups[0].tiles_as_stored);
  EXPECT_EQ(p.groups[0].staged, 12);
  EXPECT_EQ(p.shared_bytes, 12 * 32 * 64 * 2);
  EXPECT_NE(p.toString().find("12 staged inputs (tiles as stored)"), std::string::npos) << p.toString();
  // Where float tiles stage every load, they stay float (no conversion on the way through).
  TransposeProblem few = many;
  few.groups[0].candidate_bytes.resize(3);
  few.groups[0].stored_bytes.resize(3);
  const auto q = transposeHeuristics(DeviceInfo::h100Sxm(), few);
  EXPECT_FALSE(q.groups[0].tiles_as_stored);
  EXPECT_EQ(q.groups[0].staged, 3);
  // Float loads gain nothing from it.
  TransposeProblem floats = many;
  floats.groups[0].stored_bytes.assign(24, 4);
  EXPECT_FALSE(transposeHeuristics(DeviceInfo::h100Sxm(), floats).groups[0].tiles_as_stored);
}

TEST(TransposeHeuristics, GroupsShareTheLaunchWithTheirOwnTiles) {
  TransposeProblem problem;
  problem.groups.push_back({{72, 40}, 0, 1, {4}});  // y = x.T: staged
  problem.groups.push_back({{40, 72}, 0, 1, {}});   // z = x + 1: rows of a whole block, nothing staged
  problem.groups.push_back({{0, 8}, 0, 1, {4}});    // empty: no blocks
  const auto p = transposeHeuristics(DeviceInfo::h100Sxm(), problem);
  ASSERT_EQ(p.groups.size(), 3u);
  EXPECT_EQ(p.groups[0].staged, 1);
  EXPECT_EQ(p.groups[1].staged, 0);
  EXPECT_EQ(p.groups[1].tile_a * p.groups[1].tile_b, 256 * p.vectorize);
  EXPECT_EQ(p.groups[2].blocks, 0);
  EXPECT_EQ(p.grid, p.groups[0].blocks + p.groups[1].blocks);
  EXPECT_EQ(p, transposeHeuristics(DeviceInfo::h100Sxm(), problem));  // pure
}

}  // namespace
}  // namespace braze
