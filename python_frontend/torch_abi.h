// torch's stable C ABI (torch/csrc/stable/c/shim.h and the AOTInductor shim it builds on), found in
// the libtorch that the imported torch module has loaded. Reading a tensor's address, dtype, device,
// sizes and strides through it is a handful of C calls, where the Python attributes cost a method call
// each (100-200 ns apiece, for six of them per input of every cached execute), and an output is made by
// at::empty_strided (torch's caching allocator on a GPU) without a Python call.
// The Python interop it needs (torch_tensor_from_pyobject, torch_tensor_to_pyobject) arrived in torch
// 2.14; with an older torch there is none and the callers read the attributes. Nothing of torch is
// linked: torch's extension module (torch._C) is opened with RTLD_NOLOAD and the functions looked up by
// name through it.
#pragma once

#include "ir/data_type.h"

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace braze::python {

class TorchAbi;

// What braze reads of a tensor. `on_cuda`: on a CUDA (or ROCm, which torch calls CUDA) device;
// `on_cpu`: in host memory; neither for every other device (meta, XPU, ...).
struct TorchTensorFields {
  uintptr_t data = 0;                // data_ptr(): the address of element [0, ..., 0]
  std::optional<DataType> dtype;     // none: a dtype braze lacks (complex, quantized, ...)
  bool on_cuda = false;
  bool on_cpu = false;
  int device_index = -1;
};

// The stable ABI of the torch module `torch` (found through torch._C), or null where this torch lacks it.
// Looked up once per process; never freed (the library stays loaded).
const TorchAbi* loadTorchAbi(nanobind::handle torch);

// `tensor`'s fields through the C ABI, its sizes and strides written over `sizes` and `strides` (whose
// capacity a caller reading again and again reuses); false where torch reports an error for it (a tensor
// without storage, say), which the attribute path then reports in Python's terms. `tensor` must be a
// torch.Tensor (or subclass) object; the GIL must be held.
bool readTorchTensor(const TorchAbi& abi, PyObject* tensor, TorchTensorFields& fields, std::vector<int64_t>& sizes,
                     std::vector<int64_t>& strides);

// Whether torch's ABI names a dtype code for `dtype` (else emptyStridedThroughAbi cannot make it).
bool torchAbiHasDtype(const TorchAbi& abi, DataType dtype);

// at::empty_strided(sizes, strides, dtype) on CUDA device `device_index` (on the CPU where `on_cpu`) as
// a new torch.Tensor, and its address; nullopt where torch has no such dtype or reports an error
// (out of memory: the caller's torch.empty_strided then raises torch's own error).
struct TorchAbiOutput {
  nanobind::object tensor;
  uintptr_t address = 0;
};
std::optional<TorchAbiOutput> emptyStridedThroughAbi(const TorchAbi& abi, const std::vector<int64_t>& sizes,
                                                     const std::vector<int64_t>& strides, DataType dtype,
                                                     int device_index, bool on_cpu);

// torch's current CUDA stream on a device through the AOTInductor shim (aoti_torch_get_current_cuda_stream,
// which a CUDA build of torch has had since long before the tensor ABI above; found through torch._C the
// same way), instead of the Python call torch._C._cuda_getCurrentRawStream, which parses its argument and
// builds an int on every execute.
using CurrentCudaStreamFunction = int32_t (*)(int32_t device_index, void** stream);
// Looked up once per process; null where torch has none (a CPU-only build, a stand-in module).
CurrentCudaStreamFunction loadCurrentCudaStream(nanobind::handle torch);
// The raw stream handle, or nullopt where torch reports an error (no driver, a device out of range): the
// caller then asks torch in Python, which raises torch's own error.
std::optional<uintptr_t> currentCudaStreamThroughAbi(CurrentCudaStreamFunction function, int device);

// Whether the readers above are used (default: yes, where torch has the ABI). Switched off by
// BRAZE_TORCH_C_ABI=0, and by tests and benchmarks that compare the two ways of reading.
bool torchAbiEnabled();
void setTorchAbiEnabled(bool enabled);

}  // namespace braze::python
