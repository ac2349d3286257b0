#include "codegen/tma_preamble.h"

#include "support/error.h"

#include <algorithm>
#include <functional>
#include <string_view>

namespace braze::codegen {
namespace {

using kernel::SKind;
using kernel::Stmt;

bool anyStmt(const std::vector<Stmt>& stmts, const std::function<bool(const Stmt&)>& pred) {
  return std::any_of(stmts.begin(), stmts.end(),
                     [&](const Stmt& s) { return pred(s) || anyStmt(s.body, pred) || anyStmt(s.orelse, pred); });
}

// Each clobbers "memory": the compiler may not move the kernel's shared-memory accesses across them. The
// wait spins on try_wait (which itself suspends the thread for a while) until the phase has completed; a
// wait still spinning after 2^24 tries (each suspends the thread up to a time the hardware chooses: far
// longer than the microseconds a TMA box takes to land or a stage to be released) waits for a phase that
// never completes, and traps, so that the launch fails with an error instead of hanging the GPU.
constexpr std::string_view kTmaFunctions = R"(
struct __align__(64) BrazeTensorMap { unsigned long long opaque[16]; };
__device__ __forceinline__ void braze_mbarrier_init(unsigned long long* bar, int arrivals) {
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(b), "r"(arrivals) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void braze_mbarrier_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes) : "memory");
}
__device__ __forceinline__ void braze_mbarrier_wait(unsigned long long* bar, unsigned parity) {
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile(
      "{\n.reg .pred done;\n.reg .u32 tries;\nmov.u32 tries, 0;\nbraze_wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@done bra braze_waited;\n"
      "add.u32 tries, tries, 1;\n"
      "setp.lt.u32 done, tries, 16777216;\n"
      "@done bra braze_wait;\n"
      "trap;\n"
      "braze_waited:\n}\n" ::"r"(b), "r"(parity) : "memory");
}
__device__ __forceinline__ void braze_tma_load_2d(void* smem, const BrazeTensorMap* map, int column, int row,
                                                  unsigned long long* bar) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(s), "l"(map), "r"(column), "r"(row), "r"(b) : "memory");
}
__device__ __forceinline__ void braze_tma_load_3d(void* smem, const BrazeTensorMap* map, int column, int row,
                                                  int batch, unsigned long long* bar) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
      ::"r"(s), "l"(map), "r"(column), "r"(row), "r"(batch), "r"(b) : "memory");
}
)";

// A kernel with clusters: its rank, the cluster-wide barrier, an arrival on another block's mbarrier (its
// address in that block's shared memory by mapa), and TMA loads multicast to the blocks a 16-bit mask
// names. Its waits acquire at cluster scope: a phase may complete by other blocks' arrivals.
constexpr std::string_view kClusterFunctions = R"(
__device__ __forceinline__ unsigned braze_cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ void braze_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void braze_mbarrier_arrive_remote(unsigned long long* bar, unsigned rank) {
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n" ::"r"(b), "r"(rank) : "memory");
}
__device__ __forceinline__ void braze_tma_load_2d_multicast(void* smem, const BrazeTensorMap* map, int column, int row,
                                                            unsigned long long* bar, unsigned short ranks) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(s), "l"(map), "r"(column), "r"(row), "r"(b), "h"(ranks) : "memory");
}
__device__ __forceinline__ void braze_tma_load_3d_multicast(void* smem, const BrazeTensorMap* map, int column, int row,
                                                            int batch, unsigned long long* bar, unsigned short ranks) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
      ::"r"(s), "l"(map), "r"(column), "r"(row), "r"(batch), "r"(b), "h"(ranks) : "memory");
}
)";

}  // namespace

bool usesTma(const kernel::Kernel& kernel) {
  return anyStmt(kernel.body, [](const Stmt& s) {
    return s.kind == SKind::MbarrierInit || s.kind == SKind::MbarrierArriveExpectTx || s.kind == SKind::MbarrierWait ||
           s.kind == SKind::TmaLoad;
  });
}

std::string tmaPreamble(const kernel::Kernel& kernel, SourceDialect dialect) {
  if (!usesTma(kernel) && kernel.cluster == 1) return "";
  BRAZE_CHECK(dialect == SourceDialect::Cuda,
              "kernel {} uses mbarriers, TMA loads or clusters, which have no HIP spelling (sm_90's)",
              kernel.name);
  if (kernel.cluster == 1) return std::string(kTmaFunctions);
  std::string functions(kTmaFunctions);
  const std::string_view wait = "mbarrier.try_wait.parity.shared::cta.b64";
  functions.replace(functions.find(wait), wait.size(), "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64");
  return functions + std::string(kClusterFunctions);
}

std::string tensorMapName(const kernel::TensorParam& tensor) { return tensor.name + "_map"; }

}  // namespace braze::codegen
