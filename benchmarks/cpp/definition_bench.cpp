// Host cost of the foundation's stages on the seed layer_norm: defining the fusion (what a Python
// FusionDefinition does on a cache miss), copying it (what every pass pipeline starts with), and one
// reference evaluation of a small instance (the oracle's speed bounds how large tests can be).
#include "fusions/host_util.h"
#include "fusions/layer_norm.h"
#include "reference/evaluator.h"

#include <benchmark/benchmark.h>

namespace braze {
namespace {

void BM_DefineLayerNorm(benchmark::State& state) {
  for (auto _ : state) {
    Fusion fusion;
    testing::defineLayerNorm(fusion, {});
    benchmark::DoNotOptimize(fusion.vals().size());
  }
}
BENCHMARK(BM_DefineLayerNorm);

void BM_CopyLayerNorm(benchmark::State& state) {
  Fusion fusion;
  testing::defineLayerNorm(fusion, {});
  for (auto _ : state) {
    Fusion copy = fusion;
    benchmark::DoNotOptimize(copy.vals().size());
  }
}
BENCHMARK(BM_CopyLayerNorm);

void BM_ReferenceLayerNorm(benchmark::State& state) {
  const int64_t rows = state.range(0);
  Fusion fusion;
  testing::defineLayerNorm(fusion, {.batch = 1, .seq = rows, .hidden = 1600});
  const std::vector<HostValue> inputs{testing::randomTensor(DataType::BFloat16, {1, rows, 1600}, 1),
                                      testing::randomTensor(DataType::BFloat16, {1600}, 2),
                                      testing::randomTensor(DataType::BFloat16, {1600}, 3)};
  for (auto _ : state) benchmark::DoNotOptimize(evaluate(fusion, inputs));
  state.SetItemsProcessed(state.iterations() * rows * 1600);
}
BENCHMARK(BM_ReferenceLayerNorm)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace braze
