// The cache of freed device memory in front of a GPU's stream-ordered pool, against a fake pool that
// records every call and notes what the driver would refuse: a block comes back only on the stream it was
// released on and in its size class, large blocks and captured streams go to the pool both ways, blocks
// released during a capture wait for its end, the limit holds, an out-of-memory pool is given the
// stream's kept blocks back before the allocation is tried again, threads never share a block, and random
// sequences of all of it break none of these rules.
#include "device/cuda/cuda_driver.h"
#include "device/device_ops.h"
#include "device/stream_block_cache.h"
#include "runtime/fake_block_pool.h"
#include "support/error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace braze {
namespace {

using device::DevicePtr;
using device::StreamBlockCache;
using device::StreamHandle;
using testing::FakePool;
using testing::stream;

// A cache keeping up to 1 MiB in front of a fake pool.
class CacheOfOneMiB : public ::testing::Test {
 protected:
  // Blocks of these sizes allocated on these streams, then released (kept by the cache), in order.
  std::vector<DevicePtr> kept(const std::vector<std::pair<size_t, uintptr_t>>& blocks) {
    std::vector<DevicePtr> pointers;
    for (const auto& [bytes, s] : blocks) pointers.push_back(cache.allocate(bytes, stream(s)));
    for (size_t i = 0; i < blocks.size(); ++i) cache.release(pointers[i], stream(blocks[i].second));
    return pointers;
  }

  void TearDown() override { EXPECT_EQ(pool.violations, std::vector<std::string>{}); }

  FakePool pool;
  StreamBlockCache cache{pool.source(), 1 << 20};
};

TEST(StreamBlockCache, SizeClassesAreMultiplesOf512ThenSixteenPerPowerOfTwo) {
  EXPECT_EQ(StreamBlockCache::sizeClass(0), 512u);
  EXPECT_EQ(StreamBlockCache::sizeClass(1), 512u);
  EXPECT_EQ(StreamBlockCache::sizeClass(512), 512u);
  EXPECT_EQ(StreamBlockCache::sizeClass(513), 1024u);
  EXPECT_EQ(StreamBlockCache::sizeClass(size_t{1} << 20), size_t{1} << 20);
  EXPECT_EQ(StreamBlockCache::sizeClass((size_t{1} << 20) + 1), (size_t{1} << 20) + (size_t{64} << 10));
  EXPECT_EQ(StreamBlockCache::sizeClass((size_t{3} << 20) + 1), (size_t{3} << 20) + (size_t{128} << 10));
  std::mt19937_64 random(11);
  for (int i = 0; i < 10000; ++i) {
    const size_t bytes = random() % (size_t{1} << 34);
    const size_t size = StreamBlockCache::sizeClass(bytes);
    ASSERT_GE(size, bytes);
    ASSERT_LE(size - bytes, std::max<size_t>(511, bytes / 16)) << bytes;
    ASSERT_EQ(StreamBlockCache::sizeClass(size), size) << "a class is its own class: " << bytes;
  }
}

TEST_F(CacheOfOneMiB, AFreedBlockServesTheNextAllocationOfItsClassOnItsStream) {
  const DevicePtr a = cache.allocate(1000, stream(1));
  EXPECT_EQ(pool.allocated, std::vector<size_t>{1024}) << "allocated with its class's size";
  cache.release(a, stream(1));
  EXPECT_TRUE(pool.released.empty()) << "kept, not returned to the pool";
  EXPECT_EQ(cache.counts().cached_bytes, 1024u);
  EXPECT_EQ(cache.allocate(513, stream(1)), a) << "513 bytes are in the 1024 class";
  EXPECT_EQ(pool.allocated.size(), 1u);
  EXPECT_EQ(cache.counts().hits, 1);
  EXPECT_EQ(cache.counts().misses, 1);
  EXPECT_EQ(cache.counts().cached_bytes, 0u);

  // Another class on the same stream, or the same class on another stream: a new block.
  cache.release(a, stream(1));
  const DevicePtr other_class = cache.allocate(2000, stream(1));
  const DevicePtr other_stream = cache.allocate(1000, stream(2));
  EXPECT_NE(other_class, a);
  EXPECT_NE(other_stream, a);
  EXPECT_EQ(pool.allocated.size(), 3u);
  EXPECT_EQ(cache.allocate(1000, stream(1)), a);
}

TEST(StreamBlockCache, LargeBlocksGoToThePoolBothWaysWithTheSizeAsked) {
  FakePool pool;
  StreamBlockCache cache(pool.source(), size_t{1} << 30);
  const size_t large = StreamBlockCache::kLargestCachedBlock + 1;
  const DevicePtr p = cache.allocate(large, stream(1));
  EXPECT_EQ(pool.allocated, std::vector<size_t>{large});
  cache.release(p, stream(1));
  ASSERT_EQ(pool.released.size(), 1u);
  EXPECT_EQ(pool.released[0], std::make_pair(p, stream(1)));
  EXPECT_EQ(cache.counts().cached_blocks, 0u);
}

TEST(StreamBlockCache, TheLimitCapsTheMemoryKeptAndZeroKeepsNone) {
  FakePool pool;
  StreamBlockCache cache(pool.source(), 2048);
  std::vector<DevicePtr> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(cache.allocate(1024, stream(1)));
  for (DevicePtr p : blocks) cache.release(p, stream(1));
  EXPECT_EQ(cache.counts().cached_bytes, 2048u);
  ASSERT_EQ(pool.released.size(), 1u);
  EXPECT_EQ(pool.released[0].first, blocks[2]) << "the block past the limit went back to the pool";

  FakePool bare;
  StreamBlockCache off(bare.source(), 0);
  const DevicePtr p = off.allocate(100, stream(1));
  EXPECT_EQ(bare.allocated, std::vector<size_t>{100}) << "no cache: the size asked for";
  off.release(p, stream(1));
  EXPECT_EQ(bare.released.size(), 1u);
  EXPECT_NE(off.allocate(100, stream(1)), 0u);
  EXPECT_EQ(bare.allocated.size(), 2u);
}

TEST_F(CacheOfOneMiB, ACapturedStreamNeitherTakesNorGivesCachedBlocks) {
  const DevicePtr before = cache.allocate(1000, stream(1));
  const DevicePtr kept = cache.allocate(1000, stream(1));
  cache.release(kept, stream(1));

  pool.captured.insert(stream(1));
  // During the capture: a block of the graph's own, whatever is cached, freed inside the graph.
  const DevicePtr in_graph = cache.allocate(1000, stream(1));
  EXPECT_NE(in_graph, kept);
  EXPECT_EQ(pool.allocated.back(), 1000u) << "the size asked for: the graph's block is never cached";
  const DevicePtr freed_in_graph = cache.allocate(1000, stream(1));
  cache.release(freed_in_graph, stream(1));
  ASSERT_EQ(pool.released.size(), 1u);
  EXPECT_EQ(pool.released[0].first, freed_in_graph) << "a free node of the graph's own allocation";
  // A block from before the capture cannot be freed in it, nor reused while it lasts.
  cache.release(before, stream(1));
  EXPECT_EQ(pool.released.size(), 1u) << "not freed inside the graph";
  EXPECT_EQ(cache.counts().deferred_blocks, 1u);
  EXPECT_NE(cache.allocate(1000, stream(1)), before);
  EXPECT_EQ(cache.counts().cached_blocks, 1u) << "`kept` untouched by the capture";
  pool.captured.clear();

  // After it: the graph's block goes back to the pool; the deferred block joins the cache.
  cache.release(in_graph, stream(1));
  ASSERT_EQ(pool.released.size(), 2u);
  EXPECT_EQ(pool.released[1].first, in_graph);
  EXPECT_EQ(cache.counts().deferred_blocks, 0u);
  EXPECT_EQ(cache.counts().cached_blocks, 2u);
  const std::set<DevicePtr> reused = {cache.allocate(1000, stream(1)), cache.allocate(1000, stream(1))};
  EXPECT_EQ(reused, (std::set<DevicePtr>{before, kept}));
}

TEST_F(CacheOfOneMiB, BlocksFollowTheStreamsIdentityNotItsHandle) {
  const DevicePtr a = cache.allocate(1000, stream(5));
  cache.release(a, stream(5));
  // The stream was destroyed and a new one got its handle: its blocks are not the new stream's.
  pool.identities[stream(5)] = 77;
  EXPECT_NE(cache.allocate(1000, stream(5)), a);
  // Another handle of the first stream (the legacy stream is both 0 and 1) finds them.
  pool.identities[stream(6)] = 5;
  EXPECT_EQ(cache.allocate(1000, stream(6)), a);
  // A handle naming another stream on each thread: never cached, freed on it at once.
  pool.identities[stream(2)] = std::nullopt;
  const DevicePtr per_thread = cache.allocate(1000, stream(2));
  EXPECT_EQ(pool.allocated.back(), 1000u);
  cache.release(per_thread, stream(2));
  EXPECT_EQ(pool.released.back(), std::make_pair(per_thread, stream(2)));
}

TEST_F(CacheOfOneMiB, OutOfMemoryReturnsTheStreamsBlocksWithoutWaitingThenTriesOnceMore) {
  const DevicePtr a = kept({{1000, 1}, {5000, 2}})[0];
  pool.fail_next = 1;
  EXPECT_NE(cache.allocate(3000, stream(1)), 0u);
  ASSERT_EQ(pool.released.size(), 1u) << "stream 1's block went back, on stream 1";
  EXPECT_EQ(pool.released[0], std::make_pair(a, stream(1)));
  EXPECT_EQ(pool.synchronized, 0) << "no wait for the device: a capture elsewhere would end";
  EXPECT_EQ(cache.counts().cached_bytes, 5120u) << "stream 2's block is still kept";

  // Nothing of stream 1 left to return: the error, at once.
  pool.fail_next = 1;
  try {
    cache.allocate(7000, stream(1));
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("out of device memory: 7000 bytes asked for (0 bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(pool.fail_next, 0) << "tried once";

  // While the stream is captured, no block of it is freed outside the graph.
  const DevicePtr c = cache.allocate(1000, stream(2));
  cache.release(c, stream(2));
  pool.captured.insert(stream(2));
  pool.fail_next = 2;
  EXPECT_THROW(cache.allocate(9000, stream(2)), Error);
  EXPECT_EQ(cache.counts().cached_blocks, 2u);
}

TEST_F(CacheOfOneMiB, ABlockWhoseStreamWasDestroyedIsFreedOnlyByTrim) {
  const DevicePtr a = cache.allocate(1000, stream(5));
  // Its stream was destroyed (its work may still run) and a new one has its handle when the block drops.
  pool.identities[stream(5)] = 99;
  cache.release(a, stream(5));
  EXPECT_TRUE(pool.released.empty()) << "not freed in the new stream's order";
  EXPECT_EQ(cache.counts().orphaned_blocks, 1u);
  EXPECT_NE(cache.allocate(1000, stream(5)), a) << "nor reused";
  EXPECT_EQ(cache.trim(), 1024u);
  EXPECT_EQ(pool.released, (std::vector<std::pair<DevicePtr, StreamHandle>>{{a, nullptr}}))
      << "after the wait for the device";
}

TEST_F(CacheOfOneMiB, APoolThatFailsToFreeOneBlockStillGetsTheOthers) {
  kept({{1000, 1}, {3000, 1}});
  pool.fail_release = 1;
  EXPECT_THROW(cache.trim(), Error);
  EXPECT_EQ(pool.released.size(), 1u) << "the second block was returned after the first failed";
  EXPECT_EQ(cache.counts().cached_blocks, 0u);
}

TEST_F(CacheOfOneMiB, TrimWaitsForTheDeviceThenReturnsEveryBlockAndSaysHowMuch) {
  std::vector<DevicePtr> blocks = kept({{100, 1}, {600, 3}, {600, 3}});
  blocks.push_back(cache.allocate(70000, stream(4)));
  pool.captured.insert(stream(4));
  cache.release(blocks.back(), stream(4));  // deferred: released during a capture
  pool.captured.clear();
  ASSERT_EQ(cache.counts().deferred_blocks, 1u);

  // A device that cannot be waited for: nothing is freed, nothing is lost.
  pool.synchronize_fails = true;
  EXPECT_THROW(cache.trim(), Error);
  EXPECT_TRUE(pool.released.empty());
  EXPECT_EQ(cache.counts().cached_blocks, 3u);
  EXPECT_EQ(cache.counts().deferred_blocks, 1u);

  pool.synchronize_fails = false;
  EXPECT_EQ(cache.trim(), 512u + 1024 + 1024 + 70144);
  EXPECT_EQ(pool.synchronized, 1);
  ASSERT_EQ(pool.released.size(), 4u);
  for (const auto& [p, s] : pool.released) {
    EXPECT_NE(std::find(blocks.begin(), blocks.end(), p), blocks.end());
    EXPECT_EQ(s, nullptr) << "after the wait, on the legacy stream: a block's own stream may be gone";
  }
  EXPECT_EQ(cache.counts().cached_blocks, 0u);
  EXPECT_EQ(cache.counts().deferred_blocks, 0u);
  EXPECT_EQ(cache.trim(), 0u);
  EXPECT_EQ(pool.synchronized, 1) << "nothing to return: no wait";
}

TEST_F(CacheOfOneMiB, ThreadsOnTheirOwnStreamsNeverHoldTheSameBlock) {
  std::mutex mutex;
  std::set<DevicePtr> held;
  bool shared = false;
  std::vector<std::thread> threads;
  for (uintptr_t t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(t));
      std::vector<DevicePtr> mine;
      for (int i = 0; i < 2000; ++i) {
        if (mine.size() < 4 && random() % 2 == 0) {
          const DevicePtr p = cache.allocate(512 * (1 + random() % 4), stream(t % 3));
          std::lock_guard<std::mutex> lock(mutex);
          shared = shared || !held.insert(p).second;
          mine.push_back(p);
        } else if (!mine.empty()) {
          {
            std::lock_guard<std::mutex> lock(mutex);
            held.erase(mine.back());
          }
          cache.release(mine.back(), stream(t % 3));
          mine.pop_back();
        }
      }
      for (DevicePtr p : mine) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          held.erase(p);
        }
        cache.release(p, stream(t % 3));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(shared) << "two owners held one block at once";
  const device::BlockCacheCounts counts = cache.counts();
  EXPECT_EQ(static_cast<size_t>(counts.misses), pool.allocated.size());
  EXPECT_GT(counts.hits, counts.misses) << "the loop reuses its blocks";
  EXPECT_EQ(counts.cached_blocks + pool.released.size(), pool.allocated.size()) << "every block is kept or returned";
}

TEST(StreamBlockCache, TheLimitComesFromTheEnvironment) {
  const char* old = std::getenv("BRAZE_BLOCK_CACHE_BYTES");
  const std::string saved = old == nullptr ? "" : old;
  ::unsetenv("BRAZE_BLOCK_CACHE_BYTES");
  EXPECT_EQ(device::blockCacheLimitFromEnv(), size_t{1} << 30);
  ::setenv("BRAZE_BLOCK_CACHE_BYTES", "0", 1);
  EXPECT_EQ(device::blockCacheLimitFromEnv(), 0u);
  ::setenv("BRAZE_BLOCK_CACHE_BYTES", "4096", 1);
  EXPECT_EQ(device::blockCacheLimitFromEnv(), 4096u);
  ::setenv("BRAZE_BLOCK_CACHE_BYTES", "1G", 1);
  try {
    device::blockCacheLimitFromEnv();
    FAIL() << "expected an error for 1G";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BRAZE_BLOCK_CACHE_BYTES=1G: expected a number of bytes"), std::string::npos)
        << e.what();
  }
  old == nullptr ? ::unsetenv("BRAZE_BLOCK_CACHE_BYTES") : ::setenv("BRAZE_BLOCK_CACHE_BYTES", saved.c_str(), 1);
}

TEST(StreamBlockCache, ACudaDeviceThatFailedToOpenLeavesNothingToRelease) {
  if (device::cudaAvailable()) GTEST_SKIP() << "a CUDA driver and device are present";
  EXPECT_THROW(device::cudaDeviceOps(0), Error);
  EXPECT_EQ(device::releaseCudaCachedBlocks(), 0u) << "and does not crash on the device it could not make";
}

// Random sequences of what executes and their callers do to the cache: allocations and releases of many
// sizes on several streams, captures that begin and end, streams destroyed and their handles given to new
// streams, pools out of memory, trims. After every step, what must hold on a GPU: no block has two owners;
// a block comes back only to the stream it was freed on (by identity, not handle); an allocation inside a
// capture is the graph's own, never a kept block; the pool never sees a double free or a free inside a
// capture of memory the graph does not own; and at the end every block the pool gave is back in it.
struct Held {
  StreamHandle stream = nullptr;
  std::optional<uint64_t> identity;  // of the stream when allocated
};

// One random sequence; the first broken rule, or "" when all held.
std::string runSequence(uint64_t seed) {
  std::mt19937_64 random(seed);
  FakePool pool;
  const size_t limits[] = {0, 4096, size_t{1} << 20};
  StreamBlockCache cache(pool.source(), limits[random() % 3]);
  constexpr uintptr_t kStreams = 4;
  uint64_t next_identity = 1000;
  std::map<DevicePtr, Held> held;                      // blocks the "user" owns
  std::map<DevicePtr, uint64_t> freed_on;              // the identity each block was last freed on by its user
  auto pick = [&](size_t n) { return static_cast<size_t>(random() % n); };
  for (int step = 0; step < 400; ++step) {
    const StreamHandle s = stream(1 + pick(kStreams));
    const size_t what = pick(100);
    if (what < 45) {
      const size_t sizes[] = {0,     1, 100, 512, 513, 4096, 70000, (size_t{1} << 20) + 1,
                              StreamBlockCache::kLargestCachedBlock + 7};
      if (pick(20) == 0) pool.fail_next = 1 + static_cast<int>(pick(2));
      const size_t before = pool.allocated.size();
      DevicePtr p = 0;
      try {
        p = cache.allocate(sizes[pick(std::size(sizes))], s);
      } catch (const Error&) {
        pool.fail_next = 0;
        continue;  // out of memory: nothing handed out
      }
      pool.fail_next = 0;
      const bool fresh = pool.allocated.size() > before;
      if (held.count(p) != 0) return fmt::format("step {}: {:#x} handed to a second owner", step, p);
      if (pool.owned.count(p) == 0) return fmt::format("step {}: {:#x} handed out but not the pool's", step, p);
      if (!fresh && pool.capturing(s)) return fmt::format("step {}: a kept block handed out inside a capture", step);
      if (!fresh && freed_on.count(p) != 0 && std::optional<uint64_t>(freed_on[p]) != pool.identity(s)) {
        return fmt::format("step {}: {:#x} freed on stream {} came back on stream {}", step, p, freed_on[p],
                           pool.identity(s).value_or(0));
      }
      held[p] = Held{s, pool.identity(s)};
    } else if (what < 85 && !held.empty()) {
      auto it = std::next(held.begin(), static_cast<long>(pick(held.size())));
      const auto [p, h] = *it;
      held.erase(it);
      // Released under a handle that names another stream now: it must never come back from the cache.
      const std::optional<uint64_t> now = pool.identity(h.stream);
      freed_on[p] = now && h.identity && *now == *h.identity ? *h.identity : ~uint64_t{0};
      cache.release(p, h.stream);
    } else if (what < 92) {
      // A capture begins or ends on a stream.
      if (pool.captured.count(s) != 0) {
        pool.captured.erase(s);
      } else {
        pool.captured.insert(s);
      }
    } else if (what < 96) {
      // The stream is destroyed and a new one gets its handle (with blocks still held on it, which the
      // contract forbids but a user can do: they must never be reused by the new stream).
      pool.identities[s] = next_identity++;
    } else if (what < 98 && pool.captured.empty()) {
      cache.trim();  // documented: not during a capture
    } else if (pool.captured.count(s) == 0) {
      pool.identities[s] = std::nullopt;  // a handle naming another stream on each thread, for a while
      const DevicePtr p = cache.allocate(64, s);
      cache.release(p, s);
      pool.identities.erase(s);
    }
    if (!pool.violations.empty()) return fmt::format("step {}: {}", step, pool.violations.front());
  }
  pool.captured.clear();
  for (const auto& [p, h] : held) cache.release(p, h.stream);
  cache.trim();
  if (!pool.violations.empty()) return pool.violations.front();
  if (!pool.owned.empty()) return fmt::format("{} blocks never returned to the pool", pool.owned.size());
  const device::BlockCacheCounts counts = cache.counts();
  if (counts.cached_blocks != 0 || counts.deferred_blocks != 0 || counts.cached_bytes != 0) {
    return fmt::format("counts after the final trim: {} kept, {} deferred, {} bytes", counts.cached_blocks,
                       counts.deferred_blocks, counts.cached_bytes);
  }
  return "";
}

TEST(StreamBlockCacheModel, RandomSequencesBreakNoRuleAndReturnEveryBlock) {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const std::string broken = runSequence(seed);
    ASSERT_EQ(broken, "") << "seed " << seed;
  }
}

}  // namespace
}  // namespace braze
