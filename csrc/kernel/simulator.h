// The CPU simulator: runs kernel IR on host tensors, block by block, the threads of a block in
// lockstep (each statement for every active thread before the next), so block reductions see every
// thread's value and barriers are checked: a barrier or block reduction reached by only part of a
// block is reported, as is any access outside a tensor, a misaligned vector access, or an index
// outside a local array, naming the kernel, the tensor, the offset, the block and the thread. cp.async
// copies land at the wait that covers them: shared memory read before then is reported. ldmatrix is
// executed per warp with the PTX layout, and its shared-memory bank conflicts are counted. wgmma runs
// per warpgroup, reading its operands where their descriptors point the hardware; what it reads and
// writes stays busy until the wait that covers it (simulator_matrix.cpp lists the mistakes reported).
// TMA loads land when a thread waits on the mbarrier phase they complete (simulator_tma.cpp), and a
// wait orders the waiter after what the phase's arriving threads did before arriving. The branches of an
// if whose branches run at once (a warp-specialized block's roles) run interleaved, handing over where
// one waits on a phase that has not completed (simulator_branches.cpp). The blocks of a cluster
// (Kernel::cluster) run together, in lockstep as one block of all their threads, each with shared memory
// of its own: a block may arrive on another's mbarriers and multicast TMA boxes into the others' shared
// memory, and an mbarrier used by another block before a cluster barrier, or a kernel that ends without
// one after such accesses, is reported.
// It uses the same index arithmetic, predicates and vector widths as the emitted CUDA, and the
// reference's element math (kernel/element_math.h).
#pragma once

#include "kernel/kernel_ir.h"
#include "ir/host_tensor.h"

#include <optional>
#include <vector>

namespace braze::kernel {

// One launch as a device receives it: the address each tensor parameter's offsets start from, the grid,
// and the scalar arguments' values (decodeArgumentWords). `extents`, when given, holds per tensor the
// element offsets [first, last] it may touch (the memory its pointer lies in), in place of the bounds
// its layout in the kernel IR implies: a kernel launched for another shape than it was lowered for is
// checked against the memory it was given.
// What a launch measured beyond its results.
struct SimStats {
  // Extra shared-memory wavefronts of ldmatrix: each 8-row phase whose 16-byte rows share banks takes
  // one more per row beyond the first on a bank group (0 for a conflict-free layout).
  int64_t ldmatrix_bank_conflicts = 0;
  int64_t ldmatrix_phases = 0;
};

struct SimLaunch {
  std::vector<uint8_t*> tensors;
  std::array<int64_t, 2> grid{1, 1};
  std::vector<ScalarValue> arguments;
  std::vector<std::pair<int64_t, int64_t>> extents;
  // Per tensor parameter read through TMA, the tensor map the launch passed, as a layout from the tensor's
  // pointer: what TMA loads read (as a GPU reads the map, not the kernel); none, the kernel IR's.
  std::vector<std::optional<StridedLayout>> tma_maps;
  SimStats* stats = nullptr;  // added to when given
};
void simulate(const Kernel& kernel, const SimLaunch& launch);

// The kernel as lowered: tensors[i] is bound to kernel.tensors[i] at its data(), with the kernel's own
// grid and argument values.
void simulate(const Kernel& kernel, std::vector<HostTensor*> tensors);

}  // namespace braze::kernel
