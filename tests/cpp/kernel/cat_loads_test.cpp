// A cat whose inputs each read one and the same kernel input through meta and unary ops (RoPE's
// rotate-half, cat(-x2, x1)) loads that input once, at the index of the cat input the element falls in,
// and applies each cat input's ops to the one value (ValueBuilder::catOfOneSource), where each piece's
// load is one of whole vectors. Checked on the simulator against the reference, and by counting the
// kernel's loads of the source: litGPT's GQA qkv split + RoPE, cats of three pieces with different unary
// ops along the last dim and along the rows, and cats that keep a load per piece (pieces that split the
// vectors, no vectors, a binary op on a piece, a persistent row kernel).
#include "fusions/kernel_corpus.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;

// The loads of tensor parameter `tensor` the kernel issues: vector loads and scalar ones.
int loadsOf(const Kernel& k, TensorId tensor) {
  int loads = 0;
  std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& stmts) {
    for (const Stmt& s : stmts) {
      if (s.kind == SKind::VecLoad && s.tensor == tensor) ++loads;
      walk(s.body);
      walk(s.orelse);
    }
  };
  walk(k.body.get());
  for (const KExpr& e : k.exprs) loads += e.kind == EKind::Load && e.ref == tensor;
  return loads;
}

TensorId paramOf(const Kernel& k, const Val* input) {
  for (size_t t = 0; t < k.tensors.size(); ++t) {
    // The plan's segments hold copies of the fusion's values, under the same names.
    if (k.tensors[t].val != nullptr && k.tensors[t].val->name() == input->name()) return static_cast<TensorId>(t);
  }
  ADD_FAILURE() << "no parameter for " << input->name();
  return -1;
}

TEST(CatLoads, RopeLoadsEachRotatedChunkOnce) {
  // GQA: q of 4 heads, k and v of 2 groups expanded to 4 heads, all 16 features rotated. Per chunk of
  // output, qkv is read for v, for q's own chunk and its rotate-half partner, and the same for k: 5 loads
  // (7 with a load per cat input). cos and sin are read once each (q and k share them).
  const testing::KernelCase c =
      testing::ropeCase({.batch = 2, .seq = 8, .heads = 4, .groups = 2, .head = 16, .rope_n_elem = 16}, 5);
  const auto compiled = testing::expectDeviceMatches(*c.fusion, c.inputs);
  const Kernel& k = testing::onlyKernel(compiled);
  const auto& inputs = c.fusion->inputs();
  EXPECT_EQ(loadsOf(k, paramOf(k, inputs[0])), 5) << codegen::emitCuda(k);
  EXPECT_EQ(loadsOf(k, paramOf(k, inputs[1])), 1);
  EXPECT_EQ(loadsOf(k, paramOf(k, inputs[2])), 1);
}

// out = cat([exp(x[:, a:b]), -x[:, :a], x[:, b:]], 1) * 2 (+ y where given), for x [rows, cols] of `dtype`.
testing::KernelCase threePieceCat(int64_t rows, int64_t cols, int64_t a, int64_t b, DataType dtype, bool second) {
  testing::KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, dtype);
    TensorView* y = second ? defineTensor({-1, -1}, {true, true}, dtype) : nullptr;
    auto piece = [&](TensorView* t, int64_t from, int64_t to) {
      return slice(t, testing::ints(f, {0, from}), testing::ints(f, {rows, to}), testing::ints(f, {1, 1}));
    };
    TensorView* first = cast(unaryOp(OpKind::Exp, piece(x, a, b)), dtype)->asTensor();
    TensorView* middle = cast(unaryOp(OpKind::Neg, piece(x, 0, a)), dtype)->asTensor();
    TensorView* last = second ? add(piece(x, b, cols), piece(y, b, cols))->asTensor() : piece(x, b, cols);
    TensorView* joined = cat({first, middle, cast(last, dtype)->asTensor()}, 1);
    f.addOutput(cast(mul(joined, f.constant(2.0)), dtype));
  }
  std::vector<std::vector<int64_t>> shapes{{rows, cols}};
  if (second) shapes.push_back({rows, cols});
  c.inputs = testing::randomInputs(f, 17, shapes);
  return c;
}

TEST(CatLoads, PiecesOfWholeVectorsShareOneLoad) {
  struct Case {
    int64_t rows, cols, a, b;
    DataType dtype;
    int loads;  // of x
    const char* what;
  };
  const Case cases[] = {
      {6, 64, 16, 40, DataType::BFloat16, 1, "pieces of whole vectors"},
      {3, 24, 8, 16, DataType::Float, 1, "float pieces of whole vectors"},
      // A load per lane: selecting each lane's index would cost more than the loads it saves.
      {5, 48, 3, 20, DataType::BFloat16, 3, "pieces that split vectors"},
      {1, 9, 1, 8, DataType::Half, 3, "no vectors (9 columns), a piece of one element"},
  };
  for (const Case& x : cases) {
    const testing::KernelCase c = threePieceCat(x.rows, x.cols, x.a, x.b, x.dtype, false);
    const auto compiled = testing::expectDeviceMatches(*c.fusion, c.inputs);
    const Kernel& k = testing::onlyKernel(compiled);
    EXPECT_EQ(loadsOf(k, paramOf(k, c.fusion->inputs()[0])), x.loads) << x.what << "\n" << codegen::emitCuda(k);
  }
}

TEST(CatLoads, RowsOfOneTensorShareOneLoad) {
  // cat([-x[2:5], x[:2], exp(x[5:])], 0) for x [7, 32]: the piece is chosen by the row, alike for every
  // lane of a vector.
  testing::KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    auto rows = [&](int64_t from, int64_t to) {
      return slice(x, testing::ints(f, {from, 0}), testing::ints(f, {to, 32}), testing::ints(f, {1, 1}));
    };
    TensorView* first = cast(unaryOp(OpKind::Neg, rows(2, 5)), DataType::BFloat16)->asTensor();
    TensorView* last = cast(unaryOp(OpKind::Exp, rows(5, 7)), DataType::BFloat16)->asTensor();
    f.addOutput(cat({first, rows(0, 2), last}, 0));
  }
  c.inputs = testing::randomInputs(f, 19, {{7, 32}});
  const auto compiled = testing::expectDeviceMatches(*c.fusion, c.inputs);
  const Kernel& k = testing::onlyKernel(compiled);
  EXPECT_EQ(loadsOf(k, paramOf(k, c.fusion->inputs()[0])), 1) << codegen::emitCuda(k);
}

TEST(CatLoads, RowsKeptByAPersistentKernelMatchTheReference) {
  // softmax(cat(-x2, x1)) over the rows: the row kernel keeps its loads (they are cached across its
  // passes by their index), and equals the reference.
  testing::KernelCase c;
  Fusion& f = *c.fusion;
  {
    FusionGuard g(&f);
    TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
    auto half = [&](int64_t from, int64_t to) {
      return slice(x, testing::ints(f, {0, from}), testing::ints(f, {6, to}), testing::ints(f, {1, 1}));
    };
    TensorView* rotated = cat({cast(unaryOp(OpKind::Neg, half(32, 64)), DataType::BFloat16)->asTensor(), half(0, 32)}, 1);
    Val* xf = cast(rotated, DataType::Float);
    TensorView* m = reduce(OpKind::Max, xf->asTensor(), {1}, /*keepdim=*/true);
    Val* e = unaryOp(OpKind::Exp, sub(xf, expand(m, testing::ints(f, {6, 64}))));
    TensorView* sum = reduce(OpKind::Sum, e->asTensor(), {1}, /*keepdim=*/true);
    f.addOutput(cast(div(e, expand(sum, testing::ints(f, {6, 64}))), DataType::BFloat16));
  }
  c.inputs = testing::randomInputs(f, 23, {{6, 64}});
  testing::expectDeviceMatches(*c.fusion, c.inputs);
}

TEST(CatLoads, APieceComputedFromTwoTensorsKeepsItsOwnLoads) {
  // The last piece adds y: x is still read by the other two pieces, once each, and by the last.
  const testing::KernelCase c = threePieceCat(4, 48, 8, 24, DataType::BFloat16, true);
  const auto compiled = testing::expectDeviceMatches(*c.fusion, c.inputs);
  const Kernel& k = testing::onlyKernel(compiled);
  EXPECT_EQ(loadsOf(k, paramOf(k, c.fusion->inputs()[0])), 3) << codegen::emitCuda(k);
  EXPECT_EQ(loadsOf(k, paramOf(k, c.fusion->inputs()[1])), 1);
}

}  // namespace
}  // namespace braze
