// Conversion between Python numbers and braze::ScalarValue. Written by hand rather than with
// nanobind's variant caster because the order matters: Python's bool is a subclass of int, and
// numpy scalars must be accepted too (they are converted with .item() on the Python side).
#pragma once

#include "ir/val.h"

#include <nanobind/nanobind.h>

#include <optional>

namespace braze::python {

// The value of a Python bool, int or float; nullopt for anything else. `index`: the execute input it is,
// if one (an int that does not fit braze's Int is an error naming it).
std::optional<ScalarValue> scalarValueFromPython(nanobind::handle value, int64_t index = -1);
// A Python int as braze's Int (int64_t); a ValueError naming input `index` (or a constant, where it is
// -1) and the value where it does not fit.
int64_t int64FromPython(nanobind::handle integer, int64_t index = -1);
nanobind::object scalarValueToPython(const ScalarValue& value);

}  // namespace braze::python
