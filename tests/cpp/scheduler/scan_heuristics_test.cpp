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

}  // namespace
}  // namespace braze
