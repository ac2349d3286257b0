// braze::Error carries a kind; Python users expect the builtin exception that matches it, with the
// message unchanged (it already names the op, the operand and what was expected). nvFuser raises
// RuntimeError for every error its C++ checks find, and scripts written for it catch that; so each
// kind's class derives from both the builtin that fits (ValueError, TypeError, IndexError) and
// RuntimeError, and either `except` clause catches it.
#include "bindings.h"

#include "support/error.h"

namespace nb = nanobind;

namespace braze::python {

namespace {

PyObject* value_error = nullptr;
PyObject* type_error = nullptr;
PyObject* index_error = nullptr;

PyObject* newErrorClass(nb::module_& m, const char* name, PyObject* builtin, const char* doc) {
  PyObject* bases = PyTuple_Pack(2, builtin, PyExc_RuntimeError);
  const std::string qualified = std::string("braze.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  Py_DECREF(bases);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::borrow(type);  // the module keeps a reference for the translator's lifetime
  return type;
}

}  // namespace

void bindErrors(nb::module_& m) {
  value_error = newErrorClass(m, "BrazeValueError", PyExc_ValueError,
                              "A value is out of range or inconsistent (shapes, dims); also a RuntimeError, as "
                              "nvFuser raises.");
  type_error = newErrorClass(m, "BrazeTypeError", PyExc_TypeError,
                             "A dtype or kind of value is wrong; also a RuntimeError, as nvFuser raises.");
  index_error = newErrorClass(m, "BrazeIndexError", PyExc_IndexError,
                              "An index or dim is out of bounds; also a RuntimeError, as nvFuser raises.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = PyExc_RuntimeError;
      switch (e.kind()) {
        case ErrorKind::Value: type = value_error; break;
        case ErrorKind::Type: type = type_error; break;
        case ErrorKind::Index: type = index_error; break;
        case ErrorKind::Runtime:
        case ErrorKind::Internal: type = PyExc_RuntimeError; break;
      }
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace braze::python
