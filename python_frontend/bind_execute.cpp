// Host tensors: numpy memory wrapped (not copied) as HostTensors, the reference evaluator on them
// (braze.execute.reference), and results handed back to numpy without a copy. fd.execute on host inputs
// does not come here: it runs the fusion's FusionCache on the simulated device (bind_gpu.cpp), the GPU's
// path.
//
// numpy has no bfloat16 or fp8 of its own (ml_dtypes adds them) and nanobind's ndarray cannot
// name ml_dtypes types, so tensors cross the boundary as raw storage: a pointer with sizes and
// strides on the way in, an integer array of the same item size on the way out, which
// braze/execute.py views as the right numpy dtype.
#include "bindings.h"
#include "host_values.h"
#include "scalar_value.h"

#include "support/error.h"
#include "reference/evaluator.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;

namespace braze::python {
namespace {

// The storage type numpy can represent natively for each braze dtype (same item size): the dtype
// itself where numpy has it, else an unsigned integer of its width (bf16 and the fp8 types).
nb::dlpack::dtype storageDtype(DataType dtype) {
  const auto bits = static_cast<uint8_t>(sizeOf(dtype) * 8);
  if (numpyHasType(dtype)) return {static_cast<uint8_t>(dlpackCode(dtype)), bits, 1};
  return {static_cast<uint8_t>(nb::dlpack::dtype_code::UInt), bits, 1};
}

// Keeps a Python object (the caller's numpy array) alive while any HostTensor view of its memory
// lives. The evaluator may drop views with the GIL released, so the deleter takes the GIL.
std::shared_ptr<void> keepAlive(nb::object owner) {
  if (!owner.is_valid() || owner.is_none()) return nullptr;
  return std::shared_ptr<void>(new nb::object(std::move(owner)), [](void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<nb::object*>(p);
  });
}

HostTensor wrapHost(uintptr_t data, DataType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                    nb::object owner) {
  BRAZE_CHECK(sizes.size() == strides.size(), "HostTensor.wrap: {} sizes but {} strides", sizes.size(), strides.size());
  return HostTensor::wrap(reinterpret_cast<void*>(data), dtype, std::move(sizes), std::move(strides),
                          keepAlive(std::move(owner)));
}

// A numpy array over the tensor's memory, owned by the Python HostTensor object `self`.
nb::object rawArray(nb::handle self) {
  HostTensor& t = nb::cast<HostTensor&>(self);
  std::vector<size_t> shape(t.sizes().begin(), t.sizes().end());
  nb::ndarray<nb::numpy> array(t.data(), shape.size(), shape.data(), self, t.strides().data(), storageDtype(t.dtype()));
  return nb::cast(array, nb::rv_policy::reference);
}

nb::list evaluateHost(const Fusion& fusion, nb::list py_inputs, double reduction_nudge) {
  std::vector<HostValue> inputs;
  inputs.reserve(py_inputs.size());
  for (size_t i = 0; i < py_inputs.size(); ++i) inputs.push_back(hostValueFromPython(py_inputs[i], i));
  std::vector<HostValue> outputs;
  {
    // The reference evaluator is slow; let other Python threads run meanwhile.
    nb::gil_scoped_release release;
    const ScopedReductionNudge nudge(reduction_nudge);
    outputs = evaluate(fusion, inputs);
  }
  return hostValuesToPython(std::move(outputs));
}

}  // namespace

HostValue hostValueFromPython(nb::handle item, size_t index) {
  if (nb::isinstance<HostTensor>(item)) return nb::cast<HostTensor>(item);
  auto value = scalarValueFromPython(item, static_cast<int64_t>(index));
  BRAZE_TYPE_CHECK(value.has_value(), "input {}: expected a tensor or a bool/int/float, got {}", index,
                   nb::cast<std::string>(nb::str(item.type())));
  return *value;
}

nb::list hostValuesToPython(std::vector<HostValue> values) {
  nb::list result;
  for (HostValue& out : values) {
    if (auto* tensor = std::get_if<HostTensor>(&out)) {
      result.append(nb::cast(std::move(*tensor)));
    } else {
      result.append(scalarValueToPython(std::get<ScalarValue>(out)));
    }
  }
  return result;
}

void bindExecute(nb::module_& m) {
  nb::class_<HostTensor>(m, "HostTensor", "A tensor in host memory (sizes and strides in elements)")
      .def_static("wrap", &wrapHost, nb::arg("data"), nb::arg("dtype"), nb::arg("sizes"), nb::arg("strides"),
                  nb::arg("owner").none(), "borrow memory at address `data`; `owner` is kept alive meanwhile")
      .def_prop_ro("dtype", &HostTensor::dtype)
      .def_prop_ro("sizes", &HostTensor::sizes)
      .def_prop_ro("strides", &HostTensor::strides)
      .def("_raw_array", &rawArray, "the memory as a numpy array of an integer/float type of the same item size");
  m.def("evaluate", &evaluateHost, nb::arg("fusion"), nb::arg("inputs"), nb::arg("reduction_nudge") = 0.0,
        "runs the CPU reference evaluator; tensors in and out are HostTensors, scalars Python numbers. "
        "reduction_nudge: every floating sum, product, mean and variance scaled by 1 + it (condition estimation)");
}

}  // namespace braze::python
