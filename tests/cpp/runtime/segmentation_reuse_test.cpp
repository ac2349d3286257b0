// A new input signature of a known shape class keeps the class's segmentation (segmenter/reuse_segments.h,
// exec's InputSignature::shapeClassOf): which signatures share a class, what inputs represent a class
// (InputSignature::representativeOf), that the reused plans are the fresh ones' whatever ran before and
// run exactly on the simulated device, and that a segmentation the new sizes no longer allow is planned
// afresh.
#include "fusions/backward_cases.h"
#include "fusions/kernel_corpus.h"
#include "fusions/kernel_util.h"
#include "fusions/layer_norm.h"
#include "device/sim/sim_device_ops.h"
#include "exec/fusion_cache.h"
#include "exec/host_execute.h"
#include "segmenter/reuse_segments.h"

#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <random>
#include <set>

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

std::vector<int64_t> sizesOf(const DeviceValue& v) { return std::get<DeviceTensor>(v).sizes; }
std::vector<int64_t> stridesOf(const DeviceValue& v) { return std::get<DeviceTensor>(v).strides; }

TEST(ShapeClass, ARepresentativeStandsForEachExtentByItsPowerAndDivisor) {
  const auto rep = InputSignature::representativeOf(testing::layerNormBackwardAddresses(3001, 768));
  ASSERT_TRUE(rep.has_value());
  EXPECT_EQ(sizesOf((*rep)[0]), (std::vector<int64_t>{2049, 512}));  // odd in [2048, 4096); 16 | 768 in [512, 1024)
  EXPECT_EQ(stridesOf((*rep)[0]), (std::vector<int64_t>{512, 1}));
  EXPECT_EQ(sizesOf((*rep)[2]), (std::vector<int64_t>{2049, 1}));  // the same row count stands for the same
  EXPECT_EQ(sizesOf((*rep)[4]), (std::vector<int64_t>{512}));
  // Distinct extents of one power and divisor stay distinct; small extents and exact strides stay as given.
  const auto two = InputSignature::representativeOf(matrix({300, 428, 5}, {0, 900, 1}));
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(sizesOf((*two)[0]), (std::vector<int64_t>{260, 268, 5}));
  EXPECT_EQ(stridesOf((*two)[0]), (std::vector<int64_t>{0, 900, 1}));
  // Extents the definition fixes stay, and no other extent is made equal to them.
  const auto fixed = InputSignature::representativeOf(testing::layerNormBackwardAddresses(3001, 768),
                                                      {{-1, 768}, {-1, 768}, {-1, 1}, {-1, 1}, {768}});
  ASSERT_TRUE(fixed.has_value());
  EXPECT_EQ(sizesOf((*fixed)[0]), (std::vector<int64_t>{2049, 768}));
  // As the definition fixes them, whatever the inputs say (binding them says what is wrong).
  const auto wrong = InputSignature::representativeOf(testing::layerNormBackwardAddresses(3001, 800),
                                                      {{-1, 768}, {-1, 768}, {-1, 1}, {-1, 1}, {768}});
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(sizesOf((*wrong)[1]), (std::vector<int64_t>{2049, 768}));
  EXPECT_EQ(sizesOf((*wrong)[4]), (std::vector<int64_t>{768}));
  const auto apart = InputSignature::representativeOf(matrix({768, 512}), {{-1, 512}});
  ASSERT_TRUE(apart.has_value());
  EXPECT_EQ(sizesOf((*apart)[0]), (std::vector<int64_t>{528, 512}));
  // Inputs that are their class's representative.
  const std::vector<DeviceValue> own = matrix({136, 48});
  EXPECT_EQ(InputSignature::of(*InputSignature::representativeOf(own)), InputSignature::of(own));
}

// Random signatures and a member of the same class each (other extents of the same powers and divisors,
// equal where the signature's are): both have one representative, of their class.
TEST(ShapeClass, TheRepresentativeDependsOnTheClassAlone) {
  std::mt19937_64 rng(41);
  const std::vector<int64_t> pool{1, 3, 64, 128, 136, 200, 255, 256, 300, 769, 1024, 2049};
  int checked = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<int64_t> distinct;  // the signature's extents; the member maps each to another of its class
    std::vector<DeviceValue> inputs;
    const int tensors = 1 + static_cast<int>(rng() % 3);
    for (int t = 0; t < tensors; ++t) {
      std::vector<int64_t> sizes(1 + rng() % 3);
      for (int64_t& e : sizes) e = pool[rng() % pool.size()];
      DeviceTensor tensor = DeviceTensor::contiguous(0x100000 * (t + 1), DataType::Float, sizes);
      const uint64_t layout = rng() % 4;
      if (layout == 1) tensor.strides[0] = 0;                                           // expanded
      if (layout == 2 && sizes.size() > 1) tensor.strides[0] = tensor.strides[0] + 16;  // a slice of wider rows
      inputs.push_back(tensor);
      distinct.insert(distinct.end(), sizes.begin(), sizes.end());
    }
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    // Another extent of the same class word for each large one, none equal to another's.
    std::map<int64_t, int64_t> other;
    std::set<int64_t> used;
    for (int64_t e : distinct) {
      int64_t mapped = e;
      if (e >= 128) {
        const int64_t low = int64_t{1} << (std::bit_width(static_cast<uint64_t>(e)) - 1);
        const int64_t step = int64_t{1} << std::min(std::countr_zero(static_cast<uint64_t>(e)), 4);
        for (int tries = 0; tries < 50; ++tries) {
          const int64_t m = low + step * static_cast<int64_t>(rng() % static_cast<uint64_t>(low / step));
          if (std::min(std::countr_zero(static_cast<uint64_t>(m)), 4) == std::min(std::countr_zero(static_cast<uint64_t>(e)), 4) &&
              used.count(m) == 0 && std::find(distinct.begin(), distinct.end(), m) == distinct.end()) {
            mapped = m;
            break;
          }
        }
      }
      used.insert(mapped);
      other[e] = mapped;
    }
    std::vector<DeviceValue> member = inputs;
    for (DeviceValue& v : member) {
      auto& t = std::get<DeviceTensor>(v);
      const std::vector<int64_t> before = t.strides;
      const std::vector<int64_t> row_major = StridedLayout::rowMajor(t.sizes).strides;
      for (int64_t& e : t.sizes) e = other[e];
      const std::vector<int64_t> now = StridedLayout::rowMajor(t.sizes).strides;
      for (size_t d = 0; d < t.strides.size(); ++d) {
        if (before[d] == row_major[d]) t.strides[d] = now[d];
      }
    }
    if (classOf(member) != classOf(inputs)) continue;  // an exact stride the new sizes made row-major
    const auto a = InputSignature::representativeOf(inputs);
    const auto b = InputSignature::representativeOf(member);
    ASSERT_EQ(a.has_value(), b.has_value()) << round;
    if (!a) continue;
    EXPECT_EQ(classOf(*a), classOf(inputs)) << round;
    EXPECT_EQ(InputSignature::of(*a), InputSignature::of(*b)) << round;
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

// Two caches fed the row counts of one class in opposite orders make the same plan and the same CUDA for
// each: the class's segmentation is its representative's, whichever signature came first.
TEST(SegmentationReuse, APlanDoesNotDependOnWhichSignatureOfItsClassCameFirst) {
  const std::vector<int64_t> rows{2049, 3001, 4095, 2501};  // odd, in [2048, 4096)
  device::NoOpDeviceOps ops;
  exec::FusionCache forward(testing::sizelessLayerNormBackward(), {}, &ops, DeviceInfo::h100Sxm());
  exec::FusionCache backward(testing::sizelessLayerNormBackward(), {}, &ops, DeviceInfo::h100Sxm());
  for (size_t i = 0; i < rows.size(); ++i) {
    forward.prepare(testing::layerNormBackwardAddresses(rows[i], 768));
    backward.prepare(testing::layerNormBackwardAddresses(rows[rows.size() - 1 - i], 768));
  }
  for (int64_t r : rows) {
    const auto a = forward.prepare(testing::layerNormBackwardAddresses(r, 768));
    const auto b = backward.prepare(testing::layerNormBackwardAddresses(r, 768));
    EXPECT_EQ(a->compiled().plan.toString(), b->compiled().plan.toString()) << r;
    EXPECT_EQ(a->cudaCode(), b->cudaCode()) << r;
    EXPECT_TRUE(a->compiled().plan.reused) << r;  // 768 is not the representative's 512
  }
}

// Row counts of one class reuse its segmentation (made at 136 rows, its representative's row count); each
// plan equals the one a fresh cache makes for the same inputs, and runs exactly on the simulated device.
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
    // A cache that never saw 136 rows makes the same plan: the class's segmentation is its representative's.
    exec::FusionCache fresh_cache(first.fusion, {}, &ops, DeviceInfo::h100Sxm());
    exec::runOnHost(fresh_cache, c.inputs);
    const SegmentedFusion& fresh = fresh_cache.lastPlan()->compiled().plan;
    EXPECT_EQ(fresh.toString(), reused.toString());
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

// The bias grad of the neighbouring linear joins the norm's kernel where it sums at most four times the
// norm's rows: with more, the segmentation does not hold, and says which segment decided.
TEST(SegmentationReuse, ASegmentItsSchedulerNoLongerTakesIsPlannedAfresh) {
  const testing::KernelCase c = testing::normBackwardCase({.rows = 136, .hidden = 48, .extra_width = 80}, 5);
  const SegmentedFusion planned = planSegments(*c.fusion, c.inputs);
  ASSERT_EQ(planned.segments.size(), 1u) << planned.toString();
  ASSERT_EQ(planned.segments[0].scheduler, SchedulerKind::InnerOuterPersistent);

  std::vector<HostValue> more_rows = testing::normBackwardCase({.rows = 152, .hidden = 48, .extra_width = 80}, 6).inputs;
  const ReusedSegments kept = reuseSegments(planned, more_rows);
  ASSERT_TRUE(kept.plan.has_value()) << kept.why_not;
  EXPECT_EQ(kept.plan->bound.sizesOf(c.fusion->inputs()[0]), (std::vector<int64_t>{152, 48}));

  // 144 rows of its own where the norm has 152: still the norm's kernel.
  more_rows.back() = testing::randomTensor(DataType::BFloat16, {144, 80}, 7);
  EXPECT_TRUE(reuseSegments(planned, more_rows).plan.has_value());
  // The extra tensor [rows, 80] with 609 rows where the norm has 152.
  more_rows.back() = testing::randomTensor(DataType::BFloat16, {609, 80}, 7);
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
