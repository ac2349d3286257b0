// Fusion::toString (readable IR, one line per expr) and Fusion::toPython (a script that rebuilds the
// fusion with braze's Python frontend, which mirrors nvFuser's fd.ops). Both print an expr's
// arguments with the same code: what differs is only how a dtype, a constant and the call look, so
// the two printouts can never disagree about an op's keywords.
//
// How an expr's arguments print: operands positionally, then its attributes as `name=value` in the
// order the builder stored them. The ops whose Python signature differs from that layout (lists of
// shape scalars, the quantize granularity, reductions' default dtype) have their own function.
#include "ir/fusion.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <span>
#include <set>
#include <string>
#include <vector>

namespace braze {
namespace {

// The two dialects: the IR dump ("Float", "1e-05") and Python ("DataType.Float",
// "fd.define_scalar(1e-05, dtype=DataType.Double)").
struct Style {
  bool python = false;
  // Scalar inputs each execute draws (the seed and offset of a random op defined without them): a script
  // leaves them out, as its definition did.
  std::span<const Val* const> drawn = {};

  bool isDrawn(const Val* v) const { return std::find(drawn.begin(), drawn.end(), v) != drawn.end(); }

  std::string dtype(DataType t) const {
    return python ? fmt::format("DataType.{}", braze::toString(t)) : std::string(braze::toString(t));
  }

  // An operand: constants inline (Python has no literal operands, so it defines them in place),
  // everything else by name.
  std::string operand(const Val* v) const {
    if (v == nullptr) return "None";
    if (v->isScalar() && v->asScalar()->isConstant()) {
      const Scalar* s = v->asScalar();
      if (!python) return braze::toString(*s->value());
      if (const auto& written = s->writtenAs()) {
        return fmt::format("fd.define_scalar({}, dtype={})", braze::toString(written->value), dtype(written->dtype));
      }
      return fmt::format("fd.define_scalar({}, dtype={})", braze::toString(*s->value()), dtype(v->dtype()));
    }
    return v->name();
  }

  // A shape-like argument: a list mixing plain constants (ints) and the names of symbolic scalars.
  std::string list(std::span<Val* const> vals) const {
    std::vector<std::string> parts;
    for (const Val* v : vals) {
      const bool constant = v->isScalar() && v->asScalar()->isConstant();
      parts.push_back(constant ? braze::toString(*v->asScalar()->value()) : v->name());
    }
    return fmt::format("[{}]", fmt::join(parts, ", "));
  }

  std::string attr(const AttrValue& value) const {
    if (const DataType* t = std::get_if<DataType>(&value)) return dtype(*t);
    return braze::toString(value);
  }
};

using Args = std::vector<std::string>;

std::span<Val* const> inputsFrom(const Expr* e, size_t first, size_t count) {
  const auto& in = e->inputs();
  first = std::min(first, in.size());
  count = std::min(count, in.size() - first);
  return std::span<Val* const>(in).subspan(first, count);
}

std::string keyword(std::string_view name, const std::string& value) { return fmt::format("{}={}", name, value); }

// Operands positionally, then every attribute as a keyword: cast, var, welford, permute, squeeze,
// set, iota, index_select, gather, take_along_axis, matmul, linear, size and the elementwise ops.
Args genericArgs(const Expr* e, const Style& s) {
  Args args;
  for (const Val* v : e->inputs()) args.push_back(s.operand(v));
  for (const auto& [name, value] : e->attrs().entries()) args.push_back(keyword(name, s.attr(value)));
  return args;
}

// The dtype a reduction gets when none is given; the Python printout says DataType.Null then, as
// nvFuser's does (max/min reject any other dtype), and names a dtype only when the user chose one.
DataType defaultReductionType(OpKind kind, DataType input) {
  if (kind == OpKind::Any || kind == OpKind::All) return DataType::Bool;
  if ((kind == OpKind::Sum || kind == OpKind::Prod) && !isFloating(input)) return DataType::Int64;
  return input;
}

Args reductionArgs(const Expr* e, const Style& s) {
  Args args = genericArgs(e, s);
  const Attributes& a = e->attrs();
  if (s.python && a.has("dtype") && !e->inputs().empty() &&
      a.getDataType("dtype") == defaultReductionType(e->kind(), e->input(0)->dtype())) {
    for (std::string& arg : args) {
      if (arg.starts_with("dtype=")) arg = keyword("dtype", s.dtype(DataType::Null));
    }
  }
  return args;
}

// Stored as 0/1 ints (attributes have no bool list); Python takes a list of bools.
Args broadcastArgs(const Expr* e, const Style& s) {
  std::vector<std::string> flags;
  for (int64_t f : e->attrs().getInts("is_broadcast_dim")) flags.push_back(f ? "True" : "False");
  return {s.operand(e->input(0)), fmt::format("is_broadcast_dim=[{}]", fmt::join(flags, ", "))};
}

// x followed by one scalar per dim: broadcast_in_dim(shape=), expand(shape=), reshape(new_shape=).
Args shapeArgs(const Expr* e, const Style& s, std::string_view name) {
  Args args{s.operand(e->input(0)), keyword(name, s.list(inputsFrom(e, 1, e->inputs().size())))};
  for (const auto& [attr, value] : e->attrs().entries()) args.push_back(keyword(attr, s.attr(value)));
  return args;
}

Args sliceArgs(const Expr* e, const Style& s) {
  const size_t rank = (e->inputs().size() - 1) / 3;
  return {s.operand(e->input(0)), keyword("start_indices", s.list(inputsFrom(e, 1, rank))),
          keyword("end_indices", s.list(inputsFrom(e, 1 + rank, rank))),
          keyword("strides", s.list(inputsFrom(e, 1 + 2 * rank, rank))),
          keyword("manual_normalization", s.attr(e->attrs().get("manual_normalization")))};
}

// pad(x, pad_widths, value) is positional in nvFuser; the builder stores x, value, widths...
Args padArgs(const Expr* e, const Style& s) {
  return {s.operand(e->input(0)), s.list(inputsFrom(e, 2, e->inputs().size())), s.operand(e->input(1))};
}

Args catArgs(const Expr* e, const Style& s) {
  std::vector<std::string> tensors;
  for (const Val* v : e->inputs()) tensors.push_back(s.operand(v));
  return {fmt::format("[{}]", fmt::join(tensors, ", ")), keyword("dim", s.attr(e->attrs().get("dim")))};
}

// The builder stores fill_value, then the shape.
Args fullArgs(const Expr* e, const Style& s) {
  return {keyword("shape", s.list(inputsFrom(e, 1, e->inputs().size()))), keyword("fill_value", s.operand(e->input(0))),
          keyword("dtype", s.attr(e->attrs().get("dtype")))};
}

// The builder stores the two bounds (or mean and std), seed, offset, then the shape.
Args randomArgs(const Expr* e, const Style& s) {
  Args args{s.operand(e->input(0)), s.operand(e->input(1)), keyword("shape", s.list(inputsFrom(e, 4, e->inputs().size()))),
            keyword("dtype", s.attr(e->attrs().get("dtype")))};
  if (!s.isDrawn(e->input(2))) {
    args.push_back(keyword("rng_seed", s.operand(e->input(2))));
    args.push_back(keyword("rng_offset", s.operand(e->input(3))));
  }
  return args;
}

// quantize(x, scale, zero_point, dtype=, axis= | block_shape=): zero_point is None when absent, and
// the granularity is implied by which keyword (if any) follows.
Args quantizeArgs(const Expr* e, const Style& s) {
  const Attributes& a = e->attrs();
  Args args{s.operand(e->input(0)), s.operand(e->input(1)),
            e->inputs().size() > 2 ? s.operand(e->input(2)) : std::string("None"),
            keyword("dtype", s.attr(a.get("dtype")))};
  if (a.has("axis")) args.push_back(keyword("axis", s.attr(a.get("axis"))));
  if (a.has("block_shape")) args.push_back(keyword("block_shape", s.attr(a.get("block_shape"))));
  return args;
}

Args exprArgs(const Expr* e, const Style& s) {
  switch (e->kind()) {
    case OpKind::Broadcast: return broadcastArgs(e, s);
    case OpKind::BroadcastInDim: return shapeArgs(e, s, "shape");
    case OpKind::Expand: return shapeArgs(e, s, "shape");
    case OpKind::Reshape: return shapeArgs(e, s, "new_shape");
    case OpKind::Slice: return sliceArgs(e, s);
    case OpKind::Pad: return padArgs(e, s);
    case OpKind::Cat: return catArgs(e, s);
    case OpKind::Full: return fullArgs(e, s);
    case OpKind::Uniform:
    case OpKind::Normal: return randomArgs(e, s);
    case OpKind::Quantize:
    case OpKind::Dequantize: return quantizeArgs(e, s);
    default: break;
  }
  if (opInfo(e->kind()).category == OpCategory::Reduction) return reductionArgs(e, s);
  return genericArgs(e, s);
}

// ---- the IR dump --------------------------------------------------------------------------------

std::string extentString(const IterDomain& id) {
  const std::string n = id.extent == IterDomain::kSymbolic ? "?" : fmt::format("{}", id.extent);
  switch (id.type) {
    case IterType::Iteration: return n;
    case IterType::Reduction: return "r" + n;
    case IterType::Broadcast: return "1b";
    case IterType::Expanded: return n + "e";
  }
  return n;
}

// "BFloat16[?, 1b, 16e, r?]" for tensors (every dim, reduction dims included), "Double" for scalars.
std::string typeString(const Val* v) {
  if (v->isScalar()) return std::string(braze::toString(v->dtype()));
  std::vector<std::string> dims;
  for (const IterDomain& id : v->asTensor()->domain()) dims.push_back(extentString(id));
  return fmt::format("{}[{}]", braze::toString(v->dtype()), fmt::join(dims, ", "));
}

std::string boolList(const std::vector<std::optional<bool>>& values) {
  std::vector<std::string> parts;
  for (const auto& v : values) parts.push_back(!v ? "None" : (*v ? "True" : "False"));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

// Contiguity as nvFuser's define_tensor takes it: in allocation order (outermost first) when a stride
// order is given. braze stores it per logical dim; logical dim d sits at position rank-1-stride_order[d].
std::vector<std::optional<bool>> allocationContiguity(const TensorView* tv) {
  const TensorLayout& layout = tv->layout();
  const size_t rank = layout.contiguity.size();
  if (layout.stride_order.size() != rank) return layout.contiguity;
  std::vector<std::optional<bool>> ordered(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t position = static_cast<int64_t>(rank) - 1 - layout.stride_order[d];
    if (position >= 0 && position < static_cast<int64_t>(rank)) ordered[position] = layout.contiguity[d];
  }
  return ordered;
}

std::string inputLine(const Val* v) {
  std::string line = fmt::format("  {} {}", v->name(), typeString(v));
  if (v->isScalar()) return line;
  const TensorView* tv = v->asTensor();
  line += fmt::format(" contiguity={}", boolList(allocationContiguity(tv)));
  if (!tv->layout().stride_order.empty()) line += fmt::format(" stride_order=[{}]", fmt::join(tv->layout().stride_order, ", "));
  if (tv->isCpu()) line += " is_cpu=True";
  return line;
}

const Val* aliasedInput(const Fusion& fusion, const Val* output) {
  for (const auto& [out, in] : fusion.outputAliases()) {
    if (out == output) return in;
  }
  return nullptr;
}

std::string outputNames(const Expr* e) {
  std::vector<std::string> names;
  for (const Val* v : e->outputs()) names.push_back(v->name());
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::string Fusion::toString() const {
  const Style style{.python = false};
  std::string text = "Inputs:\n";
  for (const Val* v : inputs_) text += inputLine(v) + "\n";
  text += "Outputs:\n";
  for (const Val* v : outputs_) {
    text += fmt::format("  {} {}", v->name(), typeString(v));
    if (v->isScalar() && v->asScalar()->isConstant()) text += " = " + style.operand(v);
    if (const Val* in = aliasedInput(*this, v)) text += fmt::format(" (aliases input {})", in->name());
    text += "\n";
  }
  text += "Exprs:\n";
  for (const Expr* e : exprsToEvaluate()) {
    std::vector<std::string> outs;
    for (const Val* v : e->outputs()) outs.push_back(fmt::format("{} {}", v->name(), typeString(v)));
    text += fmt::format("  {} = {}({})\n", fmt::join(outs, ", "), e->name(), fmt::join(exprArgs(e, style), ", "));
  }
  return text;
}

std::string Fusion::toPython(const std::vector<size_t>& drawn_inputs) const {
  std::vector<const Val*> drawn;
  for (size_t i : drawn_inputs) drawn.push_back(inputs_.at(i));
  const Style style{.python = true, .drawn = drawn};
  std::string body;
  auto line = [&](const std::string& text) { body += "    " + text + "\n"; };
  for (const Val* v : inputs_) {
    if (style.isDrawn(v)) continue;
    if (v->isScalar()) {
      line(fmt::format("{} = fd.define_scalar(None, dtype={})", v->name(), style.dtype(v->dtype())));
      continue;
    }
    const TensorView* tv = v->asTensor();
    std::string def = fmt::format("{} = fd.define_tensor(shape=[{}], contiguity={}, dtype={}, is_cpu={}", v->name(),
                                  fmt::join(tv->staticShape(), ", "), boolList(allocationContiguity(tv)),
                                  style.dtype(tv->dtype()), tv->isCpu() ? "True" : "False");
    if (!tv->layout().stride_order.empty()) def += fmt::format(", stride_order=[{}]", fmt::join(tv->layout().stride_order, ", "));
    line(def + ")");
  }
  for (const Expr* e : exprsToEvaluate()) {
    line(fmt::format("{} = fd.ops.{}({})", outputNames(e), e->name(), fmt::join(exprArgs(e, style), ", ")));
  }
  std::set<const Val*> printed;
  for (const Val* v : outputs_) {
    const bool first = printed.insert(v).second;
    // A constant output has no line of its own yet (constants are otherwise printed inline).
    if (first && v->isScalar() && v->asScalar()->isConstant() && !isInput(v)) {
      line(fmt::format("{} = {}", v->name(), style.operand(v)));
    }
    // An output listed again after (or before) its aliasing entry is a plain output the second time:
    // add_output(alias_input=) may be given once per input.
    const Val* in = first ? aliasedInput(*this, v) : nullptr;
    if (in != nullptr) {
      line(fmt::format("fd.add_output({}, alias_input={})", v->name(), in->name()));
    } else {
      line(fmt::format("fd.add_output({})", v->name()));
    }
  }
  if (body.empty()) line("pass");  // an empty fusion still needs a function body
  return fmt::format(
      "from braze import FusionDefinition, DataType\n\n"
      "def nvfuser_fusion_id0(fd : FusionDefinition) -> None :\n{}\n"
      "with FusionDefinition() as fd:\n"
      "    nvfuser_fusion_id0(fd)\n",
      body);
}

}  // namespace braze
