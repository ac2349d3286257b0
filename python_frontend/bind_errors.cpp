// braze::Error carries a kind; Python users expect the builtin exception that matches it, with the
// message unchanged (it already names the op, the operand and what was expected).
#include "bindings.h"

#include "support/error.h"

namespace nb = nanobind;

namespace braze::python {

void bindErrors(nb::module_& m) {
  (void)m;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = PyExc_RuntimeError;
      switch (e.kind()) {
        case ErrorKind::Value: type = PyExc_ValueError; break;
        case ErrorKind::Type: type = PyExc_TypeError; break;
        case ErrorKind::Index: type = PyExc_IndexError; break;
        case ErrorKind::Runtime:
        case ErrorKind::Internal: type = PyExc_RuntimeError; break;
      }
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace braze::python
