// DataType, Fusion, the value handles (Val / TensorView / Scalar), FusionGuard, and the two
// definitions (define_tensor, define_scalar) plus constants.
//
// Handles are returned by reference: the Fusion owns every node. The Python wrappers in
// braze/fusion_definition.py hold the FusionDefinition (and so the Fusion) alive for as long as
// any handle to one of its values exists.
#include "bindings.h"
#include "scalar_value.h"

#include "support/error.h"
#include "ir/json.h"
#include "ir/ops.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <memory>

namespace nb = nanobind;

namespace braze::python {
namespace {

void bindDataType(nb::module_& m) {
  auto dtype = nb::enum_<DataType>(m, "DataType", "Element type of tensors and scalars (nvFuser's names)");
  dtype.value("Null", DataType::Null);
  for (DataType t : kAllDataTypes) dtype.value(std::string(toString(t)).c_str(), t);
  // nvFuser calls the 64-bit integer type `Int`; scripts printed by nvFuser use that spelling.
  dtype.attr("Int") = dtype.attr("Int64");
  m.def(
      "dtype_table",
      [] {
        std::vector<std::tuple<DataType, std::string, bool, int64_t>> rows;
        for (DataType t : kAllDataTypes) rows.emplace_back(t, std::string(arrayTypeName(t)), numpyHasType(t), sizeOf(t));
        return rows;
      },
      "[(DataType, array name, numpy has it without ml_dtypes, bytes)]: the C++ dtype table (ir/data_type.cpp), "
      "which every Python dtype mapping is made from; the array name is numpy's, ml_dtypes', torch's and JAX's");
}

void bindValues(nb::module_& m) {
  nb::class_<Val>(m, "Val", "A value of a fusion (a handle: the Fusion owns it)")
      .def_prop_ro("id", &Val::id)
      .def_prop_ro("name", &Val::name)
      .def_prop_ro("dtype", &Val::dtype)
      .def_prop_ro("is_tensor", &Val::isTensor)
      .def_prop_ro("is_fusion_input", &Val::isFusionInput)
      .def_prop_ro("is_fusion_output", &Val::isFusionOutput)
      .def("__repr__", [](const Val& v) { return fmt::format("<braze._C.Val {} {}>", v.name(), toString(v.dtype())); });

  nb::class_<TensorView, Val>(m, "TensorView")
      .def_prop_ro("ndim", &TensorView::rank)
      .def_prop_ro("static_shape", &TensorView::staticShape, "static extents, -1 where symbolic")
      .def_prop_ro("contiguity", [](const TensorView& tv) { return tv.layout().contiguity; },
                   "per logical dim: True/False, None for broadcast dims")
      .def_prop_ro("stride_order", [](const TensorView& tv) { return tv.layout().stride_order; })
      .def_prop_ro("is_cpu", &TensorView::isCpu);

  nb::class_<Scalar, Val>(m, "Scalar")
      .def_prop_ro("is_constant", &Scalar::isConstant)
      .def_prop_ro("value", [](const Scalar& s) -> nb::object {
        return s.value() ? scalarValueToPython(*s.value()) : nb::none();
      });
}

// FusionGuard is RAII in C++; Python gets it as a context manager that must be strictly nested.
class PyFusionGuard {
 public:
  explicit PyFusionGuard(Fusion* fusion) : fusion_(fusion) {}
  void enter() {
    BRAZE_CHECK(!guard_, "FusionGuard: already entered");
    guard_ = std::make_unique<FusionGuard>(fusion_);
  }
  void exit() { guard_.reset(); }

 private:
  Fusion* fusion_;
  std::unique_ptr<FusionGuard> guard_;
};

void bindFusion(nb::module_& m) {
  nb::class_<Fusion>(m, "Fusion", "A graph of tensor operations with inputs and outputs")
      .def(nb::init<>())
      .def("to_string", &Fusion::toString, "readable IR (what fd.fusion_ir() shows)")
      .def("to_python", &Fusion::toPython, nb::arg("drawn_inputs") = std::vector<size_t>{},
           "a runnable Python definition (what repr(fd) shows); drawn_inputs: the positions of the scalar "
           "inputs each execute draws, which it leaves out")
      .def("to_json", [](const Fusion& f) { return toJsonString(f); },
           "the lossless JSON record of the fusion (ir/json.h): equal for identical definitions")
      .def("inputs", &Fusion::inputs, nb::rv_policy::reference_internal)
      .def("outputs", &Fusion::outputs, nb::rv_policy::reference_internal)
      .def("aliased_inputs",
           [](const Fusion& f) {
             std::vector<Val*> inputs;
             for (const auto& [out, in] : f.outputAliases()) inputs.push_back(in);
             return inputs;
           },
           nb::rv_policy::reference_internal, "the inputs that an output is written into (add_output(alias_input=))")
      .def("add_output", &Fusion::addOutput, nb::arg("val"))
      .def("alias_output_to_input", &Fusion::aliasOutputToInput, nb::arg("output"), nb::arg("input"))
      .def("__copy__", [](const Fusion& f) { return Fusion(f); })
      .def("__deepcopy__", [](const Fusion& f, nb::handle) { return Fusion(f); });

  nb::class_<PyFusionGuard>(m, "FusionGuard", "Makes a Fusion the one op builders add to, in a `with` block")
      .def(nb::init<Fusion*>(), nb::keep_alive<1, 2>())
      .def("__enter__", [](PyFusionGuard& g) { g.enter(); })
      .def("__exit__", [](PyFusionGuard& g, nb::handle, nb::handle, nb::handle) { g.exit(); }, nb::arg().none(),
           nb::arg().none(), nb::arg().none());
}

void bindDefinitions(nb::module_& m) {
  // The fusion is passed explicitly (rather than relying on the thread-local current fusion) so a
  // definition always lands in the FusionDefinition it was called on, even with several open.
  m.def(
      "define_tensor",
      [](Fusion& fusion, const std::vector<int64_t>& shape, nb::handle contiguity, DataType dtype, bool is_cpu,
         const std::vector<int64_t>& stride_order) {
        FusionGuard guard(&fusion);
        // A list (one entry per dim, allocation order) or one flag for every dim (None: nvFuser's False).
        if (contiguity.is_none() || nb::isinstance<nb::bool_>(contiguity)) {
          const std::optional<bool> flag =
              contiguity.is_none() ? std::nullopt : std::optional<bool>(nb::cast<bool>(contiguity));
          return defineTensorSameContiguity(shape, flag, dtype, is_cpu, stride_order);
        }
        return defineTensor(shape, nb::cast<std::vector<std::optional<bool>>>(contiguity), dtype, is_cpu, stride_order);
      },
      nb::arg("fusion"), nb::arg("shape"), nb::arg("contiguity").none(), nb::arg("dtype"), nb::arg("is_cpu") = false,
      nb::arg("stride_order") = std::vector<int64_t>{}, nb::rv_policy::reference);
  m.def(
      "define_scalar",
      [](Fusion& fusion, DataType dtype) {
        FusionGuard guard(&fusion);
        return defineScalar(dtype);
      },
      nb::arg("fusion"), nb::arg("dtype"), nb::rv_policy::reference, "a symbolic scalar input");
  m.def(
      "constant",
      [](Fusion& fusion, nb::handle value, DataType dtype) {
        auto v = scalarValueFromPython(value);
        BRAZE_TYPE_CHECK(v.has_value(), "define_scalar: expected a bool, int or float value, got {}",
                         nb::cast<std::string>(nb::str(value.type())));
        return fusion.constant(*v, dtype);
      },
      nb::arg("fusion"), nb::arg("value"), nb::arg("dtype") = DataType::Null, nb::rv_policy::reference);
}

}  // namespace

void bindIr(nb::module_& m) {
  bindDataType(m);
  bindValues(m);
  bindFusion(m);
  bindDefinitions(m);
}

}  // namespace braze::python
