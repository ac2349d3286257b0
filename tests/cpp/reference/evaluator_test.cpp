// The reference evaluator against hand-computed values: every op family, integer and float
// semantics, any input layout. The evaluator is the oracle, so these tests pin its meaning.
#include "fusions/evaluate_defined.h"
#include "fusions/host_util.h"
#include "fusions/layer_norm.h"
#include "support/error.h"
#include "ir/ops.h"
#include "reference/evaluator.h"

#include <gtest/gtest.h>

#include <cmath>

namespace braze {
namespace {

using testing::asTensor;
using testing::evaluateDefined;
using testing::tensorOf;
using testing::valuesOf;

TEST(Evaluator, SeedLayerNormMatchesFloat64WithinBFloat16) {
  const testing::LayerNormShape shape{.batch = 2, .seq = 3, .hidden = 40};
  Fusion fusion;
  testing::defineLayerNorm(fusion, shape);
  HostTensor x = testing::randomTensor(DataType::BFloat16, {2, 3, 40}, 1);
  HostTensor w = testing::randomTensor(DataType::BFloat16, {40}, 2);
  HostTensor b = testing::randomTensor(DataType::BFloat16, {40}, 3);
  const HostTensor out = asTensor(evaluate(fusion, {x, w, b})[0]);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2, 3, 40}));
  EXPECT_EQ(out.dtype(), DataType::BFloat16);
  const auto xs = valuesOf(x), ws = valuesOf(w), bs = valuesOf(b), os = valuesOf(out);
  for (int64_t row = 0; row < 6; ++row) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < 40; ++c) mean += xs[row * 40 + c] / 40;
    for (int64_t c = 0; c < 40; ++c) var += (xs[row * 40 + c] - mean) * (xs[row * 40 + c] - mean) / 40;
    for (int64_t c = 0; c < 40; ++c) {
      const double expected = (xs[row * 40 + c] - mean) / std::sqrt(var + 1e-5) * ws[c] + bs[c];
      EXPECT_NEAR(os[row * 40 + c], expected, std::abs(expected) * 0x1p-8 + 1e-6) << "row " << row << " col " << c;
    }
  }
}

TEST(Evaluator, BroadcastOperandsAndExpandedInputs) {
  // x [2, 3] + y [1 (broadcast), 3], and an expanded input (stride 0) that must read one value per row.
  // Two values for a [2, 3] tensor expanded along its last dim (stride 0), kept alive by the wrapper.
  const std::shared_ptr<float[]> expanded(new float[2]{100, 200});
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
        auto* y = defineTensor({1, -1}, {std::nullopt, true}, DataType::Float);
        auto* e = defineTensor({-1, -1}, {true, std::nullopt}, DataType::Float);
        f.addOutput(add(add(x, y), e));
      },
      {tensorOf(DataType::Float, {2, 3}, {1, 2, 3, 4, 5, 6}), tensorOf(DataType::Float, {1, 3}, {10, 20, 30}),
       HostTensor::wrap(expanded.get(), DataType::Float, {2, 3}, {1, 0}, expanded)});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{111, 122, 133, 214, 225, 236}));
}

TEST(Evaluator, NonContiguousInputReadsThroughStrides) {
  std::vector<float> storage{1, 2, 3, 4, 5, 6};  // a 2x3 row-major buffer viewed as its 3x2 transpose
  HostTensor t = HostTensor::wrap(storage.data(), DataType::Float, {3, 2}, {1, 3});
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* x = defineTensor({-1, -1}, {true, true}, DataType::Float, false, {0, 1});
        f.addOutput(mul(x, f.constant(2.0)));
      },
      {t});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{2, 8, 4, 10, 6, 12}));
}

TEST(Evaluator, IntegerSemanticsFollowCpp) {
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1}, {true}, DataType::Int32);
        auto* b = defineTensor({-1}, {true}, DataType::Int32);
        f.addOutput(binaryOp(OpKind::Div, a, b));        // truncates toward zero
        f.addOutput(binaryOp(OpKind::Fmod, a, b));       // sign of the dividend
        f.addOutput(binaryOp(OpKind::Remainder, a, b));  // sign of the divisor
        f.addOutput(binaryOp(OpKind::TrueDiv, a, b));    // promotes to Float
        f.addOutput(binaryOp(OpKind::BitwiseRightShift, a, f.constant(int64_t{1})));
        f.addOutput(binaryOp(OpKind::LogicalRightShift, a, f.constant(int64_t{28})));
      },
      {tensorOf(DataType::Int32, {4}, {7, -7, 7, -7}), tensorOf(DataType::Int32, {4}, {2, 2, -2, -2})});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{3, -3, -3, 3}));
  EXPECT_EQ(valuesOf(asTensor(outs[1])), (std::vector<double>{1, -1, 1, -1}));
  EXPECT_EQ(valuesOf(asTensor(outs[2])), (std::vector<double>{1, 1, -1, -1}));
  EXPECT_EQ(asTensor(outs[3]).dtype(), DataType::Float);
  EXPECT_EQ(valuesOf(asTensor(outs[3])), (std::vector<double>{3.5, -3.5, -3.5, 3.5}));
  EXPECT_EQ(valuesOf(asTensor(outs[4])), (std::vector<double>{3, -4, 3, -4}));
  // -7 as uint32 is 0xFFFFFFF9; >> 28 gives 15: the shift works on the type's own 32 bits.
  EXPECT_EQ(valuesOf(asTensor(outs[5])), (std::vector<double>{0, 15, 0, 15}));
}

TEST(Evaluator, Int8ArithmeticWrapsAround) {
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1}, {true}, DataType::Int8);
        f.addOutput(add(a, a));
      },
      {tensorOf(DataType::Int8, {3}, {100, -100, 64})});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{-56, 56, -128}));
}

TEST(Evaluator, IntegerDivisionByZeroIsAnError) {
  EXPECT_THROW(evaluateDefined(
                   [](Fusion& f) {
                     auto* a = defineTensor({-1}, {true}, DataType::Int64);
                     f.addOutput(binaryOp(OpKind::Div, a, f.constant(int64_t{0})));
                   },
                   {tensorOf(DataType::Int64, {1}, {3})}),
               Error);
}

TEST(Evaluator, FloatDivisionByZeroAndNaNFollowIeee) {
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1}, {true}, DataType::Float);
        f.addOutput(div(a, f.constant(0.0)));
        f.addOutput(binaryOp(OpKind::Maximum, a, f.constant(std::nan(""))));
        f.addOutput(reduce(OpKind::Max, a, {0}));
      },
      {tensorOf(DataType::Float, {3}, {1, -1, std::nan("")})});
  const auto q = valuesOf(asTensor(outs[0]));
  EXPECT_TRUE(std::isinf(q[0]) && q[0] > 0);
  EXPECT_TRUE(std::isinf(q[1]) && q[1] < 0);
  EXPECT_TRUE(std::isnan(q[2]));
  for (double v : valuesOf(asTensor(outs[1]))) EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(std::isnan(valuesOf(asTensor(outs[2]))[0]));  // max propagates NaN
}

TEST(Evaluator, CastSaturatesAndRoundsLikeCuda) {
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1}, {true}, DataType::Float);
        f.addOutput(cast(a, DataType::Int8));
        f.addOutput(cast(a, DataType::BFloat16));
        f.addOutput(cast(a, DataType::Float8_e4m3fn));
      },
      {tensorOf(DataType::Float, {4}, {300.7, -2.9, std::nan(""), 1.00390625})});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{127, -2, 0, 1}));
  EXPECT_EQ(valuesOf(asTensor(outs[1]))[3], 1.0);  // 1 + 2^-8 is a tie in bf16: rounds to even (1.0)
  EXPECT_EQ(valuesOf(asTensor(outs[2]))[0], 288.0);  // nearest e4m3 value (steps of 32 above 256)
}

// A sum over dim 1, a product over dim 0 (kept as size 1 where `keep_prod_dim`), a min of all, var_mean
// over dim 1 with correction 1, and welford's m2 and count over the last dim, of a [-1, -1] Float input.
TensorView* defineReductions(Fusion& f, bool keep_prod_dim) {
  auto* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
  f.addOutput(reduce(OpKind::Sum, a, {1}));
  f.addOutput(reduce(OpKind::Prod, a, {0}, keep_prod_dim));
  f.addOutput(reduce(OpKind::Min, a, {0, 1}));
  auto [var, mean] = varMean(a, {1}, /*correction=*/1.0);
  f.addOutput(var);
  f.addOutput(mean);
  auto [avg, m2, n] = welford(a, {-1});
  f.addOutput(m2);
  f.addOutput(n);
  return a;
}

TEST(Evaluator, ReductionsAndStatistics) {
  const auto x = tensorOf(DataType::Float, {2, 3}, {1, 2, 3, 4, 5, 9});
  const auto outs = evaluateDefined([](Fusion& f) { defineReductions(f, /*keep_prod_dim=*/true); }, {x});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{6, 18}));
  EXPECT_EQ(asTensor(outs[1]).sizes(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(valuesOf(asTensor(outs[1])), (std::vector<double>{4, 10, 27}));
  EXPECT_EQ(valuesOf(asTensor(outs[2])), (std::vector<double>{1}));
  EXPECT_EQ(valuesOf(asTensor(outs[3])), (std::vector<double>{1, 7}));
  EXPECT_EQ(valuesOf(asTensor(outs[4])), (std::vector<double>{2, 6}));
  EXPECT_EQ(valuesOf(asTensor(outs[5])), (std::vector<double>{2, 14}));
  EXPECT_EQ(valuesOf(asTensor(outs[6])), (std::vector<double>{3, 3}));
}

// A nudged reference (condition estimation in the fuzz tests) scales what a kernel accumulates in float:
// sums, products, means and squared deviations; not a min, a count or an integer sum. The nudge lasts as
// long as its scope, and an inner one gives way to the outer when it ends.
TEST(Evaluator, ANudgeScalesTheFloatAccumulationsWhileItLives) {
  const auto x = tensorOf(DataType::Float, {2, 3}, {1, 2, 3, 4, 5, 9});
  const auto define = [](Fusion& f) {
    TensorView* a = defineReductions(f, /*keep_prod_dim=*/false);
    f.addOutput(reduce(OpKind::Sum, cast(a, DataType::Int64)->asTensor(), {1}));
  };
  const auto check = [&](double scale) {
    const auto outs = evaluateDefined(define, {x});
    EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{6 * scale, 18 * scale}));
    EXPECT_EQ(valuesOf(asTensor(outs[1])), (std::vector<double>{4 * scale, 10 * scale, 27 * scale}));
    EXPECT_EQ(valuesOf(asTensor(outs[2])), (std::vector<double>{1}));
    EXPECT_EQ(valuesOf(asTensor(outs[3])), (std::vector<double>{1 * scale, 7 * scale}));
    EXPECT_EQ(valuesOf(asTensor(outs[4])), (std::vector<double>{2 * scale, 6 * scale}));
    EXPECT_EQ(valuesOf(asTensor(outs[5])), (std::vector<double>{2 * scale, 14 * scale}));
    EXPECT_EQ(valuesOf(asTensor(outs[6])), (std::vector<double>{3, 3}));
    EXPECT_EQ(valuesOf(asTensor(outs[7])), (std::vector<double>{6, 18}));
  };
  {
    const ScopedReductionNudge outer(0.25);
    check(1.25);
    {
      const ScopedReductionNudge inner(-0.5);
      check(0.5);
    }
    check(1.25);
  }
  check(1.0);
}

TEST(Evaluator, SumOfIntegersIsInt64) {
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1}, {true}, DataType::Int8);
        f.addOutput(reduce(OpKind::Sum, a, {0}));
      },
      {tensorOf(DataType::Int8, {3}, {100, 100, 100})});
  EXPECT_EQ(asTensor(outs[0]).dtype(), DataType::Int64);
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{300}));
}

TEST(Evaluator, MetaOpsAreViewsWithTheRightValues) {
  const auto x = tensorOf(DataType::Float, {2, 3}, {0, 1, 2, 3, 4, 5});
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
        auto c = [&](int64_t v) -> Val* { return f.constant(v); };
        f.addOutput(permute(a, {1, 0}));
        f.addOutput(reshape(a, {c(3), c(-1)}));
        f.addOutput(slice(a, {c(0), c(1)}, {c(2), c(-1)}, {c(1), c(1)}));
        f.addOutput(squeeze(broadcast(a, {false, true, false}), {1}));
        f.addOutput(expand(broadcastInDim(a, {c(2), c(1), c(3)}, {0, 2}), {c(-1), c(2), c(-1)}));
        f.addOutput(slice(a, {c(0), c(0)}, {c(2), c(3)}, {c(1), c(2)}));
      },
      {x});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(asTensor(outs[1]).sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(valuesOf(asTensor(outs[2])), (std::vector<double>{1, 4}));
  EXPECT_EQ(valuesOf(asTensor(outs[3])), valuesOf(x));
  EXPECT_EQ(valuesOf(asTensor(outs[4])), (std::vector<double>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  EXPECT_EQ(valuesOf(asTensor(outs[5])), (std::vector<double>{0, 2, 3, 5}));
}

TEST(Evaluator, PadCatFullIota) {
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
        auto c = [&](int64_t v) -> Val* { return f.constant(v); };
        f.addOutput(pad(a, {c(1), c(0), c(0), c(1)}, f.constant(9.0)));
        f.addOutput(cat({a, a}, -1));
        f.addOutput(full({c(2)}, f.constant(1.5), DataType::BFloat16));
        f.addOutput(iota(c(4), f.constant(int64_t{3}), f.constant(int64_t{-2}), DataType::Int64));
      },
      {tensorOf(DataType::Float, {1, 2}, {1, 2})});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{9, 1, 2, 9, 9, 9}));
  EXPECT_EQ(valuesOf(asTensor(outs[1])), (std::vector<double>{1, 2, 1, 2}));
  EXPECT_EQ(valuesOf(asTensor(outs[2])), (std::vector<double>{1.5, 1.5}));
  EXPECT_EQ(valuesOf(asTensor(outs[3])), (std::vector<double>{3, 1, -1, -3}));
}

TEST(Evaluator, IndexingOpsAndOutOfBoundsIndex) {
  auto body = [](Fusion& f) {
    auto* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
    auto* i1 = defineTensor({-1}, {true}, DataType::Int64);
    auto* i2 = defineTensor({-1, -1}, {true, true}, DataType::Int64);
    f.addOutput(indexSelect(a, i1, 1));
    f.addOutput(gather(a, i2, 1));
    f.addOutput(takeAlongAxis(a, i2, 1));
  };
  const auto a = tensorOf(DataType::Float, {2, 3}, {0, 1, 2, 3, 4, 5});
  const auto outs = evaluateDefined(body, {a, tensorOf(DataType::Int64, {2}, {2, 0}), tensorOf(DataType::Int64, {2, 1}, {1, 2})});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{2, 0, 5, 3}));
  EXPECT_EQ(valuesOf(asTensor(outs[1])), (std::vector<double>{1, 5}));
  EXPECT_EQ(valuesOf(asTensor(outs[2])), (std::vector<double>{1, 5}));
  try {
    evaluateDefined(body, {a, tensorOf(DataType::Int64, {1}, {3}), tensorOf(DataType::Int64, {2, 1}, {0, 0})});
    FAIL() << "an out-of-bounds index must raise";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
    EXPECT_NE(std::string(e.what()).find("index 3 is out of bounds"), std::string::npos) << e.what();
  }
}

TEST(Evaluator, Int8MatmulAccumulatesInInt32) {
  // 100 * 100 * 2 = 20000 does not fit int8: the default Int32 result holds it exactly.
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1, -1}, {true, true}, DataType::Int8);
        auto* b = defineTensor({-1, -1}, {true, true}, DataType::Int8);
        f.addOutput(matmul(a, b));
      },
      {tensorOf(DataType::Int8, {1, 2}, {100, 100}), tensorOf(DataType::Int8, {2, 1}, {100, 100})});
  EXPECT_EQ(asTensor(outs[0]).dtype(), DataType::Int32);
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{20000}));
}

TEST(Evaluator, BatchedMatmulAndLinearWithBias) {
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
        auto* b = defineTensor({-1, -1}, {true, true}, DataType::Float);
        auto* bias = defineTensor({-1}, {true}, DataType::Float);
        f.addOutput(matmul(a, b));
        f.addOutput(linear(a, b, bias));
      },
      {tensorOf(DataType::Float, {2, 1, 2}, {1, 2, 3, 4}), tensorOf(DataType::Float, {2, 2}, {1, 0, 0, 2}),
       tensorOf(DataType::Float, {2}, {10, 20})});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{1, 4, 3, 8}));
  // linear: a @ b^T + bias: b^T = [[1, 0], [0, 2]] (symmetric here), plus bias.
  EXPECT_EQ(valuesOf(asTensor(outs[1])), (std::vector<double>{11, 24, 13, 28}));
}

TEST(Evaluator, QuantizePerTensorChannelAndBlock) {
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
        auto* st = defineTensor({}, {}, DataType::Float);
        auto* sc = defineTensor({-1}, {true}, DataType::Float);
        auto* zp = defineTensor({-1}, {true}, DataType::Int32);
        auto* sb = defineTensor({-1, -1}, {true, true}, DataType::Float);
        f.addOutput(quantize(x, st, nullptr, DataType::Int8));
        TensorView* q = quantize(x, sc, zp, DataType::Int8, {.axis = 0, .block_shape = {}});
        f.addOutput(q);
        f.addOutput(dequantize(q, sc, zp, DataType::Float, {.axis = 0, .block_shape = {}}));
        f.addOutput(quantize(x, sb, nullptr, DataType::Float8_e4m3fn, {.axis = std::nullopt, .block_shape = {1, 2}}));
      },
      {tensorOf(DataType::Float, {2, 3}, {0.5, 1.5, 1000, -2.5, 3, -1000}), tensorOf(DataType::Float, {}, {1}),
       tensorOf(DataType::Float, {2}, {0.5, 2}), tensorOf(DataType::Int32, {2}, {1, -1}),
       tensorOf(DataType::Float, {2, 2}, {1, 0.001, 1, 1})});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{0, 2, 127, -2, 3, -128}));  // half to even, saturated
  EXPECT_EQ(valuesOf(asTensor(outs[1])), (std::vector<double>{2, 4, 127, -2, 1, -128}));
  EXPECT_EQ(valuesOf(asTensor(outs[2])), (std::vector<double>{0.5, 1.5, 63, -2, 4, -254}));
  EXPECT_EQ(valuesOf(asTensor(outs[3])), (std::vector<double>{0.5, 1.5, 448, -2.5, 3, -448}));
}

TEST(Evaluator, SymbolicScalarsAndSizeQueries) {
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1, -1}, {true, true}, DataType::Float);
        auto* s = defineScalar(DataType::Double);
        f.addOutput(mul(a, s));
        f.addOutput(mul(size(a, 0), size(a, 1)));
      },
      {tensorOf(DataType::Float, {2, 2}, {1, 2, 3, 4}), ScalarValue{0.5}});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{0.5, 1, 1.5, 2}));
  EXPECT_EQ(toInt(std::get<ScalarValue>(outs[1])), 4);
}

TEST(Evaluator, AliasedOutputIsWrittenIntoItsInputAndNotReturned) {
  std::vector<float> storage{1, 2, 3};
  Fusion fusion;
  {
    FusionGuard guard(&fusion);
    auto* a = defineTensor({-1}, {true}, DataType::Float);
    fusion.aliasOutputToInput(mul(a, fusion.constant(2.0)), a);
    fusion.addOutput(add(a, fusion.constant(1.0)));
  }
  const auto outs = evaluate(fusion, {HostTensor::wrap(storage.data(), DataType::Float, {3}, {1})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{2, 3, 4}));  // computed from the old values
  EXPECT_EQ(storage, (std::vector<float>{2, 4, 6}));
}

}  // namespace
}  // namespace braze

namespace braze {
namespace {

TEST(Evaluator, EmptyInputsSkipLayoutChecks) {
  // numpy gives an empty array stride 0 everywhere; there is no memory whose layout could be wrong.
  int dummy = 0;
  const auto outs = evaluateDefined(
      [](Fusion& f) {
        auto* a = defineTensor({-1, -1}, {true, true}, DataType::Int32);
        f.addOutput(reduce(OpKind::Sum, a, {1}));
      },
      {HostTensor::wrap(&dummy, DataType::Int32, {3, 0}, {0, 0})});
  EXPECT_EQ(valuesOf(asTensor(outs[0])), (std::vector<double>{0, 0, 0}));
}

}  // namespace
}  // namespace braze
