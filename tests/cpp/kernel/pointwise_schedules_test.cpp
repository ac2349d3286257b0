// Pointwise tiling: 2D (rows x columns) when an input is broadcast along the leading dims, 1D
// otherwise; both through the simulator against the reference, on odd sizes and vectorized dtypes.
#include "fusions/kernel_util.h"
#include "ir/ops.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using testing::expectDeviceMatches;
using testing::ints;
using testing::onlyKernel;
using testing::randomInputs;

TEST(PointwiseSchedules, ABiasOverRowsGets2DTiles) {
  struct Case {
    std::vector<int64_t> x;
    DataType dtype;
    int64_t vectorize;
  };
  for (const Case& c : {Case{{13, 7}, DataType::Float, 1}, Case{{5, 3, 64}, DataType::BFloat16, 8},
                        Case{{1000, 48}, DataType::Half, 8}, Case{{2, 1, 4, 12}, DataType::Float, 4}}) {
    Fusion f;
    {
      FusionGuard g(&f);
      const int64_t rank = static_cast<int64_t>(c.x.size());
      TensorView* x = defineTensor(std::vector<int64_t>(rank, -1), std::vector<std::optional<bool>>(rank, true), c.dtype);
      TensorView* bias = defineTensor({-1}, {true}, c.dtype);
      std::vector<int64_t> dims{rank - 1};
      Val* b = broadcastInDim(bias, ints(f, c.x), dims);
      f.addOutput(cast(mul(add(cast(x, DataType::Float), cast(b, DataType::Float)), f.constant(2.0)), c.dtype));
    }
    const auto compiled = expectDeviceMatches(f, randomInputs(f, 21, {c.x, {c.x.back()}}));
    const kernel::Kernel& k = onlyKernel(compiled);
    EXPECT_NE(k.summary.find("pointwise 2D"), std::string::npos) << k.summary;
    EXPECT_EQ(k.vectorize, c.vectorize) << k.summary;
  }
}

TEST(PointwiseSchedules, AnInputBroadcastAlongTheFirstDimOnlyBreaksThere) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
    TensorView* y = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f.addOutput(sub(x, broadcastInDim(y, ints(f, {6, 5, 8}), {1, 2})));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 22, {{6, 5, 8}, {5, 8}}));
  const kernel::Kernel& k = onlyKernel(compiled);
  EXPECT_NE(k.summary.find("rows = dims [0, 1)"), std::string::npos) << k.summary;
}

TEST(PointwiseSchedules, NoBroadcastKeeps1DTiles) {
  Fusion f;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* y = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f.addOutput(add(x, y));
  }
  const auto compiled = expectDeviceMatches(f, randomInputs(f, 23, {{9, 33}, {9, 33}}));
  EXPECT_EQ(onlyKernel(compiled).summary.find("2D"), std::string::npos) << onlyKernel(compiled).summary;
}

}  // namespace
}  // namespace braze
