#include "scalar_value.h"

#include "support/error.h"

#include <nanobind/stl/string.h>

#include <string>

namespace nb = nanobind;

namespace braze::python {

int64_t int64FromPython(nb::handle integer, int64_t index) {
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
  if (overflow != 0) {
    const std::string text = nb::cast<std::string>(nb::str(integer));
    BRAZE_CHECK(index < 0, "input {}: the integer {} does not fit braze's Int (64-bit, from -2**63 to 2**63 - 1)",
                index, text);
    BRAZE_CHECK(false, "the integer constant {} does not fit braze's Int (64-bit, from -2**63 to 2**63 - 1)", text);
  }
  return static_cast<int64_t>(value);
}

std::optional<ScalarValue> scalarValueFromPython(nb::handle value, int64_t index) {
  // Bool before int: True is also an int in Python, but must stay a Bool constant.
  if (PyBool_Check(value.ptr())) return ScalarValue{value.ptr() == Py_True};
  if (PyLong_Check(value.ptr())) return ScalarValue{int64FromPython(value, index)};
  if (PyFloat_Check(value.ptr())) return ScalarValue{PyFloat_AsDouble(value.ptr())};
  return std::nullopt;
}

nb::object scalarValueToPython(const ScalarValue& value) {
  return std::visit([](auto v) -> nb::object { return nb::cast(v); }, value);
}

}  // namespace braze::python
