#include "torch_abi.h"

#include "support/dynamic_library.h"

#include <Python.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

namespace braze::python {

namespace nb = nanobind;

namespace {

// The shim's types: a tensor handle is an opaque pointer, every call returns 0 on success.
using Handle = void*;
using Status = int32_t;

std::atomic<bool>& enabledFlag() {
  static std::atomic<bool> enabled{[] {
    const char* value = std::getenv("BRAZE_TORCH_C_ABI");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }()};
  return enabled;
}

}  // namespace

class TorchAbi {
 public:
  explicit TorchAbi(DynamicLibrary library) : library(std::move(library)) {}
  DynamicLibrary library;  // torch._C, held open while the functions below point into it
  Status (*from_pyobject)(void*, Handle*) = nullptr;
  Status (*to_pyobject)(Handle, void*, void**) = nullptr;
  Status (*delete_tensor)(Handle) = nullptr;
  Status (*has_storage)(Handle, bool*) = nullptr;
  Status (*data_ptr)(Handle, void**) = nullptr;
  Status (*dim)(Handle, int64_t*) = nullptr;
  Status (*sizes)(Handle, int64_t**) = nullptr;
  Status (*strides)(Handle, int64_t**) = nullptr;
  Status (*dtype)(Handle, int32_t*) = nullptr;
  Status (*device_type)(Handle, int32_t*) = nullptr;
  Status (*device_index)(Handle, int32_t*) = nullptr;
  Status (*empty_strided)(int64_t, const int64_t*, const int64_t*, int32_t, int32_t, int32_t, Handle*) = nullptr;
  int32_t cuda = -1;  // device type codes
  int32_t cpu = -1;
  std::vector<std::pair<int32_t, DataType>> dtypes;  // torch's dtype code of each braze dtype it has

  std::optional<DataType> dataTypeOf(int32_t code) const {
    for (const auto& [known, dtype] : dtypes) {
      if (known == code) return dtype;
    }
    return std::nullopt;
  }

  std::optional<int32_t> codeOf(DataType dtype) const {
    for (const auto& [code, known] : dtypes) {
      if (known == dtype) return code;
    }
    return std::nullopt;
  }
};

namespace {

// The tensor handle that torch_tensor_from_pyobject makes (a new reference), released on every return.
class OwnedHandle {
 public:
  OwnedHandle(const TorchAbi& abi, Handle handle) : abi_(abi), handle_(handle) {}
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;
  ~OwnedHandle() {
    if (handle_ != nullptr) abi_.delete_tensor(handle_);
  }
  Handle get() const { return handle_; }

 private:
  const TorchAbi& abi_;
  Handle handle_;
};

// torch._C, the extension module torch has loaded, or none: also for a module without one (a test's
// stand-in), whose tensors are no torch's. Symbols looked up through it are searched in the libraries it
// depends on too (libtorch_python, libtorch_cpu), wherever the installation keeps them.
std::optional<std::string> torchExtensionPath(nb::handle torch) {
  if (!nb::hasattr(torch, "_C")) return std::nullopt;
  nb::object extension = torch.attr("_C");
  if (!nb::hasattr(extension, "__file__")) return std::nullopt;
  nb::object file = extension.attr("__file__");
  if (!nb::isinstance<nb::str>(file)) return std::nullopt;
  return nb::cast<std::string>(file);
}

// Whether a call into the ABI failed. torch reports its own errors by status, and may leave a Python
// error set where one arose in Python's C API (a tensor object that could not be made): cleared, as the
// caller goes on another way, except an interrupt, which is raised.
bool failed(Status status) {
  if (status == 0) return false;
  if (PyErr_Occurred() != nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) throw nb::python_error();
    PyErr_Clear();
  }
  return true;
}

std::unique_ptr<TorchAbi> lookUpAbi(DynamicLibrary library) {
  auto abi = std::make_unique<TorchAbi>(std::move(library));
  const DynamicLibrary& lib = abi->library;
  const bool complete =
      lib.resolve("torch_tensor_from_pyobject", abi->from_pyobject) &&
      lib.resolve("torch_tensor_to_pyobject", abi->to_pyobject) &&
      lib.resolve("aoti_torch_delete_tensor_object", abi->delete_tensor) &&
      lib.resolve("torch_has_storage", abi->has_storage) && lib.resolve("aoti_torch_get_data_ptr", abi->data_ptr) &&
      lib.resolve("aoti_torch_get_dim", abi->dim) && lib.resolve("aoti_torch_get_sizes", abi->sizes) &&
      lib.resolve("aoti_torch_get_strides", abi->strides) && lib.resolve("aoti_torch_get_dtype", abi->dtype) &&
      lib.resolve("aoti_torch_get_device_type", abi->device_type) &&
      lib.resolve("aoti_torch_get_device_index", abi->device_index) &&
      lib.resolve("aoti_torch_empty_strided", abi->empty_strided);
  int32_t (*cuda)() = nullptr;
  int32_t (*cpu)() = nullptr;
  if (!complete || !lib.resolve("aoti_torch_device_type_cuda", cuda) || !lib.resolve("aoti_torch_device_type_cpu", cpu)) {
    return nullptr;
  }
  abi->cuda = cuda();
  abi->cpu = cpu();
  for (DataType dtype : kAllDataTypes) {
    // aoti_torch_dtype_bfloat16, aoti_torch_dtype_float8_e4m3fn, ...: torch's names, as arrayTypeName gives.
    const std::string name = "aoti_torch_dtype_" + std::string(arrayTypeName(dtype));
    int32_t (*code)() = nullptr;
    if (lib.resolve(name.c_str(), code)) abi->dtypes.emplace_back(code(), dtype);
  }
  return abi;
}

}  // namespace

CurrentCudaStreamFunction loadCurrentCudaStream(nb::handle torch) {
  const std::optional<std::string> path = torchExtensionPath(torch);
  if (!path) return nullptr;
  // As loadTorchAbi: once per torch, the library held open for the process (never closed: the function
  // pointer stays valid through static destruction).
  static std::string looked_up;
  static CurrentCudaStreamFunction function = nullptr;
  if (*path != looked_up) {
    std::optional<DynamicLibrary> library = DynamicLibrary::alreadyLoaded(*path);
    function = nullptr;
    if (library && library->resolve("aoti_torch_get_current_cuda_stream", function)) {
      new DynamicLibrary(std::move(*library));  // kept open on purpose
    }
    looked_up = *path;
  }
  return function;
}

std::optional<uintptr_t> currentCudaStreamThroughAbi(CurrentCudaStreamFunction function, int device) {
  void* stream = nullptr;
  if (failed(function(static_cast<int32_t>(device), &stream))) return std::nullopt;
  return reinterpret_cast<uintptr_t>(stream);
}

const TorchAbi* loadTorchAbi(nb::handle torch) {
  const std::optional<std::string> path = torchExtensionPath(torch);
  if (!path) return nullptr;
  // One torch per process: looked up once and kept for the process, with the library held open (the
  // torch module object may be looked up again, a test's stand-in having replaced it for a while).
  static std::string looked_up;
  static const TorchAbi* abi = nullptr;
  if (*path != looked_up) {
    std::optional<DynamicLibrary> library = DynamicLibrary::alreadyLoaded(*path);
    abi = library ? lookUpAbi(std::move(*library)).release() : nullptr;
    looked_up = *path;
  }
  return abi;
}

bool readTorchTensor(const TorchAbi& abi, PyObject* tensor, TorchTensorFields& fields, std::vector<int64_t>& sizes_out,
                     std::vector<int64_t>& strides_out) {
  Handle raw = nullptr;
  if (failed(abi.from_pyobject(tensor, &raw))) return false;
  const OwnedHandle handle(abi, raw);
  bool has_storage = false;
  if (failed(abi.has_storage(handle.get(), &has_storage)) || !has_storage) return false;
  void* data = nullptr;
  int64_t rank = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  int32_t dtype = 0;
  int32_t device_type = 0;
  int32_t device_index = 0;
  if (failed(abi.data_ptr(handle.get(), &data)) || failed(abi.dim(handle.get(), &rank)) ||
      failed(abi.sizes(handle.get(), &sizes)) || failed(abi.strides(handle.get(), &strides)) ||
      failed(abi.dtype(handle.get(), &dtype)) || failed(abi.device_type(handle.get(), &device_type)) ||
      failed(abi.device_index(handle.get(), &device_index))) {
    return false;
  }
  fields.data = reinterpret_cast<uintptr_t>(data);
  fields.dtype = abi.dataTypeOf(dtype);
  fields.on_cuda = device_type == abi.cuda;
  fields.on_cpu = device_type == abi.cpu;
  fields.device_index = device_index;
  sizes_out.assign(sizes, sizes + rank);
  strides_out.assign(strides, strides + rank);
  return true;
}

bool torchAbiHasDtype(const TorchAbi& abi, DataType dtype) { return abi.codeOf(dtype).has_value(); }

std::optional<TorchAbiOutput> emptyStridedThroughAbi(const TorchAbi& abi, const std::vector<int64_t>& sizes,
                                                     const std::vector<int64_t>& strides, DataType dtype,
                                                     int device_index, bool on_cpu) {
  const std::optional<int32_t> code = abi.codeOf(dtype);
  if (!code) return std::nullopt;
  Handle raw = nullptr;
  if (failed(abi.empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(), *code,
                               on_cpu ? abi.cpu : abi.cuda, on_cpu ? -1 : device_index, &raw))) {
    return std::nullopt;
  }
  const OwnedHandle handle(abi, raw);
  void* data = nullptr;
  void* object = nullptr;
  if (failed(abi.data_ptr(handle.get(), &data)) || failed(abi.to_pyobject(handle.get(), nullptr, &object))) {
    return std::nullopt;
  }
  return TorchAbiOutput{nb::steal(static_cast<PyObject*>(object)), reinterpret_cast<uintptr_t>(data)};
}

bool torchAbiEnabled() { return enabledFlag().load(std::memory_order_relaxed); }

void setTorchAbiEnabled(bool enabled) { enabledFlag().store(enabled, std::memory_order_relaxed); }

}  // namespace braze::python
