// The zeroed scratch a GPU keeps per stream for the workspaces kernels count their blocks in, against a
// fake pool: one zeroing serves every run on a stream, a grown region is zeroed and the smaller one kept
// (a thread may still launch on it), a spoiled region is zeroed again, streams are known by identity, and
// a captured stream or one without an identity gets none. Then on the simulated device: a cross entropy
// whose mean finishes in its rows' kernel (an arrival count) runs many times with one zeroing, and a failed
// run spoils the scratch.
#include "device/zeroed_scratch.h"
#include "device/sim/sim_device_ops.h"
#include "exec/host_execute.h"
#include "fusions/loss_cases.h"
#include "runtime/fake_block_pool.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <utility>
#include <vector>

namespace braze {
namespace {

using device::DevicePtr;
using device::StreamHandle;
using device::ZeroedScratch;
using testing::FakePool;
using testing::stream;

struct Scratch {
  FakePool pool;
  std::vector<std::pair<DevicePtr, size_t>> zeroed;  // each zeroing queued: where, how many bytes
  ZeroedScratch scratch{device::zeroedScratchSource(
      pool.source(), [this](DevicePtr pointer, size_t bytes, StreamHandle) { zeroed.emplace_back(pointer, bytes); })};
};

TEST(ZeroedScratch, OneZeroingServesEveryRunOnAStream) {
  Scratch s;
  const DevicePtr first = s.scratch.get(100, stream(1));
  ASSERT_NE(first, 0u);
  EXPECT_EQ(s.scratch.get(100, stream(1)), first);
  EXPECT_EQ(s.scratch.get(ZeroedScratch::kSmallestRegion, stream(1)), first);
  ASSERT_EQ(s.zeroed.size(), 1u);
  EXPECT_EQ(s.zeroed[0], std::make_pair(first, ZeroedScratch::kSmallestRegion));
  // Another stream's kernels may run at the same time: a region of its own.
  const DevicePtr other = s.scratch.get(100, stream(2));
  EXPECT_NE(other, first);
  EXPECT_EQ(s.zeroed.size(), 2u);
  EXPECT_EQ(s.scratch.zeroings(), 2);
  EXPECT_TRUE(s.pool.released.empty());
}

TEST(ZeroedScratch, AGrownRegionIsZeroedAndTheSmallerOneKept) {
  Scratch s;
  const DevicePtr small = s.scratch.get(10, stream(1));
  const DevicePtr large = s.scratch.get(ZeroedScratch::kSmallestRegion + 1, stream(1));
  EXPECT_NE(large, small);
  ASSERT_EQ(s.zeroed.size(), 2u);
  EXPECT_EQ(s.zeroed[1], std::make_pair(large, 2 * ZeroedScratch::kSmallestRegion));
  EXPECT_EQ(s.scratch.get(10, stream(1)), large);  // the larger region serves smaller asks from then on
  EXPECT_TRUE(s.pool.released.empty());  // a thread that bound the smaller one may not have launched yet
  EXPECT_EQ(s.scratch.regions(), (std::vector<DevicePtr>{small, large}));
}

TEST(ZeroedScratch, ASpoiledRegionIsZeroedAgainAtItsNextUse) {
  Scratch s;
  const DevicePtr region = s.scratch.get(64, stream(1));
  s.scratch.get(64, stream(2));
  s.scratch.spoil(stream(1));
  EXPECT_EQ(s.zeroed.size(), 2u);  // spoiling queues nothing by itself
  EXPECT_EQ(s.scratch.get(64, stream(1)), region);
  ASSERT_EQ(s.zeroed.size(), 3u);
  EXPECT_EQ(s.zeroed[2].first, region);
  s.scratch.get(64, stream(2));  // the other stream's region was not spoiled
  EXPECT_EQ(s.zeroed.size(), 3u);
  s.scratch.spoil(stream(3));  // a stream that has none: nothing to do
}

TEST(ZeroedScratch, StreamsAreKnownByIdentity) {
  Scratch s;
  s.pool.identities[stream(7)] = 42;
  s.pool.identities[stream(8)] = 42;  // a handle reused for what the device calls the same stream
  EXPECT_EQ(s.scratch.get(64, stream(7)), s.scratch.get(64, stream(8)));
  s.pool.identities[stream(9)] = 43;  // ... and one handle naming another stream now
  s.pool.identities[stream(7)] = 43;
  EXPECT_NE(s.scratch.get(64, stream(7)), s.scratch.get(64, stream(8)));
}

TEST(ZeroedScratch, ACapturedStreamOrOneWithoutIdentityGetsNone) {
  Scratch s;
  s.pool.captured.insert(stream(1));
  EXPECT_EQ(s.scratch.get(64, stream(1)), 0u);  // the graph would own memory made inside it
  s.pool.identities[stream(2)] = std::nullopt;   // a per-thread default stream
  EXPECT_EQ(s.scratch.get(64, stream(2)), 0u);
  EXPECT_TRUE(s.pool.allocated.empty());
  EXPECT_TRUE(s.zeroed.empty());
  s.pool.captured.clear();
  EXPECT_NE(s.scratch.get(64, stream(1)), 0u);  // once the capture ends
}

TEST(ZeroedScratch, OutOfMemoryIsAnErrorThatSaysWhatFor) {
  Scratch s;
  s.pool.fail_next = 1;
  try {
    s.scratch.get(64, stream(1));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zeroed workspace"), std::string::npos) << e.what();
  }
  EXPECT_NE(s.scratch.get(64, stream(1)), 0u);  // nothing half-made stays behind
  EXPECT_EQ(s.zeroed.size(), 1u);
}

TEST(ZeroedScratch, ACrossEntropyMeanRunsAgainAndAgainOnOneZeroing) {
  // The mean finishes in the rows' kernel: its blocks count their arrival in a zeroed workspace, and the
  // last one resets the count (the simulated device checks that after each launch).
  const testing::KernelCase c = testing::crossEntropyCase(37, 300, 3, /*mean=*/true);
  device::SimDeviceOps ops;
  exec::FusionCache cache(c.fusion, {}, &ops, DeviceInfo::h100Sxm());
  auto inputsOf = [&](uint64_t seed) {
    std::vector<HostValue> inputs = c.inputs;  // the case's targets, other logits
    inputs[0] = testing::randomTensor(DataType::BFloat16, {37, 300}, seed);
    return inputs;
  };
  for (uint64_t run = 0; run < 4; ++run) {
    const std::vector<HostValue> inputs = inputsOf(10 + run);
    testing::expectClose(exec::runOnHost(cache, inputs), evaluate(*c.fusion, inputs));
  }
  bool counts = false;
  for (const auto& k : cache.lastPlan()->compiled().kernels) {
    for (const kernel::TensorParam& p : k->tensors) counts = counts || p.zeroed;
  }
  ASSERT_TRUE(counts) << cache.lastPlan()->compiled().plan.toString();
  EXPECT_EQ(ops.zeroedScratchZeroings(), 1);
  EXPECT_EQ(ops.liveAllocations(), 0u);  // the scratch is the device's, not a run's

  // A run that fails partway (here, work queued on the stream before it) spoils the scratch: the next run
  // zeroes it again.
  char tag = 0;
  const auto failing = reinterpret_cast<StreamHandle>(&tag);
  ops.enqueueHost(failing, [] { throw std::runtime_error("a kernel that failed"); });
  EXPECT_THROW(ops.synchronize(failing), std::runtime_error);
  const std::vector<HostValue> inputs = inputsOf(20);
  testing::expectClose(exec::runOnHost(cache, inputs), evaluate(*c.fusion, inputs));
  EXPECT_EQ(ops.zeroedScratchZeroings(), 2);
}

}  // namespace
}  // namespace braze
