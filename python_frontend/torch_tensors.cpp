#include "torch_tensors.h"

#include "torch_abi.h"

#include "support/error.h"

#include <Python.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <utility>
#include <vector>

namespace braze::python {
namespace {

namespace nb = nanobind;

nb::object intern(const char* name) { return nb::steal(PyUnicode_InternFromString(name)); }

// object.name(), without making a bound method object first (what attr(name)() does).
nb::object callMethod(nb::handle object, const nb::object& name) {
  PyObject* args[] = {object.ptr()};
  PyObject* result = PyObject_VectorcallMethod(name.ptr(), args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  if (result == nullptr) throw nb::python_error();
  return nb::steal(result);
}

}  // namespace

// What braze needs of the torch module, looked up again whenever sys.modules["torch"] is another
// object (a test's stand-in, say). Every access holds the GIL, which serializes them.
struct TorchTypes {
  nb::object module;  // held, so that another module object can never take its address
  nb::object tensor_type;
  bool has_is_neg = false;  // torch.Tensor.is_neg (torch 1.10 on)
  nb::object current_raw_stream;  // torch._C._cuda_getCurrentRawStream, or None
  CurrentCudaStreamFunction current_cuda_stream = nullptr;  // the same through the C ABI, where torch has it
  nb::object empty_strided;       // torch.empty_strided, or None
  // torch._C._dynamo.guards._empty_strided_cuda(sizes, strides, dtype), or None: what torch.compile's code
  // allocates with, about a microsecond cheaper than torch.empty_strided; on torch's current device.
  nb::object empty_strided_cuda;
  nb::object empty_strided_cpu;  // its host twin, for host stand-ins' outputs, or None
  nb::object current_device;  // torch._C._cuda_getDevice, or None (then the call above is not used)
  nb::object out_of_memory;   // torch.OutOfMemoryError (torch.cuda.OutOfMemoryError before 2.5), or None
  nb::object from_capsule;   // torch._C._from_dlpack, or None
  nb::object is_grad_enabled;    // torch.is_grad_enabled, or None
  nb::object increment_version;  // torch.autograd.graph.increment_version, or None
  std::vector<std::pair<nb::object, DataType>> dtypes;  // torch.dtype objects are singletons
  const TorchAbi* abi = nullptr;  // torch's stable C ABI, where this torch has it
};

namespace {

// The attribute names braze reads, as interned Python strings made once: a lookup by C string makes a
// new str object on every call, and this runs for every input of every cached execute.
struct Names {
  nb::object is_cuda, is_cpu, is_neg, dtype, data_ptr, shape, stride, get_device;
};

const Names& names() {
  static const Names& n = *new Names{intern("is_cuda"), intern("is_cpu"), intern("is_neg"), intern("dtype"),
                                     intern("data_ptr"), intern("shape"), intern("stride"), intern("get_device")};
  return n;
}

// object.a.b.c for the path {a, b, c}, or None where an attribute on the way is missing.
nb::object attributeOrNone(nb::handle object, std::initializer_list<const char*> path) {
  nb::object at = nb::borrow(object);
  for (const char* name : path) {
    if (!nb::hasattr(at, name)) return nb::none();
    at = at.attr(name);
  }
  return at;
}

TorchTypes& torchTypeCache() {
  // Never destroyed: its references must not be dropped after the interpreter has finalized
  // (releaseTorchTypes drops them before, at exit).
  static TorchTypes& types = *new TorchTypes;
  return types;
}

const TorchTypes* torchTypes() {
  TorchTypes& types = torchTypeCache();
  // sys.modules["torch"], with an interned key: this runs for every input of every cached execute.
  static PyObject* const key = PyUnicode_InternFromString("torch");
  PyObject* module = PyDict_GetItemWithError(PyImport_GetModuleDict(), key);  // borrowed, or null
  if (module == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  if (module == types.module.ptr()) return types.tensor_type.is_valid() ? &types : nullptr;
  types = TorchTypes{};
  nb::handle torch(module);
  if (!nb::hasattr(torch, "Tensor")) return nullptr;  // torch half imported: looked at again next time
  types.module = nb::borrow(torch);
  types.tensor_type = torch.attr("Tensor");
  types.has_is_neg = nb::hasattr(types.tensor_type, "is_neg");
  types.current_raw_stream = nb::none();
  if (nb::hasattr(torch, "_C") && nb::hasattr(torch.attr("_C"), "_cuda_getCurrentRawStream")) {
    types.current_raw_stream = torch.attr("_C").attr("_cuda_getCurrentRawStream");
  }
  types.empty_strided = nb::hasattr(torch, "empty_strided") ? torch.attr("empty_strided") : nb::none();
  types.empty_strided_cuda = attributeOrNone(torch, {"_C", "_dynamo", "guards", "_empty_strided_cuda"});
  types.empty_strided_cpu = attributeOrNone(torch, {"_C", "_dynamo", "guards", "_empty_strided_cpu"});
  types.current_device = attributeOrNone(torch, {"_C", "_cuda_getDevice"});
  types.out_of_memory = attributeOrNone(torch, {"OutOfMemoryError"});
  if (types.out_of_memory.is_none()) types.out_of_memory = attributeOrNone(torch, {"cuda", "OutOfMemoryError"});
  types.from_capsule = attributeOrNone(torch, {"_C", "_from_dlpack"});
  types.is_grad_enabled = attributeOrNone(torch, {"is_grad_enabled"});
  types.increment_version = attributeOrNone(torch, {"autograd", "graph", "increment_version"});
  for (DataType dtype : kAllDataTypes) {
    const std::string name(arrayTypeName(dtype));  // torch.bfloat16, torch.float8_e4m3fn, ...
    if (nb::hasattr(torch, name.c_str())) types.dtypes.emplace_back(torch.attr(name.c_str()), dtype);
  }
  types.abi = loadTorchAbi(torch);
  types.current_cuda_stream = loadCurrentCudaStream(torch);
  return &types;
}

// `values` as a Python tuple of ints (what torch.empty_strided takes for sizes and strides).
nb::object tupleOf(const std::vector<int64_t>& values) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(values.size()));
  if (tuple == nullptr) throw nb::python_error();
  nb::object owned = nb::steal(tuple);
  for (size_t i = 0; i < values.size(); ++i) {
    PyObject* item = PyLong_FromLongLong(values[i]);
    if (item == nullptr) throw nb::python_error();
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), item);
  }
  return owned;
}

// A tuple of ints (torch's shape and stride() are tuples, torch.Size one too) read without an iterator;
// any other sequence item by item. Written over `values`, whose capacity a caller reading again reuses.
void int64s(nb::handle sequence, std::vector<int64_t>& values) {
  values.clear();
  if (PyTuple_Check(sequence.ptr())) {
    const Py_ssize_t n = PyTuple_GET_SIZE(sequence.ptr());
    values.reserve(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) values.push_back(nb::cast<int64_t>(nb::handle(PyTuple_GET_ITEM(sequence.ptr(), i))));
    return;
  }
  for (nb::handle item : sequence) values.push_back(nb::cast<int64_t>(item));
}

// torch.compile's allocation call (`call`: _empty_strided_cuda or _empty_strided_cpu) where this torch has
// it; none (the caller then calls torch.empty_strided) otherwise. A call this torch does not take in that
// form turns the fast call off for the module (`call` becomes None); running out of memory does not
// (torch.empty_strided then raises it), and an interrupt is raised as it is.
std::optional<TorchOutput> torchCompilesEmptyStrided(const TorchTypes& torch, nb::object& call, const nb::object& sizes,
                                                     const nb::object& strides, const nb::object& dtype) {
  if (call.is_none()) return std::nullopt;
  PyObject* args[] = {nullptr, sizes.ptr(), strides.ptr(), dtype.ptr()};
  PyObject* tensor = PyObject_Vectorcall(call.ptr(), args + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  if (tensor == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) throw nb::python_error();  // KeyboardInterrupt, SystemExit
    const bool out_of_memory = !torch.out_of_memory.is_none() && PyErr_ExceptionMatches(torch.out_of_memory.ptr());
    PyErr_Clear();
    if (!out_of_memory) call = nb::none();
    return std::nullopt;
  }
  TorchOutput out{nb::steal(tensor), 0};
  out.address = static_cast<uintptr_t>(nb::cast<uint64_t>(callMethod(out.tensor, names().data_ptr)));
  return out;
}

// The CUDA one allocates on torch's current device: asked first, so that no other device is touched.
std::optional<TorchOutput> torchEmptyStridedOnCurrentDevice(const TorchTypes& torch, const nb::object& sizes,
                                                            const nb::object& strides, const nb::object& dtype,
                                                            int device) {
  if (torch.empty_strided_cuda.is_none() || torch.current_device.is_none()) return std::nullopt;
  if (nb::cast<int>(torch.current_device()) != device) return std::nullopt;
  return torchCompilesEmptyStrided(torch, torchTypeCache().empty_strided_cuda, sizes, strides, dtype);
}

}  // namespace

bool torchHasCAbi() {
  const TorchTypes* torch = torchTypes();
  return torch != nullptr && torch->abi != nullptr;
}

void releaseTorchTypes() { torchTypeCache() = TorchTypes{}; }

namespace {

// Item `position` of a flat list or tuple (checked by the caller).
nb::handle itemAt(nb::handle sequence, size_t position) {
  const auto i = static_cast<Py_ssize_t>(position);
  return PyList_Check(sequence.ptr()) ? PyList_GET_ITEM(sequence.ptr(), i) : PyTuple_GET_ITEM(sequence.ptr(), i);
}

bool truthy(nb::handle object, const char* attribute) {
  const int value = PyObject_IsTrue(object.attr(attribute).ptr());
  if (value < 0) throw nb::python_error();
  return value != 0;
}

}  // namespace

bool torchAllowsUpdates(nb::handle inputs, const std::vector<size_t>& positions) {
  if (!PyList_Check(inputs.ptr()) && !PyTuple_Check(inputs.ptr())) return false;
  const auto n = static_cast<size_t>(PySequence_Fast_GET_SIZE(inputs.ptr()));
  for (size_t i = 0; i < n; ++i) {
    const nb::handle item = itemAt(inputs, i);
    if (PyList_Check(item.ptr()) || PyTuple_Check(item.ptr())) return false;  // positions count flattened inputs
  }
  if (std::any_of(positions.begin(), positions.end(), [&](size_t p) { return p >= n; })) return false;
  const TorchTypes* torch = torchTypes();
  const auto missing = [](const nb::object& f) { return !f.is_valid() || f.is_none(); };
  // A torch without these leaves the whole update to the Python path.
  if (torch == nullptr || missing(torch->is_grad_enabled) || missing(torch->increment_version)) return false;
  // Held: the calls below run Python code, which may reset the types.
  const nb::object tensor_type = torch->tensor_type, is_grad_enabled = torch->is_grad_enabled;
  const int grad = PyObject_IsTrue(is_grad_enabled().ptr());
  if (grad < 0) throw nb::python_error();
  if (grad == 0) return true;  // under torch.no_grad(), as an optimizer step runs
  for (size_t p : positions) {
    const nb::handle t = itemAt(inputs, p);
    if (nb::isinstance(t, tensor_type) && truthy(t, "requires_grad") && truthy(t, "is_leaf")) return false;
  }
  return true;
}

void bumpTorchVersions(nb::handle inputs, const std::vector<size_t>& positions) {
  const TorchTypes* torch = torchTypes();
  if (torch == nullptr || !torch->increment_version.is_valid() || torch->increment_version.is_none()) return;
  const nb::object tensor_type = torch->tensor_type, increment_version = torch->increment_version;
  nb::list tensors;
  const auto n = static_cast<size_t>(PySequence_Fast_GET_SIZE(inputs.ptr()));
  for (size_t p : positions) {
    if (p >= n) continue;
    const nb::handle t = itemAt(inputs, p);
    if (!nb::isinstance(t, tensor_type)) continue;
    const int inference = PyObject_IsTrue(t.attr("is_inference")().ptr());
    if (inference < 0) throw nb::python_error();
    if (inference == 0) tensors.append(t);
  }
  if (nb::len(tensors) != 0) increment_version(tensors);
}

namespace {

// A view with torch's negative bit set (y = z.conj().imag) holds the values without their sign: its
// memory alone would be read wrong. The bit has no C ABI reader: asked of the tensor.
void refuseNegativeViews(const TorchTypes& torch, nb::handle object, size_t input) {
  BRAZE_CHECK(!torch.has_is_neg || !nb::cast<bool>(callMethod(object, names().is_neg)),
              "input {}: a torch tensor with its negative bit set (a lazily negated view); call resolve_neg() on "
              "it first",
              input);
}

// Size-1 dims: any stride addresses the same element; 1, as torch's DLPack export says, so that the
// same tensor has one input signature whichever way it was made.
void unitStridesOfSizeOneDims(device::DeviceTensor& t) {
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] == 1) t.strides[d] = 1;
  }
}

// Where a tensor's memory is, as read: a CUDA (or ROCm) device, host memory, or anything else (meta, XPU,
// MPS: never read as host memory).
enum class Place { Cuda, Cpu, Other };

// Whether a tensor in `place` can be an input at all: on a GPU; in host memory where the fusion takes a
// CPU scalar there or host tensors stand in for device ones. Asked before anything else is read.
bool takenFrom(Place place, bool cpu_scalar, bool host_stand_in) {
  return place == Place::Cuda || (place == Place::Cpu && (cpu_scalar || host_stand_in));
}

// The device of a tensor read from `place` into `t`: its GPU; -1 for a CPU scalar (kernels get its value);
// device 0 for a host tensor standing in; false for any other host tensor (the DLPack path says what is
// wrong).
bool placed(device::DeviceTensor& t, Place place, int cuda_device, bool cpu_scalar, bool host_stand_in,
            TorchRead* note) {
  unitStridesOfSizeOneDims(t);
  if (place == Place::Cuda) {
    t.device = cuda_device;
  } else if (cpu_scalar && t.sizes.empty()) {
    t.device = -1;
  } else if (host_stand_in) {
    t.device = 0;
    if (note != nullptr) note->stood_in = true;
  } else {
    return false;
  }
  return true;
}

// Where a tensor is, through its attributes: is_cuda, then is_cpu (a stand-in without it is in host memory;
// any other error reading it is raised).
Place placeOf(nb::handle object) {
  if (nb::cast<bool>(object.attr(names().is_cuda))) return Place::Cuda;
  PyObject* is_cpu = PyObject_GetAttr(object.ptr(), names().is_cpu.ptr());
  if (is_cpu == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw nb::python_error();
    PyErr_Clear();
    return Place::Cpu;
  }
  return nb::cast<bool>(nb::steal(is_cpu)) ? Place::Cpu : Place::Other;
}

}  // namespace

const TorchTypes* importedTorch() { return torchTypes(); }

std::optional<device::DeviceTensor> torchTensorOf(nb::handle object, size_t input, bool cpu_scalar,
                                                  bool host_stand_in, TorchRead* note) {
  const TorchTypes* torch = torchTypes();
  if (torch == nullptr) return std::nullopt;
  device::DeviceTensor t;
  if (!torchTensorInto(*torch, object, input, cpu_scalar, host_stand_in, note, t)) return std::nullopt;
  return t;
}

bool torchTensorInto(const TorchTypes& torch, nb::handle object, size_t input, bool cpu_scalar, bool host_stand_in,
                     TorchRead* note, device::DeviceTensor& t) {
  // The types are reset in place (releaseTorchTypes, another torch module) while Python code runs: a caller
  // holding them across such code may find them empty, and then reads nothing.
  if (!torch.tensor_type.is_valid() || !nb::isinstance(object, torch.tensor_type)) return false;
  // A subclass may report other fields than its storage holds (a wrapper subclass): read as it says.
  TorchTensorFields fields;
  if (torch.abi != nullptr && torchAbiEnabled() && object.type().is(torch.tensor_type) &&
      readTorchTensor(*torch.abi, object.ptr(), fields, t.sizes, t.strides)) {
    if (note != nullptr) note->through_abi = true;
    const Place place = fields.on_cuda ? Place::Cuda : fields.on_cpu ? Place::Cpu : Place::Other;
    if (!takenFrom(place, cpu_scalar, host_stand_in)) return false;
    refuseNegativeViews(torch, object, input);
    if (!fields.dtype) return false;
    t.data = fields.data;
    t.dtype = *fields.dtype;
    return placed(t, place, fields.device_index, cpu_scalar, host_stand_in, note);
  }
  const Names& name = names();
  const Place place = placeOf(object);
  if (!takenFrom(place, cpu_scalar, host_stand_in)) return false;
  refuseNegativeViews(torch, object, input);
  nb::object dtype = object.attr(name.dtype);
  const auto known = std::find_if(torch.dtypes.begin(), torch.dtypes.end(),
                                  [&](const auto& entry) { return entry.first.is(dtype); });
  if (known == torch.dtypes.end()) return false;
  t.dtype = known->second;  // before any more Python code runs (which may reset the types)
  // data_ptr() is the address of element [0, ..., 0]: the storage offset is in it already.
  t.data = nb::cast<uint64_t>(callMethod(object, name.data_ptr));
  int64s(object.attr(name.shape), t.sizes);
  int64s(callMethod(object, name.stride), t.strides);
  BRAZE_CHECK(t.sizes.size() == t.strides.size(), "input {}: its shape has {} dims but its stride() has {}", input,
              t.sizes.size(), t.strides.size());
  const int cuda_device = place == Place::Cuda ? nb::cast<int>(callMethod(object, name.get_device)) : -1;
  return placed(t, place, cuda_device, cpu_scalar, host_stand_in, note);
}

bool isPlainTorchTensor(nb::handle object) {
  const TorchTypes* torch = torchTypes();
  return torch != nullptr && isPlainTorchTensor(*torch, object);
}

bool isPlainTorchTensor(const TorchTypes& torch, nb::handle object) { return object.type().is(torch.tensor_type); }

std::optional<TorchOutput> torchEmptyStrided(const device::DeviceTensor& spec, bool on_cpu) {
  const TorchTypes* torch = torchTypes();
  if (torch == nullptr) return std::nullopt;
  return torchEmptyStrided(*torch, spec, on_cpu);
}

std::optional<TorchOutput> torchEmptyStrided(const TorchTypes& torch, const device::DeviceTensor& spec, bool on_cpu) {
  // Reset (see torchTensorOf), or a torch without it.
  if (!torch.empty_strided.is_valid() || torch.empty_strided.is_none()) return std::nullopt;
  const auto found = std::find_if(torch.dtypes.begin(), torch.dtypes.end(),
                                  [&](const auto& entry) { return entry.second == spec.dtype; });
  if (found == torch.dtypes.end()) return std::nullopt;
  const nb::object dtype = found->first;  // held: the calls below run Python code, which may reset the types
  if (std::find(spec.sizes.begin(), spec.sizes.end(), 0) != spec.sizes.end()) return std::nullopt;
  const bool through_abi = torch.abi != nullptr && torchAbiEnabled() && torchAbiHasDtype(*torch.abi, spec.dtype);
  if (through_abi) {
    if (std::optional<TorchAbiOutput> made =
            emptyStridedThroughAbi(*torch.abi, spec.sizes, spec.strides, spec.dtype, spec.device, on_cpu)) {
      return TorchOutput{std::move(made->tensor), made->address};
    }
  }
  // Keyword names made once and interned, as the attribute names are: torch matches them by identity first.
  static PyObject* const keywords = [] {
    PyObject* names = PyTuple_New(2);
    PyTuple_SET_ITEM(names, 0, PyUnicode_InternFromString("dtype"));
    PyTuple_SET_ITEM(names, 1, PyUnicode_InternFromString("device"));
    return names;
  }();
  const nb::object sizes = tupleOf(spec.sizes);
  const nb::object strides = tupleOf(spec.strides);
  // Where the ABI failed (out of memory, most likely), torch.empty_strided at once: it raises torch's own
  // error, with torch's out-of-memory handling run once more, not twice.
  if (!through_abi) {
    std::optional<TorchOutput> fast =
        on_cpu ? torchCompilesEmptyStrided(torch, torchTypeCache().empty_strided_cpu, sizes, strides, dtype)
               : torchEmptyStridedOnCurrentDevice(torch, sizes, strides, dtype, spec.device);
    if (fast) return fast;
  }
  const nb::object device = on_cpu ? nb::object(nb::str("cpu")) : nb::object(nb::int_(spec.device));
  PyObject* args[] = {nullptr, sizes.ptr(), strides.ptr(), dtype.ptr(), device.ptr()};
  PyObject* tensor = PyObject_Vectorcall(torch.empty_strided.ptr(), args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                         keywords);
  if (tensor == nullptr) throw nb::python_error();
  TorchOutput out{nb::steal(tensor), 0};
  out.address = static_cast<uintptr_t>(nb::cast<uint64_t>(callMethod(out.tensor, names().data_ptr)));
  return out;
}

bool torchImportsCapsules() {
  const TorchTypes* torch = torchTypes();
  return torch != nullptr && !torch->from_capsule.is_none();
}

nb::object torchFromCapsule(nb::handle capsule) {
  const TorchTypes* torch = torchTypes();
  BRAZE_ASSERT(torch != nullptr && !torch->from_capsule.is_none(), "torchFromCapsule without torch._C._from_dlpack");
  PyObject* args[] = {nullptr, capsule.ptr()};
  PyObject* tensor =
      PyObject_Vectorcall(torch->from_capsule.ptr(), args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  if (tensor == nullptr) throw nb::python_error();
  return nb::steal(tensor);
}

std::optional<uintptr_t> torchCurrentStream(int device) {
  const TorchTypes* torch = torchTypes();
  if (torch == nullptr) return std::nullopt;
  return torchCurrentStream(*torch, device);
}

bool torchHasCurrentStreamAbi() {
  const TorchTypes* torch = torchTypes();
  return torch != nullptr && torch->current_cuda_stream != nullptr;
}

std::optional<uintptr_t> torchCurrentStream(const TorchTypes& torch, int device) {
  if (!torch.current_raw_stream.is_valid() || torch.current_raw_stream.is_none()) return std::nullopt;
  if (torch.current_cuda_stream != nullptr && torchAbiEnabled()) {
    if (std::optional<uintptr_t> stream = currentCudaStreamThroughAbi(torch.current_cuda_stream, device)) return stream;
  }
  return nb::cast<uintptr_t>(torch.current_raw_stream(device));
}

}  // namespace braze::python
