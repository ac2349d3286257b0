// The kernel IR as text: the parameters with their layouts, the scalar arguments, the launch shape, and
// the statements with their expressions written out. What BRAZE_DUMP=after:lower prints, and what the
// golden kernel tests (tests/cpp/kernel/golden/) compare, so that a change to lowering shows up as a
// readable diff rather than a changed CUDA source.
#pragma once

#include "kernel/kernel_ir.h"

#include <string>

namespace braze::kernel {

std::string printKernel(const Kernel& kernel);

}  // namespace braze::kernel
