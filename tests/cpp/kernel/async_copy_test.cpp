// cp.async and ldmatrix in the kernel IR. A one-warp kernel copies an operand tile into shared memory
// with cp.async, waits, and reads it with ldmatrix where shared_tiles.h points each lane: the registers
// must be the lane's mma fragment as the PTX tables give it (kernel/mma_fragments.h), for A and B, both
// tile orders, 16- and 8-bit operands. The simulator reports a read of shared memory before the cp.async
// wait that covers it, and counts ldmatrix bank conflicts: none for rotated tiles, some for plain ones.
// NVRTC compiles the staged matmul kernels into LDGSTS, LDSM and HMMA / IMMA.
#include "fusions/kernel_corpus.h"
#include "exec/host_execute.h"
#include "support/error.h"
#include "codegen/source_emitter.h"
#include "kernel/shared_tiles.h"
#include "kernel/simulator.h"
#include "kernel/verifier.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"

#include <gtest/gtest.h>

#include <functional>

namespace braze {
namespace {

// How many times `op` occurs in `text` (a SASS listing).
int64_t occurrences(const std::string& text, std::string_view op) {
  int64_t n = 0;
  for (size_t at = text.find(op); at != std::string::npos; at = text.find(op, at + 1)) ++n;
  return n;
}

using namespace kernel;

struct FragmentCase {
  bool a;  // A (16 x K) or B (K x 8) of the mma
  TileOrder order;
  DataType dtype;
  bool rotate = false;  // chunks stored at rotatedChunk positions
  std::string name() const {
    return fmt::format("{}_{}_{}{}", a ? "A" : "B", order == TileOrder::KMajor ? "k_major" : "mn_major",
                       toString(dtype), rotate ? "_rotated" : "");
  }
};

MmaShape shapeOf(DataType dtype) { return sizeOf(dtype) == 2 ? MmaShape::M16N8K16 : MmaShape::M16N8K32; }

// The tile as stored: rows along K (k-major: a row per m or n) or along M / N (a row per k).
struct TileShape {
  int64_t rows, row_elements;
};
TileShape tileShape(const FragmentCase& c) {
  const MmaDims d = mmaDims(shapeOf(c.dtype));
  const int64_t mn = c.a ? d.m : d.n;
  return c.order == TileOrder::KMajor ? TileShape{mn, d.k} : TileShape{d.k, mn};
}

// One warp: G (the tile, row-major as stored) -> cp.async -> shared tile -> ldmatrix -> D[lane][value].
Kernel fragmentKernel(const FragmentCase& c) {
  const MmaDims dims = mmaDims(shapeOf(c.dtype));
  const TileShape shape = tileShape(c);
  const int64_t per_chunk = 16 / sizeOf(c.dtype), chunks = shape.row_elements / per_chunk;
  const int values = c.a ? dims.a_values : dims.b_values;
  Kernel k;
  k.name = "fragment_" + c.name();
  k.summary = "one fragment through shared memory";
  k.block = {32, 1};
  KernelBuilder kb(k);
  const TensorId g = kb.addTensor(testing::vectorParam("G", c.dtype, shape.rows * shape.row_elements, false));
  const TensorId d = kb.addTensor(testing::vectorParam("D", c.dtype, 32 * values, true));
  const VarId tile = kb.sharedStorageArray("tile", c.dtype, shape.rows * shape.row_elements);
  kb.declare(tile);
  const ExprId lane = kb.threadIdx(0);
  auto place = [&](ExprId row, ExprId chunk) {
    const ExprId stored = c.rotate ? kb.mod(kb.add(chunk, kb.div(row, kb.index(rowsPerRotation(chunks)))), kb.index(chunks)) : chunk;
    return kb.add(kb.mul(row, kb.index(shape.row_elements)), kb.mul(stored, kb.index(per_chunk)));
  };
  for (int64_t first = 0; first < shape.rows * chunks; first += 32) {
    const ExprId q = kb.add(lane, kb.index(first));
    kb.openIf(kb.lt(q, kb.index(shape.rows * chunks)));
    kb.cpAsync(tile, place(kb.div(q, kb.index(chunks)), kb.mod(q, kb.index(chunks))), g, kb.mul(q, kb.index(per_chunk)),
               static_cast<int>(per_chunk), kb.index(16));
    kb.close();
  }
  kb.cpAsyncCommit();
  kb.cpAsyncWait(0);
  kb.barrier();
  const LdmatrixPattern pattern = c.a ? ldmatrixPatternA(c.order) : ldmatrixPatternB(c.order);
  const TilePlace source = ldmatrixSource(kb, pattern, lane);
  const VarId fragment = kb.arrayVar("frag", c.dtype, values);
  kb.declare(fragment);
  kb.ldmatrix(fragment, kb.index(0), tile, place(source.row, source.chunk), pattern.matrices, pattern.transpose);
  for (int i = 0; i < values; ++i) {
    kb.store(d, kb.add(kb.mul(lane, kb.index(values)), kb.index(i)), kb.localRead(fragment, kb.index(i)));
  }
  return k;
}

class LdmatrixFragment : public ::testing::TestWithParam<FragmentCase> {};

TEST_P(LdmatrixFragment, EachLaneReceivesItsMmaFragment) {
  const FragmentCase c = GetParam();
  const MmaShape shape = shapeOf(c.dtype);
  const MmaDims dims = mmaDims(shape);
  const TileShape tile = tileShape(c);
  const Kernel k = fragmentKernel(c);
  verifyKernel(k);
  // Distinct values: element e of G is e (mod 128 for 8-bit), so every value names where it came from.
  HostTensor g = HostTensor::empty(c.dtype, {tile.rows * tile.row_elements});
  for (int64_t e = 0; e < g.numel(); ++e) {
    if (isFloating(c.dtype)) {
      g.writeDouble(e, static_cast<double>(e));
    } else {
      g.writeInt(e, e % 128);
    }
  }
  const int values = c.a ? dims.a_values : dims.b_values;
  HostTensor d = HostTensor::empty(c.dtype, {32 * values});
  simulate(k, {&g, &d});
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < values; ++i) {
      // (m or n, k) of the fragment value, then where the tile stores it.
      const MatrixPosition p = c.a ? mmaAPosition(shape, lane, i) : mmaBPosition(shape, lane, i);
      const int64_t mn = c.a ? p.row : p.col, kk = c.a ? p.col : p.row;
      const int64_t e = c.order == TileOrder::KMajor ? mn * tile.row_elements + kk : kk * tile.row_elements + mn;
      const double want = isFloating(c.dtype) ? static_cast<double>(e) : static_cast<double>(e % 128);
      const double got = isFloating(c.dtype) ? d.readDouble(lane * values + i) : static_cast<double>(d.readInt(lane * values + i));
      ASSERT_EQ(got, want) << c.name() << ": lane " << lane << " value " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, LdmatrixFragment,
                         ::testing::Values(FragmentCase{true, TileOrder::KMajor, DataType::BFloat16},
                                           FragmentCase{true, TileOrder::KMajor, DataType::BFloat16, true},
                                           FragmentCase{true, TileOrder::MnMajor, DataType::Half},
                                           FragmentCase{true, TileOrder::KMajor, DataType::Int8},
                                           FragmentCase{false, TileOrder::KMajor, DataType::BFloat16},
                                           FragmentCase{false, TileOrder::MnMajor, DataType::BFloat16, true},
                                           FragmentCase{false, TileOrder::KMajor, DataType::UInt8, true}),
                         [](const auto& info) { return info.param.name(); });

// A 64-byte-row tile read by 8 consecutive rows per phase: plain rows put pairs of rows on the same banks;
// rotated chunks spread each phase over all of them. So for A's pattern and for two n-tiles of B at once
// (k-major and mn-major).
TEST(LdmatrixFragment, RotatedTilesReadWithoutBankConflicts) {
  for (const LdmatrixPattern pattern : {ldmatrixPatternA(TileOrder::KMajor), ldmatrixPatternBPair(TileOrder::KMajor),
                                        ldmatrixPatternBPair(TileOrder::MnMajor)}) {
    for (bool rotate : {false, true}) {
      // A bf16 tile of 16 rows x 32 elements (64 bytes, 4 chunks per row): wider than a fragment.
      Kernel k;
      k.name = rotate ? "rotated" : "plain";
      k.summary = "bank conflicts";
      k.block = {32, 1};
      KernelBuilder kb(k);
      const int64_t rows = 16, row_elements = 32, chunks = 4;
      const TensorId g = kb.addTensor(testing::vectorParam("G", DataType::BFloat16, rows * row_elements, false));
      const TensorId d = kb.addTensor(testing::vectorParam("D", DataType::BFloat16, 32 * 8, true));
      const VarId tile = kb.sharedStorageArray("tile", DataType::BFloat16, rows * row_elements);
      kb.declare(tile);
      const ExprId lane = kb.threadIdx(0);
      auto place = [&](ExprId row, ExprId chunk) {
        const ExprId stored = rotate ? kb.mod(kb.add(chunk, kb.div(row, kb.index(rowsPerRotation(chunks)))), kb.index(chunks)) : chunk;
        return kb.add(kb.mul(row, kb.index(row_elements)), kb.mul(stored, kb.index(8)));
      };
      for (int64_t first = 0; first < rows * chunks; first += 32) {
        const ExprId q = kb.add(lane, kb.index(first));
        kb.cpAsync(tile, place(kb.div(q, kb.index(chunks)), kb.mod(q, kb.index(chunks))), g, kb.mul(q, kb.index(8)), 8,
                   kb.index(16));
      }
      kb.cpAsyncCommit();
      kb.cpAsyncWait(0);
      kb.barrier();
      const TilePlace source = ldmatrixSource(kb, pattern, lane);
      const VarId fragment = kb.arrayVar("frag", DataType::BFloat16, 8);
      kb.declare(fragment);
      kb.ldmatrix(fragment, kb.index(0), tile, place(source.row, source.chunk), 4, pattern.transpose);
      for (int i = 0; i < 8; ++i) kb.store(d, kb.add(kb.mul(lane, kb.index(8)), kb.index(i)), kb.localRead(fragment, kb.index(i)));
      verifyKernel(k);
      HostTensor gt = HostTensor::empty(DataType::BFloat16, {rows * row_elements});
      for (int64_t e = 0; e < gt.numel(); ++e) gt.writeDouble(e, 1.0);
      HostTensor dt = HostTensor::empty(DataType::BFloat16, {32 * 8});
      SimStats stats;
      SimLaunch launch;
      launch.tensors = {gt.data(), dt.data()};
      launch.stats = &stats;
      simulate(k, launch);
      EXPECT_EQ(stats.ldmatrix_phases, 4);
      if (rotate) {
        EXPECT_EQ(stats.ldmatrix_bank_conflicts, 0);
      } else {
        EXPECT_GT(stats.ldmatrix_bank_conflicts, 0);  // rows r and r + 2 share banks: 4-way per phase
      }
    }
  }
}

// One warp, a float tile of 132 elements in shared memory filled from G (4 per lane, one cp.async each),
// D one float per lane; `body` builds the rest. Simulating it must fail with `error` in the message.
void expectSimulationError(const std::string& what, const std::string& error,
                           const std::function<void(KernelBuilder&, VarId tile, TensorId g, TensorId d, ExprId lane)>& body) {
  Kernel k;
  k.name = "tile_hazard";
  k.summary = what;
  k.block = {32, 1};
  KernelBuilder kb(k);
  const TensorId g = kb.addTensor(testing::vectorParam("G", DataType::Float, 132, false));
  const TensorId d = kb.addTensor(testing::vectorParam("D", DataType::Float, 32, true));
  const VarId tile = kb.sharedStorageArray("tile", DataType::Float, 132);
  kb.declare(tile);
  const ExprId lane = kb.threadIdx(0);
  kb.cpAsync(tile, kb.mul(lane, kb.index(4)), g, kb.mul(lane, kb.index(4)), 4, kb.index(16));
  kb.cpAsyncCommit();
  body(kb, tile, g, d, lane);
  verifyKernel(k);
  HostTensor gt = HostTensor::empty(DataType::Float, {132}), dt = HostTensor::empty(DataType::Float, {32});
  try {
    simulate(k, {&gt, &dt});
    FAIL() << what << " was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(error), std::string::npos) << e.what();
  }
}

// A read of the tile without a wait (or with a wait that leaves the group in flight): reported, naming
// the array.
TEST(CpAsync, AReadBeforeTheWaitThatCoversTheCopyIsReported) {
  for (int pending : {-1, 1}) {
    expectSimulationError(fmt::format("a read after wait({})", pending), "reads shared tile[0] while a cp.async into it is in flight",
                          [&](KernelBuilder& kb, VarId tile, TensorId, TensorId d, ExprId lane) {
                            if (pending >= 0) kb.cpAsyncWait(pending);
                            kb.barrier();
                            kb.store(d, lane, kb.localRead(tile, kb.mul(lane, kb.index(4))));
                          });
  }
}

// A stage refilled while another thread may still be reading it: thread t reads element 4 t + 4 (its
// neighbour's), then every thread cp.asyncs into its own 4 elements with no barrier in between.
TEST(CpAsync, ARefillWithoutABarrierAfterOtherThreadsReadIsReported) {
  expectSimulationError("a refill without a barrier", "with no barrier in between",
                        [](KernelBuilder& kb, VarId tile, TensorId g, TensorId d, ExprId lane) {
                          kb.cpAsyncWait(0);
                          kb.barrier();
                          kb.store(d, lane, kb.localRead(tile, kb.add(kb.mul(lane, kb.index(4)), kb.index(4))));
                          kb.cpAsync(tile, kb.mul(lane, kb.index(4)), g, kb.mul(lane, kb.index(4)), 4, kb.index(16));
                        });
}

TEST(CpAsync, TheVerifierChecksSizesAndOperands) {
  Kernel k;
  k.name = "bad";
  k.block = {32, 1};
  KernelBuilder kb(k);
  const TensorId g = kb.addTensor(testing::vectorParam("G", DataType::Int8, 64, false));
  const VarId tile = kb.sharedStorageArray("tile", DataType::Int8, 64);
  kb.declare(tile);
  kb.cpAsync(tile, kb.index(0), g, kb.index(0), 12, kb.index(12));  // 12 bytes: not a cp.async size
  EXPECT_THROW(verifyKernel(k), Error);
  Kernel t;
  t.name = "trans8";
  t.block = {32, 1};
  KernelBuilder tb(t);
  const VarId tile8 = tb.sharedStorageArray("tile", DataType::Int8, 256);
  const VarId frag = tb.arrayVar("frag", DataType::Int8, 8);
  tb.declare(tile8);
  tb.declare(frag);
  tb.ldmatrix(frag, tb.index(0), tile8, tb.index(0), 2, /*transpose=*/true);  // .trans takes 16-bit values only
  try {
    verifyKernel(t);
    FAIL() << "ldmatrix.trans of int8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("without .trans"), std::string::npos) << e.what();
  }
}

// The staged matmuls of the corpus take the pipeline, and their SASS has cp.async (LDGSTS), ldmatrix
// (LDSM) and the tensor-core mma.
TEST(CpAsync, StagedMatmulKernelsUseLdgstsLdsmAndTensorCores) {
  const std::pair<testing::KernelCase, const char*> cases[] = {
      {testing::matmulCase({100, 264}, {264, 72}, DataType::BFloat16, false, DataType::Null, 1), "HMMA"},
      {testing::matmulCase({2, 70, 144}, {2, 144, 40}, DataType::Int8, true, DataType::Int8, 2), "IMMA"},
  };
  for (const auto& [c, opcode] : cases) {
    const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
    const kernel::Kernel& k = testing::onlyKernel(compiled);
    ASSERT_NE(k.summary.find("cp.async pipeline"), std::string::npos) << k.summary;
    if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
    for (const char* arch : {"sm_80", "sm_90"}) {
      const auto cubin = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = arch});
      EXPECT_TRUE(cubin.log.empty()) << cubin.log;
      const auto sass = device::disassemble(cubin.cubin);
      if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
      for (const char* op : {"LDGSTS", "LDSM", opcode}) {
        EXPECT_NE(sass->find(op), std::string::npos) << arch << ": no " << op << " in " << k.summary;
      }
    }
  }
}

// fp8 operands (sm_89 on) stage as 8-bit ones do: NVRTC compiles the kernel for sm_89 (QMMA) and sm_90
// (which runs fp8 mma.sync as f16 HMMA) with cp.async and ldmatrix.
TEST(CpAsync, StagedFp8MatmulCompilesForSm89AndSm90) {
  testing::KernelCase c;
  {
    FusionGuard g(c.fusion.get());
    TensorView* a = defineTensor({-1, -1}, {true, true}, DataType::Float8_e4m3fn);
    TensorView* bt = defineTensor({-1, -1}, {true, true}, DataType::Float8_e4m3fn);
    c.fusion->addOutput(matmul(a, permute(bt, {1, 0}), DataType::Float));
  }
  c.inputs = testing::randomInputs(*c.fusion, 6, {{70, 160}, {40, 160}});
  const LoweredPlan compiled = testing::expectDeviceMatches(*c.fusion, c.inputs);
  const kernel::Kernel& k = testing::onlyKernel(compiled);
  ASSERT_NE(k.summary.find("mma.m16n8k32"), std::string::npos) << k.summary;
  ASSERT_NE(k.summary.find("cp.async pipeline"), std::string::npos) << k.summary;
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  for (const auto& [arch, mma] : {std::pair{"sm_89", "QMMA"}, std::pair{"sm_90", "HMMA"}}) {
    const auto cubin = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = arch});
    EXPECT_TRUE(cubin.log.empty()) << cubin.log;
    const auto sass = device::disassemble(cubin.cubin);
    if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
    for (const char* op : {"LDGSTS", "LDSM", mma}) EXPECT_NE(sass->find(op), std::string::npos) << arch << ": no " << op;
  }
}

// An operand through registers whose tiles are whole loads a slice ahead of the mmas (the loads of the
// slice after next, clamped to the last one, before this slice's mmas; its stores after them), or, with
// matmul_loads_ahead=0, when its stage is refilled: both equal the reference on the simulated device, which
// reports a refill that races with another warp's reads.
TEST(CpAsync, RegisterStagedOperandsLoadASliceAhead) {
  const testing::KernelCase c = testing::matmulCase({2, 64, 256}, {2, 256, 64}, DataType::Int8, false, DataType::Null, 14);
  std::vector<std::string> sources;
  for (const char* tuning : {"", "matmul_loads_ahead=0"}) {
    DeviceInfo device = DeviceInfo::h100Sxm();
    device.tuning = HeuristicTuning::parse(tuning);
    device::SimDeviceOps sim;
    exec::FusionCache cache(c.fusion, c.options.plan, &sim, device);
    testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), tuning);
    const kernel::Kernel& k = testing::onlyKernel(cache.lastPlan()->compiled());
    ASSERT_NE(k.summary.find("B k-major through registers"), std::string::npos) << k.summary;
    sources.push_back(codegen::emitCuda(k));
  }
  EXPECT_NE(sources[0].find("min((kt + 2), 3)"), std::string::npos) << sources[0];
  EXPECT_EQ(sources[1].find("min((kt + 2), 3)"), std::string::npos) << sources[1];
}

// A row-major int8 B goes into k-major tiles through registers four k rows at a time: each lane's four k
// bytes of one n are adjacent, and the emitter joins them into 4-byte shared stores. The s8 bmm benchmark's
// kernel (16 slices in four stages, 256 x 128 tiles) has no 1-byte ones left. (The small corpus case
// matmul_s8_row_major_b_four_k_rows checks the values on the simulator.)
TEST(CpAsync, RowMajorInt8BIsStoredFourBytesAtATime) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  const testing::KernelCase c = testing::matmulCase({2, 1024, 1024}, {2, 1024, 1024}, DataType::Int8, false, DataType::Null, 13);
  const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
  const kernel::Kernel& k = testing::onlyKernel(compiled);
  ASSERT_NE(k.summary.find("B k-major through registers"), std::string::npos) << k.summary;
  const std::string source = codegen::emitCuda(k);
  // The loaded rows stay 32-bit words: each 4-byte store takes its bytes out of four words with three byte
  // perms (sign-extending every byte at the load and joining them again cost eight PRMT per store).
  EXPECT_NE(source.find("braze_store_4_bytes_of_words("), std::string::npos) << source;
  const auto cubin = device::compileCuda(source, k.name, {.arch = "sm_90"});
  const auto sass = device::disassemble(cubin.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  EXPECT_EQ(sass->find("STS.U8"), std::string::npos) << *sass;
  auto count = [&](std::string_view op) { return occurrences(*sass, op); };
  EXPECT_GT(count("STS "), 0) << *sass;
  EXPECT_LE(count("PRMT"), 4 * count("STS ")) << *sass;  // three per store, a few in the index arithmetic
}

// Fragments that ldmatrix loads and only mma reads stay the 32-bit registers ldmatrix loaded: each mma
// takes them as they are (braze_mma_*_w). Unpacked into their values and packed again, an int8 fragment
// cost NVRTC about nine PRMT per IMMA (seed 002's s8 bmm with B given [batch, n, k]: 560 PRMT to 64 IMMA).
TEST(CpAsync, LdmatrixFragmentsStayPackedForTheMma) {
  const testing::KernelCase c = testing::matmulCase({16, 1024, 1024}, {16, 1024, 1024}, DataType::Int8, true, DataType::Null, 14);
  DeviceInfo mma_h100 = DeviceInfo::h100Sxm();
  mma_h100.tuning = HeuristicTuning::parse("matmul_wgmma=0");  // mma.sync's fragments
  const auto compiled = lowerPlan(planSegments(*c.fusion, c.inputs), mma_h100);
  const kernel::Kernel& k = testing::onlyKernel(compiled);
  ASSERT_NE(k.summary.find("(A k-major, B k-major)"), std::string::npos) << k.summary;
  const std::string source = codegen::emitCuda(k);
  EXPECT_NE(source.find("unsigned fa[4];  // packed: 4 values per register"), std::string::npos) << source;
  EXPECT_NE(source.find("braze_mma_m16n8k32_s8_w(acc, fa, fb, acc);"), std::string::npos) << source;
  EXPECT_EQ(source.find("braze_mma_m16n8k32_s8(acc"), std::string::npos) << source;
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  const auto cubin = device::compileCuda(source, k.name, {.arch = "sm_90"});
  EXPECT_TRUE(cubin.log.empty()) << cubin.log;
  const auto sass = device::disassemble(cubin.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  auto count = [&](std::string_view op) { return occurrences(*sass, op); };
  // A few PRMT remain in the index arithmetic before the main loop.
  EXPECT_GE(count("IMMA"), 128) << *sass;
  EXPECT_LT(count("PRMT"), count("IMMA") / 8) << *sass;
}

// Fragments double-buffered: each k step's mmas run while the next step's fragments load, the block
// waits for the next slice at the last k step, and the refill's copies follow the earlier steps' mmas. With one set or two, on odd shapes (cut tiles, K not a
// whole number of slices, a batch) and with the K-split partials, the simulated device equals the
// reference, and the simulator finds no read of a stage before its copies landed.
TEST(CpAsync, DoubleBufferedFragmentsMatchTheReference) {
  // 128-byte slices: four k steps, the refill's copies spread over three of them (or issued at once).
  for (const char* tuning : {"matmul_fragments_ahead=1", "matmul_fragments_ahead=1, matmul_slice_bytes=128",
                             "matmul_fragments_ahead=1, matmul_slice_bytes=128, matmul_copy_parts=1",
                             "matmul_fragments_ahead=0"}) {
    DeviceInfo device_info = DeviceInfo::h100Sxm();
    device_info.sm_count = 4;
    // mma.sync's fragments (the rows under 64 would take the GEMV on tensor cores).
    device_info.tuning = HeuristicTuning::parse(std::string("matmul_wgmma=0, matmul_gemv=0, ") + tuning);
    for (const testing::KernelCase& c :
         {testing::matmulCase({97, 200}, {200, 72}, DataType::BFloat16, false, DataType::Null, 21),
          testing::matmulCase({3, 33, 336}, {3, 336, 40}, DataType::Int8, true, DataType::Null, 22),
          testing::matmulCase({64, 1024}, {1024, 64}, DataType::Half, true, DataType::Null, 23)}) {
      device::SimDeviceOps device;
      exec::FusionCache cache(c.fusion, c.options.plan, &device, device_info);
      testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), tuning);
      const kernel::Kernel& k = testing::onlyKernel(cache.lastPlan()->compiled());
      EXPECT_EQ(k.summary.find("fragments double-buffered") != std::string::npos, std::string_view(tuning).find("ahead=1") != std::string_view::npos) << k.summary;
    }
  }
}

// A lane's two accumulators of adjacent columns go out in one store where N is even (one 8-byte store
// of two int32 here, where each value took a 4-byte one); with N odd, one store per value. Either way the
// simulated device equals the reference.
TEST(CpAsync, EpilogueStoresAdjacentColumnsTogether) {
  DeviceInfo four_sms = DeviceInfo::h100Sxm();
  four_sms.sm_count = 4;
  // mma.sync's tiles (wgmma's accumulators share the layout; 37 rows would take the GEMV on tensor cores).
  four_sms.tuning = HeuristicTuning::parse("matmul_wgmma=0,matmul_gemv=0");
  for (int64_t n : {40, 33}) {
    const testing::KernelCase c = testing::matmulCase({3, 37, 64}, {3, 64, n}, DataType::Int8, true, DataType::Null, 24);
    device::SimDeviceOps device;
    exec::FusionCache cache(c.fusion, c.options.plan, &device, four_sms);
    testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), fmt::format("N = {}", n));
    const std::string source = codegen::emitCuda(testing::onlyKernel(cache.lastPlan()->compiled()));
    EXPECT_EQ(source.find("BrazeVec<int, 2>") != std::string::npos, n % 2 == 0) << source;
  }
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  const testing::KernelCase big = testing::matmulCase({16, 1024, 1024}, {16, 1024, 1024}, DataType::Int8, true, DataType::Null, 25);
  const auto compiled = lowerPlan(planSegments(*big.fusion, big.inputs), four_sms);
  const kernel::Kernel& k = testing::onlyKernel(compiled);
  const auto cubin = device::compileCuda(codegen::emitCuda(k), k.name, {.arch = "sm_90"});
  const auto sass = device::disassemble(cubin.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  EXPECT_NE(sass->find("STG.E.64"), std::string::npos) << *sass;
  EXPECT_EQ(sass->find("STG.E "), std::string::npos) << *sass;
}

// Seed 000's second GEMM: bf16 operands quantized to e4m3fn in the prologue (through registers), which
// equals the reference on the test device, and whose SASS has no double-precision arithmetic: the quotient
// is divided in float and moved off fp8 ties (braze_quotient_for_fp8), and each value is rounded once,
// where it is stored into the shared tile.
TEST(CpAsync, Fp8QuantizedOperandsAreDividedInFloatAndRoundedOnce) {
  const testing::KernelCase c = testing::quantizedFp8MatmulCase(40, 64, 24, 12);
  const LoweredPlan compiled = testing::expectDeviceMatches(*c.fusion, c.inputs);
  const kernel::Kernel& k = testing::onlyKernel(compiled);
  ASSERT_NE(k.summary.find("through registers"), std::string::npos) << k.summary;
  const std::string source = codegen::emitCuda(k);
  EXPECT_NE(source.find("braze_quotient_for_fp8("), std::string::npos) << source;
  EXPECT_NE(source.find("rounded where it is stored"), std::string::npos) << source;
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: SASS not checked";
  const auto cubin = device::compileCuda(source, k.name, {.arch = "sm_90"});
  EXPECT_TRUE(cubin.log.empty()) << cubin.log;
  const auto sass = device::disassemble(cubin.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  for (const char* op : {"DMUL", "DADD", "DFMA", "MUFU.RCP64H"}) EXPECT_EQ(sass->find(op), std::string::npos) << op;
}

// The large block tiles of eight warps, taken where the problem gives every SM a block: on a described H100
// of one SM, 256 x 128 tiles in four stages of 128-byte slices; where a block's shared memory is 100 KiB,
// 128 x 128 tiles in four 64-byte stages. A 200 x 136 output (block rows and columns cut short) of K = 1032
// (a slice cut short) equals the reference on the simulated device either way.
TEST(CpAsync, LargeBlockTilesMatchTheReference) {
  DeviceInfo one_sm = DeviceInfo::h100Sxm();
  one_sm.sm_count = 1;
  one_sm.tuning = HeuristicTuning::parse("matmul_wgmma=0");  // mma.sync's tiles (wgmma_test.cpp has wgmma's)
  DeviceInfo less_smem = one_sm;
  less_smem.smem_per_block_optin = 100 * 1024;
  for (const auto& [device, summary] :
       {std::pair{one_sm, "4x2 warps of 4x8 tiles (256x128 outputs per block), 4-stage cp.async pipeline of 64-element"},
        std::pair{less_smem, "2x4 warps of 4x4 tiles (128x128 outputs per block), 4-stage cp.async pipeline of 32-element"}}) {
    for (bool b_transposed : {false, true}) {
      const testing::KernelCase c =
          testing::matmulCase({200, 1032}, {1032, 136}, DataType::BFloat16, b_transposed, DataType::Null, 5);
      device::SimDeviceOps sim;
      exec::FusionCache cache(c.fusion, c.options.plan, &sim, device);
      testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), summary);
      const kernel::Kernel& k = testing::onlyKernel(cache.lastPlan()->compiled());
      EXPECT_NE(k.summary.find(summary), std::string::npos) << k.summary;
    }
  }
}

// Rasterized block order: groups of 8 block rows walk N together, the last group shorter (9 block rows of
// 64 x 64 s8 tiles on a described one-SM H100 whose blocks have 48 KiB of shared memory): every output tile
// is computed once, as the reference gives it.
TEST(CpAsync, RasterizedBlocksCoverEveryTileOnce) {
  DeviceInfo one_sm = DeviceInfo::h100Sxm();
  one_sm.sm_count = 1;
  one_sm.smem_per_block_optin = 48 * 1024;
  const testing::KernelCase c = testing::matmulCase({576, 64}, {64, 150}, DataType::Int8, true, DataType::Null, 7);
  device::SimDeviceOps device;
  exec::FusionCache cache(c.fusion, c.options.plan, &device, one_sm);
  testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), "rasterized");
  const kernel::Kernel& k = testing::onlyKernel(cache.lastPlan()->compiled());
  EXPECT_NE(k.summary.find("blocks in groups of 8 rows"), std::string::npos) << k.summary;
  EXPECT_EQ(k.grid[0], 9 * 3);
}

// The matmul fields of $BRAZE_TUNING, for measuring on a GPU: 128 x 256 block tiles, 128-byte K slices and
// four stages (128 KiB of shared memory, opted into), on 16-bit operands with B either way and on int8
// through registers: equal to the reference on the simulated device, and as the summary says.
TEST(CpAsync, TunedTilesSlicesAndStagesMatchTheReference) {
  DeviceInfo tuned = DeviceInfo::h100Sxm();
  tuned.sm_count = 1;
  tuned.tuning =
      HeuristicTuning::parse("matmul_wgmma=0, matmul_stages=4, matmul_slice_bytes=128, matmul_block_m=128, matmul_block_n=256");
  for (const testing::KernelCase& c :
       {testing::matmulCase({150, 200}, {200, 264}, DataType::BFloat16, false, DataType::Null, 8),
        testing::matmulCase({150, 200}, {200, 264}, DataType::Half, true, DataType::Null, 9),
        testing::matmulCase({2, 70, 260}, {2, 260, 40}, DataType::Int8, false, DataType::Null, 10)}) {
    device::SimDeviceOps device;
    exec::FusionCache cache(c.fusion, c.options.plan, &device, tuned);
    testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), "tuned");
    const kernel::Kernel& k = testing::onlyKernel(cache.lastPlan()->compiled());
    EXPECT_NE(k.summary.find("2x4 warps of 4x8 tiles (128x256 outputs per block), 4-stage cp.async pipeline of"),
              std::string::npos) << k.summary;
    EXPECT_NE(k.summary.find(fmt::format("{}-element K slices", 128 / sizeOf(c.fusion->inputs()[0]->dtype()))),
              std::string::npos) << k.summary;
    EXPECT_GT(k.shared_bytes, 48 * 1024);
  }
  // Sixteen warps of 64 x 32 outputs in a 256 x 128 tile.
  tuned.tuning = HeuristicTuning::parse("matmul_wgmma=0, matmul_block_m=256, matmul_block_n=128, matmul_warps_m=4, matmul_warps_n=4");
  const testing::KernelCase c = testing::matmulCase({300, 136}, {136, 200}, DataType::BFloat16, false, DataType::Null, 11);
  device::SimDeviceOps device;
  exec::FusionCache cache(c.fusion, c.options.plan, &device, tuned);
  testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), "sixteen warps");
  const kernel::Kernel& k = testing::onlyKernel(cache.lastPlan()->compiled());
  EXPECT_NE(k.summary.find("4x4 warps of 4x4 tiles (256x128 outputs per block)"), std::string::npos) << k.summary;
  EXPECT_EQ(k.block[0], 512);
}

}  // namespace
}  // namespace braze
