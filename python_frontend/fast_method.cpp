// FusionDefinition.execute as a method written in C: a cached execute of CUDA torch tensors calls the
// fusion's torch runner (FusionCache.torch_runner, which _execute_torch puts in the definition's
// __dict__ as "_torch_fast") without entering the Python function at all; every other call goes to
// that function (the general path), with the same arguments. The Python frame, its argument binding
// and keyword checks cost about as much as reading two tensors: on Thunder's every execute.
//
// The object is a method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR): `fd.execute(...)` calls it with
// the definition first and no bound method made; `fd.execute` alone is a bound method of it. It
// answers __doc__, __name__, __qualname__, __module__ and __wrapped__ (the Python function) as the
// function does, so help() and inspect.signature show the function's.
#include "bindings.h"

#include <Python.h>
#include <structmember.h>

#include <cstddef>

namespace braze::python {
namespace {

namespace nb = nanobind;

struct FastMethod {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* function;     // the Python execute(self, inputs, device=None, **keywords)
  PyObject* names_a_gpu;  // device -> whether the fast path may take it (execute.names_a_gpu)
  PyObject* known_devices;  // the dict names_a_gpu keeps of its answers: device -> bool
  PyObject* failed;       // (fd, inputs, error, keywords or None) -> None: what the Python path does on errors
  PyObject* ignored;      // the keyword names the fast path takes and ignores (a frozenset)
};

PyObject* internedTorchFast() {
  static PyObject* const name = PyUnicode_InternFromString("_torch_fast");
  return name;
}

PyObject* internedDevice() {
  static PyObject* const name = PyUnicode_InternFromString("device");
  return name;
}

// The keywords of a call as a dict (for the error hook), or null with an error set.
PyObject* keywordDict(PyObject* const* args, size_t nargs, PyObject* kwnames) {
  PyObject* dict = PyDict_New();
  if (dict == nullptr) return nullptr;
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); ++k) {
    if (PyDict_SetItem(dict, PyTuple_GET_ITEM(kwnames, k), args[nargs + static_cast<size_t>(k)]) < 0) {
      Py_DECREF(dict);
      return nullptr;
    }
  }
  return dict;
}

// 1: the call takes the fast path (inputs, and a device that names a GPU, and only ignored keywords);
// 0: it does not; -1: an error is set.
int fastForm(FastMethod* method, PyObject* const* args, size_t nargs, PyObject* kwnames) {
  if (nargs != 2 && nargs != 3) return 0;  // (self, inputs[, device])
  PyObject* device = nargs == 3 ? args[2] : nullptr;
  const Py_ssize_t keywords = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    // Names at call sites are interned, as "device" is here: the comparison only for another object of
    // its length.
    const bool is_device =
        name == internedDevice() || (PyUnicode_GET_LENGTH(name) == 6 && PyUnicode_Compare(name, internedDevice()) == 0);
    if (is_device) {
      if (device != nullptr) return 0;  // device given twice: the Python function raises
      device = args[nargs + static_cast<size_t>(k)];
      continue;
    }
    const int ignored = PySet_Contains(method->ignored, name);
    if (ignored <= 0) return ignored;
  }
  if (device == nullptr || device == Py_None || PyLong_CheckExact(device)) return 1;
  // A device seen before ("cuda:0", a torch.device): names_a_gpu's answer then, without calling it.
  PyObject* known = PyDict_GetItemWithError(method->known_devices, device);  // borrowed
  if (known != nullptr) {
    Py_INCREF(known);
    const int gpu = PyObject_IsTrue(known);
    Py_DECREF(known);
    return gpu;
  }
  if (PyErr_Occurred()) {  // unhashable: names_a_gpu answers; any other error of its hash or == is raised
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
    PyErr_Clear();
  }
  PyObject* verdict = PyObject_CallOneArg(method->names_a_gpu, device);
  if (verdict == nullptr) return -1;
  const int gpu = PyObject_IsTrue(verdict);
  Py_DECREF(verdict);
  return gpu;
}

// The error being raised, taken (a new reference, its traceback on it), and raised again.
PyObject* takeRaised() {
#if PY_VERSION_HEX >= 0x030C0000
  return PyErr_GetRaisedException();
#else
  PyObject *type = nullptr, *error = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &error, &traceback);
  PyErr_NormalizeException(&type, &error, &traceback);
  if (traceback != nullptr && error != nullptr) PyException_SetTraceback(error, traceback);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  return error;
#endif
}

void raiseAgain(PyObject* error) {  // steals `error`
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(error);
#else
  PyErr_Restore(Py_NewRef(reinterpret_cast<PyObject*>(Py_TYPE(error))), error, PyException_GetTraceback(error));
#endif
}

// `error` (stolen) as the last context of `raised`'s chain, where Python would have put it had `raised`
// been raised while `error` was handled; nothing where the chain has it already (the hook raised it again).
void chainAtEnd(PyObject* raised, PyObject* error) {
  PyObject* last = raised;  // borrowed: the chain holds each link
  for (int link = 0; link < 1000; ++link) {
    if (last == error) break;  // in the chain already
    PyObject* context = PyException_GetContext(last);  // a new reference, or null
    if (context == nullptr) {
      PyException_SetContext(last, error);  // steals `error`
      return;
    }
    Py_DECREF(context);
    last = context;
  }
  Py_DECREF(error);  // in the chain already, or a chain too long to walk (a cycle): left as it is
}

// The runner's error, after the hook has renumbered it and saved a reproducer as the Python path does.
PyObject* reportFailure(FastMethod* method, PyObject* const* args, size_t nargs, PyObject* kwnames) {
  PyObject* error = takeRaised();
  if (error == nullptr) return nullptr;
  if (!PyErr_GivenExceptionMatches(error, PyExc_Exception)) {  // KeyboardInterrupt, SystemExit: as they are
    raiseAgain(error);
    return nullptr;
  }
  PyObject* keywords = kwnames == nullptr ? Py_NewRef(Py_None) : keywordDict(args, nargs, kwnames);
  PyObject* reported = keywords == nullptr
                           ? nullptr
                           : PyObject_CallFunctionObjArgs(method->failed, args[0], args[1], error, keywords, nullptr);
  Py_XDECREF(keywords);
  if (reported == nullptr) {  // the hook's own error is raised instead, with the run's as its context
    PyObject* hook_error = takeRaised();
    if (hook_error == nullptr) {
      Py_DECREF(error);
      return nullptr;
    }
    chainAtEnd(hook_error, error);
    raiseAgain(hook_error);
    return nullptr;
  }
  Py_DECREF(reported);
  raiseAgain(error);
  return nullptr;
}

// Its fields are null once the collector has cleared it (a cycle through it being freed).
bool cleared(FastMethod* method) {
  if (method->function != nullptr) return false;
  PyErr_SetString(PyExc_RuntimeError, "this FusionDefinition.execute method has been cleared");
  return true;
}

PyObject* fastMethodCall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* method = reinterpret_cast<FastMethod*>(self);
  if (cleared(method)) return nullptr;
  const size_t nargs = PyVectorcall_NARGS(nargsf);
  // A class as the first argument has no instance __dict__ to look in (and its own is not to be touched).
  if (nargs >= 2 && !PyType_Check(args[0])) {
    // The definition's runner: a lookup in its __dict__, no attribute protocol (a subclass's property
    // or __getattr__ never sees it). An object without a __dict__ goes to the function, which says what
    // is wrong.
    PyObject* dict = PyObject_GenericGetDict(args[0], nullptr);
    PyObject* runner = dict == nullptr ? nullptr : PyDict_GetItemWithError(dict, internedTorchFast());  // borrowed
    Py_XINCREF(runner);  // the run may replace the dict's entry
    Py_XDECREF(dict);
    if (runner == nullptr) PyErr_Clear();
    if (runner != nullptr) {
      const int fast = fastForm(method, args, nargs, kwnames);
      PyObject* outputs = fast == 1 ? PyObject_CallOneArg(runner, args[1]) : nullptr;
      Py_DECREF(runner);
      if (fast < 0) return nullptr;
      if (fast == 1) {
        if (outputs == nullptr) return reportFailure(method, args, nargs, kwnames);
        if (outputs != Py_None) return outputs;
        Py_DECREF(outputs);  // declined: the general path decides
      }
    }
  }
  return PyObject_Vectorcall(method->function, args, nargsf, kwnames);
}

PyObject* fastMethodGet(PyObject* self, PyObject* instance, PyObject* /*owner*/) {
  if (instance == nullptr || instance == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, instance);
}

// The names answered as the Python function answers them.
PyObject* fastMethodGetAttr(PyObject* self, PyObject* name) {
  auto* method = reinterpret_cast<FastMethod*>(self);
  if (PyUnicode_Check(name) && method->function != nullptr) {
    if (PyUnicode_CompareWithASCIIString(name, "__wrapped__") == 0) return Py_NewRef(method->function);
    for (const char* delegated : {"__doc__", "__name__", "__qualname__", "__module__", "__annotations__"}) {
      if (PyUnicode_CompareWithASCIIString(name, delegated) == 0) return PyObject_GetAttr(method->function, name);
    }
  }
  return PyObject_GenericGetAttr(self, name);
}

PyObject* fastMethodRepr(PyObject* self) {
  auto* method = reinterpret_cast<FastMethod*>(self);
  if (method->function == nullptr) return PyUnicode_FromString("<braze fast method, cleared>");
  return PyUnicode_FromFormat("<braze fast method %R>", method->function);
}

int fastMethodTraverse(PyObject* self, visitproc visit, void* arg) {
  auto* method = reinterpret_cast<FastMethod*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(method->function);
  Py_VISIT(method->names_a_gpu);
  Py_VISIT(method->known_devices);
  Py_VISIT(method->failed);
  Py_VISIT(method->ignored);
  return 0;
}

int fastMethodClear(PyObject* self) {
  auto* method = reinterpret_cast<FastMethod*>(self);
  Py_CLEAR(method->function);
  Py_CLEAR(method->names_a_gpu);
  Py_CLEAR(method->known_devices);
  Py_CLEAR(method->failed);
  Py_CLEAR(method->ignored);
  return 0;
}

void fastMethodDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  fastMethodClear(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMemberDef fast_method_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FastMethod, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot fast_method_slots[] = {
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(fastMethodGet)},
    {Py_tp_getattro, reinterpret_cast<void*>(fastMethodGetAttr)},
    {Py_tp_repr, reinterpret_cast<void*>(fastMethodRepr)},
    {Py_tp_traverse, reinterpret_cast<void*>(fastMethodTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(fastMethodClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(fastMethodDealloc)},
    {Py_tp_members, fast_method_members},
    {0, nullptr},
};

PyType_Spec fast_method_spec = {
    "braze._C.TorchFastMethod",
    sizeof(FastMethod),
    0,
    // Made only by torch_fast_method (DISALLOW_INSTANTIATION), whose fields are then all set.
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR |
        Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
    fast_method_slots,
};

PyTypeObject* fastMethodType() {
  static PyTypeObject* const type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&fast_method_spec));
  if (type == nullptr) throw nb::python_error();
  return type;
}

}  // namespace

void bindFastMethod(nb::module_& m) {
  m.def(
      "torch_fast_method",
      [](nb::object function, nb::object names_a_gpu, nb::dict known_devices, nb::object failed,
         nb::object ignored_keywords) {
        if (!PyCallable_Check(function.ptr())) throw nb::type_error("torch_fast_method: `function` is not callable");
        PyTypeObject* type = fastMethodType();
        auto* method = PyObject_GC_New(FastMethod, type);
        if (method == nullptr) throw nb::python_error();
        method->vectorcall = fastMethodCall;
        method->function = function.release().ptr();
        method->names_a_gpu = names_a_gpu.release().ptr();
        method->known_devices = known_devices.release().ptr();
        method->failed = failed.release().ptr();
        method->ignored = PyFrozenSet_New(ignored_keywords.ptr());
        if (method->ignored == nullptr) {
          Py_DECREF(method);
          throw nb::python_error();
        }
        PyObject_GC_Track(method);
        return nb::steal(reinterpret_cast<PyObject*>(method));
      },
      nb::arg("function"), nb::arg("names_a_gpu"), nb::arg("known_devices"), nb::arg("failed"),
      nb::arg("ignored_keywords"),
      "`function` (FusionDefinition.execute's general path) as a method whose calls on CUDA torch tensors, "
      "once the definition has a '_torch_fast' runner in its __dict__, go straight to that runner: when the "
      "call is (inputs[, device]) with a device that names a GPU (None, an index, or what names_a_gpu(device) "
      "accepts, or answered before as known_devices[device] holds) and only keywords in ignored_keywords, "
      "and the runner does not decline (None). A runner's error goes through failed(fd, inputs, error, "
      "keywords or None) and is raised. Every other call is function's");
}

}  // namespace braze::python
