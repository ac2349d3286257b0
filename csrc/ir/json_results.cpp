#include "ir/json_results.h"

#include "ir/ops.h"
#include "support/error.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string_view>

namespace braze {
namespace {

// A value of `v`'s kind, dtype and dims (a constant's value kept) in `scratch`.
Val* standIn(Fusion& scratch, const Val* v) {
  if (v->isTensor()) return scratch.newTensor(v->dtype(), v->asTensor()->domain(), v->asTensor()->layout());
  return scratch.newScalar(v->dtype(), v->asScalar()->isConstant() ? v->asScalar()->value() : std::nullopt);
}

// The 0-d tensor `v` is a broadcast of, or null. An elementwise builder broadcasts a 0-d operand to its
// result's rank after choosing the result's dtype, in which a 0-d operand takes no part; a broadcast the
// definition wrote itself is an operand with dims. The reader tries both.
const Val* zeroDimBroadcast(const Val* v) {
  const Expr* made = v->definition();
  const bool is = made != nullptr && made->kind() == OpKind::Broadcast && made->input(0)->isTensor() &&
                  made->input(0)->asTensor()->rank() == 0;
  return is ? made->input(0) : nullptr;
}

// "an Int32 tensor of rank 2", "a Float scalar".
std::string kindOf(const Val* v) {
  const std::string_view dtype = toString(v->dtype());
  const char* article = std::string_view("AEIOU").find(dtype.front()) == std::string_view::npos ? "a" : "an";
  return v->isTensor() ? fmt::format("{} {} tensor of rank {}", article, dtype, v->asTensor()->rank())
                       : fmt::format("{} {} scalar", article, dtype);
}

// `in[i]` as a tensor, for a builder that takes one there.
TensorView* tensorAt(const std::vector<Val*>& in, size_t i, std::string_view op) {
  BRAZE_CHECK(in.at(i)->isTensor(), "{}: operand {} must be a tensor, got {}", op, i, kindOf(in[i]));
  return in[i]->asTensor();
}

// What the builder of `kind` makes of stand-ins of `inputs` with `attrs`: its results, or none for the
// views with size operands (reshape, expand, broadcast_in_dim, slice), whose operands checkViewOperands
// checks instead. `before_broadcasts`: 0-d tensors broadcast to the result's rank stand in as 0-d.
std::vector<Val*> rebuilt(Fusion& scratch, OpKind kind, const std::vector<Val*>& inputs, const Attributes& attrs,
                          bool before_broadcasts = false) {
  std::vector<Val*> in;
  for (const Val* v : inputs) {
    const Val* zero_d = before_broadcasts ? zeroDimBroadcast(v) : nullptr;
    in.push_back(standIn(scratch, zero_d != nullptr ? zero_d : v));
  }
  const std::string_view op = opName(kind);
  const auto tensor = [&](size_t i) { return tensorAt(in, i, op); };
  switch (opInfo(kind).category) {
    case OpCategory::Unary: return {unaryOp(kind, in.at(0))};
    case OpCategory::Binary: return {binaryOp(kind, in.at(0), in.at(1))};
    case OpCategory::Ternary:
      return {kind == OpKind::Addcmul ? addcmul(in.at(0), in.at(1), in.at(2), in.at(3))
                                      : ternaryOp(kind, in.at(0), in.at(1), in.at(2))};
    case OpCategory::Cast: return {cast(in.at(0), attrs.getDataType("dtype"))};
    case OpCategory::Reduction:
      return {reduce(kind, tensor(0), attrs.getInts("dims"), attrs.getBool("keepdim"), attrs.getDataType("dtype"))};
    default: break;
  }
  switch (kind) {
    case OpKind::Cumsum: return {cumsum(tensor(0), attrs.getInt("dim"))};
    case OpKind::Argsort:
      return {argsort(tensor(0), attrs.getInt("dim"), attrs.getBool("descending"), attrs.getBool("stable"))};
    case OpKind::TopK: {
      const auto [values, indices] =
          topk(tensor(0), in.at(1), attrs.getInt("dim"), attrs.getBool("largest"), attrs.getBool("sorted"));
      return {values, indices};
    }
    case OpKind::Scatter: return {scatter(tensor(0), tensor(1), tensor(2), attrs.getInt("dim"))};
    case OpKind::IndexPutAccumulate: return {indexPutAccumulate(tensor(0), tensor(1), tensor(2))};
    case OpKind::IndexSelect: return {indexSelect(tensor(0), tensor(1), attrs.getInt("dim"))};
    case OpKind::Gather: return {gather(tensor(0), tensor(1), attrs.getInt("dim"))};
    case OpKind::TakeAlongAxis: return {takeAlongAxis(tensor(0), tensor(1), attrs.getInt("dim"))};
    case OpKind::Broadcast: {
      std::vector<bool> flags;
      for (int64_t flag : attrs.getInts("is_broadcast_dim")) {
        BRAZE_CHECK(flag == 0 || flag == 1, "broadcast: is_broadcast_dim holds {}, not 0 or 1", flag);
        flags.push_back(flag == 1);
      }
      return {broadcast(tensor(0), flags)};
    }
    case OpKind::Permute: return {permute(tensor(0), attrs.getInts("dims"))};
    case OpKind::Size: return {size(tensor(0), attrs.getInt("dim"))};
    case OpKind::Set: return {set(tensor(0))};
    case OpKind::SegmentSet: return {segmentSet(tensor(0))};
    case OpKind::StrideOrder: return {strideOrder(tensor(0), attrs.getInts("stride_order"))};
    case OpKind::Full:  // inputs: the fill value, then the shape
      return {full(std::vector<Val*>(in.begin() + 1, in.end()), in.at(0), attrs.getDataType("dtype"))};
    case OpKind::Iota: return {iota(in.at(0), in.at(1), in.at(2), attrs.getDataType("dtype"))};
    case OpKind::Squeeze: return {squeeze(tensor(0), attrs.getInts("dims"), attrs.getBool("squeeze_expanded"))};
    case OpKind::Pad: return {pad(tensor(0), std::vector<Val*>(in.begin() + 2, in.end()), in.at(1))};
    case OpKind::Cat: {
      std::vector<TensorView*> tensors;
      for (size_t i = 0; i < in.size(); ++i) tensors.push_back(tensor(i));
      return {cat(tensors, attrs.getInt("dim"))};
    }
    case OpKind::Var:
      return {var(tensor(0), attrs.getInts("dims"), attrs.getDouble("correction"), attrs.getBool("keepdim"))};
    case OpKind::VarMean: {
      const auto [v, mean] =
          varMean(tensor(0), attrs.getInts("dims"), attrs.getDouble("correction"), attrs.getBool("keepdim"));
      return {v, mean};
    }
    case OpKind::Welford: {
      const auto [avg, var_sum, n] = welford(tensor(0), attrs.getInts("dims"));
      return {avg, var_sum, n};
    }
    case OpKind::Quantize:
    case OpKind::Dequantize: {
      QuantAxis granularity;
      const std::string& kind_of_scale = attrs.getString("granularity");
      BRAZE_CHECK(kind_of_scale == "tensor" || kind_of_scale == "channel" || kind_of_scale == "block",
                  "{}: granularity '{}' (expected tensor, channel or block)", op, kind_of_scale);
      if (kind_of_scale == "channel") granularity.axis = attrs.getInt("axis");
      if (kind_of_scale == "block") granularity.block_shape = attrs.getInts("block_shape");
      TensorView* zero_point = in.size() > 2 ? tensor(2) : nullptr;
      const DataType dtype = attrs.getDataType("dtype");
      return {kind == OpKind::Quantize ? quantize(tensor(0), tensor(1), zero_point, dtype, granularity)
                                       : dequantize(tensor(0), tensor(1), zero_point, dtype, granularity)};
    }
    case OpKind::Uniform:
    case OpKind::Normal: {
      // inputs: the two parameters, seed, offset, then the shape
      const std::vector<Val*> shape(in.begin() + 4, in.end());
      const DataType dtype = attrs.getDataType("dtype");
      return {kind == OpKind::Uniform ? uniform(in.at(0), in.at(1), shape, in.at(2), in.at(3), dtype)
                                      : normal(in.at(0), in.at(1), shape, in.at(2), in.at(3), dtype)};
    }
    case OpKind::Matmul: return {matmul(tensor(0), tensor(1), attrs.getDataType("dtype"))};
    case OpKind::Linear:
      return {linear(tensor(0), tensor(1), in.size() > 2 ? tensor(2) : nullptr, attrs.getDataType("dtype"))};
    default: return {};
  }
}

// A view's operands: one tensor viewed, and integer sizes or bounds; the view keeps the tensor's dtype.
void checkViewOperands(OpKind kind, const std::vector<Val*>& inputs, const std::vector<Val*>& outputs,
                       const std::string& where) {
  BRAZE_CHECK(!inputs.empty() && inputs[0]->isTensor(), "fusion json: {} views {}, which is no tensor", where,
              inputs.empty() ? std::string("nothing") : inputs[0]->name() + " (" + kindOf(inputs[0]) + ")");
  // One size per result dim (reshape, expand, broadcast_in_dim), or a start, end and step per dim (slice).
  const int64_t in_rank = inputs[0]->asTensor()->rank();
  const int64_t sizes = static_cast<int64_t>(inputs.size()) - 1;
  const int64_t out_rank = outputs.at(0)->isTensor() ? outputs[0]->asTensor()->rank() : -1;
  const bool takes_sizes = kind == OpKind::Reshape || kind == OpKind::Expand || kind == OpKind::BroadcastInDim;
  BRAZE_CHECK(!takes_sizes || sizes == out_rank, "fusion json: {} has {} sizes for a result of rank {}", where,
              sizes, out_rank);
  BRAZE_CHECK(kind != OpKind::Expand || in_rank == out_rank,
              "fusion json: {} expands {} of rank {} to a result of rank {}", where, inputs[0]->name(), in_rank,
              out_rank);
  BRAZE_CHECK(kind != OpKind::Slice || (sizes == 3 * in_rank && out_rank == in_rank),
              "fusion json: {} has {} bounds and a result of rank {} for {} of rank {} (a start, an end and a step "
              "per dim)", where, sizes, out_rank, inputs[0]->name(), in_rank);
  for (size_t i = 1; i < inputs.size(); ++i) {
    BRAZE_CHECK(inputs[i]->isScalar() && isIntegral(inputs[i]->dtype()),
                "fusion json: {} reads {} ({}) as operand {}, a size or bound: an integer scalar", where,
                inputs[i]->name(), kindOf(inputs[i]), i);
  }
  for (const Val* out : outputs) {
    BRAZE_CHECK(out->dtype() == inputs[0]->dtype(), "fusion json: {} gives {} as {}, a view of {} ({})", where,
                out->name(), kindOf(out), inputs[0]->name(), kindOf(inputs[0]));
  }
}

// The first of `outputs` that `want` (a rebuild's results) differs from in kind, dtype or rank; none if none.
std::optional<size_t> firstDifference(const std::vector<Val*>& want, const std::vector<Val*>& outputs) {
  for (size_t i = 0; i < want.size() && i < outputs.size(); ++i) {
    const Val* out = outputs[i];
    if (want[i]->isTensor() != out->isTensor() || want[i]->dtype() != out->dtype() ||
        (out->isTensor() && want[i]->asTensor()->rank() != out->asTensor()->rank())) {
      return i;
    }
  }
  return std::nullopt;
}

}  // namespace

void checkResultsAsBuilt(OpKind kind, const std::vector<Val*>& inputs, const std::vector<Val*>& outputs,
                         const Attributes& attrs, const std::string& where) {
  if (isElementwise(kind)) {
    // Kernels index every tensor operand as the result: the builders broadcast them to its rank first.
    const Val* out = outputs.at(0);
    for (const Val* in : inputs) {
      BRAZE_CHECK(!in->isTensor() || !out->isTensor() || in->asTensor()->rank() == out->asTensor()->rank(),
                  "fusion json: {} reads {} ({}) into {} ({}): an elementwise op's tensors have its result's rank",
                  where, in->name(), kindOf(in), out->name(), kindOf(out));
    }
  }
  if (isMetaOp(kind)) checkViewOperands(kind, inputs, outputs, where);
  Fusion scratch;
  std::vector<Val*> want;
  std::optional<size_t> differs;
  try {
    want = rebuilt(scratch, kind, inputs, attrs);
    differs = firstDifference(want, outputs);
    if (differs && isElementwise(kind) && std::any_of(inputs.begin(), inputs.end(), zeroDimBroadcast) &&
        !firstDifference(rebuilt(scratch, kind, inputs, attrs, /*before_broadcasts=*/true), outputs)) {
      differs.reset();
    }
  } catch (const Error& e) {  // the builder's own check (or a missing attribute): the record is at fault
    throw Error(e.kind() == ErrorKind::Internal ? ErrorKind::Value : e.kind(),
                fmt::format("fusion json: {}: {}", where, e.what()));
  }
  // The message's arguments are read only when the check fails.
  BRAZE_CHECK(!differs, "fusion json: {} gives {} as {}, where its operands make {}", where,
              outputs[*differs]->name(), kindOf(outputs[*differs]), kindOf(want[*differs]));
}

void checkEveryValueIsComputed(const Fusion& fusion) {
  // Fusion::addInput has refused an input listed twice or computed by an expr.
  const std::set<const Val*> inputs(fusion.inputs().begin(), fusion.inputs().end());
  const auto computed = [&](const Val* v) {
    return inputs.count(v) != 0 || v->definition() != nullptr || (v->isScalar() && v->asScalar()->isConstant());
  };
  for (const auto& e : fusion.allExprs()) {
    for (const Val* in : e->inputs()) {
      BRAZE_CHECK(computed(in), "fusion json: expr {} ({}) reads {}, which is neither an input, a constant nor "
                  "an expr's result", e->id(), opName(e->kind()), in->name());
    }
  }
  for (const Val* out : fusion.outputs()) {
    BRAZE_CHECK(computed(out), "fusion json: output {} is neither an input, a constant nor an expr's result",
                out->name());
  }
  for (const auto& v : fusion.vals()) {
    if (!v->isTensor() || !v->asTensor()->isCpu()) continue;
    BRAZE_CHECK(inputs.count(v.get()) != 0 && v->asTensor()->rank() == 0,
                "fusion json: {} has is_cpu (a CPU scalar), which only a 0-d fusion input may have ({})", v->name(),
                kindOf(v.get()));
  }
}

}  // namespace braze
