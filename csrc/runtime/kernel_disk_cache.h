// Compiled kernels on disk, so that a new process loads in about a millisecond what NVRTC takes a
// hundred to compile. One file per kernel, named after the SHA-256 of its key (the kernel cache's key:
// source, arch, NVRTC version, options); the file holds the whole key too, and is used only when that
// key matches, so a hash collision costs a recompile, never a wrong cubin.
//
// Several processes may share the directory: entries are written to a temporary file and renamed into
// place, so a reader sees a whole entry or none. Anything wrong with an entry (truncated, garbage, a
// checksum that does not match) makes it a miss, and the recompiled kernel replaces it. The cache never
// throws: when the directory cannot be created or written, it stops writing after one warning on
// stderr (entries already there are still read, so a read-only shared cache works), and kernels are
// compiled as if it were not there.
#pragma once

#include "runtime/nvrtc.h"

#include <atomic>
#include <filesystem>
#include <optional>
#include <string_view>

namespace braze::runtime {

// Where the process's disk cache lives: $BRAZE_CACHE_DIR, else $XDG_CACHE_HOME/braze, else
// $HOME/.cache/braze. nullopt (no disk cache) when BRAZE_DISABLE_DISK_CACHE is set to anything but ""
// or "0", when BRAZE_CACHE_DIR is set but empty, or when none of the variables is set.
std::optional<std::filesystem::path> kernelCacheDirFromEnv();

class KernelDiskCache {
 public:
  // Entries go to `root`/kernels-v<format version>; nothing is created before the first store.
  explicit KernelDiskCache(const std::filesystem::path& root);

  // The kernel stored under `key`; nullopt when there is none or it cannot be used.
  std::optional<CompiledKernel> load(std::string_view key) const;
  // Stores `kernel` under `key`, replacing any entry there. false when it could not be written; the
  // first such failure turns writing off for good (one warning, not one per kernel).
  bool store(std::string_view key, const CompiledKernel& kernel);

  bool writable() const { return writable_.load(std::memory_order_relaxed); }
  const std::filesystem::path& directory() const { return dir_; }
  // The file `key` is stored in (tests corrupt entries through it).
  std::filesystem::path entryPath(std::string_view key) const;

 private:
  void stopWriting(const std::string& why);

  std::filesystem::path dir_;
  std::atomic<bool> writable_{true};
};

}  // namespace braze::runtime
