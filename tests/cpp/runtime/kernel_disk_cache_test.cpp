// The disk cache's file handling, without NVRTC: entries round-trip, anything wrong with one makes it a
// miss with a warning (never a crash, never another key's cubin), the directories it makes are private,
// an entry's lock excludes other holders, an unusable directory turns writing off without an error, and
// the environment picks the directory.
#include "device/kernel_disk_cache.h"
#include "runtime/temp_dir.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

namespace braze::device {
namespace {

using testing::ScopedEnv;
using testing::TempDir;

CompiledKernel fakeKernel(const std::string& cubin_text) {
  CompiledKernel kernel;
  kernel.cubin.assign(cubin_text.begin(), cubin_text.end());
  kernel.log = "warning: something harmless";
  kernel.options = "--gpu-architecture=sm_90 -default-device";
  return kernel;
}

void expectSame(const CompiledKernel& got, const CompiledKernel& expected) {
  EXPECT_EQ(got.cubin, expected.cubin);
  EXPECT_EQ(got.log, expected.log);
  EXPECT_EQ(got.options, expected.options);
}

void writeFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(KernelDiskCache, StoredEntryLoadsBackInAVersionedDirectory) {
  TempDir dir;
  KernelDiskCache cache(dir.path());
  EXPECT_EQ(cache.directory(), dir.path() / "kernels-v1");
  EXPECT_FALSE(cache.load("key A"));  // nothing there yet, and no directory either
  const CompiledKernel a = fakeKernel(std::string("\x7f" "ELF cubin\0with nul bytes", 24));
  ASSERT_TRUE(cache.store("key A", a));
  const std::optional<CompiledKernel> loaded = KernelDiskCache(dir.path()).load("key A");
  ASSERT_TRUE(loaded);
  expectSame(*loaded, a);
  EXPECT_FALSE(cache.load("key B"));
  EXPECT_EQ(cache.entryPath("key A").parent_path(), cache.directory());
}

TEST(KernelDiskCache, StoreReplacesAndLeavesNoTemporaryFiles) {
  TempDir dir;
  KernelDiskCache cache(dir.path());
  ASSERT_TRUE(cache.store("key", fakeKernel("old")));
  ASSERT_TRUE(cache.store("key", fakeKernel("new")));
  expectSame(*cache.load("key"), fakeKernel("new"));
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(cache.directory())) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{cache.entryPath("key").filename().string()});
}

// A different key in the file under this key's name is what a hash collision would look like.
TEST(KernelDiskCache, AnotherKeysEntryIsAMiss) {
  TempDir dir;
  KernelDiskCache cache(dir.path());
  ASSERT_TRUE(cache.store("key A", fakeKernel("cubin of A")));
  std::filesystem::copy_file(cache.entryPath("key A"), cache.entryPath("key B"));
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load("key B"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // not damage: no warning
  EXPECT_TRUE(cache.load("key A"));
}

TEST(KernelDiskCache, DamagedEntriesAreMisses) {
  TempDir dir;
  KernelDiskCache cache(dir.path());
  ASSERT_TRUE(cache.store("key", fakeKernel("a cubin of some length")));
  const std::filesystem::path path = cache.entryPath("key");
  const std::string good = readFile(path);

  const std::vector<std::pair<std::string, std::string>> damaged = {
      {"empty", ""},
      {"header only", good.substr(0, 40)},
      {"truncated", good.substr(0, good.size() - 5)},
      {"extra bytes", good + "trailing"},
      {"garbage", std::string(good.size(), '\x5a')},
      {"cubin byte flipped", good.substr(0, good.size() - 1) + static_cast<char>(good.back() ^ 1)},
      {"size field huge", [&] {
         std::string bad = good;
         bad[bad.find('\n') + 1 + 31] = '\x7f';  // the top byte of the cubin size
         return bad;
       }()},
  };
  // Each is a miss that says so once, naming the file: a corrupt cache is worth knowing about.
  const auto expectWarnedMiss = [&](const std::string& what) {
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(cache.load("key"));
    const std::string warning = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(std::count(warning.begin(), warning.end(), '\n'), 1) << warning;
    EXPECT_NE(warning.find(path.string() + " " + what), std::string::npos) << warning;
  };
  for (const auto& [what, bytes] : damaged) {
    SCOPED_TRACE(what);
    writeFile(path, bytes);
    expectWarnedMiss("is damaged");
  }
  {
    SCOPED_TRACE("a directory where the file should be");
    std::filesystem::remove(path);
    std::filesystem::create_directory(path);
    expectWarnedMiss("cannot be read (not a regular file)");
  }
  std::filesystem::remove(path);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load("key"));  // no file at all is a plain miss
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  writeFile(path, good);
  EXPECT_TRUE(cache.load("key"));
}

// The cubins run on the GPU: a directory others can write is a way to run their code in this process.
TEST(KernelDiskCache, CreatedDirectoriesArePrivateAndExistingOnesKeepTheirMode) {
  TempDir dir;
  const auto mode = [](const std::filesystem::path& path) {
    struct stat info {};
    EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
    return info.st_mode & 0777;
  };
  ::chmod(dir.path().c_str(), 0755);
  KernelDiskCache cache(dir.path() / "made" / "by" / "braze");
  ASSERT_TRUE(cache.store("key", fakeKernel("cubin")));
  for (const std::filesystem::path& made : {dir.path() / "made", dir.path() / "made" / "by",
                                             dir.path() / "made" / "by" / "braze", cache.directory()}) {
    EXPECT_EQ(mode(made), 0700u) << made;
  }
  EXPECT_EQ(mode(dir.path()), 0755u);  // there already: left alone

  // A directory shared on purpose (made by its owner with the mode they chose) stays shared.
  std::filesystem::create_directory(dir.path() / "shared");
  ::chmod((dir.path() / "shared").c_str(), 0775);
  std::filesystem::create_directory(dir.path() / "shared" / "kernels-v1");
  ::chmod((dir.path() / "shared" / "kernels-v1").c_str(), 0775);
  ASSERT_TRUE(KernelDiskCache(dir.path() / "shared").store("key", fakeKernel("cubin")));
  EXPECT_EQ(mode(dir.path() / "shared" / "kernels-v1"), 0775u);
}

// A process forked while the parent holds an entry's lock (a data-loader worker started during a
// compile) must not keep the lock after the parent releases it.
TEST(KernelDiskCache, AForkedChildDoesNotKeepTheParentsLock) {
  TempDir dir;
  KernelDiskCache parent(dir.path());
  KernelDiskCache other(dir.path());
  KernelDiskCache::EntryLock lock = parent.lockEntry("key");
  ASSERT_TRUE(lock.held());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // outlives the parent's compile; async-signal-safe calls only
    ::usleep(1'000'000);
    ::_exit(0);
  }
  lock = KernelDiskCache::EntryLock();  // the parent's compile is done
  EXPECT_TRUE(other.lockEntry("key", std::chrono::milliseconds{200}).held());
  int status = 0;
  ::waitpid(child, &status, 0);
}

// "kernels-v1 is safe to delete at any time", also while a process is using it.
TEST(KernelDiskCache, ADirectoryDeletedWhileInUseIsMadeAgain) {
  TempDir dir;
  KernelDiskCache cache(dir.path());
  ASSERT_TRUE(cache.store("key", fakeKernel("cubin")));
  std::filesystem::remove_all(cache.directory());
  EXPECT_TRUE(cache.lockEntry("key").held());
  std::filesystem::remove_all(cache.directory());
  EXPECT_TRUE(cache.store("key", fakeKernel("cubin")));
  EXPECT_TRUE(cache.writable());
  expectSame(*cache.load("key"), fakeKernel("cubin"));
}

TEST(KernelDiskCache, EntryLockExcludesOtherHoldersUntilReleased) {
  TempDir dir;
  KernelDiskCache first(dir.path());
  KernelDiskCache second(dir.path());  // another process, as far as flock is concerned (its own open file)
  KernelDiskCache::EntryLock held = first.lockEntry("key");
  ASSERT_TRUE(held.held());
  EXPECT_TRUE(std::filesystem::exists(first.lockPath("key")));
  EXPECT_TRUE(second.lockEntry("other key", std::chrono::milliseconds{0}).held());  // one lock per key

  // A holder that never lets go costs a bounded wait and a warning, then the caller goes on unlocked.
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(second.lockEntry("key", std::chrono::milliseconds{30}).held());
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("locked for 30 ms by another process"), std::string::npos) << warning;

  // A waiter gets the lock once the holder releases it, and not before.
  std::atomic<bool> released{false};
  std::atomic<bool> got_it_early{false};
  std::thread waiter([&] {
    KernelDiskCache::EntryLock lock = second.lockEntry("key");
    got_it_early = !released.load();
    EXPECT_TRUE(lock.held());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds{50});
  released = true;
  held = KernelDiskCache::EntryLock();
  waiter.join();
  EXPECT_FALSE(got_it_early.load());
}

// A root below a regular file can never be created, whoever runs the test (root ignores permissions).
TEST(KernelDiskCache, UncreatableDirectoryTurnsWritingOffWithoutAnError) {
  TempDir dir;
  writeFile(dir.path() / "a_file", "not a directory");
  KernelDiskCache cache(dir.path() / "a_file" / "cache");
  EXPECT_TRUE(cache.writable());
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.store("key", fakeKernel("cubin")));
  EXPECT_FALSE(cache.store("other key", fakeKernel("cubin")));
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(cache.writable());
  EXPECT_FALSE(cache.load("key"));
  // One warning, not one per kernel, saying where and how to turn it off.
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 1) << warnings;
  EXPECT_NE(warnings.find("a_file"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("BRAZE_DISABLE_DISK_CACHE"), std::string::npos) << warnings;
}

TEST(KernelDiskCache, DirectoryComesFromTheEnvironment) {
  ScopedEnv off("BRAZE_DISABLE_DISK_CACHE", std::nullopt);
  ScopedEnv dir("BRAZE_CACHE_DIR", std::nullopt);
  ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(kernelCacheDirFromEnv(), std::filesystem::path("/home/someone/.cache/braze"));
  {
    ScopedEnv relative_xdg("XDG_CACHE_HOME", "relative/cache");  // invalid by the XDG spec: ignored
    EXPECT_EQ(kernelCacheDirFromEnv(), std::filesystem::path("/home/someone/.cache/braze"));
  }
  ScopedEnv xdg_set("XDG_CACHE_HOME", "/xdg/cache");
  EXPECT_EQ(kernelCacheDirFromEnv(), std::filesystem::path("/xdg/cache/braze"));
  {
    ScopedEnv chosen("BRAZE_CACHE_DIR", "/tmp/chosen");
    EXPECT_EQ(kernelCacheDirFromEnv(), std::filesystem::path("/tmp/chosen"));
    ScopedEnv not_off("BRAZE_DISABLE_DISK_CACHE", "0");
    EXPECT_EQ(kernelCacheDirFromEnv(), std::filesystem::path("/tmp/chosen"));
    ScopedEnv disabled("BRAZE_DISABLE_DISK_CACHE", "1");
    EXPECT_EQ(kernelCacheDirFromEnv(), std::nullopt);
  }
  {
    ScopedEnv empty("BRAZE_CACHE_DIR", "");
    EXPECT_EQ(kernelCacheDirFromEnv(), std::nullopt);
  }
  ScopedEnv no_xdg("XDG_CACHE_HOME", std::nullopt);
  ScopedEnv no_home("HOME", std::nullopt);
  EXPECT_EQ(kernelCacheDirFromEnv(), std::nullopt);
}

}  // namespace
}  // namespace braze::device
