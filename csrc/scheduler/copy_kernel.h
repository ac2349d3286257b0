// A kernel that copies a tensor from one strided layout into another: what carries out an in-place
// update on a device (a new value written into its input, or staged in a buffer first). It is the
// pointwise scheduler's kernel for one `set`, its store going through the destination's layout, so it
// vectorizes where both layouts allow and falls back to one element per lane where they do not.
#pragma once

#include "kernel/kernel_ir.h"
#include "scheduler/lowering_context.h"
#include "target/device_info.h"

#include <string>

namespace braze::scheduler {

// `from` and `to` have the same sizes; their layouts are in elements from the addresses the kernel's
// two tensor parameters (source, then destination) are bound to. The parameters name no Val.
Kernel lowerCopyKernel(const std::string& name, DataType dtype, const InputLayout& from, const InputLayout& to,
                       const DeviceInfo& device);

}  // namespace braze::scheduler
