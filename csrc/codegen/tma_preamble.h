// The device functions a kernel's mbarrier and TMA statements call: mbarrier init (with the fence that
// makes it visible to the copy engine), arrive with expected transaction bytes, a try_wait loop on a
// phase parity, and the 2D tensor-map load that completes on an mbarrier (cp.async.bulk.tensor, sm_90),
// with the 128-byte tensor-map type kernels take as __grid_constant__ parameters; in a kernel with clusters,
// the cluster's rank and barrier, remote arrivals and multicast loads. CUDA only.
#pragma once

#include "codegen/source_preamble.h"
#include "kernel/kernel_ir.h"

#include <string>

namespace braze::codegen {

// Whether `kernel` has mbarriers or TMA loads.
bool usesTma(const kernel::Kernel& kernel);
// Their functions ("" when it has none). A Value error for HIP.
std::string tmaPreamble(const kernel::Kernel& kernel, SourceDialect dialect);
// The name of tensor parameter `tensor`'s tensor map ("T0_map").
std::string tensorMapName(const kernel::TensorParam& tensor);

}  // namespace braze::codegen
