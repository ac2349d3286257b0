// Branches that run at once (Stmt::concurrent): a producer warpgroup hands rounds of values to a consumer
// warpgroup through a ring of shared slots, each role in a loop of its own, ordered by `full` and `empty`
// mbarriers only. The simulator interleaves the two loops (a lockstep run of the producer's to its end
// would wait forever on a slot the consumer has not released yet), so the values arrive in order; and it
// reports what would hang on a GPU: a consumer that never releases a slot, a producer that refills slots
// without waiting for their release; and the verifier refuses branches at once nested in such branches.
#include "codegen/source_emitter.h"
#include "device/cuda/nvrtc.h"
#include "fusions/kernel_util.h"
#include "kernel/simulator.h"
#include "kernel/verifier.h"
#include "support/error.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

using namespace kernel;

struct PingPong {
  int64_t stages = 2, rounds = 7;
  bool concurrent = true;
  bool consumer_releases = true;
  bool producer_waits = true;
};

constexpr int64_t kLanes = 128;  // a warpgroup

// Warpgroup 0 writes round r's 128 values into slot r % stages and arrives on full[slot]; warpgroup 1 waits
// on it, stores each value from the slot (lane l reading what lane 127 - l wrote) and arrives on
// empty[slot], which the producer waits on before it refills the slot.
Kernel pingPong(const PingPong& c) {
  Kernel k;
  k.name = "ping_pong";
  k.summary = "rounds of values through a ring of shared slots";
  k.block = {2 * kLanes, 1};
  KernelBuilder kb(k);
  const int64_t n = c.rounds * kLanes;
  const TensorId in = kb.addTensor(testing::vectorParam("I", DataType::Float, n, false));
  const TensorId out = kb.addTensor(testing::vectorParam("O", DataType::Float, n, true));
  const VarId slots = kb.arrayVar("slots", DataType::Float, c.stages * kLanes, VarKind::SharedArray);
  const VarId full = kb.arrayVar("full", DataType::Int64, c.stages, VarKind::Mbarriers);
  const VarId empty = kb.arrayVar("empty", DataType::Int64, c.stages, VarKind::Mbarriers);
  kb.declare(slots);
  kb.declare(full);
  kb.declare(empty);
  kb.openIf(kb.eq(kb.threadIdx(0), kb.index(0)));
  for (int64_t s = 0; s < c.stages; ++s) {
    kb.mbarrierInit(full, kb.index(s), static_cast<int>(kLanes));
    kb.mbarrierInit(empty, kb.index(s), static_cast<int>(kLanes));
  }
  kb.close();
  kb.barrier();
  const ExprId lane = kb.mod(kb.threadIdx(0), kb.index(kLanes));
  const ExprId producer = kb.lt(kb.threadIdx(0), kb.index(kLanes));
  if (c.concurrent) {
    kb.openConcurrentIf(producer);
  } else {
    kb.openIf(producer);
  }
  {
    const VarId r = kb.scalarVar("r", DataType::Int64, true);
    kb.openFor(r, kb.index(0), kb.index(c.rounds), kb.index(1), false);
    const ExprId slot = kb.mod(kb.ref(r), kb.index(c.stages));
    if (c.producer_waits) {
      kb.openIf(kb.le(kb.index(c.stages), kb.ref(r)));
      kb.mbarrierWait(empty, slot, kb.mod(kb.add(kb.div(kb.ref(r), kb.index(c.stages)), kb.index(1)), kb.index(2)));
      kb.close();
    }
    kb.localWrite(slots, kb.add(kb.mul(slot, kb.index(kLanes)), lane),
                  kb.load(in, kb.add(kb.mul(kb.ref(r), kb.index(kLanes)), lane)));
    kb.mbarrierArriveExpectTx(full, slot, kb.index(0));
    kb.close();
  }
  kb.openElse();
  {
    const VarId r = kb.scalarVar("r", DataType::Int64, true);
    kb.openFor(r, kb.index(0), kb.index(c.rounds), kb.index(1), false);
    const ExprId slot = kb.mod(kb.ref(r), kb.index(c.stages));
    kb.mbarrierWait(full, slot, kb.mod(kb.div(kb.ref(r), kb.index(c.stages)), kb.index(2)));
    const ExprId mirrored = kb.sub(kb.index(kLanes - 1), lane);
    kb.store(out, kb.add(kb.mul(kb.ref(r), kb.index(kLanes)), mirrored),
             kb.localRead(slots, kb.add(kb.mul(slot, kb.index(kLanes)), lane)));
    if (c.consumer_releases) kb.mbarrierArriveExpectTx(empty, slot, kb.index(0));
    kb.close();
  }
  kb.close();
  return k;
}

// Runs the kernel; "" when it ran, with every value where it belongs, else what the simulator reported.
std::string run(const PingPong& c) {
  const Kernel k = pingPong(c);
  verifyKernel(k);
  const int64_t n = c.rounds * kLanes;
  HostTensor in = HostTensor::empty(DataType::Float, {n});
  for (int64_t e = 0; e < n; ++e) in.writeDouble(e, static_cast<double>(e) * 0.5 - 3.0);
  HostTensor out = HostTensor::empty(DataType::Float, {n});
  try {
    simulate(k, {&in, &out});
  } catch (const Error& e) {
    return e.what();
  }
  for (int64_t r = 0; r < c.rounds; ++r) {
    for (int64_t l = 0; l < kLanes; ++l) {
      EXPECT_EQ(out.readDouble(r * kLanes + kLanes - 1 - l), in.readDouble(r * kLanes + l)) << "round " << r << " lane " << l;
    }
  }
  return "";
}

TEST(ConcurrentBranches, TheRolesLoopsInterleaveThroughTheirMbarriers) {
  EXPECT_EQ(run({}), "");
  EXPECT_EQ(run({.stages = 3, .rounds = 3}), "");  // no slot refilled: the producer never waits
  EXPECT_EQ(run({.stages = 1, .rounds = 5}), "");  // every round waits for the one before
}

TEST(ConcurrentBranches, InLockstepTheProducerWaitsForever) {
  const std::string hang = run({.concurrent = false});
  EXPECT_NE(hang.find("waits on mbarrier empty[0] for its phase of parity 0, which never completes"), std::string::npos)
      << hang;
}

TEST(ConcurrentBranches, TheSimulatorReportsWhatWouldHangOrRace) {
  const std::string never_released = run({.consumer_releases = false});
  EXPECT_NE(never_released.find("which never completes: 128 of its 128 arrivals missing"), std::string::npos)
      << never_released;
  // Not waiting for the release, the producer runs through every round first: slot 0's full barrier
  // completes four phases, and the consumer's wait for the first (parity 0) finds the fifth open, which
  // nothing completes (a GPU would hang there, or pass it a round late).
  const std::string ahead = run({.producer_waits = false});
  EXPECT_NE(ahead.find("waits on mbarrier full[0] for its phase of parity 0, which never completes"), std::string::npos)
      << ahead;
}

TEST(ConcurrentBranches, BranchesAtOnceDoNotNest) {
  Kernel k = pingPong({});
  Stmt& roles = k.body.mut().back();
  ASSERT_TRUE(roles.kind == SKind::If && roles.concurrent);
  Stmt inner = roles;
  inner.body.clear();
  inner.orelse.clear();
  roles.body.push_back(inner);
  try {
    verifyKernel(k);
    ADD_FAILURE() << "a nested if whose branches run at once verified";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("branches that run at once inside such branches"), std::string::npos) << e.what();
  }
}

TEST(ConcurrentBranches, NvrtcCompilesThemAsAnIfElse) {
  const Kernel k = pingPong({});
  const std::string source = codegen::emitCuda(k);
  EXPECT_NE(source.find("} else {"), std::string::npos);
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: not compiled";
  const auto cubin = device::compileCuda(source, k.name, {.arch = "sm_90"});
  EXPECT_TRUE(cubin.log.empty()) << cubin.log;
}

}  // namespace
}  // namespace braze
