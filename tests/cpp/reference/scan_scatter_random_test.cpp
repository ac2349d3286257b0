// cumsum, scatter, index_put_accumulate and the random tensors on the reference evaluator: hand-computed
// values, torch's integer and index rules, Philox's published answers, and the statistics and
// determinism of uniform and normal.
#include "fusions/evaluate_defined.h"
#include "fusions/host_util.h"
#include "support/error.h"
#include "ir/ops.h"
#include "ir/random_numbers.h"
#include "reference/evaluator.h"

#include <gtest/gtest.h>

#include <cmath>

namespace braze {
namespace {

using testing::asTensor;
using testing::evaluateDefined;
using testing::tensorOf;
using testing::valuesOf;

Val* i64(Fusion& f, int64_t v) { return f.constant(v); }

TEST(RandomNumbers, PhiloxGivesThePublishedAnswers) {
  // The known-answer vectors of Random123's philox4x32_10.
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}), (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(RandomNumbers, UniformAndNormalHaveTheirMomentsAndDependOnSeedAndOffsetOnly) {
  const auto draw = [](OpKind kind, int64_t seed, int64_t offset, DataType dtype, int64_t n) {
    return valuesOf(asTensor(evaluateDefined(
        [&](Fusion& f) {
          Val* a = f.constant(kind == OpKind::Uniform ? -1.0 : 3.0);
          Val* b = f.constant(kind == OpKind::Uniform ? 2.0 : 0.5);
          const std::vector<Val*> shape{i64(f, n)};
          f.addOutput(kind == OpKind::Uniform ? uniform(a, b, shape, i64(f, seed), i64(f, offset), dtype)
                                              : normal(a, b, shape, i64(f, seed), i64(f, offset), dtype));
        },
        {})[0]));
  };
  const int64_t n = 40001;  // odd: the last Philox call is used in part
  const std::vector<double> u = draw(OpKind::Uniform, 42, 0, DataType::Float, n);
  double mean = 0, var = 0;
  for (double v : u) {
    ASSERT_GE(v, -1.0);
    ASSERT_LT(v, 2.0);
    mean += v / n;
  }
  for (double v : u) var += (v - mean) * (v - mean) / n;
  EXPECT_NEAR(mean, 0.5, 0.02);       // (a + b) / 2
  EXPECT_NEAR(var, 9.0 / 12, 0.02);   // (b - a)^2 / 12
  const std::vector<double> z = draw(OpKind::Normal, 42, 0, DataType::Double, n);
  mean = var = 0;
  for (double v : z) mean += v / n;
  for (double v : z) var += (v - mean) * (v - mean) / n;
  EXPECT_NEAR(mean, 3.0, 0.02);
  EXPECT_NEAR(var, 0.25, 0.01);
  // Element i depends on (seed, offset, i) only: a prefix of a longer draw is the shorter draw.
  const std::vector<double> head = draw(OpKind::Uniform, 42, 0, DataType::Float, 7);
  EXPECT_EQ(head, std::vector<double>(u.begin(), u.begin() + 7));
  EXPECT_NE(draw(OpKind::Uniform, 42, 1, DataType::Float, 7), head);
  EXPECT_NE(draw(OpKind::Uniform, 43, 0, DataType::Float, 7), head);
  // A bf16 draw is the float draw rounded, and stays below the upper bound.
  for (double v : draw(OpKind::Uniform, 5, 9, DataType::BFloat16, 4000)) ASSERT_LT(v, 2.0);
}

TEST(Evaluator, CumsumAlongADimFollowsTorch) {
  const HostTensor x = tensorOf(DataType::Float, {2, 3}, {1, 2, 3, 4, 5, 6});
  const auto out = evaluateDefined(
      [](Fusion& f) {
        TensorView* t = defineTensor({-1, -1}, {true, true}, DataType::Float);
        f.addOutput(cumsum(t, 1));
        f.addOutput(cumsum(t, -2));
      },
      {x});
  EXPECT_EQ(valuesOf(asTensor(out[0])), (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(valuesOf(asTensor(out[1])), (std::vector<double>{1, 2, 3, 5, 7, 9}));
  // Int8 and Bool inputs sum in Int64, as torch.cumsum does (no int8 wrap-around).
  const HostTensor bytes = tensorOf(DataType::Int8, {3}, {100, 100, 100});
  const auto wide = evaluateDefined(
      [](Fusion& f) { f.addOutput(cumsum(defineTensor({-1}, {true}, DataType::Int8), 0)); }, {bytes});
  EXPECT_EQ(asTensor(wide[0]).dtype(), DataType::Int64);
  EXPECT_EQ(valuesOf(asTensor(wide[0])), (std::vector<double>{100, 200, 300}));
}

TEST(Evaluator, ScatterWritesWhereTheIndexSaysAndChecksBounds) {
  const HostTensor x = tensorOf(DataType::Float, {3, 2}, {0, 0, 0, 0, 0, 0});
  const HostTensor index = tensorOf(DataType::Int64, {1, 2}, {2, 0});
  const HostTensor src = tensorOf(DataType::Float, {2, 2}, {7, 8, 9, 10});
  auto body = [](Fusion& f) {
    TensorView* t = defineTensor({-1, -1}, {true, true}, DataType::Float);
    TensorView* i = defineTensor({-1, -1}, {true, true}, DataType::Int64);
    TensorView* s = defineTensor({-1, -1}, {true, true}, DataType::Float);
    f.addOutput(scatter(t, i, s, 0));
  };
  EXPECT_EQ(valuesOf(asTensor(evaluateDefined(body, {x, index, src})[0])), (std::vector<double>{0, 8, 0, 0, 7, 0}));
  const HostTensor bad = tensorOf(DataType::Int64, {1, 2}, {3, 0});
  try {
    evaluateDefined(body, {x, bad, src});
    FAIL() << "expected an index error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
    EXPECT_NE(std::string(e.what()).find("scatter: index 3 is out of bounds for dim 0"), std::string::npos) << e.what();
  }
}

TEST(Evaluator, IndexPutAccumulateAddsRepeatedAndNegativeIndices) {
  const HostTensor acc = tensorOf(DataType::Float, {3, 2}, {1, 1, 1, 1, 1, 1});
  const HostTensor index = tensorOf(DataType::Int32, {3}, {0, -1, 0});  // -1 is row 2, as in torch
  const HostTensor value = tensorOf(DataType::Float, {3, 2}, {1, 2, 3, 4, 5, 6});
  const auto out = evaluateDefined(
      [](Fusion& f) {
        TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
        TensorView* i = defineTensor({-1}, {true}, DataType::Int32);
        TensorView* v = defineTensor({-1, -1}, {true, true}, DataType::Float);
        f.addOutput(indexPutAccumulate(a, i, v));
      },
      {acc, index, value});
  EXPECT_EQ(valuesOf(asTensor(out[0])), (std::vector<double>{7, 9, 1, 1, 4, 5}));
}

TEST(ScanScatterBuilders, CheckTheirOperands) {
  Fusion f;
  FusionGuard guard(&f);
  TensorView* x = defineTensor({4, 8}, {true, true}, DataType::Float);
  TensorView* fi = defineTensor({4, 8}, {true, true}, DataType::Float);
  TensorView* wide = defineTensor({9, 8}, {true, true}, DataType::Int64);
  EXPECT_THROW(cumsum(x, 2), Error);
  EXPECT_THROW(scatter(x, fi, x, 0), Error);    // a floating index
  EXPECT_THROW(scatter(x, wide, x, 0), Error);  // an index larger than src
  EXPECT_THROW(indexPutAccumulate(x, x, x), Error);
  EXPECT_THROW(uniform(f.constant(0.0), f.constant(1.0), {f.constant(int64_t{3})}, f.constant(0.5),
                       f.constant(int64_t{0}), DataType::Float),
               Error);  // a floating seed
  EXPECT_THROW(normal(f.constant(0.0), f.constant(1.0), {f.constant(int64_t{3})}, f.constant(int64_t{0}),
                      f.constant(int64_t{0}), DataType::Int32),
               Error);  // an integer dtype
}

}  // namespace
}  // namespace braze
