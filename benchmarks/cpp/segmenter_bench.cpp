// Planning cost (copy, bind shapes, bookending, segmentation) of a chain of N transformer-block
// stand-ins, N = 1..32: nvFuser's segmenter went from 300 ms to 300 s between 20 and 30 layers
// (its issue #3510). Target: 30 blocks plan in under 100 ms here, and each doubling of N costs at
// most about 2.5x. Also the seed layer_norm and litGPT RoPE, the two plans every execute makes.
#include "fusions/layer_norm.h"
#include "fusions/plan_util.h"
#include "fusions/rope.h"
#include "fusions/transformer_block.h"

#include <benchmark/benchmark.h>

namespace braze {
namespace {

void BM_PlanTransformerBlocks(benchmark::State& state) {
  Fusion fusion;
  testing::defineTransformerBlocks(fusion, {}, state.range(0));
  const auto inputs = testing::randomInputs(fusion, 1);
  int64_t kernels = 0;
  for (auto _ : state) {
    const SegmentedFusion plan = planSegments(fusion, inputs);
    kernels = plan.kernelCount();
  }
  state.counters["exprs"] = static_cast<double>(fusion.exprsToEvaluate().size());
  state.counters["kernels"] = static_cast<double>(kernels);
}
BENCHMARK(BM_PlanTransformerBlocks)->RangeMultiplier(2)->Range(1, 32)->Arg(30)->Unit(benchmark::kMillisecond);

void BM_PlanSeedLayerNorm(benchmark::State& state) {
  Fusion fusion;
  testing::defineLayerNorm(fusion, {});
  const auto inputs = testing::randomInputs(fusion, 1, {{16, 128, 1600}, {1600}, {1600}});
  for (auto _ : state) benchmark::DoNotOptimize(planSegments(fusion, inputs).kernelCount());
}
BENCHMARK(BM_PlanSeedLayerNorm)->Unit(benchmark::kMicrosecond);

void BM_PlanLitGptRope(benchmark::State& state) {
  Fusion fusion;
  testing::defineLitGptQkvSplitRope(fusion, {.batch = 2, .seq = 64, .heads = 32, .groups = 8, .head = 128,
                                             .rope_n_elem = 128});
  const auto inputs = testing::randomInputs(fusion, 1);
  for (auto _ : state) benchmark::DoNotOptimize(planSegments(fusion, inputs).kernelCount());
}
BENCHMARK(BM_PlanLitGptRope)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace braze
