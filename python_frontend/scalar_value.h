// Conversion between Python numbers and braze::ScalarValue. Written by hand rather than with
// nanobind's variant caster because the order matters: Python's bool is a subclass of int, and
// numpy scalars must be accepted too (they are converted with .item() on the Python side).
#pragma once

#include "ir/val.h"

#include <nanobind/nanobind.h>

#include <optional>

namespace braze::python {

// The value of a Python bool, int or float; nullopt for anything else.
std::optional<ScalarValue> scalarValueFromPython(nanobind::handle value);
nanobind::object scalarValueToPython(const ScalarValue& value);

}  // namespace braze::python
