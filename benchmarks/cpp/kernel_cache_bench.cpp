// What the kernel caches save on the seed layer_norm kernel (bf16 [16, 128, 1600], as the GPU corpus
// runs it), compiled for sm_90: a cold NVRTC compile (and the disk write that follows), a disk hit (a
// new process whose cache directory is warm: read, check, no NVRTC), and a memory hit. The GPU runtime's
// targets: a one-kernel fusion's first execute in at most 150 ms cold, 2 ms with the disk cache warm.
// Needs NVRTC (no GPU); without it the benchmarks report an error and do not run.
#include "fusions/kernel_corpus.h"
#include "codegen/source_emitter.h"
#include "device/kernel_cache.h"
#include "device/cuda/nvrtc.h"
#include "support/sha256.h"

#include <benchmark/benchmark.h>

#include <cstdlib>

namespace braze {
namespace {

using device::CompileSource;
using device::KernelCache;

const device::CompileOptions kOptions{.arch = "sm_90"};

struct LayerNormKernel {
  std::string name;
  std::string source;
};

const LayerNormKernel& layerNormKernel() {
  static const LayerNormKernel kernel = [] {
    const testing::KernelCase c = testing::layerNormCase({.batch = 16, .seq = 128, .hidden = 1600}, 1);
    const LoweredPlan compiled = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
    for (const auto& k : compiled.kernels) {
      if (k) return LayerNormKernel{k->name, codegen::emitCuda(*k)};
    }
    std::abort();  // the seed layer_norm always has one kernel
  }();
  return kernel;
}

// A directory of its own under $TMPDIR for one benchmark, removed after it.
class BenchDir {
 public:
  BenchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "braze_bench_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;
  ~BenchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

bool skipWithoutNvrtc(benchmark::State& state) {
  if (device::nvrtcAvailable()) return false;
  state.SkipWithError("NVRTC not found");
  return true;
}

void BM_LayerNormKernelColdCompile(benchmark::State& state) {
  if (skipWithoutNvrtc(state)) return;
  const LayerNormKernel& k = layerNormKernel();
  BenchDir dir;
  KernelCache(dir.path()).compile(k.source + "// warm-up\n", k.name, kOptions);  // NVRTC's one-time start-up
  int64_t i = 0;
  for (auto _ : state) {
    // A new comment each time: the same cost as the kernel itself, but never in any cache.
    const auto got = KernelCache(dir.path()).compile(k.source + "// " + std::to_string(i++) + "\n", k.name, kOptions);
    if (got.source != CompileSource::Compiler) state.SkipWithError("expected an NVRTC compile");
  }
  state.counters["source_bytes"] = static_cast<double>(k.source.size());
}
BENCHMARK(BM_LayerNormKernelColdCompile)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_LayerNormKernelDiskHit(benchmark::State& state) {
  if (skipWithoutNvrtc(state)) return;
  const LayerNormKernel& k = layerNormKernel();
  BenchDir dir;
  const auto compiled = KernelCache(dir.path()).compile(k.source, k.name, kOptions);
  for (auto _ : state) {
    KernelCache fresh(dir.path());  // a new process: nothing in memory
    const auto got = fresh.compile(k.source, k.name, kOptions);
    if (got.source != CompileSource::Disk) state.SkipWithError("expected a disk hit");
  }
  state.counters["cubin_bytes"] = static_cast<double>(compiled.kernel->cubin.size());
}
BENCHMARK(BM_LayerNormKernelDiskHit)->Unit(benchmark::kMicrosecond);

void BM_LayerNormKernelMemoryHit(benchmark::State& state) {
  if (skipWithoutNvrtc(state)) return;
  const LayerNormKernel& k = layerNormKernel();
  KernelCache cache(std::nullopt);
  cache.compile(k.source, k.name, kOptions);
  for (auto _ : state) {
    const auto got = cache.compile(k.source, k.name, kOptions);
    if (got.source != CompileSource::Memory) state.SkipWithError("expected a memory hit");
  }
}
BENCHMARK(BM_LayerNormKernelMemoryHit)->Unit(benchmark::kMicrosecond);

// The disk hit hashes the key (for the file name) and checks the entry: SHA-256's speed bounds both.
void BM_Sha256(benchmark::State& state) {
  const std::string bytes(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) benchmark::DoNotOptimize(sha256(bytes));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Sha256)->Arg(64 * 1024);

}  // namespace
}  // namespace braze
