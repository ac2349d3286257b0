// Another row count's heuristics from the problem chosen at one (SchedulerEntry::heuristics_at_rows), on a
// described H100 and A100: the row schedulers' own pure functions at the scaled row count, and none where
// the problem has no such row count (an outer reduction, rows that are not a whole multiple).
#include "scheduler/inner_outer/entry.h"
#include "scheduler/reduction/entry.h"
#include "scheduler/reduction/row_launch.h"

#include <gtest/gtest.h>

#include <optional>

namespace braze {
namespace {

ReductionProblem rowsOf(int64_t rows, int64_t row_length, bool inner = true) {
  return {.rows = rows, .row_length = row_length, .inner = inner, .wants_persistent = true, .max_vectorize = 8,
          .cached_tensors = 1, .widest_dtype_bytes = 2};
}

TEST(HeuristicsAtRows, AnInnerReductionGetsTheHeuristicsOfItsProblemAtTheScaledRowCount) {
  for (const DeviceInfo& device : {DeviceInfo::h100Sxm(), DeviceInfo::a100()}) {
    // 4095 rows x 3 (a [rows, 3, 1600] layer_norm) to 129 x 3: few rows change the rows per block.
    for (const int64_t to : {2049, 3001, 129, 4095}) {
      const ReductionProblem at = rowsOf(4095 * 3, 1600);
      const SegmentHeuristics chosen = heuristicsOf(innerPersistentScheduler(), reductionHeuristics(device, at));
      const std::optional<SegmentHeuristics> scaled = scheduler::rowHeuristicsAtRows(device, chosen, 4095, to);
      ASSERT_TRUE(scaled.has_value());
      ReductionProblem own = at;
      own.rows = to * 3;
      const ReductionParams expected = reductionHeuristics(device, own);
      const ReductionParams& p = paramsOf<ReductionParams>(*scaled);
      EXPECT_EQ(scaled->lowering, &innerPersistentScheduler());
      EXPECT_EQ(scaled->toString(), heuristicsOf(innerPersistentScheduler(), expected).toString());
      EXPECT_EQ(p.problem.rows, to * 3);
      EXPECT_EQ(p.grid, expected.grid);
      EXPECT_EQ(p.threads_y, expected.threads_y);
    }
  }
  // 4096 rows scaled to 4: the threads per row stay, the rows per block shrink to the 4 there are.
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  const SegmentHeuristics many = heuristicsOf(reductionScheduler(), reductionHeuristics(h100, rowsOf(4096, 64)));
  const std::optional<SegmentHeuristics> scaled = scheduler::rowHeuristicsAtRows(h100, many, 4096, 4);
  ASSERT_TRUE(scaled.has_value());
  const ReductionParams& few = paramsOf<ReductionParams>(*scaled);
  EXPECT_EQ(few.threads_x, paramsOf<ReductionParams>(many).threads_x);
  EXPECT_EQ(few.threads_y, 4);
}

TEST(HeuristicsAtRows, NoneWithoutARowCountToScale) {
  const DeviceInfo h100 = DeviceInfo::h100Sxm();
  // An outer reduction's rows are its kept elements: the leading dims are what it reduces.
  const SegmentHeuristics outer =
      heuristicsOf(reductionScheduler(), reductionHeuristics(h100, rowsOf(768, 4096, /*inner=*/false)));
  EXPECT_FALSE(scheduler::rowHeuristicsAtRows(h100, outer, 4096, 2048).has_value());
  // 1000 rows are not a whole number of 4095-row leading dims.
  const SegmentHeuristics odd = heuristicsOf(reductionScheduler(), reductionHeuristics(h100, rowsOf(1000, 64)));
  EXPECT_FALSE(scheduler::rowHeuristicsAtRows(h100, odd, 4095, 2049).has_value());
}

TEST(HeuristicsAtRows, TheInnerOuterSchedulerGetsTheHeuristicsOfItsProblemAtTheScaledRowCount) {
  for (const DeviceInfo& device : {DeviceInfo::h100Sxm(), DeviceInfo::a100()}) {
    const InnerOuterProblem at{rowsOf(4095, 768), 2, {{3072, 8}}, 4, {}};
    const SegmentHeuristics chosen = heuristicsOf(innerOuterPersistentScheduler(), innerOuterHeuristics(device, at));
    for (const int64_t to : {2049, 129, 3}) {
      const std::optional<SegmentHeuristics> scaled =
          scheduler::innerOuterHeuristicsAtRows(device, chosen, 4095, to);
      ASSERT_TRUE(scaled.has_value());
      InnerOuterProblem own = at;
      own.rows.rows = to;
      const InnerOuterParams expected = innerOuterHeuristics(device, own);
      const InnerOuterParams& p = paramsOf<InnerOuterParams>(*scaled);
      EXPECT_EQ(scaled->toString(), heuristicsOf(innerOuterPersistentScheduler(), expected).toString());
      EXPECT_EQ(p.blocks, expected.blocks);
      EXPECT_EQ(p.partial_rows, expected.partial_rows);
      EXPECT_EQ(p.problem.rows.rows, to);
      EXPECT_EQ(p.extras.size(), 1u);
    }
  }
}

}  // namespace
}  // namespace braze
