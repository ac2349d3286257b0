// torch.Tensor inputs read through their own attributes (data_ptr, shape, stride, dtype, device)
// instead of __dlpack__, which is Python code building a capsule on every call: this is the cached
// execute's hot path. Nothing of torch is linked or imported: the module is looked up in sys.modules,
// where the caller's code has put it.
#pragma once

#include "runtime/device_tensor.h"

#include <nanobind/nanobind.h>

#include <optional>

namespace braze::python {

// Input `input` as a device tensor when it is a torch.Tensor on a CUDA device of a dtype braze has;
// nullopt otherwise (other objects, CPU tensors, complex dtypes: the DLPack path takes them and
// reports what it cannot run). A view with torch's negative bit set is refused, naming the input.
std::optional<runtime::DeviceTensor> torchCudaTensorOf(nanobind::handle object, size_t input);

}  // namespace braze::python
