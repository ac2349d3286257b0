// Compiled kernels on disk, so that a new process loads in about a millisecond what NVRTC takes a
// hundred to compile. One file per kernel, named after the SHA-256 of its key (the kernel cache's key:
// source, arch, NVRTC version, options); the file holds the whole key too, and is used only when that
// key matches, so a hash collision costs a recompile, never a wrong cubin.
//
// Several processes may share the directory (the ranks of a tensor-parallel job start together): entries
// are written to a temporary file and renamed into place, so a reader sees a whole entry or none, and
// a lock per entry (lockEntry) lets one process compile a kernel while the others wait for its entry
// instead of compiling it too. Anything wrong with an entry (truncated, garbage, a checksum that does
// not match) makes it a miss with a warning, and the recompiled kernel replaces it. The directories the
// cache creates are private (0700: the cubins in them run on the GPU, so nobody else may write them);
// one that exists keeps its mode, which is how a cache is shared between users on purpose. The cache
// never throws: when the directory cannot be created or written, it stops writing after one warning on
// stderr (entries already there are still read, so a read-only shared cache works), and kernels are
// compiled as if it were not there.
#pragma once

#include "device/compile_options.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string_view>
#include <utility>

namespace braze::device {

// Where the process's disk cache lives: $BRAZE_CACHE_DIR, else $XDG_CACHE_HOME/braze, else
// $HOME/.cache/braze. nullopt (no disk cache) when BRAZE_DISABLE_DISK_CACHE is set to anything but ""
// or "0", when BRAZE_CACHE_DIR is set but empty, or when none of the variables is set.
std::optional<std::filesystem::path> kernelCacheDirFromEnv();

class KernelDiskCache {
 public:
  // An exclusive lock on one key's entry, across processes (flock on a lock file beside the entry),
  // released when destroyed or when the process dies. Empty when the lock file cannot be made (a
  // read-only cache): the caller goes on unlocked, as if alone. A child forked while it is held closes
  // its copy of the descriptor, so the lock ends with the parent's release, not with the child.
  class EntryLock {
   public:
    EntryLock() = default;
    explicit EntryLock(int fd);
    EntryLock(EntryLock&& other) noexcept
        : fd_(std::exchange(other.fd_, -1)), slot_(std::exchange(other.slot_, -1)) {}
    EntryLock& operator=(EntryLock&& other) noexcept;
    ~EntryLock();
    bool held() const { return fd_ >= 0; }

   private:
    void release() noexcept;
    int fd_ = -1;
    int slot_ = -1;  // in the registry of held lock descriptors a forked child closes; -1: none free
  };

  // A cache key and the SHA-256 its files are named after, hashed once: a key holds a kernel's whole
  // source, and hashing 20 KB takes about 90 us here, a third of a disk hit. Refers to the key's text,
  // which must outlive it.
  struct Key {
    Key(std::string_view text);  // NOLINT(google-explicit-constructor): a key is its text
    Key(const char* text) : Key(std::string_view(text)) {}
    Key(const std::string& text) : Key(std::string_view(text)) {}
    std::string_view text;
    std::string name;  // hex digest: <name>.entry and <name>.lock
  };

  // Entries go to `root`/kernels-v<format version>; nothing is created before the first lockEntry or store.
  explicit KernelDiskCache(const std::filesystem::path& root);

  // The kernel stored under `key`; nullopt when there is none or it cannot be used (a damaged entry
  // says so on stderr, naming its file; the first entry that cannot be read too; another key's entry,
  // a hash collision, is a quiet miss).
  std::optional<CompiledKernel> load(const Key& key) const;
  // Waits until no other process (or other cache object) holds `key`'s lock, then holds it. The caller
  // loads the entry under the lock and compiles and stores it only if it is still missing. A holder
  // that seems stuck (kLockPatience) is given up on, with a warning: compiling twice beats hanging.
  static constexpr std::chrono::milliseconds kLockPatience{60'000};
  EntryLock lockEntry(const Key& key, std::chrono::milliseconds patience = kLockPatience);
  // Stores `kernel` under `key`, replacing any entry there. false when it could not be written; the
  // first such failure turns writing off for good (one warning, not one per kernel).
  bool store(const Key& key, const CompiledKernel& kernel);

  bool writable() const { return writable_.load(std::memory_order_relaxed); }
  const std::filesystem::path& directory() const { return dir_; }
  // The file `key` is stored in (tests corrupt entries through it), and its lock file.
  std::filesystem::path entryPath(const Key& key) const;
  std::filesystem::path lockPath(const Key& key) const;

 private:
  void stopWriting(const std::string& why);
  // Creates the directory (and missing parents, 0700) once; false, after stopWriting, when it cannot.
  bool ensureDirectory();
  // ensureDirectory again, after the directory was found deleted (it is safe to delete at any time).
  bool remakeDirectory();

  std::filesystem::path dir_;
  std::atomic<bool> writable_{true};
  std::atomic<bool> directory_made_{false};
  mutable std::atomic<bool> read_warned_{false};
};

}  // namespace braze::device
