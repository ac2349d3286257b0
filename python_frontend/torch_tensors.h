// torch.Tensor inputs read through their own attributes (data_ptr, shape, stride, dtype, device)
// instead of __dlpack__, which is Python code building a capsule on every call: this is the cached
// execute's hot path. Nothing of torch is linked or imported: the module is looked up in sys.modules,
// where the caller's code has put it.
#pragma once

#include "device/device_tensor.h"

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace braze::python {

// What braze keeps of the torch module in sys.modules (its Tensor type, dtypes, allocation and stream
// calls, its C ABI), looked up again whenever that is another module object. The functions below look it
// up themselves, or take it from the caller, which looks it up once for all the inputs and outputs of a run.
struct TorchTypes;
// The torch module's, or null where torch is not imported (or only half).
const TorchTypes* importedTorch();

// How torchTensorOf read a tensor: whether a host tensor stood in for a device one, and whether torch's
// C ABI read it (else its Python attributes).
struct TorchRead {
  bool stood_in = false;
  bool through_abi = false;
};

// Input `input` as a device tensor when it is a torch.Tensor on a CUDA device of a dtype braze has, or,
// where `cpu_scalar` (the fusion's input is a 0-d is_cpu tensor), a 0-d CPU tensor (device -1); nullopt
// otherwise (other objects, other CPU tensors, other devices, complex dtypes: the DLPack path takes them
// and reports what it cannot run). A view with torch's negative bit set is refused, naming the input.
// `host_stand_in` (a cache that launches nothing, for tests and host benchmarks): a CPU tensor stands
// for a tensor on device 0. A torch.Tensor itself is read through torch's stable C ABI where torch has it
// (torch_abi.h), anything else through its Python attributes; `note` says which.
std::optional<device::DeviceTensor> torchTensorOf(nanobind::handle object, size_t input, bool cpu_scalar,
                                                  bool host_stand_in = false, TorchRead* note = nullptr);
// The same, read into `t` (its vectors' capacity reused by a caller reading again and again); false
// where torchTensorOf gives nullopt (`t` then holds whatever was read).
bool torchTensorInto(const TorchTypes& torch, nanobind::handle object, size_t input, bool cpu_scalar,
                     bool host_stand_in, TorchRead* note, device::DeviceTensor& t);

// Whether the torch module in sys.modules has torch's stable C ABI for Python tensors (torch_abi.h).
bool torchHasCAbi();

// Drops the references to the torch module and its objects kept for torchTensorOf: at interpreter
// exit (atexit), so that nothing they reach outlives the module's leak check.
void releaseTorchTypes();

// Whether `object`'s type is torch.Tensor itself (not a subclass, which may change what it reports).
bool isPlainTorchTensor(nanobind::handle object);
bool isPlainTorchTensor(const TorchTypes& torch, nanobind::handle object);

// An output from torch's caching allocator: at::empty_strided through torch's C ABI, else
// torch.empty_strided(sizes, strides, dtype=, device=ordinal) called from here (no Python function in
// between), and its address; nullopt where this torch has no dtype for it or it has no elements
// (braze's pool gives those). `on_cpu`: in host memory instead (the outputs of host stand-ins).
struct TorchOutput {
  nanobind::object tensor;
  uintptr_t address = 0;
};
std::optional<TorchOutput> torchEmptyStrided(const device::DeviceTensor& spec, bool on_cpu = false);
std::optional<TorchOutput> torchEmptyStrided(const TorchTypes& torch, const device::DeviceTensor& spec, bool on_cpu);

// A torch tensor made from a DLPack capsule by torch._C._from_dlpack, the C++ import that
// torch.utils.dlpack.from_dlpack ends in, where this torch has it (torchImportsCapsules). The Python
// function first asks torch for the current stream as a Stream object (to pass to __dlpack__, which
// braze's export ignores: its outputs are written on the stream the caller asked for).
bool torchImportsCapsules();
nanobind::object torchFromCapsule(nanobind::handle capsule);

// torch's rule for updating tensors in place, for a fusion that updates inputs (add_output(alias_input=))
// run from C: whether `inputs`, a flat list or tuple (a tuple the caller holds: its items are read while
// Python code runs), may be updated at `positions`. False where the Python path decides instead: grad
// enabled and one of them a leaf tensor that requires grad (the Python path raises the error), nested
// inputs (positions count flattened ones), or a torch without is_grad_enabled or increment_version.
bool torchAllowsUpdates(nanobind::handle inputs, const std::vector<size_t>& positions);
// After such a run: each updated torch tensor's autograd version bumped, as torch's in-place ops bump it
// (torch.autograd.graph.increment_version), inference tensors aside.
void bumpTorchVersions(nanobind::handle inputs, const std::vector<size_t>& positions);

// torch's current stream on CUDA device `device` as a raw handle: through the C ABI where torch has it
// (and it is enabled), else torch._C._cuda_getCurrentRawStream (what Triton's launcher reads), which also
// raises torch's error where the ABI reports one; looked up once per torch module. nullopt where this
// torch lacks the Python call.
std::optional<uintptr_t> torchCurrentStream(int device);
std::optional<uintptr_t> torchCurrentStream(const TorchTypes& torch, int device);
// Whether the imported torch module gives its current stream through the C ABI (a CUDA build of torch).
bool torchHasCurrentStreamAbi();

}  // namespace braze::python
