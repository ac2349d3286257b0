// The matmul scheduler's heuristics and device check, as pure functions of described GPUs.
#include "scheduler/matmul/heuristics.h"

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
  EXPECT_EQ(p.grid, 16 * 16 * 16);  // batch x row blocks x column blocks
}

TEST(MatmulHeuristics, SkinnyProblemsTakeNoMoreTilesThanTheyFill) {
  // One row (a GEMV's shape): one mma tile of rows, one warp along M.
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

}  // namespace
}  // namespace braze
