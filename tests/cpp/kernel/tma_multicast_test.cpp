// Thread block clusters in the kernel IR: the two blocks of a cluster each load half of a tile by TMA and
// multicast it into both blocks' shared memory, completing its bytes on both blocks' mbarriers; each block
// then stores the whole tile into its own copy of the output, which equals the input only if both halves
// landed in both blocks. The simulator runs a cluster's blocks together and reports what a GPU would hang
// or race on: an mbarrier another block copies to before a cluster barrier makes its init visible, a
// kernel that ends with no cluster barrier after such accesses (a block may exit while another still
// writes its shared memory), a tile refilled by another block after a block barrier only, bytes that
// never arrive; and a block barrier that only some blocks of the cluster reach, which it cannot order. NVRTC compiles the kernel for sm_90a with the cluster's size in its source.
#include "codegen/source_emitter.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"
#include "fusions/kernel_util.h"
#include "kernel/printer.h"
#include "kernel/simulator.h"
#include "kernel/verifier.h"
#include "support/error.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;

int64_t over(int64_t n, int64_t d) { return (n + d - 1) / d; }

struct ClusterCase {
  int64_t rows = 45, columns = 200;  // bf16
  int64_t half_rows = 8;             // each block's half of a tile's rows; a tile is 64 columns wide
  int64_t passes = 1;                // tiles per cluster, along the columns, through the one shared tile
  // The mistakes the simulator must report (all false: a correct kernel).
  bool cluster_barrier_after_init = true;
  bool cluster_barrier_at_end = true;
  bool cluster_barrier_before_refill = true;  // false: a block barrier only
  bool multicast_to_own_block_only = false;
  bool block_barrier_in_one_block = false;  // a barrier only block 0 reaches, which the simulator cannot order
};

constexpr int64_t kTileColumns = 64;

TensorParam param(std::string name, int64_t copies, const ClusterCase& c, bool output) {
  TensorParam p = testing::vectorParam(std::move(name), DataType::BFloat16, copies * c.rows * c.columns, output);
  p.layout = copies == 1 ? StridedLayout{{c.rows, c.columns}, {c.columns, 1}, 0}
                         : StridedLayout{{copies, c.rows, c.columns}, {c.rows * c.columns, c.columns, 1}, 0};
  return p;
}

// Cluster (x / 2, y) copies the tiles at rows (x / 2) * 2 * half_rows and columns (y * passes + p) * 64;
// the block of rank r loads the tile's rows r * half_rows on and stores the whole tile into O[r].
Kernel clusterCopyKernel(const ClusterCase& c) {
  Kernel k;
  k.name = "cluster_copy";
  k.summary = "tiles multicast to a cluster of two blocks";
  k.block = {128, 1};
  k.cluster = 2;
  const int64_t tile_rows = 2 * c.half_rows;
  k.grid = {2 * over(c.rows, tile_rows), over(over(c.columns, kTileColumns), c.passes)};
  KernelBuilder kb(k);
  TensorParam in = param("G", 1, c, false);
  in.tma = TensorParam::TmaBox{c.half_rows, kTileColumns, true, in.layout};
  const TensorId g = kb.addTensor(std::move(in));
  const TensorId o = kb.addTensor(param("O", 2, c, true));
  const VarId tile = kb.sharedStorageArray("tile", DataType::BFloat16, tile_rows * kTileColumns, 1024);
  const VarId bar = kb.arrayVar("bar", DataType::Int64, 1, VarKind::Mbarriers);
  kb.declare(tile);
  kb.declare(bar);
  const ExprId first = kb.eq(kb.threadIdx(0), kb.index(0));
  const ExprId rank = kb.letValue("rank", kb.clusterRank());
  kb.openIf(first);
  kb.mbarrierInit(bar, kb.index(0), 1);
  kb.close();
  if (c.cluster_barrier_after_init) {
    kb.clusterBarrier();
  } else {
    kb.barrier();
  }
  const ExprId row0 = kb.mul(kb.div(kb.blockIdx(0), kb.index(2)), kb.index(tile_rows));
  const int64_t half = c.half_rows * kTileColumns;  // elements
  for (int64_t pass = 0; pass < c.passes; ++pass) {
    const ExprId col0 =
        kb.mul(kb.add(kb.mul(kb.blockIdx(1), kb.index(c.passes)), kb.index(pass)), kb.index(kTileColumns));
    if (pass > 0) {  // every thread of both blocks done reading the tile the other block refills
      if (c.cluster_barrier_before_refill) {
        kb.clusterBarrier();
      } else {
        kb.barrier();
      }
    }
    kb.openIf(first);
    kb.mbarrierArriveExpectTx(bar, kb.index(0), kb.index(2 * half * 2));  // both halves, 2 bytes each
    kb.tmaLoad(tile, kb.mul(rank, kb.index(half)), g, col0, kb.add(row0, kb.mul(rank, kb.index(c.half_rows))), bar,
               kb.index(0), -1, c.multicast_to_own_block_only ? 0 : 0b11);
    kb.close();
    kb.mbarrierWait(bar, kb.index(0), kb.index(pass % 2));
    const VarId q = kb.scalarVar("q", DataType::Int64, true);
    kb.openFor(q, kb.threadIdx(0), kb.index(tile_rows * kTileColumns), kb.index(128), false);
    const ExprId r = kb.div(kb.ref(q), kb.index(kTileColumns)), col = kb.mod(kb.ref(q), kb.index(kTileColumns));
    ExprId byte = kb.add(kb.mul(r, kb.index(128)), kb.mul(col, kb.index(2)));
    byte = kb.bitXor(byte, kb.mul(kb.mod(kb.div(byte, kb.index(128)), kb.index(8)), kb.index(16)));  // the swizzle
    const ExprId row = kb.add(row0, r), column = kb.add(col0, col);
    kb.openIf(kb.land(kb.lt(row, kb.index(c.rows)), kb.lt(column, kb.index(c.columns))));
    kb.store(o, kb.add(kb.mul(rank, kb.index(c.rows * c.columns)), kb.add(kb.mul(row, kb.index(c.columns)), column)),
             kb.localRead(tile, kb.div(byte, kb.index(2))));
    kb.close();
    kb.close();
  }
  if (c.block_barrier_in_one_block) {
    kb.openIf(kb.eq(rank, kb.index(0)));
    kb.barrier();
    kb.close();
  }
  if (c.cluster_barrier_at_end) kb.clusterBarrier();
  return k;
}

// Runs the kernel on distinct values; returns the input and the output (poisoned where nothing stored).
std::pair<HostTensor, HostTensor> run(const ClusterCase& c) {
  const Kernel k = clusterCopyKernel(c);
  verifyKernel(k);
  HostTensor g = HostTensor::empty(DataType::BFloat16, {c.rows, c.columns});
  for (int64_t e = 0; e < g.numel(); ++e) g.writeDouble(e, static_cast<double>(e % 251) - 125.0);
  HostTensor o = HostTensor::empty(DataType::BFloat16, {2, c.rows, c.columns});
  for (int64_t e = 0; e < o.numel(); ++e) o.writeDouble(e, 7777.0);
  simulate(k, {&g, &o});
  return {std::move(g), std::move(o)};
}

void expectCopiedTwice(const ClusterCase& c, const std::string& what) {
  const auto [g, o] = run(c);
  for (int64_t copy = 0; copy < 2; ++copy) {
    for (int64_t e = 0; e < g.numel(); ++e) {
      ASSERT_EQ(o.readDouble(copy * g.numel() + e), g.readDouble(e))
          << what << ": block rank " << copy << ", element " << e << " (row " << e / c.columns << ")";
    }
  }
}

TEST(TmaMulticast, EachBlockOfAClusterReceivesTheHalfTheOtherLoaded) {
  expectCopiedTwice({}, "two 8-row halves, ragged rows and columns");
  expectCopiedTwice({.rows = 16, .columns = 64, .half_rows = 16}, "one cluster, 16-row halves");
  // Two tiles through one shared tile: phases of parity 0 and 1, a cluster barrier before the refill.
  expectCopiedTwice({.columns = 256, .passes = 2}, "two passes");
}

void expectReported(const ClusterCase& c, const std::string& message) {
  try {
    run(c);
    ADD_FAILURE() << "not reported: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(TmaMulticast, TheSimulatorReportsWhatAClusterWouldRaceOrHangOn) {
  expectReported({.cluster_barrier_after_init = false},
                 "uses mbarrier bar[0] of the cluster's block 1, which another block of the cluster initialized, with "
                 "no cluster barrier in between");
  expectReported({.cluster_barrier_at_end = false}, "the cluster's blocks end with no cluster barrier after");
  expectReported({.columns = 256, .passes = 2, .cluster_barrier_before_refill = false},
                 "of the cluster's block 1, which thread");
  expectReported({.multicast_to_own_block_only = true}, "which never completes");
  // Valid on a GPU, but the simulator runs the blocks in lockstep: it says so rather than pass what it cannot check.
  expectReported({.block_barrier_in_one_block = true}, "a barrier reached by only some blocks of the cluster");
}

TEST(TmaMulticast, OnlyAKernelWithClustersUsesThem) {
  Kernel k = clusterCopyKernel({});
  EXPECT_NE(printKernel(k).find("clusters of 2 blocks"), std::string::npos);
  Kernel odd = k;
  odd.grid[0] = 3;
  EXPECT_THROW(verifyKernel(odd), Error);
  Kernel alone = k;
  alone.cluster = 1;
  try {
    verifyKernel(alone);
    ADD_FAILURE() << "a kernel reading its cluster rank without clusters verified";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reads the cluster rank of a kernel without clusters"), std::string::npos)
        << e.what();
  }
}

TEST(TmaMulticast, NvrtcCompilesTheClusterKernel) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: not compiled";
  const Kernel k = clusterCopyKernel({});
  const std::string source = codegen::emitCuda(k);
  EXPECT_NE(source.find("__cluster_dims__(2, 1, 1)"), std::string::npos) << source;
  EXPECT_EQ(compileArch(k, "sm_90"), "sm_90a");  // multicast is sm_90a's
  const auto cubin = device::compileCuda(source, k.name, {.arch = compileArch(k, "sm_90")});
  EXPECT_TRUE(cubin.log.empty()) << cubin.log;
  const auto sass = device::disassemble(cubin.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  EXPECT_NE(sass->find("UTMALDG.2D.MULTICAST"), std::string::npos) << *sass;
  EXPECT_NE(sass->find("UCGABAR_ARV"), std::string::npos) << *sass;
  EXPECT_THROW(codegen::emitHip(k), Error);
}

}  // namespace
}  // namespace braze
