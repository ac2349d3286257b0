// Fusions as JSON: a lossless, versioned record of a fusion, for repros, caches and tests. The
// restored fusion has the same ids (so the same names), layouts and typed attributes:
// fusionFromJson(toJson(f)).toString() == f.toString(). Malformed input raises braze::Error.
//
// Schema (version 1):
//   {"version": 1,
//    "vals": [{"id": 0, "kind": "tensor", "dtype": "BFloat16",
//              "domain": [[-1, "iteration"], [1, "broadcast"], [16, "expanded"], [-1, "reduction"]],
//              "contiguity": [true, null, null], "stride_order": [], "is_cpu": false},
//             {"id": 1, "kind": "scalar", "dtype": "Double", "value": null},
//             {"id": 2, "kind": "scalar", "dtype": "Double", "value": {"type": "double", "value": 1e-05}}],
//    "exprs": [{"id": 0, "op": "var_mean", "inputs": [0], "outputs": [3, 4],
//               "attrs": [{"name": "dims", "type": "ints", "value": [2]}, ...]}],
//    "inputs": [0, 1], "outputs": [4], "output_aliases": [{"output": 4, "input": 0}]}
// Vals and exprs are listed in creation order. Typed values ({"type", "value"}) keep the variant:
// "bool", "int", "double" (a number, or "nan" / "inf" / "-inf", which JSON cannot spell), and for
// attributes also "dtype" (a DataType name), "ints" and "string". Extents are -1 when symbolic.
#pragma once

#include "ir/fusion.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace braze {

inline constexpr int kFusionJsonVersion = 1;

nlohmann::json toJson(const Fusion& fusion);
// Checks the record (version, op and dtype names, ids, arities, acyclicity) and rebuilds the fusion.
Fusion fusionFromJson(const nlohmann::json& json);

// indent < 0: compact, one line; otherwise pretty-printed with that many spaces.
std::string toJsonString(const Fusion& fusion, int indent = -1);
Fusion fusionFromJsonString(std::string_view text);

}  // namespace braze
