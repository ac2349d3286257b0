// Fusion <-> JSON: a corpus with every OpKind round-trips to identical printouts and an identical
// record, and each kind of malformed record is a braze::Error that says what is wrong.
#include "support/error.h"
#include "ir/json.h"
#include "ir/ops.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace braze {
namespace {

using std::nullopt;
using json = nlohmann::json;

Val* i64(int64_t v) { return FusionGuard::current()->constant(v); }

Fusion build(const std::function<void(Fusion&)>& body) {
  Fusion f;
  FusionGuard guard(&f);
  body(f);
  return f;
}

// Every unary and binary op, so a new elementwise row in op_kind.cpp is covered without a test edit.
Fusion elementwise() {
  return build([](Fusion& f) {
    TensorView* x = defineTensor({-1, 8}, {true, true}, DataType::Float);
    TensorView* y = defineTensor({1, 8}, {nullopt, true}, DataType::Float);
    TensorView* n = defineTensor({-1, 8}, {true, true}, DataType::Int32);
    for (const OpInfo& op : allOps()) {
      const bool integer = op.result == ResultType::IntegerOnly;
      if (op.category == OpCategory::Unary) f.addOutput(unaryOp(op.kind, integer ? n : x));
      if (op.category == OpCategory::Binary) f.addOutput(binaryOp(op.kind, integer ? n : x, integer ? i64(3) : y));
    }
    Scalar* s = defineScalar(DataType::Int64);
    f.addOutput(add(s, i64(2)));  // a scalar-only expr
  });
}

Fusion ternaryAndCast() {
  return build([](Fusion& f) {
    TensorView* x = defineTensor({-1, -1}, {true, false}, DataType::BFloat16);
    TensorView* c = defineTensor({-1, -1}, {true, true}, DataType::Bool);
    Scalar* w = defineScalar(DataType::Double);
    Val* xf = cast(x, DataType::Float);
    f.addOutput(ternaryOp(OpKind::Where, c, xf, f.constant(std::numeric_limits<double>::infinity())));
    f.addOutput(ternaryOp(OpKind::Lerp, xf, xf, w));
    f.addOutput(ternaryOp(OpKind::Clamp, x, f.constant(-1.5), f.constant(std::numeric_limits<double>::quiet_NaN())));
    f.addOutput(ternaryOp(OpKind::Threshold, x, f.constant(0.0), f.constant(int64_t{7})));
    f.addOutput(addcmul(xf, xf, xf, f.constant(true)));
  });
}

Fusion reductions() {
  return build([](Fusion& f) {
    TensorView* x = defineTensor({-1, -1, 16}, {true, true, true}, DataType::Half, false, {1, 2, 0});
    TensorView* b = defineTensor({4, -1}, {true, true}, DataType::Bool);
    f.addOutput(reduce(OpKind::Sum, x, {0, -1}, false, DataType::Float));
    f.addOutput(reduce(OpKind::Prod, x, {1}, true));
    f.addOutput(reduce(OpKind::Max, x, {2}));
    f.addOutput(reduce(OpKind::Min, x, {0}, true));
    f.addOutput(reduce(OpKind::Any, b, {1}));
    f.addOutput(reduce(OpKind::All, b, {0, 1}, true));
    f.addOutput(reduce(OpKind::Sum, b, {1}));
    f.addOutput(var(x, {2}, 1.0, true));
    auto [v, m] = varMean(x, {0, 2}, 0.0);
    f.addOutput(v);
    f.addOutput(m);
    auto [avg, var_sum, count] = welford(x, {1});
    f.addOutput(avg);
    f.addOutput(var_sum);
    f.addOutput(count);
  });
}

Fusion metaOps() {
  return build([](Fusion& f) {
    TensorView* x = defineTensor({-1, 8}, {true, true}, DataType::Float);
    TensorView* e = defineTensor({1, -1, 16}, {nullopt, nullopt, true}, DataType::Float);  // expanded input
    Scalar* rows = defineScalar(DataType::Int64);
    TensorView* b = broadcast(x, {false, true, false});
    TensorView* bid = broadcastInDim(x, {rows, i64(1), i64(8)}, {0, 2});
    f.addOutput(expand(bid, {i64(-1), i64(5), i64(-1)}));
    f.addOutput(reshape(b, {i64(-1), i64(4), i64(2)}));
    f.addOutput(permute(b, {2, 0, 1}));
    f.addOutput(squeeze(e, {0, 1}, /*squeeze_expanded=*/true));
    f.addOutput(slice(x, {i64(1), i64(0)}, {rows, i64(-2)}, {i64(1), i64(2)}, /*manual_normalization=*/false));
    f.addOutput(set(x));
    f.addOutput(segmentSet(e));
    f.addOutput(size(x, 0));
    f.addOutput(size(x, 1));  // static: a constant scalar output
  });
}

Fusion dataAndCreation() {
  return build([](Fusion& f) {
    TensorView* x = defineTensor({-1, 8}, {true, true}, DataType::Int64);
    TensorView* y = defineTensor({3, 8}, {true, true}, DataType::Int64);
    Scalar* n = defineScalar(DataType::Int64);
    Scalar* fill = defineScalar(DataType::Double);
    f.addOutput(pad(x, {i64(1), i64(2), n, i64(0)}, f.constant(int64_t{-1})));
    f.addOutput(pad(y, {i64(0), i64(1)}));
    f.addOutput(cat({x, y, x}, -2));
    f.addOutput(strideOrder(x, {0, 1}));
    f.addOutput(full({n, i64(4)}, fill, DataType::BFloat16));
    f.addOutput(iota(n, f.constant(2.5), f.constant(0.5), DataType::Float));
    f.addOutput(iota(i64(10), nullptr, nullptr, DataType::Int32));
  });
}

Fusion indexingAndMatmul() {
  return build([](Fusion& f) {
    TensorView* x = defineTensor({4, 8}, {true, true}, DataType::Float);
    TensorView* i = defineTensor({3}, {true}, DataType::Int64);
    TensorView* g = defineTensor({4, 3}, {true, true}, DataType::Int32);
    TensorView* a = defineTensor({-1, 4, 16}, {true, true, true}, DataType::BFloat16);
    TensorView* w = defineTensor({8, 16}, {true, true}, DataType::BFloat16);
    TensorView* bias = defineTensor({8}, {true}, DataType::BFloat16);
    TensorView* k = defineTensor({16, 8}, {false, true}, DataType::Int8, false, {0, 1});
    TensorView* k8 = defineTensor({-1, 16}, {true, true}, DataType::Int8);
    f.addOutput(indexSelect(x, i, 0));
    f.addOutput(gather(x, g, 1));
    f.addOutput(takeAlongAxis(x, g, -1));
    f.addOutput(matmul(a, permute(w, {1, 0})));
    f.addOutput(matmul(k8, k));
    f.addOutput(matmul(k8, k, DataType::Int64));
    f.addOutput(linear(a, w, bias));
    f.addOutput(linear(a, w, nullptr, DataType::Float));
  });
}

Fusion quantization() {
  return build([](Fusion& f) {
    TensorView* x = defineTensor({-1, 8}, {true, true}, DataType::Float);
    TensorView* per_tensor = defineTensor({}, {}, DataType::Float);
    TensorView* channel = defineTensor({8}, {true}, DataType::Float);
    TensorView* channel_zp = defineTensor({8}, {true}, DataType::Int32);
    TensorView* block = defineTensor({-1, 2}, {true, true}, DataType::Float);
    TensorView* block_zp = defineTensor({-1, 2}, {true, true}, DataType::Int32);
    TensorView* cpu = defineTensor({}, {}, DataType::Double, /*is_cpu=*/true);
    TensorView* q_tensor = quantize(x, per_tensor, nullptr, DataType::Float8_e4m3fn);
    TensorView* q_channel = quantize(x, channel, channel_zp, DataType::Int8, {.axis = 1, .block_shape = {}});
    TensorView* q_block = quantize(x, block, block_zp, DataType::UInt8, {.axis = nullopt, .block_shape = {1, 4}});
    f.addOutput(dequantize(q_tensor, per_tensor, nullptr, DataType::BFloat16));
    f.addOutput(dequantize(q_channel, channel, channel_zp, DataType::Float, {.axis = -1, .block_shape = {}}));
    f.addOutput(dequantize(q_block, block, block_zp, DataType::Half, {.axis = nullopt, .block_shape = {1, 4}}));
    f.addOutput(cpu);
    f.aliasOutputToInput(unaryOp(OpKind::Relu, x), x);  // an in-place update
  });
}

Fusion scanScatterRandom() {
  return build([](Fusion& f) {
    TensorView* x = defineTensor({-1, 8}, {true, true}, DataType::BFloat16);
    TensorView* i = defineTensor({2, 8}, {true, true}, DataType::Int64);
    TensorView* src = defineTensor({3, 8}, {true, true}, DataType::BFloat16);
    TensorView* rows = defineTensor({-1}, {true}, DataType::Int32);
    TensorView* values = defineTensor({-1, 8}, {true, true}, DataType::BFloat16);
    Scalar* seed = defineScalar(DataType::Int64);
    f.addOutput(cumsum(x, -1));
    auto [top, top_at] = topk(x, seed, 1, /*largest=*/false, /*sorted=*/true);
    f.addOutput(top);
    f.addOutput(top_at);
    f.addOutput(argsort(src, 0, /*descending=*/true, /*stable=*/false));
    f.addOutput(scatter(x, i, src, 0));
    f.addOutput(indexPutAccumulate(x, rows, values));
    f.addOutput(uniform(f.constant(-1.0), f.constant(1.0), {i64(4), i64(3)}, seed, i64(2), DataType::Float));
    f.addOutput(normal(f.constant(0.0), f.constant(2.0), {i64(5)}, seed, i64(0), DataType::BFloat16));
  });
}

const std::vector<std::pair<std::string, Fusion>>& corpus() {
  static const auto* fusions = new std::vector<std::pair<std::string, Fusion>>{
      {"elementwise", elementwise()}, {"ternary_and_cast", ternaryAndCast()},
      {"reductions", reductions()},   {"meta_ops", metaOps()},
      {"data_and_creation", dataAndCreation()}, {"indexing_and_matmul", indexingAndMatmul()},
      {"quantization", quantization()}, {"scan_scatter_random", scanScatterRandom()},
  };
  return *fusions;
}

TEST(Json, CorpusCoversEveryOpKind) {
  std::set<OpKind> used;
  for (const auto& [name, fusion] : corpus()) {
    for (const auto& e : fusion.allExprs()) used.insert(e->kind());
  }
  for (const OpInfo& op : allOps()) {
    EXPECT_TRUE(used.count(op.kind)) << "no fusion in the JSON corpus uses '" << op.name << "'; add one to json_test.cpp";
  }
}

TEST(Json, RoundTripKeepsPrintout) {
  for (const auto& [name, fusion] : corpus()) {
    SCOPED_TRACE(name);
    const json record = toJson(fusion);
    const Fusion restored = fusionFromJson(record);
    EXPECT_EQ(restored.toString(), fusion.toString());
    EXPECT_EQ(restored.toPython(), fusion.toPython());
    EXPECT_EQ(toJson(restored), record);
  }
}

TEST(Json, RoundTripThroughTextKeepsEveryNode) {
  for (const auto& [name, fusion] : corpus()) {
    SCOPED_TRACE(name);
    const Fusion restored = fusionFromJsonString(toJsonString(fusion, /*indent=*/2));
    ASSERT_EQ(restored.vals().size(), fusion.vals().size());
    ASSERT_EQ(restored.allExprs().size(), fusion.allExprs().size());
    for (size_t i = 0; i < fusion.vals().size(); ++i) EXPECT_EQ(restored.vals()[i]->name(), fusion.vals()[i]->name());
    for (size_t i = 0; i < fusion.allExprs().size(); ++i) {
      const Expr& a = *restored.allExprs()[i];
      const Expr& b = *fusion.allExprs()[i];
      EXPECT_EQ(a.id(), b.id());
      EXPECT_EQ(a.attrs(), b.attrs());  // same variant types, same order
    }
    EXPECT_EQ(restored.outputAliases().size(), fusion.outputAliases().size());
  }
}

TEST(Json, ConstantsKeepBoolIntAndDoubleApart) {
  Fusion f = build([](Fusion& f) {
    TensorView* x = defineTensor({-1}, {true}, DataType::Float);
    f.addOutput(add(x, f.constant(1.0)));
    f.addOutput(add(x, f.constant(int64_t{1})));
    f.addOutput(binaryOp(OpKind::LogicalAnd, x, f.constant(true)));
    f.addOutput(mul(x, f.constant(-std::numeric_limits<double>::infinity())));
  });
  const Fusion restored = fusionFromJsonString(toJsonString(f));
  std::vector<ScalarValue> values;
  for (const auto& v : restored.vals()) {
    if (v->isScalar() && v->asScalar()->isConstant()) values.push_back(*v->asScalar()->value());
  }
  // Each constant as defined, then as converted to x's Float (the written form survives the round trip).
  ASSERT_EQ(values.size(), 8u);
  EXPECT_TRUE(std::holds_alternative<double>(values[0]));
  EXPECT_TRUE(std::holds_alternative<int64_t>(values[2]));
  EXPECT_TRUE(std::holds_alternative<bool>(values[4]));
  EXPECT_TRUE(std::isinf(std::get<double>(values[6])));
  for (size_t i = 1; i < values.size(); i += 2) EXPECT_TRUE(std::holds_alternative<double>(values[i]));
  size_t written = 0;
  for (const auto& v : restored.vals()) written += v->isScalar() && v->asScalar()->writtenAs() ? 1 : 0;
  EXPECT_EQ(written, 4u);
}

TEST(Json, RestoredFusionGivesNewNodesFreshIds) {
  Fusion restored = fusionFromJson(toJson(corpus()[0].second));
  FusionGuard guard(&restored);
  const int64_t largest = restored.vals().back()->id();
  TensorView* x = restored.inputs()[0]->asTensor();
  Val* y = unaryOp(OpKind::Neg, x);
  EXPECT_EQ(y->id(), largest + 1);
  EXPECT_EQ(y->definition()->id(), restored.allExprs()[restored.allExprs().size() - 2]->id() + 1);
}

// ---- malformed records ----------------------------------------------------------------------------

// T0, T1 inputs; T2 = add(T0, T1); T3 = neg(T2); output T3.
json smallRecord() {
  return toJson(build([](Fusion& f) {
    TensorView* a = defineTensor({-1}, {true}, DataType::Float);
    TensorView* b = defineTensor({-1}, {true}, DataType::Float);
    f.addOutput(unaryOp(OpKind::Neg, add(a, b)));
  }));
}

// The message of the braze::Error that reading `record` raises ("" if none).
std::string errorOf(const json& record) {
  try {
    fusionFromJson(record);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an error reading " << record.dump();
  return "";
}

void expectError(const std::function<void(json&)>& corrupt, const std::string& expected) {
  json record = smallRecord();
  corrupt(record);
  EXPECT_NE(errorOf(record).find(expected), std::string::npos) << "expected '" << expected << "' in: " << errorOf(record);
}

TEST(Json, WrongVersionIsAnError) {
  expectError([](json& j) { j["version"] = 2; }, "version 2 is not supported");
  expectError([](json& j) { j.erase("version"); }, "has no field 'version'");
}

TEST(Json, UnknownOpNameIsAnError) {
  expectError([](json& j) { j["exprs"][0]["op"] = "frobnicate"; }, "unknown op 'frobnicate'");
}

TEST(Json, UnknownDtypeIsAnError) {
  expectError([](json& j) { j["vals"][0]["dtype"] = "Float128"; }, "dtype 'Float128' is not a known dtype");
  expectError([](json& j) { j["vals"][0]["dtype"] = "Null"; }, "has dtype Null");
  expectError([](json& j) { j["exprs"][0]["attrs"] = {{{"name", "dtype"}, {"type", "dtype"}, {"value", "F32"}}}; },
              "attribute 'dtype' 'F32' is not a known dtype");
}

TEST(Json, DanglingIdIsAnError) {
  expectError([](json& j) { j["exprs"][0]["inputs"][1] = 42; }, "refers to val 42, which is not in 'vals'");
  expectError([](json& j) { j["outputs"][0] = 17; }, "refers to val 17");
  expectError([](json& j) { j["output_aliases"] = {{{"output", 3}, {"input", 9}}}; }, "refers to val 9");
}

TEST(Json, DuplicateIdsAreAnError) {
  expectError([](json& j) { j["vals"][1]["id"] = 0; }, "val id 0 appears twice");
  expectError([](json& j) { j["exprs"][1]["id"] = 0; },
              "expr id 0 is negative, above 1120 (tables are indexed by ids) or appears twice");
}

TEST(Json, WrongFieldTypesAreAnError) {
  expectError([](json& j) { j["vals"][0]["id"] = "zero"; }, "val #0 id must be an integer, got \"zero\"");
  expectError([](json& j) { j["vals"][0]["is_cpu"] = 1; }, "is_cpu must be true or false");
  expectError([](json& j) { j["vals"][0]["domain"][0] = {-1}; }, "val #0 dim 0 must be [extent, type]");
  expectError([](json& j) { j["vals"][0]["domain"][0][1] = "diagonal"; }, "unknown dim type 'diagonal'");
  expectError([](json& j) { j["vals"][0]["kind"] = "vector"; }, "kind 'vector'");
  expectError([](json& j) { j["exprs"] = json::object(); }, "'exprs' of the fusion must be an array");
  expectError([](json& j) { j["exprs"][0]["attrs"] = {{{"name", "x"}, {"type", "complex"}, {"value", 1}}}; },
              "unknown type 'complex'");
  expectError([](json& j) { j["vals"][2] = {{"id", 2}, {"kind", "scalar"}, {"dtype", "Float"},
                                           {"value", {{"type", "ints"}, {"value", {1}}}}}; },
              "must be a bool, int or double value");
}

TEST(Json, WrongArityIsAnError) {
  expectError([](json& j) { j["exprs"][0]["inputs"] = {0}; }, "has 1 inputs, which add does not take");
  expectError([](json& j) { j["exprs"][1]["outputs"] = json::array(); }, "has 0 outputs but neg has 1");
}

// T1 = sum(T0, dims=[1]) over a rank-3 T0, T2 = permute(T1, [1, 0]), T3 = cumsum(T2, dim=0).
json axesRecord() {
  return toJson(build([](Fusion& f) {
    TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::Float);
    f.addOutput(cumsum(permute(reduce(OpKind::Sum, x, {1}), {1, 0}), 0));
  }));
}

void expectAxesError(const std::function<void(json&)>& corrupt, const std::string& expected) {
  json record = axesRecord();
  corrupt(record);
  const std::string message = errorOf(record);
  EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in: " << message;
}

json& attr(json& record, size_t expr, const std::string& name) {
  for (json& a : record["exprs"][expr]["attrs"]) {
    if (a["name"] == name) return a["value"];
  }
  ADD_FAILURE() << "expr " << expr << " has no attribute " << name;
  return record;
}

TEST(Json, AxesOutOfRangeRepeatedOrUnsortedAreAnError) {
  EXPECT_NO_THROW(fusionFromJson(axesRecord()));
  const std::string sum_dims = "expected distinct dims in range, ascending";
  expectAxesError([](json& j) { attr(j, 0, "dims") = {3}; }, "dims [3] for T0 of rank 3: " + sum_dims);
  expectAxesError([](json& j) { attr(j, 0, "dims") = {-1}; }, sum_dims);
  expectAxesError([](json& j) { attr(j, 0, "dims") = {1, 1}; }, sum_dims);
  expectAxesError([](json& j) { attr(j, 0, "dims") = {2, 0}; }, sum_dims);
  expectAxesError([](json& j) { attr(j, 0, "dims") = {0, 2}; }, "output T1 should be a tensor of rank 1");
  expectAxesError([](json& j) { j["exprs"][0]["attrs"][0] = {{"name", "dims"}, {"type", "int"}, {"value", 1}}; },
                  "attribute 'dims' is 1; expected ints");
  expectAxesError([](json& j) { j["exprs"][0]["attrs"] = json::array(); }, "has no attribute 'dims'");
  expectAxesError([](json& j) { attr(j, 1, "dims") = {1, 1}; }, "expected a permutation of its dims");
  expectAxesError([](json& j) { attr(j, 1, "dims") = {0}; }, "expected a permutation of its dims");
  expectAxesError([](json& j) { attr(j, 2, "dim") = 2; }, "attribute 'dim' is 2; expected an int in [0, 2)");
  expectAxesError([](json& j) { attr(j, 2, "dim") = -1; }, "expected an int in [0, 2)");
}

// T3 = gather(T0, T1, dim=1), T5 = scatter(T0, T1, T2, dim=0), then quantize(T0) per channel along axis 1,
// broadcast_in_dim(T4, [2, 3, 4], [1]) of a rank-1 T4.
json indexedRecord() {
  return toJson(build([](Fusion& f) {
    TensorView* x = defineTensor({2, 3}, {true, true}, DataType::Float);
    TensorView* index = defineTensor({2, 3}, {true, true}, DataType::Int64);
    TensorView* src = defineTensor({2, 3}, {true, true}, DataType::Float);
    TensorView* scale = defineTensor({3}, {true}, DataType::Float);
    TensorView* row = defineTensor({3}, {true}, DataType::Float);
    f.addOutput(gather(x, index, 1));
    f.addOutput(scatter(x, index, src, 0));
    f.addOutput(quantize(x, scale, nullptr, DataType::Int8, QuantAxis{.axis = 1, .block_shape = {}}));
    f.addOutput(broadcastInDim(row, {i64(2), i64(3), i64(4)}, {1}));
  }));
}

// The expr of `record` whose op is `op`.
json& exprOf(json& record, const std::string& op) {
  for (json& e : record["exprs"]) {
    if (e["op"] == op) return e;
  }
  ADD_FAILURE() << "no " << op << " in the record";
  return record;
}

json& attrOf(json& expr, const std::string& name) {
  for (json& a : expr["attrs"]) {
    if (a["name"] == name) return a["value"];
  }
  ADD_FAILURE() << "no attribute " << name;
  return expr;
}

void expectIndexedError(const std::function<void(json&)>& corrupt, const std::string& expected) {
  json record = indexedRecord();
  corrupt(record);
  const std::string message = errorOf(record);
  EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in: " << message;
}

TEST(Json, IndexOperandsAxesAndBroadcastDimsOutOfShapeAreAnError) {
  EXPECT_NO_THROW(fusionFromJson(indexedRecord()));
  const int64_t row = 4;  // the rank-1 tensor's val id
  expectIndexedError([&](json& j) { exprOf(j, "gather")["inputs"][1] = row; },
                     "operand 1 (T4) should be a tensor of rank 2");
  expectIndexedError([&](json& j) { exprOf(j, "scatter")["inputs"][2] = row; },
                     "operand 2 (T4) should be a tensor of rank 2");
  expectIndexedError([](json& j) { attrOf(exprOf(j, "quantize"), "axis") = 2; },
                     "attribute 'axis' is 2; expected an int in [0, 2)");
  expectIndexedError([](json& j) { attrOf(exprOf(j, "broadcast_in_dim"), "broadcast_dims") = {3}; },
                     "attribute 'broadcast_dims' is [3]; expected 1 increasing dims in [0, 3)");
  expectIndexedError([](json& j) { attrOf(exprOf(j, "broadcast_in_dim"), "broadcast_dims") = {0, 1}; },
                     "expected 1 increasing dims");
}

TEST(Json, ResultsTheBuildersWouldNotMakeAreAnError) {
  expectError([](json& j) { j["vals"][2]["dtype"] = "Int32"; },
              "expr #0 (add) gives T2 as an Int32 tensor of rank 1, where its operands make a Float tensor of rank 1");
  expectError([](json& j) { j["vals"][3]["dtype"] = "Bool"; }, "expr #1 (neg) gives T3 as a Bool tensor");
  expectError(
      [](json& j) {
        j["vals"][1]["domain"].push_back({-1, "iteration"});
        j["vals"][1]["contiguity"].push_back(true);
      },
      "expr #0 (add) reads T1 (a Float tensor of rank 2) into T2 (a Float tensor of rank 1): an elementwise op's "
      "tensors have its result's rank");
  // A view keeps its operand's dtype, a rebuilt one (permute) or one whose sizes are read (reshape).
  const auto half = [] { return defineTensor({-1, 4}, {true, true}, DataType::Half); };
  json permuted = toJson(build([&](Fusion& f) { f.addOutput(permute(half(), {1, 0})); }));
  permuted["vals"][1]["dtype"] = "Float";
  EXPECT_NE(errorOf(permuted).find("expr #0 (permute) gives T1 as a Float tensor of rank 2, a view of T0 (a Half "
                                   "tensor of rank 2)"), std::string::npos) << errorOf(permuted);
  json reshaped = toJson(build([&](Fusion& f) { f.addOutput(reshape(half(), {i64(-1)})); }));
  for (json& v : reshaped["vals"]) {
    if (v["kind"] == "tensor" && v["domain"].size() == 1) v["dtype"] = "Float";
  }
  EXPECT_NE(errorOf(reshaped).find("expr #0 (reshape) gives T2 as a Float tensor of rank 1, a view of T1 (a Half "
                                   "tensor of rank 2)"), std::string::npos) << errorOf(reshaped);
  // A broadcast's flags are 0 or 1.
  json broadcasted = toJson(build([](Fusion& f) {
    f.addOutput(broadcast(defineTensor({-1}, {true}, DataType::Half), {true, false}));
  }));
  broadcasted["exprs"][0]["attrs"][0]["value"] = {1, 2};
  EXPECT_NE(errorOf(broadcasted).find("broadcast: is_broadcast_dim holds 2, not 0 or 1"), std::string::npos)
      << errorOf(broadcasted);
}

// What builders make from 0-d tensors among dimensioned ones (broadcast to the result's rank after the
// result's dtype is chosen) reads back: the reader also rebuilds from the 0-d tensor, as the builder did.
TEST(Json, ZeroDimOperandsOfElementwiseOpsReadBack) {
  const Fusion f = build([](Fusion& f) {
    TensorView* mask = defineTensor({-1, 4}, {true, true}, DataType::Bool);
    TensorView* x = defineTensor({-1, 4}, {true, true}, DataType::Half);
    TensorView* zero_d_float = defineTensor({}, {}, DataType::Float);
    TensorView* zero_d_half = defineTensor({}, {}, DataType::Half);
    f.addOutput(ternaryOp(OpKind::Where, mask, x, zero_d_float));
    f.addOutput(binaryOp(OpKind::NextAfter, x, zero_d_half));
  });
  const Fusion restored = fusionFromJson(toJson(f));
  EXPECT_EQ(restored.toString(), f.toString());
  // A broadcast the definition wrote itself takes part in the promotion as an operand with dims.
  const Fusion written = build([](Fusion& f) {
    TensorView* x = defineTensor({-1, 4}, {true, true}, DataType::Half);
    TensorView* zero_d_float = defineTensor({}, {}, DataType::Float);
    f.addOutput(add(x, broadcast(zero_d_float, {true, true})));
  });
  EXPECT_EQ(fusionFromJson(toJson(written)).toString(), written.toString());
}

TEST(Json, ValuesNothingComputesAreAnError) {
  expectError([](json& j) { j["exprs"].erase(0); },
              "expr 1 (neg) reads T2, which is neither an input, a constant nor an expr's result");
  expectError([](json& j) { j["outputs"][0] = 5; }, "refers to val 5");
  expectError([](json& j) { j["inputs"] = {0, 0}; }, "T0 is already a fusion input");
  expectError([](json& j) { j["inputs"] = {0, 1, 2}; }, "T2 is computed by add and cannot be a fusion input");
  expectError([](json& j) { j["vals"][0]["is_cpu"] = true; },
              "T0 has is_cpu (a CPU scalar), which only a 0-d fusion input may have (a Float tensor of rank 1)");
  // A constant holds the value its dtype holds, as Fusion::constant makes it.
  json constant = toJson(build([](Fusion& f) {
    f.addOutput(add(defineTensor({-1}, {true}, DataType::Float), f.constant(0.5, DataType::Float)));
  }));
  for (json& v : constant["vals"]) {
    if (v["kind"] == "scalar") v["dtype"] = "Int64";
  }
  EXPECT_NE(errorOf(constant).find("is a constant of dtype Int64 holding 0.5, which that dtype holds as 0"),
            std::string::npos) << errorOf(constant);
  // Ids index tables: one far beyond the record's size is refused before anything is sized by it.
  expectError([](json& j) { j["vals"][3]["id"] = int64_t{1} << 40; }, "has id 1099511627776 (ids are 0 to 1120");
  expectError([](json& j) { j["exprs"][1]["id"] = int64_t{1} << 40; }, "expr id 1099511627776 is negative, above 1120");
}

TEST(Json, CyclesAndDoubleDefinitionsAreAnError) {
  // neg reads its own result through add: T2 = add(T0, T3), T3 = neg(T2).
  expectError([](json& j) { j["exprs"][0]["inputs"][1] = 3; }, "the exprs form a cycle");
  expectError([](json& j) { j["exprs"][1]["outputs"][0] = 2; }, "defines T2, which already has a definition");
  expectError([](json& j) { j["inputs"].push_back(2); }, "T2 is computed by add and cannot be a fusion input");
}

TEST(Json, AliasOfANonOutputIsAnError) {
  expectError([](json& j) { j["output_aliases"] = {{{"output", 2}, {"input", 0}}}; }, "names T2, which is not in 'outputs'");
}

TEST(Json, InvalidTextIsAnError) {
  EXPECT_THROW(fusionFromJsonString("{\"version\": 1, "), Error);
  EXPECT_THROW(fusionFromJsonString("[1, 2]"), Error);
}

}  // namespace
}  // namespace braze
