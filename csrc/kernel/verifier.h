// The kernel IR's invariants, checked after lowering (exec/pipeline.cpp) and when the simulated device
// loads a kernel (device/sim): every expression and statement refers to nodes that exist, scalars are defined before use
// in an enclosing scope and arrays declared before they are indexed, kernels write only their outputs
// and workspaces, vector accesses are at most 16 bytes and a power of two, shared arrays lie inside the
// block's shared memory, and the launch shape is one a GPU accepts. Internal errors name the kernel.
#pragma once

#include "kernel/kernel_ir.h"

namespace braze::kernel {

void verifyKernel(const Kernel& kernel);

}  // namespace braze::kernel
