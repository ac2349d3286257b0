// Every kernel of the test corpus compiles with NVRTC for sm_80 and sm_90 without a warning, and
// where the heuristics vectorize by 16 bytes the SASS has 128-bit global loads and stores.
// No GPU is needed: NVRTC and cuobjdump run on any machine with the toolkit.
#include "fusions/kernel_util.h"
#include "fusions/layer_norm.h"
#include "fusions/rope.h"
#include "ir/ops.h"
#include "kernel/cuda_emitter.h"
#include "runtime/nvrtc.h"
#include "runtime/sass.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using testing::ints;

struct CorpusEntry {
  std::string name;
  std::shared_ptr<Fusion> fusion;
  std::vector<HostValue> inputs;
};

std::vector<CorpusEntry> corpus() {
  std::vector<CorpusEntry> entries;
  auto add = [&](std::string name, std::shared_ptr<Fusion> f, std::vector<HostValue> inputs) {
    entries.push_back({std::move(name), std::move(f), std::move(inputs)});
  };
  {
    auto f = std::make_shared<Fusion>();
    testing::defineLayerNorm(*f, {.batch = 16, .seq = 128, .hidden = 1600});
    add("seed_layer_norm", f, testing::randomInputs(*f, 1, {{16, 128, 1600}, {1600}, {1600}}));
  }
  for (int64_t groups : {32, 8}) {
    auto f = std::make_shared<Fusion>();
    const testing::RopeConfig c{.batch = 1, .seq = 64, .heads = 32, .groups = groups, .head = 128, .rope_n_elem = 128};
    testing::defineLitGptQkvSplitRope(*f, c);
    add("rope_groups_" + std::to_string(groups), f, testing::randomInputs(*f, 2));
  }
  for (DataType dtype : {DataType::BFloat16, DataType::Half, DataType::Float8_e4m3fn, DataType::Double}) {
    auto f = std::make_shared<Fusion>();
    {
      FusionGuard g(f.get());
      TensorView* x = defineTensor({-1, -1}, {true, true}, dtype);
      Val* xf = cast(x, DataType::Float);
      TensorView* m = reduce(OpKind::Max, xf->asTensor(), {1}, true);
      Val* e = unaryOp(OpKind::Exp, sub(xf, expand(m, ints(*f, {64, 4096}))));
      TensorView* s = reduce(OpKind::Sum, e->asTensor(), {1}, true);
      f->addOutput(cast(div(e, expand(s, ints(*f, {64, 4096}))), dtype));
      f->addOutput(reduce(OpKind::Sum, xf->asTensor(), {0}));
    }
    add(std::string("softmax_") + std::string(toString(dtype)), f, testing::randomInputs(*f, 3, {{64, 4096}}));
  }
  {
    // Shared-memory tiles (two groups: y = permute(x) * 2 + bias, z = x + 1) with partial tiles.
    auto f = std::make_shared<Fusion>();
    {
      FusionGuard g(f.get());
      TensorView* x = defineTensor({-1, -1, -1}, {true, true, true}, DataType::BFloat16);
      TensorView* b = defineTensor({-1}, {true}, DataType::BFloat16);
      Val* y = braze::add(mul(permute(x, {0, 2, 1}), f->constant(2.0)), broadcastInDim(b, ints(*f, {4, 200, 72}), {2}));
      f->addOutput(cast(y, DataType::BFloat16));
      f->addOutput(cast(braze::add(x, f->constant(1.0)), DataType::BFloat16));
    }
    add("transpose_tiles", f, testing::randomInputs(*f, 4, {{4, 72, 200}, {72}}));
  }
  {
    auto f = std::make_shared<Fusion>();
    {
      FusionGuard g(f.get());
      TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Int32);
      TensorView* i = defineTensor({-1}, {true}, DataType::Int64);
      f->addOutput(indexSelect(x, i, 0));
      f->addOutput(pad(x, ints(*f, {1, 1}), f->constant(int64_t{0})));
      f->addOutput(reduce(OpKind::Sum, x, {1}));
    }
    add("int_gather_pad", f,
        {testing::randomTensor(DataType::Int32, {5, 6}, 1), testing::tensorOf(DataType::Int64, {3}, {4, 0, 2})});
  }
  {
    // Grid reductions (inner over few long rows, outer over a long column, booleans) and a layer_norm
    // row kept in shared memory: workspace, atomics, fences and dynamic shared memory.
    auto f = std::make_shared<Fusion>();
    {
      FusionGuard g(f.get());
      TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::Float);
      f->addOutput(reduce(OpKind::Sum, x, {1}));
      f->addOutput(reduce(OpKind::Any, binaryOp(OpKind::Gt, x, f->constant(1.5))->asTensor(), {1}));
    }
    add("grid_inner", f, testing::randomInputs(*f, 4, {{3, 40001}}));
    auto o = std::make_shared<Fusion>();
    {
      FusionGuard g(o.get());
      TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
      o->addOutput(reduce(OpKind::Max, x, {0}));
    }
    add("grid_outer", o, testing::randomInputs(*o, 5, {{20011, 64}}));
    auto ln = std::make_shared<Fusion>();
    testing::defineLayerNorm(*ln, {.batch = 2, .seq = 1, .hidden = 40960});
    add("shared_layer_norm", ln, testing::randomInputs(*ln, 6, {{2, 1, 40960}, {40960}, {40960}}));
    auto bias = std::make_shared<Fusion>();
    {
      FusionGuard g(bias.get());
      TensorView* x = defineTensor({-1, -1}, {true, true}, DataType::BFloat16);
      TensorView* b = defineTensor({-1}, {true}, DataType::BFloat16);
      bias->addOutput(braze::add(x, broadcastInDim(b, ints(*bias, {64, 4096}), {1})));
    }
    add("pointwise_2d_bias", bias, testing::randomInputs(*bias, 7, {{64, 4096}, {4096}}));
  }
  return entries;
}

std::vector<std::string> corpusSources() {
  std::vector<std::string> sources;
  for (const CorpusEntry& entry : corpus()) {
    const auto compiled = kernel::compilePlan(explain(*entry.fusion, entry.inputs), DeviceInfo::h100Sxm());
    for (const auto& k : compiled.kernels) {
      if (k) sources.push_back(kernel::emitCuda(*k));
    }
  }
  return sources;
}

TEST(NvrtcCorpus, EveryKernelCompilesForSm80AndSm90WithoutWarnings) {
  if (!runtime::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: kernel compilation not checked";
  const auto sources = corpusSources();
  ASSERT_GE(sources.size(), 8u);
  for (const std::string& source : sources) {
    for (const char* arch : {"sm_80", "sm_90"}) {
      const auto compiled = runtime::compileCuda(source, source.substr(3, source.find(':') - 3), {.arch = arch});
      EXPECT_TRUE(compiled.log.empty()) << arch << ":\n" << compiled.log << "\n" << source;
      EXPECT_FALSE(compiled.cubin.empty());
    }
  }
}

TEST(NvrtcCorpus, VectorizedLayerNormUses128BitLoadsAndStores) {
  if (!runtime::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  Fusion f;
  testing::defineLayerNorm(f, {.batch = 16, .seq = 128, .hidden = 1600});
  const auto inputs = testing::randomInputs(f, 1, {{16, 128, 1600}, {1600}, {1600}});
  const auto compiled = kernel::compilePlan(explain(f, inputs), DeviceInfo::h100Sxm());
  const kernel::Kernel* k = nullptr;
  for (const auto& kk : compiled.kernels) {
    if (kk) k = &*kk;
  }
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->vectorize, 8);
  for (const char* arch : {"sm_80", "sm_90"}) {
    const auto cubin = runtime::compileCuda(kernel::emitCuda(*k), k->name, {.arch = arch});
    const auto sass = runtime::disassemble(cubin.cubin);
    if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
    const auto counts = runtime::countGlobalAccesses(*sass);
    EXPECT_GT(counts.load_bits.count(128) ? counts.load_bits.at(128) : 0, 0) << arch << "\n" << *sass;
    EXPECT_GT(counts.store_bits.count(128) ? counts.store_bits.at(128) : 0, 0) << arch << "\n" << *sass;
    // Only the 16-byte accesses move row data: no narrow loads of x or stores of the output.
    EXPECT_EQ(counts.store_bits.count(16), 0u) << arch;
  }
}

}  // namespace
}  // namespace braze
