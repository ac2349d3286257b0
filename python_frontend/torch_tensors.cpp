#include "torch_tensors.h"

#include "ir/error.h"

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
  if (!nb::hasattr(torch, "Tensor")) return nullptr;  // torch half imported: looked at again next time
  types.module = nb::borrow(torch);
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

std::optional<runtime::DeviceTensor> torchCudaTensorOf(nb::handle object, size_t input) {
  const TorchTypes* torch = torchTypes();
  if (torch == nullptr || !nb::isinstance(object, torch->tensor_type)) return std::nullopt;
  if (!nb::cast<bool>(object.attr("is_cuda"))) return std::nullopt;
  // A lazily negated view (y = z.conj().imag) holds the values without their sign: its memory alone
  // would be read wrong.
  BRAZE_CHECK(!nb::hasattr(object, "is_neg") || !nb::cast<bool>(object.attr("is_neg")()),
              "input {}: a torch tensor with its negative bit set (a lazily negated view); call resolve_neg() on "
              "it first",
              input);
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
  // Size-1 dims: any stride addresses the same element; 1, as torch's DLPack export says, so that the
  // same tensor has one input signature whichever way it was made.
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] == 1) t.strides[d] = 1;
  }
  t.device = nb::cast<int>(object.attr("get_device")());
  return t;
}

}  // namespace braze::python
