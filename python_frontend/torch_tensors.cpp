#include "torch_tensors.h"

#include <Python.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace braze::python {
namespace {

namespace nb = nanobind;

// What braze needs of the torch module, looked up again whenever sys.modules["torch"] is another
// object (a test's stand-in, say). Every access holds the GIL, which serializes them.
struct TorchTypes {
  nb::object module;  // held, so that another module object can never take its address
  nb::object tensor_type;
  std::vector<std::pair<nb::object, DataType>> dtypes;  // torch.dtype objects are singletons
};

const TorchTypes* torchTypes() {
  // Never destroyed: its references must not be dropped after the interpreter has finalized.
  static TorchTypes& types = *new TorchTypes;
  PyObject* module = PyDict_GetItemString(PySys_GetObject("modules"), "torch");  // borrowed, or null
  if (module == nullptr) return nullptr;
  if (module == types.module.ptr()) return types.tensor_type.is_valid() ? &types : nullptr;
  types = TorchTypes{};
  nb::handle torch(module);
  types.module = nb::borrow(torch);
  if (!nb::hasattr(torch, "Tensor")) return nullptr;
  types.tensor_type = torch.attr("Tensor");
  static const std::array<std::pair<const char*, DataType>, 14> kNames{{
      {"bool", DataType::Bool},
      {"int8", DataType::Int8},
      {"uint8", DataType::UInt8},
      {"int16", DataType::Int16},
      {"int32", DataType::Int32},
      {"int64", DataType::Int64},
      {"float16", DataType::Half},
      {"bfloat16", DataType::BFloat16},
      {"float32", DataType::Float},
      {"float64", DataType::Double},
      {"float8_e4m3fn", DataType::Float8_e4m3fn},
      {"float8_e5m2", DataType::Float8_e5m2},
      {"float8_e4m3fnuz", DataType::Float8_e4m3fnuz},
      {"float8_e5m2fnuz", DataType::Float8_e5m2fnuz},
  }};
  for (const auto& [name, dtype] : kNames) {
    if (nb::hasattr(torch, name)) types.dtypes.emplace_back(torch.attr(name), dtype);
  }
  return &types;
}

std::vector<int64_t> int64s(nb::handle sequence) {
  std::vector<int64_t> values;
  for (nb::handle item : sequence) values.push_back(nb::cast<int64_t>(item));
  return values;
}

}  // namespace

std::optional<runtime::DeviceTensor> torchCudaTensorOf(nb::handle object) {
  const TorchTypes* torch = torchTypes();
  if (torch == nullptr || !nb::isinstance(object, torch->tensor_type)) return std::nullopt;
  if (!nb::cast<bool>(object.attr("is_cuda"))) return std::nullopt;
  nb::object dtype = object.attr("dtype");
  const auto known = std::find_if(torch->dtypes.begin(), torch->dtypes.end(),
                                  [&](const auto& entry) { return entry.first.is(dtype); });
  if (known == torch->dtypes.end()) return std::nullopt;
  runtime::DeviceTensor t;
  // data_ptr() is the address of element [0, ..., 0]: the storage offset is in it already.
  t.data = nb::cast<uint64_t>(object.attr("data_ptr")());
  t.dtype = known->second;
  t.sizes = int64s(object.attr("shape"));
  t.strides = int64s(object.attr("stride")());
  t.device = nb::cast<int>(object.attr("get_device")());
  return t;
}

}  // namespace braze::python
