// Shape and type inference of the op builders, and the errors they raise for bad definitions.
#include "fusions/layer_norm.h"
#include "support/error.h"
#include "ir/ops.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

// Expects `fn` to throw a braze::Error of `kind` whose message contains every one of `parts`.
template <typename Fn>
void expectError(Fn&& fn, ErrorKind kind, std::initializer_list<std::string_view> parts) {
  try {
    fn();
    FAIL() << "expected an error mentioning " << *parts.begin();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    for (std::string_view part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

class Builders : public ::testing::Test {
 protected:
  Fusion fusion;
  FusionGuard guard{&fusion};
  Val* c(int64_t v) { return fusion.constant(v); }
};

TEST(DataTypes, PromotionFollowsPyTorch) {
  EXPECT_EQ(promoteTypes(DataType::Int8, DataType::UInt8), DataType::Int16);
  EXPECT_EQ(promoteTypes(DataType::Half, DataType::BFloat16), DataType::Float);
  EXPECT_EQ(promoteTypes(DataType::Int64, DataType::Half), DataType::Half);
  EXPECT_EQ(promoteTypes(DataType::Bool, DataType::Int32), DataType::Int32);
  EXPECT_EQ(promoteTypes(DataType::Float8_e4m3fn, DataType::BFloat16), DataType::BFloat16);
  EXPECT_EQ(promoteTypes(DataType::Float, DataType::Double), DataType::Double);
  for (DataType t : kAllDataTypes) {
    EXPECT_EQ(dataTypeFromString(toString(t)), t);
    EXPECT_EQ(promoteTypes(t, t), t);
  }
}

TEST_F(Builders, HalfPrecisionArithmeticReturnsFloatLikeNvFuser) {
  auto* a = defineTensor({-1}, {true}, DataType::BFloat16);
  EXPECT_EQ(add(a, a)->dtype(), DataType::Float);
  EXPECT_EQ(unaryOp(OpKind::Exp, a)->dtype(), DataType::Float);
  EXPECT_EQ(unaryOp(OpKind::Relu, a)->dtype(), DataType::BFloat16);  // keeps the input type
  EXPECT_EQ(ternaryOp(OpKind::Where, unaryOp(OpKind::IsNan, a), a, a)->dtype(), DataType::BFloat16);
  EXPECT_EQ(binaryOp(OpKind::Lt, a, a)->dtype(), DataType::Bool);
}

TEST_F(Builders, ScalarsOnlyChangeTheTypeAcrossCategories) {
  auto* i = defineTensor({-1}, {true}, DataType::Int32);
  auto* f = defineTensor({-1}, {true}, DataType::Float);
  EXPECT_EQ(add(i, fusion.constant(int64_t{2}))->dtype(), DataType::Int32);
  EXPECT_EQ(add(i, fusion.constant(2.0))->dtype(), DataType::Float);
  EXPECT_EQ(add(f, fusion.constant(2.0))->dtype(), DataType::Float);
  EXPECT_EQ(binaryOp(OpKind::TrueDiv, i, i)->dtype(), DataType::Float);
  EXPECT_EQ(binaryOp(OpKind::Div, i, i)->dtype(), DataType::Int32);
}

TEST_F(Builders, BroadcastingDimsAndExpandedInputs) {
  auto* x = defineTensor({-1, 8}, {true, true}, DataType::Float);
  auto* b = defineTensor({1, -1}, {std::nullopt, true}, DataType::Float);
  auto* e = defineTensor({16, -1}, {std::nullopt, true}, DataType::Float);  // expanded: None, not size 1
  EXPECT_EQ(b->logical()[0].type, IterType::Broadcast);
  EXPECT_EQ(e->logical()[0].type, IterType::Expanded);
  auto* out = add(x, b)->asTensor();
  EXPECT_EQ(out->staticShape(), (std::vector<int64_t>{-1, 8}));
  EXPECT_EQ(add(b, e)->asTensor()->logical()[0].type, IterType::Expanded);
  auto* other = defineTensor({-1, 9}, {true, true}, DataType::Float);
  expectError([&] { add(x, other); }, ErrorKind::Value, {"add", "dim 1", "8", "9"});
  // Different ranks: the lower-rank operand gets leading broadcast dims, as nvFuser (and numpy) align.
  auto* r3 = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
  auto* product = mul(x, r3)->asTensor();
  EXPECT_EQ(product->staticShape(), (std::vector<int64_t>{-1, -1, 8}));
  ASSERT_EQ(product->definition()->input(0)->definition()->kind(), OpKind::Broadcast);
  auto* scalar_tensor = defineTensor({}, {}, DataType::Float);
  EXPECT_EQ(add(scalar_tensor, r3)->asTensor()->rank(), 3);
  auto* r3_narrow = defineTensor({-1, -1, 7}, {true, true, true}, DataType::Float);
  expectError([&] { mul(x, r3_narrow); }, ErrorKind::Value, {"mul", "dim 2", "8", "7"});
}

TEST_F(Builders, ContiguityIsGivenInAllocationOrderWithAStrideOrder) {
  // Logical dims (a, b) stored column-major (stride_order [0, 1]): allocation order is (b, a), so
  // contiguity [False, True] says b is not contiguous and a (innermost) is.
  auto* t = defineTensor({-1, -1}, {false, true}, DataType::Float, false, {0, 1});
  EXPECT_EQ(t->layout().contiguity, (std::vector<std::optional<bool>>{true, false}));
  expectError([&] { defineTensor({-1, -1}, {true, true}, DataType::Float, false, {0, 0}); }, ErrorKind::Value,
              {"stride_order", "permutation"});
  expectError([&] { defineTensor({1}, {true}, DataType::Float); }, ErrorKind::Value, {"broadcast", "None"});
}

TEST_F(Builders, ReductionsKeepReducedDimsInTheDomainOnly) {
  auto* x = defineTensor({-1, 5, -1}, {true, true, true}, DataType::Float);
  auto* s = reduce(OpKind::Sum, x, {1, -1});
  EXPECT_EQ(s->rank(), 1);
  EXPECT_EQ(s->domain().size(), 3u);
  EXPECT_TRUE(s->domain()[1].isReduction());
  EXPECT_EQ(reduce(OpKind::Sum, x, {1}, /*keepdim=*/true)->staticShape(), (std::vector<int64_t>{-1, 1, -1}));
  expectError([&] { reduce(OpKind::Sum, x, {5}); }, ErrorKind::Index, {"sum", "dim 5", "rank 3"});
  expectError([&] { reduce(OpKind::Max, x, {0, 0}); }, ErrorKind::Value, {"max", "twice"});
  EXPECT_EQ(reduce(OpKind::Sum, defineTensor({-1}, {true}, DataType::Bool), {0})->dtype(), DataType::Int64);
}

TEST_F(Builders, MetaOpShapesAndErrors) {
  auto* x = defineTensor({4, 6}, {true, true}, DataType::Float);
  EXPECT_EQ(permute(x, {1, 0})->staticShape(), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(reshape(x, {c(3), c(-1)})->staticShape(), (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(slice(x, {c(1), c(-4)}, {c(3), c(100)}, {})->staticShape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(broadcastInDim(x, {c(2), c(4), c(6)}, {1, 2})->logical()[0].type, IterType::Expanded);
  EXPECT_EQ(cat({x, x}, 1)->staticShape(), (std::vector<int64_t>{4, 12}));
  EXPECT_EQ(pad(x, {c(1), c(2)})->staticShape(), (std::vector<int64_t>{4, 9}));
  expectError([&] { permute(x, {0, 0}); }, ErrorKind::Value, {"permute", "not a permutation"});
  expectError([&] { reshape(x, {c(5), c(5)}); }, ErrorKind::Value, {"reshape", "24 elements"});
  expectError([&] { squeeze(x, {0}); }, ErrorKind::Value, {"squeeze", "not of size 1"});
  expectError([&] { expand(x, {c(4), c(7)}); }, ErrorKind::Value, {"expand", "dim 1"});
  auto* y = defineTensor({5, 6}, {true, true}, DataType::Float);
  expectError([&] { cat({x, y}, 1); }, ErrorKind::Value, {"cat", "dim 0", "only dim 1 may differ"});
  auto* z = defineTensor({4, 6}, {true, true}, DataType::Half);
  expectError([&] { cat({x, z}, 0); }, ErrorKind::Type, {"cat", "dtype"});
  expectError([&] { broadcastInDim(x, {c(6), c(4)}, {1, 0}); }, ErrorKind::Value, {"broadcast_dims", "increasing"});
}

TEST_F(Builders, MatmulQuantizeAndIndexingTypes) {
  auto* a8 = defineTensor({-1, 64}, {true, true}, DataType::Int8);
  auto* b8 = defineTensor({64, -1}, {true, true}, DataType::Int8);
  EXPECT_EQ(matmul(a8, b8)->dtype(), DataType::Int32);  // never an int8 accumulator
  auto* bf = defineTensor({-1, 64}, {true, true}, DataType::BFloat16);
  auto* w = defineTensor({32, 64}, {true, true}, DataType::BFloat16);
  EXPECT_EQ(linear(bf, w)->staticShape(), (std::vector<int64_t>{-1, 32}));
  auto* w_bad = defineTensor({32, 63}, {true, true}, DataType::BFloat16);
  expectError([&] { linear(bf, w_bad); }, ErrorKind::Value, {"linear", "64", "63"});
  expectError([&] { matmul(a8, w); }, ErrorKind::Type, {"matmul", "both be floating or both be integer"});
  auto* x = defineTensor({-1, 64}, {true, true}, DataType::Float);
  auto* scale = defineTensor({32}, {true}, DataType::Float);
  expectError([&] { quantize(x, scale, nullptr, DataType::Int8, {.axis = 1, .block_shape = {}}); }, ErrorKind::Value,
              {"quantize", "32", "64"});
  expectError([&] { quantize(x, scale, nullptr, DataType::Float, {}); }, ErrorKind::Type, {"quantize", "Int8"});
  auto* idx = defineTensor({-1}, {true}, DataType::Float);
  expectError([&] { indexSelect(x, idx, 0); }, ErrorKind::Type, {"index_select", "integer"});
}

TEST_F(Builders, CopyingAFusionKeepsNamesAndGraph) {
  Fusion layer_norm;
  testing::defineLayerNorm(layer_norm, {});
  Fusion copy = layer_norm;
  ASSERT_EQ(copy.vals().size(), layer_norm.vals().size());
  ASSERT_EQ(copy.exprsToEvaluate().size(), layer_norm.exprsToEvaluate().size());
  for (size_t i = 0; i < copy.vals().size(); ++i) {
    EXPECT_EQ(copy.vals()[i]->name(), layer_norm.vals()[i]->name());
    EXPECT_EQ(copy.vals()[i]->fusion(), &copy);
  }
  Fusion moved = std::move(copy);
  EXPECT_EQ(moved.inputs()[0]->fusion(), &moved);
  EXPECT_EQ(moved.outputs()[0]->definition()->kind(), OpKind::CastOp);
}

// exprsToEvaluate keeps its order between calls; each edit that changes it gives the new order, never the
// kept one. Every step below asks for the order first, so that a kept one is there to go stale.
TEST_F(Builders, TheEvaluationOrderFollowsEveryEdit) {
  auto* x = defineTensor({-1}, {true}, DataType::Float);
  auto* a = set(x);
  auto* b = set(x);
  auto* c = set(b);
  fusion.addOutput(a);
  ASSERT_EQ(fusion.exprsToEvaluate(), (std::vector<Expr*>{a->definition()}));
  fusion.addOutput(c);  // a new output
  EXPECT_EQ(fusion.exprsToEvaluate(), (std::vector<Expr*>{a->definition(), b->definition(), c->definition()}));
  fusion.replaceInput(a->definition(), x, c);  // a = set(c): now after c
  EXPECT_EQ(fusion.exprsToEvaluate(), (std::vector<Expr*>{b->definition(), c->definition(), a->definition()}));
  // A new expr defining a tensor that is an output already.
  TensorView* late = fusion.newTensor(DataType::Float, x->domain());
  fusion.addOutput(late);
  EXPECT_EQ(fusion.exprsToEvaluate().size(), 3U);
  Expr* defines_late = fusion.newExpr(OpKind::Set, {x}, {late});
  EXPECT_EQ(fusion.exprsToEvaluate().back(), defines_late);
  // An output written into an input (add_output(alias_input=)), not an output before.
  auto* update = set(x);
  EXPECT_EQ(fusion.exprsToEvaluate().size(), 4U);
  fusion.aliasOutputToInput(update, x);
  EXPECT_EQ(fusion.exprsToEvaluate().back(), update->definition());
  // Copied and moved onto fusions that have an order of their own.
  Fusion other;
  testing::defineLayerNorm(other, {});
  ASSERT_GT(other.exprsToEvaluate().size(), 5U);
  other = fusion;
  const std::vector<Expr*> copied = other.exprsToEvaluate();
  ASSERT_EQ(copied.size(), 5U);
  for (const Expr* e : copied) EXPECT_EQ(e->output(0)->fusion(), &other);
  Fusion moved;
  testing::defineLayerNorm(moved, {});
  ASSERT_GT(moved.exprsToEvaluate().size(), 5U);
  moved = std::move(other);
  const std::vector<Expr*> after_move = moved.exprsToEvaluate();
  ASSERT_EQ(after_move.size(), 5U);
  for (const Expr* e : after_move) EXPECT_EQ(e->output(0)->fusion(), &moved);
}

}  // namespace
}  // namespace braze
