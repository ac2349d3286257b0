// The CPU simulator: runs kernel IR on host tensors, block by block, the threads of a block in
// lockstep (each statement for every active thread before the next), so block reductions see every
// thread's value and barriers are checked: a barrier or block reduction reached by only part of a
// block is reported, as is any access outside a tensor, a misaligned vector access, or an index
// outside a local array, naming the kernel, the tensor, the offset, the block and the thread.
// It uses the same index arithmetic, predicates and vector widths as the emitted CUDA, and the
// reference's element math (kernel/element_math.h).
#pragma once

#include "kernel/kernel_ir.h"
#include "reference/host_tensor.h"

#include <vector>

namespace braze::kernel {

// tensors[i] is bound to kernel.tensors[i]: its data() is the pointer the kernel's offsets start from.
void simulate(const Kernel& kernel, std::vector<HostTensor*> tensors);

}  // namespace braze::kernel
