// The HIP runtime underneath the cache of freed device memory, against a fake runtime (the functions a
// HipRuntime holds, pointed at fakes here): a block comes back on the stream whose id it was released
// under, a new stream in an old stream's handle gets none of the old one's blocks, and nothing is kept
// where a stream has no id (a runtime without hipStreamGetId, the per-thread stream) or is captured. The
// device is entered around releases and the wait before a trim.
#include "device/device_ops.h"
#include "device/hip/hip_block_source.h"
#include "device/hip/hip_runtime.h"
#include "device/stream_block_cache.h"
#include "support/dynamic_library.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace braze {
namespace {

using device::DevicePtr;
using device::HipError;
using device::HipStream;
using device::StreamBlockCache;
using device::StreamHandle;

// What the fake runtime was asked, and how it answers.
struct FakeHip {
  int64_t mallocs = 0, frees = 0, waits = 0;
  uintptr_t next_address = 0x10000;
  bool out_of_memory = false;
  std::map<HipStream, unsigned long long> ids;  // streams without an entry are invalid handles
  std::set<HipStream> captured;
};
FakeHip* fake = nullptr;

constexpr HipError kInvalidHandle = 400;

HipError fakeMalloc(void** pointer, size_t bytes, HipStream) {
  if (fake->out_of_memory) return device::kHipErrorOutOfMemory;
  ++fake->mallocs;
  *pointer = reinterpret_cast<void*>(fake->next_address);
  fake->next_address += bytes + 0x1000;
  return device::kHipSuccess;
}
HipError fakeFree(void*, HipStream) {
  ++fake->frees;
  return device::kHipSuccess;
}
HipError fakeStreamGetId(HipStream stream, unsigned long long* id) {
  auto found = fake->ids.find(stream);
  if (found == fake->ids.end()) return kInvalidHandle;
  *id = found->second;
  return device::kHipSuccess;
}
HipError fakeIsCapturing(HipStream stream, int* status) {
  if (stream == reinterpret_cast<HipStream>(0x400)) return kInvalidHandle;  // the runtime cannot say
  *status = fake->captured.count(stream) != 0 ? 1 : device::kHipStreamCaptureStatusNone;
  return device::kHipSuccess;
}
HipError fakeDeviceSynchronize() {
  ++fake->waits;
  return device::kHipSuccess;
}
const char* fakeErrorName(HipError error) { return error == device::kHipErrorOutOfMemory ? "hipErrorOutOfMemory" : "hipErrorFake"; }
const char* fakeErrorString(HipError) { return "fake"; }

// A device that counts how often it is entered and left (nothing else of it is used).
class CountingDevice final : public device::DeviceOps {
 public:
  int entered = 0, left = 0;
  void enter() override { ++entered; }
  void leave() override { ++left; }
  std::vector<device::KernelHandle> load(const std::vector<device::KernelImage>&) override { return {}; }
  DevicePtr allocate(size_t, StreamHandle) override { return 0; }
  void release(DevicePtr, StreamHandle) override {}
  void zero(DevicePtr, size_t, StreamHandle) override {}
  void synchronize(StreamHandle) override {}
  void launch(device::KernelHandle, const device::LaunchShape&, void**, StreamHandle) override {}
};

StreamHandle handle(uintptr_t value) { return reinterpret_cast<StreamHandle>(value); }
HipStream hip(uintptr_t value) { return reinterpret_cast<HipStream>(value); }

class HipBlockSource : public ::testing::Test {
 protected:
  void SetUp() override {
    // Any library will do for the runtime's handle: its functions are the fakes.
    std::optional<DynamicLibrary> library = DynamicLibrary::open(std::vector<std::string>{"libc.so.6"});
    ASSERT_TRUE(library.has_value());
    api_ = std::make_unique<device::HipRuntime>(device::HipRuntime{std::move(*library)});
    api_->mallocAsync = fakeMalloc;
    api_->freeAsync = fakeFree;
    api_->streamGetId = fakeStreamGetId;
    api_->streamIsCapturing = fakeIsCapturing;
    api_->deviceSynchronize = fakeDeviceSynchronize;
    api_->getErrorName = fakeErrorName;
    api_->getErrorString = fakeErrorString;
    fake = &state_;
    state_.ids = {{hip(0), 1}, {hip(0x100), 7}, {hip(0x200), 8}};
  }
  void TearDown() override { fake = nullptr; }

  StreamBlockCache cache(size_t limit = size_t{1} << 20) {
    return StreamBlockCache(device::hipBlockSource(*api_, device_), limit);
  }

  FakeHip state_;
  CountingDevice device_;
  std::unique_ptr<device::HipRuntime> api_;
};

TEST_F(HipBlockSource, ABlockComesBackOnlyOnTheStreamItWasReleasedOn) {
  StreamBlockCache blocks = cache();
  const DevicePtr first = blocks.allocate(1000, handle(0x100));
  blocks.release(first, handle(0x100));
  EXPECT_EQ(blocks.allocate(900, handle(0x100)), first);  // the same size class, the same stream
  EXPECT_EQ(state_.mallocs, 1);
  const DevicePtr other = blocks.allocate(900, handle(0x200));
  EXPECT_NE(other, first);
  EXPECT_EQ(state_.mallocs, 2);
  blocks.release(other, handle(0x200));
  // The null stream has an id of its own: neither stream's block.
  const DevicePtr on_null = blocks.allocate(900, handle(0));
  EXPECT_NE(on_null, first);
  EXPECT_NE(on_null, other);
  EXPECT_EQ(state_.mallocs, 3);
  EXPECT_EQ(state_.frees, 0);
  EXPECT_EQ(blocks.counts().hits, 1);
}

TEST_F(HipBlockSource, ANewStreamInAnOldStreamsHandleGetsNoneOfItsBlocks) {
  StreamBlockCache blocks = cache();
  const DevicePtr kept = blocks.allocate(4096, handle(0x100));
  blocks.release(kept, handle(0x100));
  state_.ids[hip(0x100)] = 9;  // the stream with id 7 was destroyed; another took its handle
  EXPECT_NE(blocks.allocate(4096, handle(0x100)), kept);
  EXPECT_EQ(state_.mallocs, 2);
  EXPECT_EQ(blocks.counts().cached_blocks, 1u);  // still kept for id 7, until a trim
  EXPECT_EQ(blocks.trim(), 4096u);
  EXPECT_EQ(state_.waits, 1);
  EXPECT_EQ(state_.frees, 1);
}

TEST_F(HipBlockSource, WithoutHipStreamGetIdNothingIsKept) {
  api_->streamGetId = nullptr;
  StreamBlockCache blocks = cache();
  for (int i = 0; i < 3; ++i) blocks.release(blocks.allocate(1000, handle(0x100)), handle(0x100));
  EXPECT_EQ(state_.mallocs, 3);
  EXPECT_EQ(state_.frees, 3);
  EXPECT_EQ(blocks.counts().hits, 0);
}

TEST_F(HipBlockSource, ThePerThreadStreamAndAnUnknownHandleKeepNothing) {
  StreamBlockCache blocks = cache();
  // hipStreamPerThread is another stream on each thread: never asked for an id.
  state_.ids[device::hipStreamPerThread()] = 3;
  const auto per_thread = reinterpret_cast<StreamHandle>(device::hipStreamPerThread());
  for (int i = 0; i < 2; ++i) blocks.release(blocks.allocate(1000, per_thread), per_thread);
  // A handle hipStreamGetId refuses has no identity either.
  for (int i = 0; i < 2; ++i) blocks.release(blocks.allocate(1000, handle(0x300)), handle(0x300));
  EXPECT_EQ(state_.mallocs, 4);
  EXPECT_EQ(state_.frees, 4);
}

TEST_F(HipBlockSource, ACapturedStreamsBlocksAreTheGraphs) {
  StreamBlockCache blocks = cache();
  state_.captured.insert(hip(0x100));
  for (int i = 0; i < 2; ++i) blocks.release(blocks.allocate(1000, handle(0x100)), handle(0x100));
  EXPECT_EQ(state_.mallocs, 2);
  EXPECT_EQ(state_.frees, 2);
  // A stream whose capture state the runtime cannot report counts as captured: nothing kept.
  state_.ids[hip(0x400)] = 11;
  for (int i = 0; i < 2; ++i) blocks.release(blocks.allocate(1000, handle(0x400)), handle(0x400));
  EXPECT_EQ(state_.mallocs, 4);
  EXPECT_EQ(state_.frees, 4);
  EXPECT_EQ(blocks.counts().hits, 0);
  // A runtime without hipStreamIsCapturing counts no stream as captured.
  api_->streamIsCapturing = nullptr;
  StreamBlockCache uncaptured = cache();
  for (int i = 0; i < 2; ++i) uncaptured.release(uncaptured.allocate(1000, handle(0x100)), handle(0x100));
  EXPECT_EQ(state_.mallocs, 5);
  EXPECT_EQ(uncaptured.counts().hits, 1);
}

TEST_F(HipBlockSource, OutOfMemoryReturnsTheStreamsBlocksThenSaysSo) {
  StreamBlockCache blocks = cache();
  blocks.release(blocks.allocate(1000, handle(0x100)), handle(0x100));
  state_.out_of_memory = true;
  try {
    blocks.allocate(5000, handle(0x100));
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("out of device memory: 5000 bytes"), std::string::npos) << error.what();
  }
  EXPECT_EQ(state_.frees, 1);  // the kept block went back first
  EXPECT_EQ(blocks.counts().cached_blocks, 0u);
}

TEST_F(HipBlockSource, ReleasesAndTheWaitBeforeATrimEnterTheDevice) {
  StreamBlockCache blocks = cache(0);  // nothing kept: every release goes to the runtime
  blocks.release(blocks.allocate(1000, handle(0x100)), handle(0x100));
  EXPECT_EQ(device_.entered, 1);
  StreamBlockCache keeping = cache();
  keeping.release(keeping.allocate(1000, handle(0x100)), handle(0x100));
  EXPECT_EQ(device_.entered, 1);  // kept: no runtime call
  EXPECT_EQ(keeping.trim(), 1024u);  // 1000 bytes' size class
  EXPECT_EQ(device_.entered, 3);  // the wait, then the free
  EXPECT_EQ(device_.left, device_.entered);
}

}  // namespace
}  // namespace braze
