// A new input signature of a known shape class keeps the class's segmentation (segmenter/reuse_segments.h,
// exec's InputSignature::shapeClassOf): which signatures share a class, that the reused plans are the
// fresh ones' and run exactly on the simulated device, and that a segmentation the new sizes no longer
// allow is planned afresh.
#include "fusions/backward_cases.h"
#include "fusions/kernel_corpus.h"
#include "fusions/kernel_util.h"
#include "fusions/layer_norm.h"
#include "device/sim/sim_device_ops.h"
#include "exec/fusion_cache.h"
#include "exec/host_execute.h"
#include "segmenter/reuse_segments.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using device::DeviceTensor;
using device::DeviceValue;
using exec::InputSignature;

InputSignature classOf(const std::vector<DeviceValue>& inputs) { return InputSignature::shapeClassOf(inputs); }

std::vector<DeviceValue> matrix(std::vector<int64_t> sizes, std::vector<int64_t> strides = {},
                                device::DevicePtr data = 0x100000) {
  DeviceTensor t = DeviceTensor::contiguous(data, DataType::BFloat16, std::move(sizes));
  if (!strides.empty()) t.strides = std::move(strides);
  return {t};
}

TEST(ShapeClass, ExtentsOfOnePowerOfTwoAndDivisorShareAClass) {
  const auto rows = [](int64_t r) { return classOf(testing::layerNormBackwardAddresses(r, 768)); };
  EXPECT_EQ(rows(2048), rows(3072));  // [2048, 4096), divisible by 16
  EXPECT_EQ(rows(2049), rows(4001));  // [2048, 4096), odd
  EXPECT_NE(rows(2048), rows(4096));  // another power of two
  EXPECT_NE(rows(2048), rows(2056));  // divisible by 8 only: vectors of 16 bytes of bf16 still fit, of fp8 not
  EXPECT_NE(rows(2048), rows(2049));
  EXPECT_NE(rows(64), rows(65));      // small extents are exact: tiles, warps and size 1 depend on them
  EXPECT_NE(classOf(testing::layerNormBackwardAddresses(2048, 768)),
            classOf(testing::layerNormBackwardAddresses(2048, 776)));  // hidden divisible by 8, not 16
  // The signatures themselves stay exact.
  EXPECT_NE(InputSignature::of(testing::layerNormBackwardAddresses(2048, 768)),
            InputSignature::of(testing::layerNormBackwardAddresses(3072, 768)));
}

TEST(ShapeClass, StridesAreKnownByTheirPatternAndEqualExtentsByWhichTheyEqual) {
  EXPECT_EQ(classOf(matrix({300, 200})), classOf(matrix({260, 216})));         // row-major
  EXPECT_NE(classOf(matrix({300, 200})), classOf(matrix({300, 200}, {0, 1})));  // expanded rows
  EXPECT_EQ(classOf(matrix({300, 200}, {0, 1})), classOf(matrix({500, 232}, {0, 1})));
  // A slice of wider rows keeps its row stride exactly.
  EXPECT_EQ(classOf(matrix({300, 200}, {600, 1})), classOf(matrix({500, 232}, {600, 1})));
  EXPECT_NE(classOf(matrix({300, 200}, {600, 1})), classOf(matrix({300, 200}, {800, 1})));
  // Square and not: an extent equal to another one is another class.
  EXPECT_NE(classOf(matrix({200, 200})), classOf(matrix({200, 232})));
  // The pointer's alignment, as in the signature.
  EXPECT_NE(classOf(matrix({300, 200})), classOf(matrix({300, 200}, {}, 0x100002)));
}

// Row counts of one class reuse the first one's segmentation; each plan equals the one a fresh cache makes
// for the same inputs, and runs exactly on the simulated device.
TEST(SegmentationReuse, LayerNormBackwardRowCountsOfAClassKeepTheirSegments) {
  const testing::NormBackward shape{.rows = 136, .hidden = 48, .extra_width = 80};
  const testing::KernelCase first = testing::normBackwardCase(shape, 3);
  device::SimDeviceOps ops;
  exec::FusionCache cache(first.fusion, {}, &ops, DeviceInfo::h100Sxm());
  testing::expectClose(exec::runOnHost(cache, first.inputs), evaluate(*first.fusion, first.inputs), "136 rows");
  EXPECT_FALSE(cache.lastPlan()->compiled().plan.reused);
  for (int64_t rows : {152, 200, 248}) {  // [128, 256), divisible by 8 and not 16, as 136 is
    testing::NormBackward other = shape;
    other.rows = rows;
    const testing::KernelCase c = testing::normBackwardCase(other, 4);
    // The same definition, built again: run it through the first case's fusion.
    testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*first.fusion, c.inputs),
                         std::to_string(rows) + " rows");
    const SegmentedFusion& reused = cache.lastPlan()->compiled().plan;
    EXPECT_TRUE(reused.reused) << reused.toString();
    EXPECT_NE(reused.toString().find("segmented for other sizes of the same shape class"), std::string::npos);
    exec::FusionCache fresh_cache(first.fusion, {}, &ops, DeviceInfo::h100Sxm());
    exec::runOnHost(fresh_cache, c.inputs);
    const SegmentedFusion& fresh = fresh_cache.lastPlan()->compiled().plan;
    EXPECT_FALSE(fresh.reused);
    ASSERT_EQ(reused.segments.size(), fresh.segments.size()) << reused.toString() << fresh.toString();
    for (size_t s = 0; s < fresh.segments.size(); ++s) {
      EXPECT_EQ(reused.segments[s].scheduler, fresh.segments[s].scheduler) << s;
      EXPECT_EQ(reused.segments[s].exprs, fresh.segments[s].exprs) << s;
      EXPECT_EQ(reused.segments[s].heuristics, fresh.segments[s].heuristics) << s;
    }
    EXPECT_EQ(reused.kernelCount(), 2);
  }
  EXPECT_EQ(ops.loadedKernels(), 2u);  // the row kernel and the finish, for every row count
}

// The bias grad of the neighbouring linear joins the norm's kernel only where it sums as many rows: with
// another row count the segmentation does not hold, and says which segment decided.
TEST(SegmentationReuse, ASegmentItsSchedulerNoLongerTakesIsPlannedAfresh) {
  const testing::KernelCase c = testing::normBackwardCase({.rows = 136, .hidden = 48, .extra_width = 80}, 5);
  const SegmentedFusion planned = planSegments(*c.fusion, c.inputs);
  ASSERT_EQ(planned.segments.size(), 1u) << planned.toString();
  ASSERT_EQ(planned.segments[0].scheduler, SchedulerKind::InnerOuterPersistent);

  std::vector<HostValue> more_rows = testing::normBackwardCase({.rows = 152, .hidden = 48, .extra_width = 80}, 6).inputs;
  const ReusedSegments kept = reuseSegments(planned, more_rows);
  ASSERT_TRUE(kept.plan.has_value()) << kept.why_not;
  EXPECT_EQ(kept.plan->bound.sizesOf(c.fusion->inputs()[0]), (std::vector<int64_t>{152, 48}));

  // The extra tensor [rows, 80] with 144 rows where the norm has 152.
  more_rows.back() = testing::randomTensor(DataType::BFloat16, {144, 80}, 7);
  const ReusedSegments refused = reuseSegments(planned, more_rows);
  EXPECT_FALSE(refused.plan.has_value());
  EXPECT_NE(refused.why_not.find("segment 0 is taken by"), std::string::npos) << refused.why_not;
  EXPECT_NE(refused.why_not.find("not inner_outer_persistent"), std::string::npos) << refused.why_not;
  EXPECT_GT(planSegments(*c.fusion, more_rows).segments.size(), 1u);
}

// Every corpus fusion's segmentation holds for the very inputs it was planned for: the checks refuse only
// what the sizes change.
TEST(SegmentationReuse, EveryCorpusPlanHoldsForItsOwnInputs) {
  for (const testing::KernelCaseMaker& maker : testing::smallKernelCorpus()) {
    const testing::KernelCase c = maker.make();
    const SegmentedFusion planned = planSegments(*c.fusion, c.inputs, c.options.plan);
    const ReusedSegments reused = reuseSegments(planned, c.inputs);
    ASSERT_TRUE(reused.plan.has_value()) << maker.name << ": " << reused.why_not << "\n" << planned.toString();
    ASSERT_EQ(reused.plan->segments.size(), planned.segments.size()) << maker.name;
    for (size_t s = 0; s < planned.segments.size(); ++s) {
      EXPECT_EQ(reused.plan->segments[s].exprs, planned.segments[s].exprs) << maker.name << " segment " << s;
    }
  }
}

}  // namespace
}  // namespace braze
