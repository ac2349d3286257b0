// The pipeline on a real GPU, mirroring run_plan.h's simulator path: each kernel's emitted CUDA is
// compiled with NVRTC for the device it runs on and launched through the driver; alias segments and
// segments no scheduler accepts run on the host exactly as runOnSimulator runs them. Host inputs in,
// host outputs out: this is the path that proves the emitter against the reference evaluator, not
// the fast one (device tensors, FusionCache and CUDA graphs come later).
//
// Without a driver or GPU every function here throws a Runtime error saying "no CUDA driver found;
// host inputs run on the CPU simulator" (or why the driver is unusable); check runtime::cudaAvailable().
#pragma once

#include "kernel/run_plan.h"
#include "runtime/device_buffer.h"
#include "runtime/device_tensor.h"

#include <vector>

namespace braze::kernel {

// One kernel on host tensors, as simulate() runs it on the CPU: tensors[i] is bound to
// kernel.tensors[i] at its data(). Every tensor is copied to the device with its layout, the kernel
// is launched and waited for, and the outputs are copied back into their host tensors.
void runKernelOnGpu(const Kernel& kernel, const std::vector<HostTensor*>& tensors);

// Runs a compiled plan on device 0: fusion inputs are uploaded when a kernel first reads them (their
// whole storage span, strides and offset kept), kernel outputs stay on the device until the host needs
// them (a segment without a kernel, or a fusion output). Each launch is waited for, so a fault names
// its kernel. Inputs must be those the plan was made for.
std::vector<HostValue> runOnGpu(const CompiledPlan& compiled, const std::vector<HostValue>& inputs);

// planAndCompile for device 0 as the driver describes it (options.device is replaced: the heuristics
// must target the GPU the kernels run on) + runOnGpu.
std::vector<HostValue> executeOnGpu(const Fusion& fusion, const std::vector<HostValue>& inputs,
                                    const ExecuteOptions& options = {}, CompiledPlan* compiled_out = nullptr);

// A host tensor copied to device memory with its layout and its first element's address modulo 256
// (what plans depend on), and back: for tests and tools that feed the FusionCache from host data.
struct UploadedTensor {
  runtime::DeviceBuffer buffer;
  runtime::DeviceTensor tensor;
};
UploadedTensor uploadToDevice(const HostTensor& t);
// Any device tensor (strided, a view) as a new row-major host tensor.
HostTensor downloadFromDevice(const runtime::DeviceTensor& t);

}  // namespace braze::kernel
