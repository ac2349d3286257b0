#include "device/kernel_cache.h"

#include "support/error.h"
#include "device/kernel_compiler.h"
#include "device/cuda/nvrtc.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace braze::device {

std::string_view toString(CompileSource source) {
  switch (source) {
    case CompileSource::Memory: return "memory";
    case CompileSource::Disk: return "disk";
    case CompileSource::Compiler: return "compiler";
  }
  return "?";
}

std::string kernelCacheKey(std::string_view source, const CompileOptions& options) {
  // Text, one field a line, so an entry's key can be read in a hex dump; the source goes last because
  // it is the only field that may hold newlines.
  // braze's version comes first: a release may change what a kernel's parameters mean (the argument
  // words, the workspace layout) without changing a byte of its source.
  return fmt::format("braze {}\n{}\noptions {}\nsource\n{}", BRAZE_VERSION, compilerName(options),
                     fmt::join(compilerArguments(options), " "), source);
}

KernelCache::KernelCache(const std::optional<std::filesystem::path>& disk_root)
    : disk_(disk_root ? std::make_unique<KernelDiskCache>(*disk_root) : nullptr) {}

CachedKernel KernelCache::compile(std::string_view source, std::string_view what, const CompileOptions& options) {
  const std::string key = [&] {
    try {
      return kernelCacheKey(source, options);
    } catch (const Error& error) {  // name the kernel whose options are wrong
      throw Error(error.kind(), fmt::format("compiling kernel {}: {}", what, error.what()));
    }
  }();
  std::promise<Result> promise;
  std::shared_future<Result> earlier;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = kernels_.try_emplace(key);
    if (inserted) {
      it->second = promise.get_future().share();
    } else {
      ++stats_.memory_hits;
      earlier = it->second;
    }
  }
  // Waits if another thread is still compiling it; rethrows that thread's compile error.
  if (earlier.valid()) return {earlier.get(), CompileSource::Memory};

  // This thread owns the key until the promise is fulfilled. Disk and NVRTC run outside the lock, so
  // different kernels load and compile in parallel.
  try {
    std::optional<CompiledKernel> kernel;
    // Under the entry's lock, held through compile and store: a process that finds another compiling
    // this kernel waits, then loads its entry instead of compiling it again.
    KernelDiskCache::EntryLock entry_lock;
    std::optional<KernelDiskCache::Key> disk_key;  // the key hashed once for the lock, load and store
    if (disk_) {
      disk_key.emplace(key);
      entry_lock = disk_->lockEntry(*disk_key);
      kernel = disk_->load(*disk_key);
    }
    const CompileSource from = kernel ? CompileSource::Disk : CompileSource::Compiler;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++(kernel ? stats_.disk_hits : stats_.compiles);
    }
    if (!kernel) {
      kernel = compileKernel(source, what, options);
      if (disk_) disk_->store(*disk_key, *kernel);
    } else if (options.lineinfo) {
      // Where the loaded cubin's line table points, when the kernel's name and $TMPDIR are those it was
      // compiled with (braze names kernels in their source, so the name is).
      saveSourceForProfilers(source, what);
    }
    auto result = std::make_shared<const CompiledKernel>(std::move(*kernel));
    promise.set_value(result);
    return {std::move(result), from};
  } catch (...) {
    // Forgotten, so that a later call compiles again instead of replaying this error forever (the
    // error may be the environment's, such as a missing header, and fixed since); waiters get it now.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      kernels_.erase(key);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

KernelCache& processKernelCache() {
  static auto* cache = new KernelCache(kernelCacheDirFromEnv());
  return *cache;
}

CachedKernel compileCached(std::string_view source, std::string_view what, const CompileOptions& options) {
  return processKernelCache().compile(source, what, options);
}

}  // namespace braze::device
