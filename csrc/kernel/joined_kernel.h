// Kernels that share nothing but their inputs, run as one launch: each part takes its own range of a
// one-dimensional grid (part 0 the first blocks), and its code sees its own block index, as if it were
// launched alone: its blocks in x, then in y, one after the other. One launch instead of several, and
// the parts' blocks fill the GPU together (a linear's bias grad beside a GELU backward of another width:
// the bias grad alone is too small to fill it).
#pragma once

#include "kernel/kernel_ir.h"

#include <vector>

namespace braze::kernel {

// Joins `parts` into `into`, whose tensor parameters (each a Val's, with none of its code) the parts'
// parameters of the same Val and direction bind to; the parts' own scratch (workspaces, the index-error
// record) is added, renamed where two parts name theirs alike. Every part has the block shape of the
// first, or a one-dimensional block of as many threads (a part that then reduces across threads nowhere),
// whose thread index is the thread's place in the block (y * x threads + x); one warp size and index
// checking. Their shared memory overlaps (a block runs one part), their index arithmetic is 64-bit if any
// part's is, and they share the arguments that carry one scalar input of the fusion (each part keeps its
// own extents, named apart).
void joinKernels(Kernel& into, const std::vector<Kernel>& parts);

}  // namespace braze::kernel
