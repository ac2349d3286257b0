#include "scalar_value.h"

namespace nb = nanobind;

namespace braze::python {

std::optional<ScalarValue> scalarValueFromPython(nb::handle value) {
  // Bool before int: True is also an int in Python, but must stay a Bool constant.
  if (PyBool_Check(value.ptr())) return ScalarValue{value.ptr() == Py_True};
  if (PyLong_Check(value.ptr())) return ScalarValue{nb::cast<int64_t>(value)};
  if (PyFloat_Check(value.ptr())) return ScalarValue{PyFloat_AsDouble(value.ptr())};
  return std::nullopt;
}

nb::object scalarValueToPython(const ScalarValue& value) {
  return std::visit([](auto v) -> nb::object { return nb::cast(v); }, value);
}

}  // namespace braze::python
