// Row kernels lowered once per shape class for its canonical row count (exec/canonical_rows.h): which
// inputs have one, that the relaunched kernels are those each row count's own lowering makes (the same
// code, launch values and tensor layouts), and that they run exactly on the simulated device.
#include "fusions/backward_cases.h"
#include "fusions/kernel_util.h"
#include "fusions/layer_norm.h"
#include "device/sim/sim_device_ops.h"
#include "exec/canonical_rows.h"
#include "exec/fusion_cache.h"
#include "exec/host_execute.h"
#include "reference/evaluator.h"

#include <gtest/gtest.h>

#include <bit>

namespace braze {
namespace {

using device::DeviceTensor;
using device::DeviceValue;
using exec::canonicalRowsOf;

std::vector<int64_t> sizesOf(const DeviceValue& v) { return std::get<DeviceTensor>(v).sizes; }

// testing::sizelessLayerNorm's inputs, [rows, 3, 1600] bf16 (stand-in addresses).
std::vector<DeviceValue> layerNormInputs(int64_t rows) {
  return {DeviceTensor::contiguous(0x10000000, DataType::BFloat16, {rows, 3, 1600}),
          DeviceTensor::contiguous(0x200000, DataType::BFloat16, {1600}),
          DeviceTensor::contiguous(0x300000, DataType::BFloat16, {1600})};
}

// Sums over the rows of a float [-1, -1] (the reduction scheduler, inner).
std::shared_ptr<Fusion> sizelessRowSums() {
  auto f = std::make_shared<Fusion>();
  FusionGuard guard(f.get());
  TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
  f->addOutput(reduce(OpKind::Sum, x, {1}));
  return f;
}

TEST(CanonicalRows, TheLeadingRowCountBecomesTheLargestOfItsShapeClass) {
  const std::optional<exec::CanonicalRows> rows = canonicalRowsOf(testing::layerNormBackwardAddresses(3001, 768), {});
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->extent, 3001);
  EXPECT_EQ(rows->canonical, 4095);  // [2048, 4096), odd
  EXPECT_EQ(sizesOf(rows->inputs[0]), (std::vector<int64_t>{4095, 768}));
  EXPECT_EQ(sizesOf(rows->inputs[2]), (std::vector<int64_t>{4095, 1}));
  EXPECT_EQ(sizesOf(rows->inputs[4]), (std::vector<int64_t>{768}));  // the weight: no row dim
  EXPECT_EQ(canonicalRowsOf(testing::layerNormBackwardAddresses(2048, 768), {})->canonical, 4080);  // 16 divides
  EXPECT_EQ(exec::largestOfShapeClass(2056), 4088);  // 8 divides, 16 does not
  EXPECT_EQ(exec::largestOfShapeClass(100), 100);    // small extents are exact
}

// Where the row count also stands elsewhere, making the leading extents canonical alone would change more
// than the one size (or the class): no canonical inputs.
TEST(CanonicalRows, NoneWhereTheRowCountIsAlsoAnotherSize) {
  EXPECT_FALSE(canonicalRowsOf(testing::layerNormBackwardAddresses(768, 768), {}));  // the hidden size too
  // Leading 100 rows are exact in the class; the weight leads with 768, which x has as its hidden size.
  EXPECT_FALSE(canonicalRowsOf(testing::layerNormBackwardAddresses(100, 768), {}));
  // The definition fixes the first input's rows.
  EXPECT_FALSE(canonicalRowsOf(testing::layerNormBackwardAddresses(3001, 768), {{3001, -1}}));
  // A column-major input: the row count is its second stride.
  std::vector<DeviceValue> column_major{DeviceTensor::contiguous(0x100000, DataType::Float, {3001, 768})};
  std::get<DeviceTensor>(column_major[0]).strides = {1, 3001};
  EXPECT_FALSE(canonicalRowsOf(column_major, {}));
  // An integer scalar input of the same value (a size the definition computes with).
  std::vector<DeviceValue> with_scalar = testing::layerNormBackwardAddresses(3001, 768);
  with_scalar.emplace_back(ScalarValue{int64_t{3001}});
  EXPECT_FALSE(canonicalRowsOf(with_scalar, {}));
}

// [batch, seq, hidden] with a small batch: seq is the row extent. The dims before it are merged with it
// in every input, so their strides follow the canonical extent.
TEST(CanonicalRows, ASequenceAfterASmallBatchIsTheRowExtentAndTheBatchStridesFollowIt) {
  const std::optional<exec::CanonicalRows> rows = canonicalRowsOf(testing::layerNormBackwardAddresses({8, 300}, 768), {});
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->extent, 300);
  EXPECT_EQ(rows->canonical, 508);  // [256, 512), 4 divides
  EXPECT_EQ(rows->dim, 1u);
  EXPECT_FALSE(rows->leading_only);
  const DeviceTensor& x = std::get<DeviceTensor>(rows->inputs[0]);
  EXPECT_EQ(x.sizes, (std::vector<int64_t>{8, 508, 768}));
  EXPECT_EQ(x.strides, (std::vector<int64_t>{508 * 768, 768, 1}));
  const DeviceTensor& mean = std::get<DeviceTensor>(rows->inputs[2]);
  EXPECT_EQ(mean.sizes, (std::vector<int64_t>{8, 508, 1}));
  EXPECT_EQ(mean.strides, (std::vector<int64_t>{508, 1, 1}));
  EXPECT_EQ(exec::nthOfShapeClass(300, 0), 260);  // [256, 512), 4 divides: 256 + 4, + 12, ...
  EXPECT_EQ(exec::nthOfShapeClass(300, 1), 268);
  EXPECT_EQ(exec::nthOfShapeClass(2048, 1), 2064);  // 16 divides: 2048 + 16k
  EXPECT_EQ(exec::nthOfShapeClass(511, 127), 511);  // 256 + 255: the last odd one
  EXPECT_EQ(exec::nthOfShapeClass(511, 128), std::nullopt);
  EXPECT_EQ(canonicalRowsOf(testing::layerNormBackwardAddresses({200, 300}, 768), {})->dim, 0u);  // the batch
  // A batch of 1: its stride follows seq where a DLPack producer made it row-major, and stays where torch
  // said 1 (any stride addresses a size-1 dim).
  for (const int64_t batch_stride : {int64_t{300 * 768}, int64_t{1}}) {
    std::vector<DeviceValue> one = testing::layerNormBackwardAddresses({1, 300}, 768);
    std::get<DeviceTensor>(one[0]).strides[0] = batch_stride;
    const std::optional<exec::CanonicalRows> single = canonicalRowsOf(one, {});
    ASSERT_TRUE(single.has_value()) << batch_stride;
    EXPECT_EQ(std::get<DeviceTensor>(single->inputs[0]).strides,
              (std::vector<int64_t>{batch_stride == 1 ? 1 : 508 * 768, 768, 1}));
  }
  // x broadcast over the batch: its row index is the flat row's remainder by seq.
  std::vector<DeviceValue> expanded = testing::layerNormBackwardAddresses({8, 300}, 768);
  std::get<DeviceTensor>(expanded[1]).strides = {0, 768, 1};
  EXPECT_FALSE(canonicalRowsOf(expanded, {}));
  // x a slice of 300 of 400 positions: its batch stride does not follow seq.
  std::vector<DeviceValue> sliced = testing::layerNormBackwardAddresses({8, 300}, 768);
  std::get<DeviceTensor>(sliced[1]).strides = {400 * 768, 768, 1};
  EXPECT_FALSE(canonicalRowsOf(sliced, {}));
}

// A batch before the row extent is known to the shape class by its power of two: FusionCache takes the
// class of the inputs with each batch dim of 2 or more the smallest of its power, strides following.
TEST(CanonicalRows, ABatchBeforeTheRowExtentFoldsToTheSmallestOfItsPowerOfTwo) {
  const std::optional<exec::FoldedBatch> five = exec::foldedBatchOf(testing::layerNormBackwardAddresses({5, 300}, 768), {});
  ASSERT_TRUE(five.has_value());
  ASSERT_EQ(five->batch.size(), 1u);
  EXPECT_EQ(five->batch[0].canonical, 4);
  EXPECT_EQ(five->batch[0].actual, 5);
  const DeviceTensor& x = std::get<DeviceTensor>(five->inputs[0]);
  EXPECT_EQ(x.sizes, (std::vector<int64_t>{4, 300, 768}));
  EXPECT_EQ(x.strides, (std::vector<int64_t>{300 * 768, 768, 1}));
  EXPECT_EQ(sizesOf(five->inputs[2]), (std::vector<int64_t>{4, 300, 1}));
  EXPECT_EQ(sizesOf(five->inputs[4]), (std::vector<int64_t>{768}));
  // 127 is 64's class; 8 is its own power, still folded (the code is lowered at 9 too).
  EXPECT_EQ(exec::foldedBatchOf(testing::layerNormBackwardAddresses({127, 300}, 768), {})->batch[0].canonical, 64);
  EXPECT_EQ(exec::foldedBatchOf(testing::layerNormBackwardAddresses({8, 300}, 768), {})->batch[0].canonical, 8);
  // Two batch dims: equal sizes stay equal, unequal ones unequal.
  const std::optional<exec::FoldedBatch> two = exec::foldedBatchOf(testing::layerNormBackwardAddresses({3, 6, 300}, 64), {});
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(sizesOf(two->inputs[0]), (std::vector<int64_t>{2, 4, 300, 64}));
  EXPECT_EQ(std::get<DeviceTensor>(two->inputs[0]).strides, (std::vector<int64_t>{4 * 300 * 64, 300 * 64, 64, 1}));
  EXPECT_FALSE(exec::foldedBatchOf(testing::layerNormBackwardAddresses({4, 5, 300}, 64), {}));
  // Nothing to fold: a batch of 1, rows in the leading dim, or a batch the definition fixes.
  EXPECT_FALSE(exec::foldedBatchOf(testing::layerNormBackwardAddresses({1, 300}, 768), {}));
  EXPECT_FALSE(exec::foldedBatchOf(testing::layerNormBackwardAddresses(3001, 768), {}));
  EXPECT_FALSE(exec::foldedBatchOf(testing::layerNormBackwardAddresses({5, 300}, 768), {{5, -1, -1}}));
  // The batch size, or what it becomes, also another size: an integer scalar, another input's dim.
  for (const int64_t other : {5, 4}) {
    std::vector<DeviceValue> with_scalar = testing::layerNormBackwardAddresses({5, 300}, 768);
    with_scalar.emplace_back(ScalarValue{other});
    EXPECT_FALSE(exec::foldedBatchOf(with_scalar, {})) << other;
    std::vector<DeviceValue> with_dim = testing::layerNormBackwardAddresses({5, 300}, 768);
    with_dim.emplace_back(DeviceTensor::contiguous(0x60000000, DataType::Float, {other, 768}));
    EXPECT_FALSE(exec::foldedBatchOf(with_dim, {})) << other;
  }
  // A launch argument's value (a seed) may equal the batch: it reaches no size.
  std::vector<DeviceValue> with_seed = testing::layerNormBackwardAddresses({5, 300}, 768);
  with_seed.emplace_back(ScalarValue{int64_t{5}});
  std::vector<bool> launch_arguments(with_seed.size(), false);
  launch_arguments.back() = true;
  EXPECT_TRUE(exec::foldedBatchOf(with_seed, {}, launch_arguments));
  // A row tensor with the extent twice.
  std::vector<DeviceValue> square = testing::layerNormBackwardAddresses({5, 300}, 768);
  square.emplace_back(DeviceTensor::contiguous(0x60000000, DataType::Float, {5, 300, 300}));
  EXPECT_FALSE(exec::foldedBatchOf(square, {}));
  // A [seq, hidden] table beside [batch, seq, hidden]: its rows are not the batch's.
  std::vector<DeviceValue> table = testing::layerNormBackwardAddresses({5, 300}, 768);
  table.emplace_back(DeviceTensor::contiguous(0x60000000, DataType::Float, {300, 768}));
  EXPECT_FALSE(exec::foldedBatchOf(table, {}));
  // The canonical inputs have the folded batch and the canonical extent, and count rows of both.
  const std::optional<exec::CanonicalRows> rows = canonicalRowsOf(testing::layerNormBackwardAddresses({5, 300}, 768), {});
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(sizesOf(rows->inputs[0]), (std::vector<int64_t>{4, 508, 768}));
  EXPECT_EQ(std::get<DeviceTensor>(rows->inputs[0]).strides, (std::vector<int64_t>{508 * 768, 768, 1}));
  EXPECT_EQ(rows->canonicalRows(), 4 * 508);
  EXPECT_EQ(rows->rows(), 5 * 300);
}

// The same heuristics, code (digest), grid, arguments and tensor layouts in `a` and `b`.
void expectSameKernels(const LoweredPlan& a, const LoweredPlan& b, const std::string& what) {
  ASSERT_EQ(a.kernels.size(), b.kernels.size()) << what;
  ASSERT_EQ(a.plan.segments.size(), b.plan.segments.size()) << what;
  for (size_t s = 0; s < a.plan.segments.size(); ++s) {
    EXPECT_EQ(a.plan.segments[s].heuristics, b.plan.segments[s].heuristics) << what;
  }
  for (size_t k = 0; k < a.kernels.size(); ++k) {
    ASSERT_TRUE(a.kernels[k] && b.kernels[k]) << what;
    EXPECT_EQ(kernel::codeDigest(*a.kernels[k]), kernel::codeDigest(*b.kernels[k])) << what;
    EXPECT_EQ(a.kernels[k]->grid, b.kernels[k]->grid) << what;
    ASSERT_EQ(a.kernels[k]->arguments.size(), b.kernels[k]->arguments.size()) << what;
    for (size_t i = 0; i < a.kernels[k]->arguments.size(); ++i) {
      EXPECT_EQ(a.kernels[k]->arguments[i].value, b.kernels[k]->arguments[i].value)
          << what << ": " << a.kernels[k]->arguments[i].name;
    }
    ASSERT_EQ(a.kernels[k]->tensors.size(), b.kernels[k]->tensors.size()) << what;
    for (size_t t = 0; t < a.kernels[k]->tensors.size(); ++t) {
      EXPECT_EQ(a.kernels[k]->tensors[t].layout, b.kernels[k]->tensors[t].layout)
          << what << ": " << a.kernels[k]->tensors[t].name;
    }
  }
}

// The kernels a cache relaunches from the canonical row count are those a cache that lowers every row
// count for itself makes: the same code (digest), arguments, grid and tensor layouts, for the layer-norm
// backward (inner-outer: its kernel and the finish) and the layer_norm forward (inner persistent).
TEST(CanonicalRows, RelaunchedKernelsAreEachRowCountsOwn) {
  struct Case {
    std::string name;
    std::shared_ptr<Fusion> fusion;
    std::function<std::vector<DeviceValue>(int64_t)> inputs;
    DeviceInfo device = DeviceInfo::h100Sxm();
  };
  DeviceInfo staged = DeviceInfo::h100Sxm();
  staged.tuning.persistent_staged = 1;  // the blocks and row groups it walks are launch values too
  const std::vector<Case> cases{
      {"layer-norm backward", testing::sizelessLayerNormBackward(),
       [](int64_t rows) { return testing::layerNormBackwardAddresses(rows, 768); }},
      {"layer-norm backward [8, seq, 768]", testing::sizelessLayerNormBackward(/*row_dims=*/2),
       [](int64_t seq) { return testing::layerNormBackwardAddresses({8, seq}, 768); }},
      {"layer_norm", testing::sizelessLayerNorm(), layerNormInputs},
      {"layer_norm staged", testing::sizelessLayerNorm(), layerNormInputs, staged},
      {"layer_norm [4, seq, 1600]", testing::sizelessLayerNorm(),
       [](int64_t seq) {
         std::vector<DeviceValue> inputs = layerNormInputs(4);
         inputs[0] = DeviceTensor::contiguous(0x10000000, DataType::BFloat16, {4, seq, 1600});
         return inputs;
       }},
      {"row sums", sizelessRowSums(),
       [](int64_t rows) {
         return std::vector<DeviceValue>{DeviceTensor::contiguous(0x10000000, DataType::Float, {rows, 3000})};
       }},
  };
  for (const Case& c : cases) {
    device::NoOpDeviceOps ops;
    exec::FusionCache canonical(c.fusion, {}, &ops, c.device);
    PlanOptions own_options;
    own_options.reuse_kernels = false;
    exec::FusionCache own(c.fusion, own_options, &ops, c.device);
    for (int64_t rows : {2049, 3001, 2501, 4095, 129, 255}) {
      const std::string what = c.name + " at " + std::to_string(rows) + " rows";
      const LoweredPlan& a = canonical.prepare(c.inputs(rows))->compiled();
      expectSameKernels(a, own.prepare(c.inputs(rows))->compiled(), what);
      // Said in the plan, except where the row count is the canonical one (4095 and 255 are).
      const bool relaunched = a.plan.segments[0].kernels_lowered_for.find("launched for") != std::string::npos;
      EXPECT_EQ(relaunched, rows != 4095 && rows != 255) << what << "\n" << a.plan.toString();
    }
  }
}

// Batch sizes of one power of two before a row extent: the kernels relaunched from the canonical sizes
// (the batch's power, the extent's largest) are each batch's own, and the plan says what they were
// lowered for.
TEST(CanonicalRows, BatchSizesOfAPowerOfTwoRelaunchTheirOwnKernels) {
  device::NoOpDeviceOps ops;
  const std::shared_ptr<Fusion> fusion = testing::sizelessLayerNormBackward(/*row_dims=*/2);
  exec::FusionCache canonical(fusion, {}, &ops, DeviceInfo::h100Sxm());
  PlanOptions own_options;
  own_options.reuse_kernels = false;
  exec::FusionCache own(fusion, own_options, &ops, DeviceInfo::h100Sxm());
  for (const int64_t batch : {5, 4, 7, 6, 64, 100, 127}) {
    for (const int64_t seq : {301, 511}) {  // [256, 512), odd
      const std::string what = "[" + std::to_string(batch) + ", " + std::to_string(seq) + ", 768]";
      const auto inputs = testing::layerNormBackwardAddresses({batch, seq}, 768);
      const LoweredPlan& a = canonical.prepare(inputs)->compiled();
      expectSameKernels(a, own.prepare(inputs)->compiled(), what);
      const std::string& said = a.plan.segments[0].kernels_lowered_for;
      const int64_t power = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(batch)));
      if (batch == power) {
        EXPECT_EQ(said.empty(), seq == 511) << what << ": " << said;
      } else {
        EXPECT_EQ(said, "lowered for rows " + std::to_string(power) + "x511 in dims 0 to 1 (the shape class's "
                            "canonical sizes), launched for " + std::to_string(batch) + "x" + std::to_string(seq))
            << what;
      }
    }
  }
  EXPECT_EQ(canonical.kernelCount(), 2u);  // the inner-outer kernel and its finish, for every batch and seq
}

// Layer-norm and RMS-norm backward (with an extra outer reduction of another width) at row counts of one
// class, run on the simulated device from the kernels lowered for the class's canonical row count: exact
// against the reference evaluator, and relaunched (the plan says so).
TEST(CanonicalRows, RowCountsOfAClassRunExactlyFromTheCanonicalKernels) {
  for (const bool rms : {false, true}) {
    testing::NormBackward shape{.rows = 129, .hidden = 48, .extra_width = 80};
    shape.rms = rms;
    const testing::KernelCase first = testing::normBackwardCase(shape, 5);
    device::SimDeviceOps ops;
    exec::FusionCache cache(first.fusion, {}, &ops, DeviceInfo::h100Sxm());
    for (int64_t rows : {129, 201, 255, 131}) {  // [128, 256), odd
      testing::NormBackward other = shape;
      other.rows = rows;
      const testing::KernelCase c = testing::normBackwardCase(other, 6 + rows);
      const std::string what = (rms ? "rms " : "layer ") + std::to_string(rows) + " rows";
      testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*first.fusion, c.inputs), what);
      const SegmentedFusion& plan = cache.lastPlan()->compiled().plan;
      const bool relaunched = std::any_of(plan.segments.begin(), plan.segments.end(), [](const Segment& s) {
        return s.kernels_lowered_for.find("lowered for 255 leading rows") != std::string::npos;
      });
      EXPECT_EQ(relaunched, rows != 255) << what << "\n" << plan.toString();
    }
  }
}

// The layer-norm backward as Thunder hands a model's, [batch, seq, 48], at sequence lengths of one class
// and batch sizes of two powers of two (two classes, whose code is the same): exact on the simulated
// device from the kernels lowered for the class's canonical sizes.
TEST(CanonicalRows, SequenceLengthsOfAClassRunExactlyFromTheCanonicalKernels) {
  std::shared_ptr<Fusion> fusion = testing::sizelessLayerNormBackward(/*row_dims=*/2);
  device::SimDeviceOps ops;
  exec::FusionCache cache(fusion, {}, &ops, DeviceInfo::h100Sxm());
  for (int64_t batch : {3, 5, 4, 7}) {
    for (int64_t seq : {129, 201, 255, 131}) {  // [128, 256), odd
      const std::vector<HostValue> inputs =
          testing::randomInputs(*fusion, 40 + static_cast<uint64_t>(seq * batch),
                                {{batch, seq, 48}, {batch, seq, 48}, {batch, seq, 1}, {batch, seq, 1}, {48}});
      const std::string what = "batch " + std::to_string(batch) + ", seq " + std::to_string(seq);
      testing::expectClose(exec::runOnHost(cache, inputs), evaluate(*fusion, inputs), what);
      const SegmentedFusion& plan = cache.lastPlan()->compiled().plan;
      const bool relaunched = std::any_of(plan.segments.begin(), plan.segments.end(), [](const Segment& s) {
        return s.kernels_lowered_for.find("launched for") != std::string::npos;
      });
      EXPECT_EQ(relaunched, seq != 255 || (batch != 4 && batch != 2)) << what << "\n" << plan.toString();
    }
  }
  EXPECT_EQ(cache.kernelCount(), 2u);  // the inner-outer kernel and its finish, for every batch and seq
}

// [1, seq, 129] normalized over its rows, at seq 131 (canonical 255, whose class starts at 129, the row
// length): the code is lowered at the class's next extent that equals no other size, and seq 131 runs the
// canonical kernels in a fresh cache as after seq 136 (whose class's code is the same).
TEST(CanonicalRows, TheOtherExtentEqualsNoOtherSizeAndThePlanDoesNotDependOnOrder) {
  auto fusion = std::make_shared<Fusion>();
  {
    FusionGuard guard(fusion.get());
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
    auto [var, mean] = varMean(x, {2}, 0, /*keepdim=*/true);
    fusion->addOutput(mul(sub(x, mean), var));
  }
  const auto inputs = [](int64_t seq) {
    return std::vector<DeviceValue>{DeviceTensor::contiguous(0x10000000, DataType::Float, {1, seq, 129})};
  };
  device::NoOpDeviceOps ops;
  exec::FusionCache alone(fusion, {}, &ops, DeviceInfo::h100Sxm());
  const std::string said = alone.prepare(inputs(131))->compiled().plan.segments[0].kernels_lowered_for;
  EXPECT_EQ(said, "lowered for a row extent of 255 in dim 1 (the shape class's canonical one), launched for 131");
  exec::FusionCache after(fusion, {}, &ops, DeviceInfo::h100Sxm());
  after.prepare(inputs(136));
  EXPECT_EQ(after.prepare(inputs(131))->compiled().plan.segments[0].kernels_lowered_for, said);
}

// [batch, seq, 8, 40] summed over the batch, then over its last dim: the second reduction's rows are
// seq x 8, without the batch. Its canonical kernel's row count scales with seq alone (8 x 301 rows at
// batch 5, not 5/4 of that), as its own lowering says, and the results are exact on the simulated device.
TEST(CanonicalRows, ASegmentWhoseRowsHaveNoBatchScalesWithTheExtentAlone) {
  auto fusion = std::make_shared<Fusion>();
  {
    FusionGuard guard(fusion.get());
    TensorView* x = defineTensor({-1, -1, -1, -1}, {true, true, true, true}, DataType::Float);
    fusion->addOutput(reduce(OpKind::Sum, reduce(OpKind::Sum, x, {0}), {2}));
  }
  device::NoOpDeviceOps no_ops;
  exec::FusionCache canonical(fusion, {}, &no_ops, DeviceInfo::h100Sxm());
  PlanOptions own_options;
  own_options.reuse_kernels = false;
  exec::FusionCache own(fusion, own_options, &no_ops, DeviceInfo::h100Sxm());
  device::SimDeviceOps sim_ops;
  exec::FusionCache simulated(fusion, {}, &sim_ops, DeviceInfo::h100Sxm());
  for (const int64_t batch : {4, 5}) {
    for (const int64_t seq : {511, 301}) {
      const std::string what = "[" + std::to_string(batch) + ", " + std::to_string(seq) + ", 8, 40]";
      const auto addresses = std::vector<DeviceValue>{
          DeviceTensor::contiguous(0x10000000, DataType::Float, {batch, seq, 8, 40})};
      expectSameKernels(canonical.prepare(addresses)->compiled(), own.prepare(addresses)->compiled(), what);
      const std::vector<HostValue> inputs = testing::randomInputs(*fusion, 3, {{batch, seq, 8, 40}});
      testing::expectClose(exec::runOnHost(simulated, inputs), evaluate(*fusion, inputs), what);
    }
  }
}

// A [seq, hidden] table added to [batch, seq, hidden] before a row sum: its rows are the flat row index's
// remainder by seq, so the code names seq. The kernels lowered at a second extent of the class differ,
// and every sequence length is lowered for itself, exactly.
TEST(CanonicalRows, CodeThatNamesTheSequenceLengthIsLoweredForEachOne) {
  auto fusion = std::make_shared<Fusion>();
  {
    FusionGuard guard(fusion.get());
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
    TensorView* table = defineTensor({-1, -1}, {true, true}, DataType::Float);
    fusion->addOutput(reduce(OpKind::Sum, add(x, broadcast(table, {true, false, false}))->asTensor(), {2}));
  }
  device::SimDeviceOps ops;
  exec::FusionCache cache(fusion, {}, &ops, DeviceInfo::h100Sxm());
  for (int64_t seq : {129, 201}) {
    const std::vector<HostValue> inputs = testing::randomInputs(*fusion, 7, {{2, seq, 40}, {seq, 40}});
    const std::string what = "seq " + std::to_string(seq);
    testing::expectClose(exec::runOnHost(cache, inputs), evaluate(*fusion, inputs), what);
    const SegmentedFusion& plan = cache.lastPlan()->compiled().plan;
    ASSERT_EQ(plan.segments.size(), 1u) << plan.toString();
    EXPECT_EQ(plan.segments[0].kernels_lowered_for, "") << what;
  }
  EXPECT_EQ(cache.kernelCount(), 2u);  // one per sequence length: their code differs
}

}  // namespace
}  // namespace braze
