// Compiling through caches: memory first (this process compiled or loaded it already), then the disk
// (another process did: kernel_disk_cache.h), then the arch's compiler (NVRTC, or hiprtc for a gfx arch:
// kernel_compiler.h), whose binary is saved to both. The key is everything the binary and its use depend
// on: braze's version, the compiler and its version, its arguments (arch, fmad, maxrregcount, -lineinfo,
// the CUDA include dirs the headers come from), and the source.
//
// Thread-safe. Threads asking for the same kernel at once share one compile: the first compiles, the
// others wait for its result (a "memory" hit), so a fusion whose segments repeat a kernel, or several
// threads executing one fusion, pay the compiler once. Across processes, the disk entry's lock does the same.
#pragma once

#include "device/kernel_disk_cache.h"
#include "device/compile_options.h"

#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace braze::device {

// Where a kernel came from, so tests and benchmarks can tell a hit from a compile.
enum class CompileSource { Memory, Disk, Compiler };  // Compiler: NVRTC or hiprtc ran
std::string_view toString(CompileSource source);

struct CachedKernel {
  std::shared_ptr<const CompiledKernel> kernel;  // shared with the cache: a hit copies no cubin
  CompileSource source = CompileSource::Compiler;
};

struct KernelCacheStats {
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t compiles = 0;  // compiler runs, failed ones included
  bool operator==(const KernelCacheStats&) const = default;
};

// The cache key of `source` compiled with `options`: braze's version, the compiler and its version, its
// arguments, then the source. Throws what compilerArguments throws (a virtual arch, missing CUDA headers).
std::string kernelCacheKey(std::string_view source, const CompileOptions& options);

class KernelCache {
 public:
  // With a disk root, entries are read from and written to it; without one, memory only.
  explicit KernelCache(const std::optional<std::filesystem::path>& disk_root);
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The binary of `source` for `options`: from memory, disk, or compileKernel (whose errors it throws,
  // naming `what`; a failed compile is not cached, so the next call tries again).
  CachedKernel compile(std::string_view source, std::string_view what, const CompileOptions& options);

  KernelCacheStats stats() const;
  // nullptr when there is no disk cache.
  const KernelDiskCache* disk() const { return disk_.get(); }

 private:
  using Result = std::shared_ptr<const CompiledKernel>;

  std::unique_ptr<KernelDiskCache> disk_;
  mutable std::mutex mutex_;
  // Every kernel compiled or loaded, by key; a compile in progress is a future not yet ready.
  std::unordered_map<std::string, std::shared_future<Result>> kernels_;
  KernelCacheStats stats_;
};

// The process's cache, made on first use with the disk directory kernelCacheDirFromEnv() names then
// (so BRAZE_CACHE_DIR set later has no effect). Never destroyed: kernels may be compiled from other
// static destructors.
KernelCache& processKernelCache();

// processKernelCache().compile(...): what loading a kernel for the GPU goes through.
CachedKernel compileCached(std::string_view source, std::string_view what, const CompileOptions& options);

}  // namespace braze::device
