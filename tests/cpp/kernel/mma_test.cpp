// Warp-level mma.sync in the kernel IR. Each test kernel is one warp that loads its fragments of A
// (16 x K, row-major), B (K x 8, row-major) and C (16 x 8) from global memory at the positions the PTX
// ISA gives (written out here from the ISA's tables, apart from kernel/mma_fragments.cpp), runs the mma
// and stores D the same way. The simulator gathers the matrices by mma_fragments.cpp: D equals a
// scalar loop only if both agree on every lane's every value. Operands are small integers, so every
// float sum is exact in any order. NVRTC compiles the same kernels (fp8 for sm_89 on), and the SASS has
// HMMA, IMMA or QMMA.
#include "fusions/kernel_util.h"
#include "support/error.h"
#include "codegen/source_emitter.h"
#include "kernel/simulator.h"
#include "kernel/verifier.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <random>

namespace braze {
namespace {

using namespace kernel;
using namespace codegen;

struct Layouts {
  // (row, col) of value i of lane `lane` with g = lane / 4, t = lane % 4, per the PTX ISA's fragment tables.
  std::function<std::pair<int64_t, int64_t>(int64_t g, int64_t t, int64_t i)> a, b, c;
};

Layouts ptxLayouts(MmaShape shape) {
  Layouts l;
  l.c = [](int64_t g, int64_t t, int64_t i) { return std::pair{i < 2 ? g : g + 8, t * 2 + (i & 1)}; };
  if (shape == MmaShape::M16N8K16) {
    l.a = [](int64_t g, int64_t t, int64_t i) {
      return std::pair{(i < 2 || (i >= 4 && i < 6)) ? g : g + 8, t * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
    };
    l.b = [](int64_t g, int64_t t, int64_t i) { return std::pair{t * 2 + (i & 1) + (i >= 2 ? 8 : 0), g}; };
  } else {
    l.a = [](int64_t g, int64_t t, int64_t i) {
      return std::pair{(i < 4 || (i >= 8 && i < 12)) ? g : g + 8, t * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
    };
    l.b = [](int64_t g, int64_t t, int64_t i) { return std::pair{t * 4 + (i & 3) + (i >= 4 ? 16 : 0), g}; };
  }
  return l;
}

TensorParam tensor(std::string name, DataType dtype, int64_t rows, int64_t cols, bool output) {
  TensorParam p;
  p.name = std::move(name);
  p.dtype = dtype;
  p.output = output;
  p.layout = StridedLayout{{rows, cols}, {cols, 1}, 0};
  return p;
}

// D = A B + C for one 16 x 8 tile, one warp; `lanes` threads per block (32, or fewer to break the rule).
// `layouts`: where the kernel loads the fragments from (the ISA's tables unless given).
Kernel mmaTileKernel(MmaShape shape, DataType operand, int64_t lanes = 32, std::optional<Layouts> given = std::nullopt) {
  const MmaDims dims = mmaDims(shape);
  const DataType acc = mmaAccumulator(shape, operand);
  const Layouts layouts = given ? *given : ptxLayouts(shape);
  Kernel k;
  k.name = fmt::format("mma_{}_{}", toString(shape), toString(operand));
  k.summary = "one mma tile";
  k.block = {lanes, 1};
  KernelBuilder kb(k);
  const TensorId ta = kb.addTensor(tensor("A", operand, dims.m, dims.k, false));
  const TensorId tb = kb.addTensor(tensor("B", operand, dims.k, dims.n, false));
  const TensorId tc = kb.addTensor(tensor("C", acc, dims.m, dims.n, false));
  const TensorId td = kb.addTensor(tensor("D", acc, dims.m, dims.n, true));
  const VarId fa = kb.arrayVar("fa", operand, dims.a_values), fb = kb.arrayVar("fb", operand, dims.b_values);
  const VarId fc = kb.arrayVar("fc", acc, dims.c_values), fd = kb.arrayVar("fd", acc, dims.c_values);
  for (VarId v : {fa, fb, fc, fd}) kb.declare(v);
  const ExprId g = kb.div(kb.threadIdx(0), kb.index(4)), t = kb.mod(kb.threadIdx(0), kb.index(4));
  auto at = [&](const auto& layout, int64_t i, int64_t cols) {
    // row and col are linear in g and t: evaluate the table at the corners to get the coefficients.
    const auto [r0, c0] = layout(0, 0, i);
    const auto [rg, cg] = layout(1, 0, i);
    const auto [rt, ct] = layout(0, 1, i);
    const ExprId row = kb.add(kb.index(r0), kb.add(kb.mul(g, kb.index(rg - r0)), kb.mul(t, kb.index(rt - r0))));
    const ExprId col = kb.add(kb.index(c0), kb.add(kb.mul(g, kb.index(cg - c0)), kb.mul(t, kb.index(ct - c0))));
    return kb.add(kb.mul(row, kb.index(cols)), col);
  };
  for (int64_t i = 0; i < dims.a_values; ++i) kb.localWrite(fa, kb.index(i), kb.load(ta, at(layouts.a, i, dims.k)));
  for (int64_t i = 0; i < dims.b_values; ++i) kb.localWrite(fb, kb.index(i), kb.load(tb, at(layouts.b, i, dims.n)));
  for (int64_t i = 0; i < dims.c_values; ++i) kb.localWrite(fc, kb.index(i), kb.load(tc, at(layouts.c, i, dims.n)));
  kb.mma(shape, fd, fa, fb, fc);
  for (int64_t i = 0; i < dims.c_values; ++i) kb.store(td, at(layouts.c, i, dims.n), kb.localRead(fd, kb.index(i)));
  return k;
}

HostTensor smallIntegers(DataType dtype, int64_t rows, int64_t cols, int64_t lo, int64_t hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(lo, hi);
  HostTensor t = HostTensor::empty(dtype, {rows, cols});
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (isFloating(dtype)) {
      t.writeDouble(i, static_cast<double>(pick(rng)));
    } else {
      t.writeInt(i, pick(rng));
    }
  }
  return t;
}

struct MmaCase {
  MmaShape shape;
  DataType operand;
};

class MmaTile : public ::testing::TestWithParam<MmaCase> {};

TEST_P(MmaTile, SimulatedFragmentsFollowThePtxLayoutsAndEqualAScalarLoop) {
  const auto [shape, operand] = GetParam();
  const MmaDims dims = mmaDims(shape);
  const DataType acc = mmaAccumulator(shape, operand);
  const Kernel k = mmaTileKernel(shape, operand);
  verifyKernel(k);
  // Integer operands over their whole range (int32 accumulators wrap only past these sums).
  const bool integer = acc == DataType::Int32;
  const int64_t lo = operand == DataType::UInt8 ? 0 : integer ? -128 : -8;
  const int64_t hi = operand == DataType::UInt8 ? 255 : integer ? 127 : 8;
  HostTensor a = smallIntegers(operand, dims.m, dims.k, lo, hi, 1);
  HostTensor b = smallIntegers(operand, dims.k, dims.n, lo, hi, 2);
  HostTensor c = smallIntegers(acc, dims.m, dims.n, -1000, 1000, 3);
  HostTensor d = HostTensor::empty(acc, {dims.m, dims.n});
  simulate(k, {&a, &b, &c, &d});
  for (int64_t m = 0; m < dims.m; ++m) {
    for (int64_t n = 0; n < dims.n; ++n) {
      double expected = c.readDouble(m * dims.n + n);
      for (int64_t x = 0; x < dims.k; ++x) expected += a.readDouble(m * dims.k + x) * b.readDouble(x * dims.n + n);
      ASSERT_EQ(d.readDouble(m * dims.n + n), expected) << toString(shape) << " D[" << m << "][" << n << "]";
    }
  }
}

TEST_P(MmaTile, NvrtcCompilesItAndTheSassUsesTensorCores) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: kernel compilation not checked";
  const auto [shape, operand] = GetParam();
  const Kernel k = mmaTileKernel(shape, operand);
  const std::string source = emitCuda(k);
  EXPECT_NE(source.find("mma.sync.aligned." + std::string(toString(shape))), std::string::npos) << source;
  const bool fp8 = mmaMinimumSm(operand) == 89;
  for (const char* arch : {fp8 ? "sm_89" : "sm_80", "sm_90"}) {
    const auto compiled = device::compileCuda(source, k.name, {.arch = arch});
    EXPECT_EQ(compiled.log, "") << arch;
    const auto sass = device::disassemble(compiled.cubin);
    if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
    // sm_89 runs fp8 mma.sync natively (QMMA); sm_90 compiles it to f16 HMMAs (Hopper's native fp8 is wgmma).
    const bool qmma = fp8 && std::string_view(arch) == "sm_89";
    const char* opcode = mmaAccumulator(shape, operand) == DataType::Int32 ? "IMMA" : qmma ? "QMMA" : "HMMA";
    EXPECT_NE(sass->find(opcode), std::string::npos) << arch << ": no " << opcode << "\n" << *sass;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MmaTile,
                         ::testing::Values(MmaCase{MmaShape::M16N8K16, DataType::BFloat16},
                                           MmaCase{MmaShape::M16N8K16, DataType::Half},
                                           MmaCase{MmaShape::M16N8K32, DataType::Int8},
                                           MmaCase{MmaShape::M16N8K32, DataType::UInt8},
                                           MmaCase{MmaShape::M16N8K32, DataType::Float8_e4m3fn},
                                           MmaCase{MmaShape::M16N8K32, DataType::Float8_e5m2}),
                         [](const auto& info) {
                           return fmt::format("{}_{}", toString(info.param.shape), toString(info.param.operand));
                         });

// The inputs and output of a bf16 m16n8k16 tile: small integers, C zero.
struct BF16Tile {
  MmaDims dims = mmaDims(MmaShape::M16N8K16);
  HostTensor a = smallIntegers(DataType::BFloat16, dims.m, dims.k, -8, 8, 1);
  HostTensor b = smallIntegers(DataType::BFloat16, dims.k, dims.n, -8, 8, 2);
  HostTensor c = smallIntegers(DataType::Float, dims.m, dims.n, 0, 0, 3);
  HostTensor d = HostTensor::empty(DataType::Float, {dims.m, dims.n});
  std::vector<HostTensor*> tensors() { return {&a, &b, &c, &d}; }
};

// The kernel's whole body under `if (threadIdx.x < threads)`.
Kernel onlyThreadsBelow(Kernel k, int64_t threads) {
  KernelBuilder kb(k);
  std::vector<Stmt> body = std::move(k.body.mut());
  k.body.mut().clear();
  kb.openIf(kb.lt(kb.threadIdx(0), kb.index(threads)));
  kb.current() = std::move(body);
  kb.close();
  return k;
}

// A kernel loading A by a wrong table (rows g and g + 8 exchanged) gets a wrong product: the scalar-loop
// comparison above does see a layout that differs from the simulator's.
TEST(MmaTile, AWrongLayoutGivesAWrongProduct) {
  const MmaDims dims = mmaDims(MmaShape::M16N8K16);
  Layouts wrong = ptxLayouts(MmaShape::M16N8K16);
  const auto right_a = wrong.a;
  wrong.a = [right_a](int64_t g, int64_t t, int64_t i) {
    const auto [row, col] = right_a(g, t, i);
    return std::pair{row < 8 ? row + 8 : row - 8, col};
  };
  BF16Tile tile;
  simulate(mmaTileKernel(MmaShape::M16N8K16, DataType::BFloat16, 32, wrong), tile.tensors());
  const HostTensor &a = tile.a, &b = tile.b, &d = tile.d;
  int64_t differing = 0;
  for (int64_t m = 0; m < dims.m; ++m) {
    for (int64_t n = 0; n < dims.n; ++n) {
      double expected = 0;
      for (int64_t x = 0; x < dims.k; ++x) expected += a.readDouble(m * dims.k + x) * b.readDouble(x * dims.n + n);
      differing += d.readDouble(m * dims.n + n) != expected ? 1 : 0;
    }
  }
  EXPECT_GT(differing, 64);  // nearly every element of the 128
}

// A warp that does not reach the mma (a warp-uniform branch) takes no part: legal, as on a GPU.
TEST(MmaTile, AWarpThatSkipsTheMmaIsLegal) {
  BF16Tile tile;
  simulate(onlyThreadsBelow(mmaTileKernel(MmaShape::M16N8K16, DataType::BFloat16, 64), 32), tile.tensors());
  const MmaDims dims = mmaDims(MmaShape::M16N8K16);
  const HostTensor &a = tile.a, &b = tile.b, &d = tile.d;
  double expected = 0;
  for (int64_t x = 0; x < dims.k; ++x) expected += a.readDouble(x) * b.readDouble(x * dims.n);
  EXPECT_EQ(d.readDouble(0), expected);
}

TEST(MmaTile, TheSimulatorRefusesAnMmaOfPartOfAWarp) {
  // The mma under `if (threadIdx.x < 16)`: half the warp.
  const Kernel k = onlyThreadsBelow(mmaTileKernel(MmaShape::M16N8K16, DataType::BFloat16, 32), 16);
  BF16Tile tile;
  try {
    simulate(k, tile.tensors());
    FAIL() << "an mma of half a warp ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mma.m16n8k16 reached by only part of its warp"), std::string::npos) << e.what();
  }
}

TEST(MmaTile, TheVerifierChecksFragmentsAndWarps) {
  Kernel k = mmaTileKernel(MmaShape::M16N8K16, DataType::BFloat16, 16);  // half a warp per block
  try {
    verifyKernel(k);
    FAIL() << "a 16-thread block passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs whole 32-lane warps"), std::string::npos) << e.what();
  }
  Kernel wrong = mmaTileKernel(MmaShape::M16N8K16, DataType::BFloat16);
  for (KVar& v : wrong.vars.mut()) {
    if (v.name.starts_with("fa")) v.size = 4;  // 4 values where A needs 8
  }
  try {
    verifyKernel(wrong);
    FAIL() << "a 4-value A fragment passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("its A fragment must be a local array of 8 BFloat16 values"), std::string::npos)
        << e.what();
  }
}

TEST(MmaTile, HipHasNoSpellingForIt) {
  try {
    emitHip(mmaTileKernel(MmaShape::M16N8K16, DataType::BFloat16));
    FAIL() << "mma emitted as HIP";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no HIP spelling"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braze
