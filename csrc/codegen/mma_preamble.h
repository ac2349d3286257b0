// The device functions a kernel's mma statements call (braze_mma_m16n8k16_bf16 ...): each packs its
// lane's fragment values into the registers PTX's mma.sync takes and issues it with inline PTX (the fp8
// forms compile for sm_89 on). CUDA only: HIP's matrix instructions (MFMA) have other shapes and layouts.
#pragma once

#include "codegen/source_preamble.h"
#include "kernel/kernel_ir.h"

#include <string>

namespace braze::codegen {

using kernel::Kernel;
using kernel::Stmt;

// The name of the function an mma statement calls: "braze_mma_m16n8k16_bf16".
std::string mmaFunctionName(const Kernel& kernel, const Stmt& mma);
// The name of the function a wgmma statement calls: "braze_wgmma_m64n256k16_bf16_km" (A k-major, B mn-major).
std::string wgmmaFunctionName(const Kernel& kernel, const Stmt& wgmma);
// The functions of every mma statement in `kernel` ("" when it has none). A Value error for HIP.
std::string mmaPreamble(const Kernel& kernel, SourceDialect dialect);

}  // namespace braze::codegen
