// TMA loads and mbarriers in the kernel IR. A kernel copies boxes of a 2D tensor into shared memory with
// cp.async.bulk.tensor (one thread issues it and announces its bytes on an mbarrier; every thread waits
// on the mbarrier's phase), then reads the box where the swizzle (or none) put each element and stores
// it: the output equals the input, edges included (TMA fills a box's out-of-range elements with zeros,
// which nothing stores). The simulator reports the mistakes a GPU would hang or race on: a read before
// the wait (or by a thread that never waits), bytes announced that never arrive or more bytes than
// announced, a wait for a phase that may or may not have completed, a barrier used before the block
// sees its initialization, a box refilled while other threads still read it. NVRTC compiles the
// kernel for sm_90 into UTMALDG and SYNCS instructions, its waits bounded by a trap. Launched on the simulated device, the kernel
// gets its tensor map as a parameter, which must be the map of the pointer bound to the tensor.
#include "codegen/source_emitter.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"
#include "kernel/code_digest.h"
#include "fusions/kernel_util.h"
#include "kernel/simulator.h"
#include "kernel/tensor_map.h"
#include "device/sim/sim_device_ops.h"
#include "kernel/verifier.h"
#include "support/error.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;

int64_t boxesOver(int64_t n, int64_t box) { return (n + box - 1) / box; }

struct TmaCase {
  DataType dtype = DataType::BFloat16;
  int64_t rows = 37, columns = 160;        // the tensor
  int64_t box_rows = 8, box_columns = 64;  // 128-byte rows of bf16
  bool swizzle = true;
  int64_t passes = 1;  // boxes per block, along the columns, through the one shared tile
  // The mistakes the simulator must report (all false: a correct kernel).
  bool read_before_wait = false;
  int64_t bytes_announced_extra = 0;
  bool barrier_after_init = true;
  bool barrier_before_refill = true;
  int64_t waiters = 128;      // the threads that wait on the mbarrier (all of them)
  int64_t parity_offset = 0;  // 1: a wait for the wrong phase
};

TensorParam matrixParam(std::string name, const TmaCase& c, bool output) {
  TensorParam p = testing::vectorParam(std::move(name), c.dtype, c.rows * c.columns, output);
  p.layout = StridedLayout{{c.rows, c.columns}, {c.columns, 1}, 0};
  return p;
}

// Block (x, y) copies the boxes at rows x * box_rows and columns (y * passes + p) * box_columns.
Kernel tmaCopyKernel(const TmaCase& c) {
  Kernel k;
  k.name = "tma_copy";
  k.summary = "boxes through shared memory by TMA";
  k.block = {128, 1};
  const int64_t column_boxes = boxesOver(c.columns, c.box_columns);
  k.grid = {boxesOver(c.rows, c.box_rows), boxesOver(column_boxes, c.passes)};
  KernelBuilder kb(k);
  TensorParam in = matrixParam("G", c, false);
  in.tma = TensorParam::TmaBox{c.box_rows, c.box_columns, c.swizzle, in.layout};
  const TensorId g = kb.addTensor(std::move(in));
  const TensorId o = kb.addTensor(matrixParam("O", c, true));
  const VarId tile = kb.sharedStorageArray("tile", c.dtype, c.box_rows * c.box_columns, 1024);
  const VarId bar = kb.arrayVar("bar", DataType::Int64, 1, VarKind::Mbarriers);
  kb.declare(tile);
  kb.declare(bar);
  const ExprId first = kb.eq(kb.threadIdx(0), kb.index(0));
  kb.openIf(first);
  kb.mbarrierInit(bar, kb.index(0), 1);
  kb.close();
  if (c.barrier_after_init) kb.barrier();
  const int64_t element = sizeOf(c.dtype), box = c.box_rows * c.box_columns;
  const ExprId row0 = kb.mul(kb.blockIdx(0), kb.index(c.box_rows));
  for (int64_t pass = 0; pass < c.passes; ++pass) {
    const ExprId col0 = kb.mul(kb.add(kb.mul(kb.blockIdx(1), kb.index(c.passes)), kb.index(pass)), kb.index(c.box_columns));
    if (pass > 0 && c.barrier_before_refill) kb.barrier();  // every thread done reading the tile
    kb.openIf(first);
    kb.mbarrierArriveExpectTx(bar, kb.index(0), kb.index(box * element + c.bytes_announced_extra));
    kb.tmaLoad(tile, kb.index(0), g, col0, row0, bar, kb.index(0));
    kb.close();
    auto readBox = [&] {
      const VarId q = kb.scalarVar("q", DataType::Int64, true);
      kb.openFor(q, kb.threadIdx(0), kb.index(box), kb.index(128), false);
      const ExprId r = kb.div(kb.ref(q), kb.index(c.box_columns)), col = kb.mod(kb.ref(q), kb.index(c.box_columns));
      ExprId byte = kb.add(kb.mul(r, kb.index(c.box_columns * element)), kb.mul(col, kb.index(element)));
      // The 128-byte swizzle: bits 4-6 of the byte address exclusive-ored with bits 7-9.
      if (c.swizzle) byte = kb.bitXor(byte, kb.mul(kb.mod(kb.div(byte, kb.index(128)), kb.index(8)), kb.index(16)));
      const ExprId row = kb.add(row0, r), column = kb.add(col0, col);
      kb.openIf(kb.land(kb.lt(row, kb.index(c.rows)), kb.lt(column, kb.index(c.columns))));
      kb.store(o, kb.add(kb.mul(row, kb.index(c.columns)), column), kb.localRead(tile, kb.div(byte, kb.index(element))));
      kb.close();
      kb.close();
    };
    if (c.read_before_wait) readBox();
    if (c.waiters < 128) kb.openIf(kb.lt(kb.threadIdx(0), kb.index(c.waiters)));
    kb.mbarrierWait(bar, kb.index(0), kb.index((pass + c.parity_offset) % 2));
    if (c.waiters < 128) kb.close();
    if (!c.read_before_wait) readBox();
  }
  return k;
}

// Runs the kernel on distinct values; returns the output (poisoned where nothing stored).
std::pair<HostTensor, HostTensor> run(const TmaCase& c) {
  const Kernel k = tmaCopyKernel(c);
  verifyKernel(k);
  HostTensor g = HostTensor::empty(c.dtype, {c.rows, c.columns});
  for (int64_t e = 0; e < g.numel(); ++e) g.writeDouble(e, static_cast<double>(e % 251) - 125.0);
  HostTensor o = HostTensor::empty(c.dtype, {c.rows, c.columns});
  for (int64_t e = 0; e < o.numel(); ++e) o.writeDouble(e, 7777.0);
  simulate(k, {&g, &o});
  return {std::move(g), std::move(o)};
}

void expectCopied(const TmaCase& c, const std::string& what) {
  const auto [g, o] = run(c);
  for (int64_t e = 0; e < g.numel(); ++e) {
    ASSERT_EQ(o.readDouble(e), g.readDouble(e)) << what << ": element " << e << " (row " << e / c.columns << ")";
  }
}

TEST(Tma, SwizzledAndPlainBoxesLandWhereTheReaderLooks) {
  expectCopied({}, "bf16, 8 x 64 swizzled boxes, ragged rows and columns");
  expectCopied({.dtype = DataType::Float, .rows = 23, .columns = 20, .box_rows = 5, .box_columns = 8, .swizzle = false},
               "f32, 5 x 8 plain boxes");
  expectCopied({.dtype = DataType::Float, .rows = 9, .columns = 64, .box_rows = 4, .box_columns = 32, .swizzle = true},
               "f32, 4 x 32 swizzled boxes");
}

TEST(Tma, ARefilledTileWaitsOnTheNextPhase) {
  // Three boxes per block through one tile: phases of parity 0, 1, 0, a barrier before each refill.
  expectCopied({.columns = 384, .passes = 3}, "three passes");
}

void expectReported(const TmaCase& c, const std::string& message) {
  try {
    run(c);
    ADD_FAILURE() << "not reported: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(Tma, TheSimulatorReportsWhatAGpuWouldRaceOrHangOn) {
  expectReported({.read_before_wait = true}, "while a TMA copy into it is in flight");
  expectReported({.bytes_announced_extra = 16}, "which never completes");
  expectReported({.bytes_announced_extra = -16}, "bytes to mbarrier bar[0], whose phase expects");
  expectReported({.barrier_after_init = false}, "which thread 0 initialized, with no barrier in between");
  expectReported({.waiters = 64}, "which a TMA copy wrote, without waiting on mbarrier bar[0] for it");
  expectReported({.parity_offset = 1}, "which passes or blocks depending on whether its current phase");
  expectReported({.columns = 384, .passes = 2, .barrier_before_refill = false},
                 "writes shared tile[1], which thread 1 read, with no barrier in between");
}

TEST(Tma, KernelsReadingOtherMapsAreNotOneKernelButOneSource) {
  // Each launch encodes its maps from the kernel IR's layouts: the code digest holds them, the source (which
  // takes the maps as parameters) does not.
  const Kernel k = tmaCopyKernel({});
  Kernel other = k;
  other.tensors[0].tma->map.sizes[0] = 36;
  EXPECT_EQ(codeDigest(k), codeDigest(tmaCopyKernel({})));
  EXPECT_NE(codeDigest(k), codeDigest(other));
  EXPECT_EQ(codegen::emitCuda(k), codegen::emitCuda(other));
}

// Through the simulated device, as a plan launches it: the tensor map after the pointers and words, which
// TMA reads (not the kernel IR's layout); a map of other boxes than the kernel announces and places is
// refused, and one that reaches past the tensor's memory reads outside it.
TEST(Tma, ALaunchPassesTheMapItsTmaLoadsRead) {
  const TmaCase c;
  const Kernel k = tmaCopyKernel(c);
  device::SimDeviceOps sim;
  const device::KernelHandle f = sim.load({{&k, {codegen::emitCuda(k), k.name, {}}, k.shared_bytes}})[0];
  const size_t bytes = static_cast<size_t>(c.rows * c.columns) * sizeOf(c.dtype);
  std::vector<uint64_t> words = {sim.allocate(bytes, nullptr), sim.allocate(bytes, nullptr)};
  for (uint64_t w : argumentWords(k)) words.push_back(w);
  HostTensor g = HostTensor::wrap(reinterpret_cast<void*>(words[0]), c.dtype, {c.rows, c.columns}, {c.columns, 1});
  for (int64_t e = 0; e < g.numel(); ++e) g.writeDouble(e, static_cast<double>(e % 97));
  auto launch = [&](uint64_t mapped, int64_t box_rows) {
    TensorParam read = k.tensors[0];
    read.tma->box_rows = box_rows;
    TensorMapBytes map;
    sim.encodeTensorMap(tensorMapSpec(read, mapped), map);
    std::vector<void*> args;
    for (uint64_t& w : words) args.push_back(&w);
    args.push_back(&map);
    sim.launch(f, {k.grid, k.block, k.shared_bytes}, args.data(), nullptr);
    sim.synchronize(nullptr);
  };
  launch(words[0], c.box_rows);
  const HostTensor o = HostTensor::wrap(reinterpret_cast<void*>(words[1]), c.dtype, {c.rows, c.columns}, {c.columns, 1});
  for (int64_t e = 0; e < g.numel(); ++e) ASSERT_EQ(o.readDouble(e), g.readDouble(e)) << e;
  auto failure = [&](uint64_t mapped, int64_t box_rows) -> std::string {
    try {
      launch(mapped, box_rows);
    } catch (const Error& e) {
      return e.what();
    }
    return "not reported";
  };
  const std::string boxes = failure(words[0], 4);
  EXPECT_NE(boxes.find("the tensor map passed for G is 2D BFloat16 at"), std::string::npos) << boxes;
  EXPECT_NE(boxes.find("in boxes of 4 x 64 swizzled, but the kernel reads 2D BFloat16 boxes of 8 x 64"), std::string::npos)
      << boxes;
  const std::string past = failure(words[0] + 1024, c.box_rows);
  EXPECT_NE(past.find("is outside"), std::string::npos) << past;
  sim.release(words[0], nullptr);
  sim.release(words[1], nullptr);
  sim.synchronize(nullptr);
}

TEST(Tma, NvrtcCompilesItIntoTmaAndMbarrierInstructions) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: not compiled";
  const Kernel k = tmaCopyKernel({});
  const std::string source = codegen::emitCuda(k);
  EXPECT_NE(source.find("const __grid_constant__ BrazeTensorMap G_map"), std::string::npos) << source;
  const auto cubin = device::compileCuda(source, k.name, {.arch = "sm_90"});
  EXPECT_TRUE(cubin.log.empty()) << cubin.log;
  const auto sass = device::disassemble(cubin.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  EXPECT_NE(sass->find("UTMALDG"), std::string::npos) << *sass;
  EXPECT_NE(sass->find("SYNCS"), std::string::npos) << *sass;
  // A wait that never completes traps after its tries run out rather than hang the GPU.
  EXPECT_NE(sass->find("BPT.TRAP"), std::string::npos) << *sass;
  EXPECT_THROW(codegen::emitHip(k), Error);
}

}  // namespace
}  // namespace braze
