// Fusion <-> JSON (schema in json.h). Reading trusts nothing: every field is checked for presence and
// type, names for being known, ids for existing, and the graph for being acyclic, so that a broken
// record is a braze::Error with a message rather than a crash later in a pass or the printer.
#include "ir/json.h"

#include "ir/json_results.h"

#include "support/error.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

namespace braze {
namespace {

using json = nlohmann::json;

// ---- writing ------------------------------------------------------------------------------------

constexpr std::pair<IterType, std::string_view> kIterTypeNames[] = {
    {IterType::Iteration, "iteration"},
    {IterType::Reduction, "reduction"},
    {IterType::Broadcast, "broadcast"},
    {IterType::Expanded, "expanded"},
};

std::string_view iterTypeName(IterType type) {
  for (const auto& [t, name] : kIterTypeNames) {
    if (t == type) return name;
  }
  BRAZE_UNREACHABLE("unknown IterType {}", static_cast<int>(type));
}

json doubleToJson(double d) {
  // JSON has no NaN or infinity; nlohmann would write them as null and lose the type.
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return d;
}

json typed(std::string_view type, json value) { return json{{"type", type}, {"value", std::move(value)}}; }

json attrToJson(const AttrValue& value) {
  struct Visitor {
    json operator()(bool b) const { return typed("bool", b); }
    json operator()(int64_t i) const { return typed("int", i); }
    json operator()(double d) const { return typed("double", doubleToJson(d)); }
    json operator()(DataType t) const { return typed("dtype", braze::toString(t)); }
    json operator()(const std::vector<int64_t>& v) const { return typed("ints", v); }
    json operator()(const std::string& s) const { return typed("string", s); }
  };
  return std::visit(Visitor{}, value);
}

json valToJson(const Val* v) {
  json j{{"id", v->id()}, {"kind", v->isTensor() ? "tensor" : "scalar"}, {"dtype", braze::toString(v->dtype())}};
  if (v->isScalar()) {
    const auto& value = v->asScalar()->value();
    j["value"] = value ? attrToJson(std::visit([](auto x) { return AttrValue{x}; }, *value)) : json(nullptr);
    if (const auto& written = v->asScalar()->writtenAs()) {
      j["written_as"] = {{"value", attrToJson(std::visit([](auto x) { return AttrValue{x}; }, written->value))},
                         {"dtype", braze::toString(written->dtype)}};
    }
    return j;
  }
  const TensorView* tv = v->asTensor();
  json domain = json::array();
  for (const IterDomain& id : tv->domain()) domain.push_back({id.extent, iterTypeName(id.type)});
  json contiguity = json::array();
  for (const auto& c : tv->layout().contiguity) contiguity.push_back(c ? json(*c) : json(nullptr));
  j["domain"] = std::move(domain);
  j["contiguity"] = std::move(contiguity);
  j["stride_order"] = tv->layout().stride_order;
  j["is_cpu"] = tv->isCpu();
  return j;
}

json idsOf(const std::vector<Val*>& vals) {
  json ids = json::array();
  for (const Val* v : vals) ids.push_back(v->id());
  return ids;
}

// ---- reading: checked access --------------------------------------------------------------------

std::string describe(const json& j) {
  std::string text = j.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

const json& field(const json& object, std::string_view key, const std::string& where) {
  BRAZE_CHECK(object.is_object(), "fusion json: {} must be an object, got {}", where, describe(object));
  auto it = object.find(key);
  BRAZE_CHECK(it != object.end(), "fusion json: {} has no field '{}'", where, key);
  return *it;
}

const json& arrayField(const json& object, std::string_view key, const std::string& where) {
  const json& value = field(object, key, where);
  BRAZE_CHECK(value.is_array(), "fusion json: '{}' of {} must be an array, got {}", key, where, describe(value));
  return value;
}

int64_t asInt(const json& j, const std::string& what) {
  BRAZE_CHECK(j.is_number_integer(), "fusion json: {} must be an integer, got {}", what, describe(j));
  return j.get<int64_t>();
}

bool asBool(const json& j, const std::string& what) {
  BRAZE_CHECK(j.is_boolean(), "fusion json: {} must be true or false, got {}", what, describe(j));
  return j.get<bool>();
}

const std::string& asString(const json& j, const std::string& what) {
  BRAZE_CHECK(j.is_string(), "fusion json: {} must be a string, got {}", what, describe(j));
  return j.get_ref<const std::string&>();
}

std::vector<int64_t> asInts(const json& j, const std::string& what) {
  BRAZE_CHECK(j.is_array(), "fusion json: {} must be an array of integers, got {}", what, describe(j));
  std::vector<int64_t> ints;
  for (const json& e : j) ints.push_back(asInt(e, what + " entry"));
  return ints;
}

double asDouble(const json& j, const std::string& what) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  BRAZE_CHECK(j.is_number(), "fusion json: {} must be a number or \"nan\"/\"inf\"/\"-inf\", got {}", what, describe(j));
  return j.get<double>();
}

DataType asDataType(const json& j, const std::string& what) {
  const std::string& name = asString(j, what);
  const std::optional<DataType> dtype = dataTypeFromString(name);
  BRAZE_CHECK(dtype.has_value(), "fusion json: {} '{}' is not a known dtype", what, name);
  return *dtype;
}

AttrValue attrFromJson(const json& j, const std::string& what) {
  const std::string& type = asString(field(j, "type", what), what + " type");
  const json& value = field(j, "value", what);
  if (type == "bool") return asBool(value, what);
  if (type == "int") return asInt(value, what);
  if (type == "double") return asDouble(value, what);
  if (type == "dtype") return asDataType(value, what);
  if (type == "ints") return asInts(value, what);
  BRAZE_CHECK(type == "string", "fusion json: {} has unknown type '{}' (expected bool, int, double, dtype, ints or string)",
              what, type);
  return asString(value, what);
}

ScalarValue scalarValueFromJson(const json& j, const std::string& what) {
  const AttrValue value = attrFromJson(j, what);
  BRAZE_CHECK(value.index() <= 2, "fusion json: {} must be a bool, int or double value, got {}", what, describe(j));
  if (const bool* b = std::get_if<bool>(&value)) return *b;
  if (const int64_t* i = std::get_if<int64_t>(&value)) return *i;
  return std::get<double>(value);
}

IterDomain iterDomainFromJson(const json& j, const std::string& what) {
  BRAZE_CHECK(j.is_array() && j.size() == 2, "fusion json: {} must be [extent, type], got {}", what, describe(j));
  const int64_t extent = asInt(j[0], what + " extent");
  BRAZE_CHECK(extent >= -1, "fusion json: {} extent {} must be -1 (symbolic) or >= 0", what, extent);
  const std::string& name = asString(j[1], what + " type");
  const auto* entry = std::find_if(std::begin(kIterTypeNames), std::end(kIterTypeNames),
                                   [&](const auto& e) { return e.second == name; });
  BRAZE_CHECK(entry != std::end(kIterTypeNames),
              "fusion json: {} has unknown dim type '{}' (expected iteration, reduction, broadcast or expanded)", what,
              name);
  return {extent, entry->first};
}

// ---- reading: the graph -------------------------------------------------------------------------

// How many operands and results each op takes, so that printers and passes can index them freely.
struct Arity {
  size_t min_inputs, max_inputs, outputs;
  size_t group = 1;  // variadic operands after the first `first_fixed` come in groups of this size
  size_t first_fixed = 0;
};

Arity arityOf(OpKind kind) {
  constexpr size_t kMany = std::numeric_limits<size_t>::max();
  switch (kind) {
    case OpKind::Addcmul: return {4, 4, 1};
    case OpKind::VarMean: return {1, 1, 2};
    case OpKind::Welford: return {1, 1, 3};
    case OpKind::BroadcastInDim:
    case OpKind::Expand:
    case OpKind::Reshape:
    case OpKind::Cat:
    case OpKind::Full: return {1, kMany, 1};
    case OpKind::Slice: return {1, kMany, 1, 3, 1};  // x, then starts, ends, strides
    case OpKind::Pad: return {2, kMany, 1, 2, 2};    // x, value, then (left, right) pairs
    case OpKind::Iota: return {3, 3, 1};
    case OpKind::Cumsum:
    case OpKind::Argsort: return {1, 1, 1};
    case OpKind::TopK: return {2, 2, 2};  // x, k; values, indices
    case OpKind::Scatter:
    case OpKind::IndexPutAccumulate: return {3, 3, 1};
    case OpKind::Uniform:
    case OpKind::Normal: return {4, kMany, 1};
    case OpKind::Linear:
    case OpKind::Quantize:
    case OpKind::Dequantize: return {2, 3, 1};
    default: break;
  }
  switch (opInfo(kind).category) {
    case OpCategory::Binary:
    case OpCategory::Indexing:
    case OpCategory::Matmul: return {2, 2, 1};
    case OpCategory::Ternary: return {3, 3, 1};
    default: return {1, 1, 1};
  }
}

void checkArity(OpKind kind, size_t inputs, size_t outputs, const std::string& where) {
  const Arity a = arityOf(kind);
  const bool inputs_ok = inputs >= a.min_inputs && inputs <= a.max_inputs && (inputs - a.first_fixed) % a.group == 0;
  BRAZE_CHECK(inputs_ok, "fusion json: {} has {} inputs, which {} does not take", where, inputs, opName(kind));
  BRAZE_CHECK(outputs == a.outputs, "fusion json: {} has {} outputs but {} has {}", where, outputs, opName(kind),
              a.outputs);
}

// The axis attributes that passes index with. The builders store them normalized: "dim" within the
// rank of the first input, "dims" ascending and distinct (a permutation for permute), and the
// outputs' rank follows from them. A record is held to the same, so that a hand-written one can
// neither index out of range nor count a repeated dim as another reduction domain.
void checkAxes(OpKind kind, const std::vector<Val*>& inputs, const std::vector<Val*>& outputs, const Attributes& attrs,
               const std::string& where) {
  const OpCategory category = opInfo(kind).category;
  const bool takes_dims = category == OpCategory::Reduction || category == OpCategory::Normalization ||
                          kind == OpKind::Permute || kind == OpKind::Squeeze;
  constexpr OpKind kTakesDim[] = {OpKind::Cat,    OpKind::IndexSelect, OpKind::Gather,  OpKind::TakeAlongAxis,
                                  OpKind::Cumsum, OpKind::TopK,        OpKind::Argsort, OpKind::Scatter,
                                  OpKind::Size};
  const bool takes_dim = std::find(std::begin(kTakesDim), std::end(kTakesDim), kind) != std::end(kTakesDim);
  if (!takes_dims && !takes_dim) return;
  BRAZE_CHECK(!inputs.empty() && inputs[0]->isTensor(), "fusion json: {} needs a tensor as its first input", where);
  const TensorView* x = inputs[0]->asTensor();
  const int64_t rank = x->rank();
  const std::string_view name = takes_dims ? "dims" : "dim";
  BRAZE_CHECK(attrs.has(name), "fusion json: {} has no attribute '{}'", where, name);
  const AttrValue& value = attrs.get(name);
  if (takes_dim) {
    const int64_t* dim = std::get_if<int64_t>(&value);
    BRAZE_CHECK(dim != nullptr && *dim >= 0 && *dim < rank,
                "fusion json: {} attribute 'dim' is {}; expected an int in [0, {}) for {} of rank {}", where,
                toString(value), rank, x->name(), rank);
    return;
  }
  const auto* dims = std::get_if<std::vector<int64_t>>(&value);
  BRAZE_CHECK(dims != nullptr, "fusion json: {} attribute 'dims' is {}; expected ints", where, toString(value));
  std::vector<int64_t> sorted = *dims;
  std::sort(sorted.begin(), sorted.end());
  const bool in_range = sorted.empty() || (sorted.front() >= 0 && sorted.back() < rank);
  const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  const bool permutation = kind != OpKind::Permute || static_cast<int64_t>(sorted.size()) == rank;
  const bool ascending = kind == OpKind::Permute || sorted == *dims;
  BRAZE_CHECK(in_range && distinct && permutation && ascending,
              "fusion json: {} dims [{}] for {} of rank {}: expected {}", where, fmt::join(*dims, ", "), x->name(),
              rank, kind == OpKind::Permute ? "a permutation of its dims" : "distinct dims in range, ascending");
  // keepdim as the ops that take it (a reduction, var, var_mean) read it.
  const bool* keep = attrs.has("keepdim") && kind != OpKind::Squeeze && kind != OpKind::Welford
                         ? std::get_if<bool>(&attrs.get("keepdim"))
                         : nullptr;
  const bool keepdim = keep != nullptr && *keep;
  const int64_t out_rank = kind == OpKind::Permute || keepdim ? rank : rank - static_cast<int64_t>(dims->size());
  for (const Val* out : outputs) {
    BRAZE_CHECK(out->isTensor() && out->asTensor()->rank() == out_rank,
                "fusion json: {} output {} should be a tensor of rank {}", where, out->name(), out_rank);
  }
}

// The other dims that passes index with: an index (and a scatter's src) of the rank of the tensor it
// picks from, a per-channel quantization's axis, broadcast_in_dim's output dims (one per input dim,
// increasing, within the output's rank).
void checkIndexedOperands(OpKind kind, const std::vector<Val*>& inputs, const std::vector<Val*>& outputs,
                          const Attributes& attrs, const std::string& where) {
  const auto rankOf = [](const Val* v) { return v->isTensor() ? v->asTensor()->rank() : int64_t{-1}; };
  const int64_t rank = inputs.empty() ? -1 : rankOf(inputs[0]);
  if (kind == OpKind::Gather || kind == OpKind::TakeAlongAxis || kind == OpKind::Scatter) {
    for (size_t i = 1; i < inputs.size(); ++i) {
      BRAZE_CHECK(rankOf(inputs[i]) == rank, "fusion json: {} operand {} ({}) should be a tensor of rank {}", where,
                  i, inputs[i]->name(), rank);
    }
  }
  if (attrs.has("axis")) {
    const int64_t* axis = std::get_if<int64_t>(&attrs.get("axis"));
    BRAZE_CHECK(axis != nullptr && *axis >= 0 && *axis < rank,
                "fusion json: {} attribute 'axis' is {}; expected an int in [0, {})", where,
                toString(attrs.get("axis")), rank);
  }
  if (kind == OpKind::BroadcastInDim) {
    BRAZE_CHECK(attrs.has("broadcast_dims"), "fusion json: {} has no attribute 'broadcast_dims'", where);
    const auto* dims = std::get_if<std::vector<int64_t>>(&attrs.get("broadcast_dims"));
    const int64_t out_rank = rankOf(outputs[0]);
    bool fits = dims != nullptr && static_cast<int64_t>(dims->size()) == rank;
    for (size_t i = 0; fits && i < dims->size(); ++i) {
      fits = (*dims)[i] >= 0 && (*dims)[i] < out_rank && (i == 0 || (*dims)[i] > (*dims)[i - 1]);
    }
    BRAZE_CHECK(fits, "fusion json: {} attribute 'broadcast_dims' is {}; expected {} increasing dims in [0, {})", where,
                toString(attrs.get("broadcast_dims")), rank, out_rank);
  }
}

// Kahn's algorithm: every expr must become ready, else some chain of exprs feeds itself (which would
// make exprsToEvaluate loop forever).
void checkAcyclic(const Fusion& fusion) {
  std::unordered_map<const Expr*, size_t> pending;
  std::vector<const Expr*> ready;
  for (const auto& e : fusion.allExprs()) {
    size_t n = 0;
    for (const Val* in : e->inputs()) n += in->definition() != nullptr ? 1 : 0;
    pending[e.get()] = n;
    if (n == 0) ready.push_back(e.get());
  }
  size_t done = 0;
  while (!ready.empty()) {
    const Expr* e = ready.back();
    ready.pop_back();
    ++done;
    for (const Val* out : e->outputs()) {
      for (const Expr* use : out->uses()) {
        for (const Val* in : use->inputs()) {
          if (in == out && --pending[use] == 0) ready.push_back(use);
        }
      }
    }
  }
  BRAZE_CHECK(done == fusion.allExprs().size(), "fusion json: the exprs form a cycle ({} of {} can be ordered)", done,
              fusion.allExprs().size());
}

class Reader {
 public:
  explicit Reader(const json& root) : root_(root) {}

  Fusion read() {
    BRAZE_CHECK(root_.is_object(), "fusion json: expected an object at the top level, got {}", describe(root_));
    const int64_t version = asInt(field(root_, "version", "the fusion"), "'version'");
    BRAZE_CHECK(version == kFusionJsonVersion, "fusion json: version {} is not supported (this braze reads version {})",
                version, kFusionJsonVersion);
    for (const json& v : arrayField(root_, "vals", "the fusion")) readVal(v);
    for (const json& e : arrayField(root_, "exprs", "the fusion")) readExpr(e);
    checkAcyclic(fusion_);
    for (const json& id : arrayField(root_, "inputs", "the fusion")) fusion_.addInput(val(id, "'inputs'"));
    readOutputs();
    checkEveryValueIsComputed(fusion_);
    fusion_.restoreNextIds(next_val_id_, next_expr_id_);
    return std::move(fusion_);
  }

 private:
  // The largest id a record's val or expr may have: passes keep tables indexed by ids, so an id far beyond
  // the record's node count would make them huge. Builders number from 0; removed nodes leave gaps.
  int64_t maxId() const {
    const auto count = [&](const char* key) {
      auto it = root_.find(key);
      return it != root_.end() && it->is_array() ? static_cast<int64_t>(it->size()) : 0;
    };
    return 16 * (count("vals") + count("exprs")) + 1024;
  }

  Val* val(const json& id_json, const std::string& where) const {
    const int64_t id = asInt(id_json, where + " entry");
    auto it = vals_.find(id);
    BRAZE_CHECK(it != vals_.end(), "fusion json: {} refers to val {}, which is not in 'vals'", where, id);
    return it->second;
  }

  std::vector<Val*> valList(const json& object, std::string_view key, const std::string& where) const {
    std::vector<Val*> vals;
    for (const json& id : arrayField(object, key, where)) vals.push_back(val(id, fmt::format("'{}' of {}", key, where)));
    return vals;
  }

  void readVal(const json& j) {
    const std::string where = fmt::format("val #{}", vals_.size());
    const int64_t id = asInt(field(j, "id", where), where + " id");
    BRAZE_CHECK(id >= 0 && id <= maxId(),
                "fusion json: {} has id {} (ids are 0 to {} for this record's size: tables are indexed by them)", where,
                id, maxId());
    BRAZE_CHECK(!vals_.count(id), "fusion json: val id {} appears twice", id);
    const std::string& kind = asString(field(j, "kind", where), where + " kind");
    const DataType dtype = asDataType(field(j, "dtype", where), where + " dtype");
    BRAZE_CHECK(dtype != DataType::Null, "fusion json: {} (id {}) has dtype Null; vals need a dtype", where, id);
    fusion_.restoreNextIds(id, next_expr_id_);
    Val* created = nullptr;
    if (kind == "scalar") {
      const json& value = field(j, "value", where);
      std::optional<ScalarValue> constant;
      if (!value.is_null()) {
        constant = scalarValueFromJson(value, where + " value");
        // Fusion::constant stores the value a dtype holds: kernels and the reference then read the same one.
        const ScalarValue held = valueOfType(*constant, dtype);
        const auto nan = [](const ScalarValue& x) {
          return std::holds_alternative<double>(x) && std::isnan(std::get<double>(x));
        };
        const bool same = held == *constant || (nan(held) && nan(*constant));
        BRAZE_CHECK(same, "fusion json: {} (id {}) is a constant of dtype {} holding {}, which that dtype holds as {}",
                    where, id, braze::toString(dtype), braze::toString(*constant), braze::toString(held));
      }
      Scalar* scalar = fusion_.newScalar(dtype, constant);
      if (const auto written = j.find("written_as"); written != j.end()) {
        const std::string what = where + " written_as";
        scalar->setWrittenAs({scalarValueFromJson(field(*written, "value", what), what + " value"),
                              asDataType(field(*written, "dtype", what), what + " dtype")});
      }
      created = scalar;
    } else {
      BRAZE_CHECK(kind == "tensor", "fusion json: {} has kind '{}' (expected tensor or scalar)", where, kind);
      std::vector<IterDomain> domain;
      for (const json& d : arrayField(j, "domain", where)) {
        domain.push_back(iterDomainFromJson(d, fmt::format("{} dim {}", where, domain.size())));
      }
      TensorLayout layout;
      for (const json& c : arrayField(j, "contiguity", where)) {
        layout.contiguity.push_back(c.is_null() ? std::nullopt : std::optional<bool>(asBool(c, where + " contiguity")));
      }
      layout.stride_order = asInts(field(j, "stride_order", where), where + " stride_order");
      if (!layout.stride_order.empty()) {  // trusted later as a permutation of the logical dims
        std::vector<int64_t> sorted = layout.stride_order;
        std::sort(sorted.begin(), sorted.end());
        size_t logical = 0;
        for (const IterDomain& d : domain) logical += d.isReduction() ? 0 : 1;
        bool permutation = sorted.size() == logical;
        for (size_t i = 0; permutation && i < sorted.size(); ++i) permutation = sorted[i] == static_cast<int64_t>(i);
        BRAZE_CHECK(permutation, "fusion json: {} stride_order [{}] is not a permutation of its {} logical dims", where,
                    fmt::join(layout.stride_order, ", "), logical);
      }
      const bool is_cpu = asBool(field(j, "is_cpu", where), where + " is_cpu");
      created = fusion_.newTensor(dtype, std::move(domain), std::move(layout), is_cpu);
    }
    vals_[id] = created;
    next_val_id_ = std::max(next_val_id_, id + 1);
  }

  void readExpr(const json& j) {
    const std::string where = fmt::format("expr #{}", expr_ids_.size());
    const int64_t id = asInt(field(j, "id", where), where + " id");
    BRAZE_CHECK(id >= 0 && id <= maxId() && expr_ids_.insert(id).second,
                "fusion json: expr id {} is negative, above {} (tables are indexed by ids) or appears twice", id,
                maxId());
    const std::string& name = asString(field(j, "op", where), where + " op");
    const std::optional<OpKind> kind = opKindFromName(name);
    BRAZE_CHECK(kind.has_value(), "fusion json: {} has unknown op '{}'", where, name);
    const std::string op_where = fmt::format("{} ({})", where, name);
    std::vector<Val*> inputs = valList(j, "inputs", op_where);
    std::vector<Val*> outputs = valList(j, "outputs", op_where);
    checkArity(*kind, inputs.size(), outputs.size(), op_where);
    for (size_t i = 0; i < outputs.size(); ++i) {
      BRAZE_CHECK(outputs[i]->definition() == nullptr && std::count(outputs.begin(), outputs.end(), outputs[i]) == 1,
                  "fusion json: {} defines {}, which already has a definition", op_where, outputs[i]->name());
    }
    Attributes attrs;
    for (const json& a : arrayField(j, "attrs", op_where)) {
      const std::string attr_where = op_where + " attribute";
      std::string attr_name = asString(field(a, "name", attr_where), attr_where + " name");
      BRAZE_CHECK(!attrs.has(attr_name), "fusion json: {} has attribute '{}' twice", op_where, attr_name);
      attrs.set(attr_name, attrFromJson(a, fmt::format("{} '{}'", attr_where, attr_name)));
    }
    checkAxes(*kind, inputs, outputs, attrs, op_where);
    checkIndexedOperands(*kind, inputs, outputs, attrs, op_where);
    checkResultsAsBuilt(*kind, inputs, outputs, attrs, op_where);
    fusion_.restoreNextIds(next_val_id_, id);
    fusion_.newExpr(*kind, std::move(inputs), std::move(outputs), std::move(attrs));
    next_expr_id_ = std::max(next_expr_id_, id + 1);
  }

  void readOutputs() {
    std::unordered_map<Val*, Val*> aliases;
    for (const json& a : arrayField(root_, "output_aliases", "the fusion")) {
      Val* out = val(field(a, "output", "an output alias"), "'output_aliases'");
      aliases[out] = val(field(a, "input", "an output alias"), "'output_aliases'");
    }
    // aliasOutputToInput also adds the output, so each output is added once, in the recorded order.
    for (Val* out : valList(root_, "outputs", "the fusion")) {
      auto it = aliases.find(out);
      if (it == aliases.end()) {
        fusion_.addOutput(out);
        continue;
      }
      fusion_.aliasOutputToInput(out, it->second);
      aliases.erase(it);
    }
    BRAZE_CHECK(aliases.empty(), "fusion json: 'output_aliases' names {}, which is not in 'outputs'",
                aliases.empty() ? "" : aliases.begin()->first->name());
  }

  const json& root_;
  Fusion fusion_;
  std::unordered_map<int64_t, Val*> vals_;
  std::set<int64_t> expr_ids_;
  int64_t next_val_id_ = 0;
  int64_t next_expr_id_ = 0;
};

}  // namespace

json toJson(const Fusion& fusion) {
  json vals = json::array();
  for (const auto& v : fusion.vals()) vals.push_back(valToJson(v.get()));
  json exprs = json::array();
  for (const auto& e : fusion.allExprs()) {
    json attrs = json::array();
    for (const auto& [name, value] : e->attrs().entries()) {
      json a = attrToJson(value);
      a["name"] = name;
      attrs.push_back(std::move(a));
    }
    exprs.push_back({{"id", e->id()},
                     {"op", e->name()},
                     {"inputs", idsOf(e->inputs())},
                     {"outputs", idsOf(e->outputs())},
                     {"attrs", std::move(attrs)}});
  }
  // outputAliases() is keyed by pointer; sort by output id so the record does not depend on addresses.
  std::vector<std::pair<int64_t, int64_t>> aliases;
  for (const auto& [out, in] : fusion.outputAliases()) aliases.emplace_back(out->id(), in->id());
  std::sort(aliases.begin(), aliases.end());
  json alias_list = json::array();
  for (const auto& [out, in] : aliases) alias_list.push_back({{"output", out}, {"input", in}});
  return json{{"version", kFusionJsonVersion}, {"vals", std::move(vals)},         {"exprs", std::move(exprs)},
              {"inputs", idsOf(fusion.inputs())}, {"outputs", idsOf(fusion.outputs())}, {"output_aliases", std::move(alias_list)}};
}

Fusion fusionFromJson(const json& j) {
  try {
    return Reader(j).read();
  } catch (const json::exception& e) {
    // The checked accessors should leave nothing to nlohmann; this keeps a missed case an Error too.
    throwError(ErrorKind::Value, __FILE__, __LINE__, fmt::format("fusion json: malformed record: {}", e.what()));
  }
}

std::string toJsonString(const Fusion& fusion, int indent) { return toJson(fusion).dump(indent); }

Fusion fusionFromJsonString(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throwError(ErrorKind::Value, __FILE__, __LINE__, fmt::format("fusion json: not valid JSON: {}", e.what()));
  }
  return fusionFromJson(j);
}

}  // namespace braze
