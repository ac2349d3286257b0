// Golden tests of Fusion::toString (the IR dump) and Fusion::toPython (the script the Python
// frontend's repr returns). The Python text is a contract with python_frontend: its keyword names
// are nvFuser's, and a change here must be matched there.
#include "ir/fusion.h"
#include "ir/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace braze {
namespace {

using std::nullopt;

// A layer-norm-like fusion that exercises the printer's special cases: a stride_order input, an
// expanded input, a symbolic scalar input, a multi-output op, constants inline, a computed scalar,
// a reduction dim and an aliased output. Each statement creates the ids the comments name.
Fusion layerNormLike() {
  Fusion f;
  FusionGuard guard(&f);
  TensorView* t0 = defineTensor({-1, -1, 1600}, {true, true, true}, DataType::BFloat16, false, {2, 1, 0});
  // Column-major: contiguity is given in allocation order, dim 1 (outermost) first.
  TensorView* t1 = defineTensor({-1, 4}, {false, true}, DataType::Float, false, {0, 1});
  TensorView* t2 = defineTensor({1, -1, 16}, {nullopt, nullopt, true}, DataType::Float);  // broadcast, expanded
  Scalar* s3 = defineScalar(DataType::Double);
  TensorView* t4 = cast(t0, DataType::Float)->asTensor();
  auto [t5, t6] = varMean(t4, {2}, /*correction=*/0.0);
  Val* s7 = size(t0, 0);
  Val* s8 = size(t0, 1);
  Val* s9 = f.constant(int64_t{1});
  TensorView* t10 = broadcastInDim(t5, {s7, s8, s9}, {0, 1});
  Val* s11 = f.constant(1e-05);
  Val* t12 = add(t10, s11);
  Val* t13 = unaryOp(OpKind::Rsqrt, t12);
  Val* t14 = mul(t13, s3);
  f.addOutput(t14);
  f.addOutput(t6);
  TensorView* t15 = reduce(OpKind::Sum, t2, {2});
  f.addOutput(t15);
  Val* t16 = unaryOp(OpKind::Neg, t1);
  f.aliasOutputToInput(t16, t1);
  return f;
}

TEST(Printer, LayerNormPrintsOneLinePerExpr) {
  const Fusion f = layerNormLike();
  EXPECT_EQ(f.toString(), R"(Inputs:
  T0 BFloat16[?, ?, 1600] contiguity=[True, True, True] stride_order=[2, 1, 0]
  T1 Float[?, 4] contiguity=[False, True] stride_order=[0, 1]
  T2 Float[1b, ?e, 16] contiguity=[None, None, True]
  S3 Double
Outputs:
  T16 Float[?, ?, 1b]
  T6 Float[?, ?, r1600]
  T17 Float[1b, ?e, r16]
  T18 Float[?, 4] (aliases input T1)
Exprs:
  T4 Float[?, ?, 1600] = cast(T0, dtype=Float)
  T5 Float[?, ?, r1600], T6 Float[?, ?, r1600] = var_mean(T4, dims=[2], correction=0.0, keepdim=False)
  S7 Int64 = size(T0, dim=0)
  S8 Int64 = size(T0, dim=1)
  T10 Float[?, ?, 1b] = broadcast_in_dim(T5, shape=[S7, S8, 1], broadcast_dims=[0, 1])
  T13 Float[?, ?, 1b] = add(T10, 9.999999747378752e-06)
  T14 Float[?, ?, 1b] = rsqrt(T13)
  S15 Float = cast(S3, dtype=Float)
  T16 Float[?, ?, 1b] = mul(T14, S15)
  T17 Float[1b, ?e, r16] = sum(T2, dims=[2], keepdim=False, dtype=Float)
  T18 Float[?, 4] = neg(T1)
)");
}

TEST(Printer, LayerNormPythonRebuildsTheDefinition) {
  const Fusion f = layerNormLike();
  EXPECT_EQ(f.toPython(), R"(from braze import FusionDefinition, DataType

def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1, 1600], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[2, 1, 0])
    T1 = fd.define_tensor(shape=[-1, 4], contiguity=[False, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1])
    T2 = fd.define_tensor(shape=[1, -1, 16], contiguity=[None, None, True], dtype=DataType.Float, is_cpu=False)
    S3 = fd.define_scalar(None, dtype=DataType.Double)
    T4 = fd.ops.cast(T0, dtype=DataType.Float)
    T5, T6 = fd.ops.var_mean(T4, dims=[2], correction=0.0, keepdim=False)
    S7 = fd.ops.size(T0, dim=0)
    S8 = fd.ops.size(T0, dim=1)
    T10 = fd.ops.broadcast_in_dim(T5, shape=[S7, S8, 1], broadcast_dims=[0, 1])
    T13 = fd.ops.add(T10, fd.define_scalar(1e-05, dtype=DataType.Double))
    T14 = fd.ops.rsqrt(T13)
    S15 = fd.ops.cast(S3, dtype=DataType.Float)
    T16 = fd.ops.mul(T14, S15)
    T17 = fd.ops.sum(T2, dims=[2], keepdim=False, dtype=DataType.Null)
    T18 = fd.ops.neg(T1)
    fd.add_output(T16)
    fd.add_output(T6)
    fd.add_output(T17)
    fd.add_output(T18, alias_input=T1)

with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)
)");
}

// One line per op whose Python signature is not "operands, then attributes as keywords": the exact
// keywords python_frontend's fd.ops must accept.
Fusion specialSignatures() {
  Fusion f;
  FusionGuard guard(&f);
  TensorView* t0 = defineTensor({-1, 8}, {true, true}, DataType::Float);
  TensorView* t1 = defineTensor({8}, {true}, DataType::Int64);
  Scalar* s2 = defineScalar(DataType::Int64);
  TensorView* b = broadcast(t0, {true, false, false});
  TensorView* e = expand(b, {f.constant(int64_t{4}), f.constant(int64_t{-1}), f.constant(int64_t{-1})});
  TensorView* r = reshape(e, {s2, f.constant(int64_t{8})});
  TensorView* p = pad(r, {f.constant(int64_t{1}), f.constant(int64_t{0})});
  TensorView* sl = slice(p, {f.constant(int64_t{0}), f.constant(int64_t{1})}, {s2, f.constant(int64_t{9})}, {});
  TensorView* c = cat({sl, t0}, 0);
  TensorView* full_t = full({s2, f.constant(int64_t{8})}, f.constant(0.5), DataType::Float);
  TensorView* m = matmul(c, permute(full_t, {1, 0}));
  TensorView* q = quantize(t0, defineTensor({1, 2}, {nullopt, true}, DataType::Float), nullptr, DataType::Float8_e4m3fn,
                           {.axis = nullopt, .block_shape = {1, 4}});
  TensorView* dq = dequantize(q, defineTensor({8}, {true}, DataType::Float), nullptr, DataType::Float, {.axis = 1, .block_shape = {}});
  Val* mx = reduce(OpKind::Max, dq, {1}, /*keepdim=*/true);
  Val* sum = reduce(OpKind::Sum, t1, {0}, false, DataType::Double);
  f.addOutput(m);
  f.addOutput(iota(s2, nullptr, nullptr, DataType::Int64));
  f.addOutput(mx);
  f.addOutput(sum);
  return f;
}

TEST(Printer, SpecialSignaturesUseNvFuserKeywords) {
  EXPECT_EQ(specialSignatures().toPython(), R"(from braze import FusionDefinition, DataType

def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, 8], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    T1 = fd.define_tensor(shape=[8], contiguity=[True], dtype=DataType.Int64, is_cpu=False)
    S2 = fd.define_scalar(None, dtype=DataType.Int64)
    T25 = fd.define_tensor(shape=[1, 2], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)
    T27 = fd.define_tensor(shape=[8], contiguity=[True], dtype=DataType.Float, is_cpu=False)
    T3 = fd.ops.broadcast(T0, is_broadcast_dim=[True, False, False])
    T7 = fd.ops.expand(T3, shape=[4, -1, -1])
    T9 = fd.ops.reshape(T7, new_shape=[S2, 8])
    T13 = fd.ops.pad(T9, [1, 0], fd.define_scalar(0.0, dtype=DataType.Float))
    T18 = fd.ops.slice(T13, start_indices=[0, 1], end_indices=[S2, 9], strides=[1, 1], manual_normalization=False)
    T19 = fd.ops.cat([T18, T0], dim=0)
    T22 = fd.ops.full(shape=[S2, 8], fill_value=fd.define_scalar(0.5, dtype=DataType.Double), dtype=DataType.Float)
    T23 = fd.ops.permute(T22, dims=[1, 0])
    T24 = fd.ops.matmul(T19, T23, dtype=DataType.Float)
    T26 = fd.ops.quantize(T0, T25, None, dtype=DataType.Float8_e4m3fn, block_shape=[1, 4])
    T28 = fd.ops.dequantize(T26, T27, None, dtype=DataType.Float, axis=1)
    T29 = fd.ops.max(T28, dims=[1], keepdim=True, dtype=DataType.Null)
    T30 = fd.ops.sum(T1, dims=[0], keepdim=False, dtype=DataType.Double)
    T33 = fd.ops.iota(S2, fd.define_scalar(0, dtype=DataType.Int64), fd.define_scalar(1, dtype=DataType.Int64), dtype=DataType.Int64)
    fd.add_output(T24)
    fd.add_output(T33)
    fd.add_output(T29)
    fd.add_output(T30)

with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)
)");
}

TEST(Printer, ContiguityIsPrintedInAllocationOrder) {
  Fusion f;
  FusionGuard guard(&f);
  // Allocation order (outermost first) is dim 1, dim 2, dim 0.
  TensorView* t0 = defineTensor({-1, -1, -1}, {true, false, true}, DataType::Half, false, {0, 2, 1});
  f.addOutput(t0);
  using C = std::vector<std::optional<bool>>;
  EXPECT_EQ(t0->layout().contiguity, (C{true, true, false}));  // stored per logical dim
  EXPECT_NE(f.toPython().find("contiguity=[True, False, True], dtype=DataType.Half, is_cpu=False, stride_order=[0, 2, 1]"),
            std::string::npos);
  EXPECT_NE(f.toString().find("contiguity=[True, False, True] stride_order=[0, 2, 1]"), std::string::npos);
}

TEST(Printer, ScalarConstantsUsePythonLiterals) {
  Fusion f;
  FusionGuard guard(&f);
  TensorView* t0 = defineTensor({-1}, {true}, DataType::Float);
  TensorView* t1 = defineTensor({-1}, {true}, DataType::Bool);
  f.addOutput(add(t0, f.constant(std::numeric_limits<double>::quiet_NaN())));
  f.addOutput(mul(t0, f.constant(-std::numeric_limits<double>::infinity())));
  f.addOutput(binaryOp(OpKind::LogicalAnd, t1, f.constant(true)));
  f.addOutput(ternaryOp(OpKind::Clamp, t0, f.constant(int64_t{-3}), f.constant(0.1)));
  const std::string python = f.toPython();
  EXPECT_NE(python.find("fd.ops.add(T0, fd.define_scalar(float('nan'), dtype=DataType.Double))"), std::string::npos);
  EXPECT_NE(python.find("fd.ops.mul(T0, fd.define_scalar(float('-inf'), dtype=DataType.Double))"), std::string::npos);
  EXPECT_NE(python.find("fd.ops.logical_and(T1, fd.define_scalar(True, dtype=DataType.Bool))"), std::string::npos);
  EXPECT_NE(python.find("fd.ops.clamp(T0, fd.define_scalar(-3, dtype=DataType.Int64), "
                        "fd.define_scalar(0.1, dtype=DataType.Double))"),
            std::string::npos);
  // The IR holds the bounds as the Float x compares with them; the script writes them as defined.
  EXPECT_NE(f.toString().find("= clamp(T0, -3.0, 0.10000000149011612)"), std::string::npos);
}

TEST(Printer, ConstantScalarOutputIsDefinedBeforeItIsAdded) {
  Fusion f;
  FusionGuard guard(&f);
  TensorView* t0 = defineTensor({-1, 4}, {true, true}, DataType::Float);
  f.addOutput(size(t0, 1));  // a static extent: size() folds it to a constant
  EXPECT_NE(f.toPython().find("    S1 = fd.define_scalar(4, dtype=DataType.Int64)\n    fd.add_output(S1)\n"),
            std::string::npos);
  EXPECT_NE(f.toString().find("Outputs:\n  S1 Int64 = 4\n"), std::string::npos);
}

TEST(Printer, EmptyFusionIsStillValidPython) {
  const Fusion f;
  EXPECT_NE(f.toPython().find("-> None :\n    pass\n"), std::string::npos);
  EXPECT_EQ(f.toString(), "Inputs:\nOutputs:\nExprs:\n");
}

}  // namespace
}  // namespace braze
