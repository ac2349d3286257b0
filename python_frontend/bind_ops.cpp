// The op builders of ir/ops.h, one binding each. Elementwise ops are bound once per arity and
// selected by nvFuser's op name (the OpKind table), so a new row in op_kind.cpp is available
// from Python without touching this file. Argument normalization (Python numbers to constants,
// nvFuser's overloads and keyword names) happens in braze/ops.py.
#include "bindings.h"

#include "support/error.h"
#include "ir/ops.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;

namespace braze::python {
namespace {

std::string_view categoryName(OpCategory category) {
  switch (category) {
    case OpCategory::Unary: return "unary";
    case OpCategory::Binary: return "binary";
    case OpCategory::Ternary: return "ternary";
    case OpCategory::Cast: return "cast";
    case OpCategory::Reduction: return "reduction";
    case OpCategory::Normalization: return "normalization";
    case OpCategory::Meta: return "meta";
    case OpCategory::Data: return "data";
    case OpCategory::Creation: return "creation";
    case OpCategory::Indexing: return "indexing";
    case OpCategory::Matmul: return "matmul";
    case OpCategory::Quantize: return "quantize";
    case OpCategory::Scan: return "scan";
    case OpCategory::Scatter: return "scatter";
    case OpCategory::Random: return "random";
    case OpCategory::ScalarQuery: return "scalar_query";
  }
  return "?";
}

OpKind kindOf(std::string_view name, OpCategory expected) {
  auto kind = opKindFromName(name);
  BRAZE_CHECK(kind.has_value(), "unknown op '{}'", name);
  BRAZE_CHECK(opInfo(*kind).category == expected, "'{}' is a {} op, not a {} op", name,
              categoryName(opInfo(*kind).category), categoryName(expected));
  return *kind;
}

QuantAxis quantAxis(std::optional<int64_t> axis, const std::vector<int64_t>& block_shape) {
  return QuantAxis{axis, block_shape};
}

constexpr auto ref = nb::rv_policy::reference;

void bindElementwise(nb::module_& m) {
  m.def("all_ops", [] {
    std::vector<std::pair<std::string_view, std::string_view>> ops;
    for (const OpInfo& op : allOps()) ops.emplace_back(op.name, categoryName(op.category));
    return ops;
  }, "(nvFuser name, category) of every op braze knows");
  m.def("unary_op", [](std::string_view name, Val* x) { return unaryOp(kindOf(name, OpCategory::Unary), x); },
        nb::arg("name"), nb::arg("x"), ref);
  m.def("binary_op",
        [](std::string_view name, Val* a, Val* b) { return binaryOp(kindOf(name, OpCategory::Binary), a, b); },
        nb::arg("name"), nb::arg("a"), nb::arg("b"), ref);
  m.def("ternary_op",
        [](std::string_view name, Val* a, Val* b, Val* c) {
          return ternaryOp(kindOf(name, OpCategory::Ternary), a, b, c);
        },
        nb::arg("name"), nb::arg("a"), nb::arg("b"), nb::arg("c"), ref);
  m.def("addcmul", &addcmul, nb::arg("x"), nb::arg("t1"), nb::arg("t2"), nb::arg("value"), ref);
  m.def("cast", &cast, nb::arg("x"), nb::arg("dtype"), ref);
}

void bindReductions(nb::module_& m) {
  m.def("reduce",
        [](std::string_view name, TensorView* x, std::vector<int64_t> dims, bool keepdim, DataType dtype) {
          return reduce(kindOf(name, OpCategory::Reduction), x, std::move(dims), keepdim, dtype);
        },
        nb::arg("name"), nb::arg("x"), nb::arg("dims"), nb::arg("keepdim"), nb::arg("dtype"), ref);
  m.def("var", &var, nb::arg("x"), nb::arg("dims"), nb::arg("correction"), nb::arg("keepdim"), ref);
  m.def("var_mean", &varMean, nb::arg("x"), nb::arg("dims"), nb::arg("correction"), nb::arg("keepdim"), ref);
  m.def("welford", &welford, nb::arg("x"), nb::arg("dims"), ref);
}

void bindShapeOps(nb::module_& m) {
  m.def("broadcast", &broadcast, nb::arg("x"), nb::arg("is_broadcast_dim"), ref);
  m.def("broadcast_in_dim", &broadcastInDim, nb::arg("x"), nb::arg("shape"), nb::arg("broadcast_dims"), ref);
  m.def("expand", &expand, nb::arg("x"), nb::arg("shape"), ref);
  m.def("reshape", &reshape, nb::arg("x"), nb::arg("new_shape"), ref);
  m.def("permute", &permute, nb::arg("x"), nb::arg("dims"), ref);
  m.def("squeeze", &squeeze, nb::arg("x"), nb::arg("dims"), nb::arg("squeeze_expanded"), ref);
  m.def("slice", &slice, nb::arg("x"), nb::arg("starts"), nb::arg("ends"), nb::arg("strides"),
        nb::arg("manual_normalization"), ref);
  m.def("set", &set, nb::arg("x"), ref);
  m.def("segment_set", &segmentSet, nb::arg("x"), ref);
  m.def("pad", &pad, nb::arg("x"), nb::arg("pad_widths"), nb::arg("value").none(), ref);
  m.def("cat", &cat, nb::arg("tensors"), nb::arg("dim"), ref);
  m.def("full", &full, nb::arg("shape"), nb::arg("fill_value"), nb::arg("dtype"), ref);
  m.def("iota", &iota, nb::arg("length"), nb::arg("start").none(), nb::arg("step").none(), nb::arg("dtype"), ref);
  m.def("size", &size, nb::arg("x"), nb::arg("dim"), ref);
  m.def("shape", &shape, nb::arg("x"), ref);
}

void bindIndexingAndMatmul(nb::module_& m) {
  m.def("index_select", &indexSelect, nb::arg("x"), nb::arg("index"), nb::arg("dim"), ref);
  m.def("gather", &gather, nb::arg("x"), nb::arg("index"), nb::arg("dim"), ref);
  m.def("take_along_axis", &takeAlongAxis, nb::arg("x"), nb::arg("index"), nb::arg("dim"), ref);
  m.def("cumsum", &cumsum, nb::arg("x"), nb::arg("dim"), ref);
  m.def("topk", &topk, nb::arg("x"), nb::arg("k"), nb::arg("dim"), nb::arg("largest"), nb::arg("sorted"), ref);
  m.def("argsort", &argsort, nb::arg("x"), nb::arg("dim"), nb::arg("descending"), nb::arg("stable"), ref);
  m.def("stride_order", &strideOrder, nb::arg("x"), nb::arg("stride_order"), ref);
  m.def("scatter", &scatter, nb::arg("x"), nb::arg("index"), nb::arg("src"), nb::arg("dim"), ref);
  m.def("index_put_accumulate", &indexPutAccumulate, nb::arg("acc"), nb::arg("index"), nb::arg("value"), ref);
  m.def("uniform", &uniform, nb::arg("low"), nb::arg("high"), nb::arg("shape"), nb::arg("seed"), nb::arg("offset"),
        nb::arg("dtype"), ref);
  m.def("normal", &normal, nb::arg("mean"), nb::arg("std"), nb::arg("shape"), nb::arg("seed"), nb::arg("offset"),
        nb::arg("dtype"), ref);
  m.def("matmul", &matmul, nb::arg("a"), nb::arg("b"), nb::arg("dtype"), ref);
  m.def("linear", &linear, nb::arg("a"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("dtype"), ref);
  m.def("quantize",
        [](TensorView* x, TensorView* scale, TensorView* zero_point, DataType dtype, std::optional<int64_t> axis,
           const std::vector<int64_t>& block_shape) {
          return quantize(x, scale, zero_point, dtype, quantAxis(axis, block_shape));
        },
        nb::arg("x"), nb::arg("scale"), nb::arg("zero_point").none(), nb::arg("dtype"), nb::arg("axis").none(),
        nb::arg("block_shape"), ref);
  m.def("dequantize",
        [](TensorView* q, TensorView* scale, TensorView* zero_point, DataType dtype, std::optional<int64_t> axis,
           const std::vector<int64_t>& block_shape) {
          return dequantize(q, scale, zero_point, dtype, quantAxis(axis, block_shape));
        },
        nb::arg("q"), nb::arg("scale"), nb::arg("zero_point").none(), nb::arg("dtype"), nb::arg("axis").none(),
        nb::arg("block_shape"), ref);
}

}  // namespace

void bindOps(nb::module_& m) {
  bindElementwise(m);
  bindReductions(m);
  bindShapeOps(m);
  bindIndexingAndMatmul(m);
}

}  // namespace braze::python
