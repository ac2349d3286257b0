// The kernel C++ of every elementwise op (codegen/source_ops.h) and its CPU twin (kernel/element_math.h).
// Every op, over every dtype combination its builder accepts, must emit code nvcc compiles without a
// warning, and the simulator must store bit for bit what the reference evaluator stores, NaN, inf,
// -0.0, integer wrap-around and float -> integer saturation included.
#include "support/error.h"
#include "ir/ops.h"
#include "codegen/source_ops.h"
#include "device/hip/hiprtc.h"
#include "kernel/element_math.h"
#include "reference/evaluator.h"
#include "reference/pointwise_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unistd.h>

namespace braze::codegen {
namespace {

using namespace kernel;  // the simulator's element math is what the emitted ops are compared with

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// The dtypes binary and ternary ops are crossed over (fp8 is covered by unary, cast and same-type pairs).
constexpr DataType kCore[] = {DataType::Bool,  DataType::Int8, DataType::UInt8,    DataType::Int16, DataType::Int32,
                              DataType::Int64, DataType::Half, DataType::BFloat16, DataType::Float, DataType::Double};
// Python scalars: what fd.define_scalar gives for bool, int and float.
constexpr DataType kScalars[] = {DataType::Bool, DataType::Int64, DataType::Double};

struct OperandSpec {
  DataType dtype;
  bool tensor = true;
};

// One op on operands of given dtypes, as a builder accepted it.
struct Signature {
  OpKind kind;
  std::vector<OperandSpec> operands;
  DataType result;
};

std::string describe(const Signature& s) {
  std::string text = fmt::format("{}(", opName(s.kind));
  for (size_t i = 0; i < s.operands.size(); ++i) {
    text += fmt::format("{}{}{}", i ? ", " : "", s.operands[i].tensor ? "tensor " : "scalar ", toString(s.operands[i].dtype));
  }
  return text + fmt::format(") -> {}", toString(s.result));
}

Val* build(OpKind kind, const std::vector<Val*>& in, DataType cast_to) {
  switch (opInfo(kind).category) {
    case OpCategory::Unary: return unaryOp(kind, in[0]);
    case OpCategory::Binary: return binaryOp(kind, in[0], in[1]);
    case OpCategory::Ternary:
      return kind == OpKind::Addcmul ? addcmul(in[0], in[1], in[2], in[3]) : ternaryOp(kind, in[0], in[1], in[2]);
    case OpCategory::Cast: return cast(in[0], cast_to);
    default: BRAZE_UNREACHABLE("{} is not elementwise", opName(kind));
  }
}

// Defines the operands as fusion inputs (1-D tensors, symbolic scalars) and applies the op.
Val* defineOp(Fusion& fusion, OpKind kind, const std::vector<OperandSpec>& operands, DataType cast_to) {
  FusionGuard guard(&fusion);
  std::vector<Val*> in;
  for (const OperandSpec& s : operands) {
    in.push_back(s.tensor ? static_cast<Val*>(defineTensor({-1}, {true}, s.dtype)) : defineScalar(s.dtype));
  }
  return build(kind, in, cast_to);
}

// The operand dtype lists tried for an op; the builders decide which are valid.
std::vector<std::vector<OperandSpec>> candidates(OpKind kind) {
  std::vector<std::vector<OperandSpec>> c;
  switch (opInfo(kind).category) {
    case OpCategory::Unary:
    case OpCategory::Cast:
      for (DataType d : kAllDataTypes) c.push_back({{d}});
      for (DataType s : kScalars) c.push_back({{s, false}});
      break;
    case OpCategory::Binary:
      for (DataType a : kCore) {
        for (DataType b : kCore) c.push_back({{a}, {b}});
      }
      for (DataType d : kAllDataTypes) {
        if (isFloat8(d)) c.push_back({{d}, {d}});
        for (DataType s : kScalars) {
          c.push_back({{d}, {s, false}});
          c.push_back({{s, false}, {d}});
        }
      }
      c.push_back({{DataType::Float8_e4m3fn}, {DataType::Float8_e5m2}});
      c.push_back({{DataType::Float8_e4m3fn}, {DataType::Float}});
      c.push_back({{DataType::Int64, false}, {DataType::Double, false}});
      break;
    case OpCategory::Ternary:
      if (kind == OpKind::Addcmul) {
        for (DataType d : kAllDataTypes) {
          for (DataType s : kScalars) c.push_back({{d}, {d}, {d}, {s, false}});
        }
        for (DataType a : kCore) {
          for (DataType b : kCore) c.push_back({{a}, {b}, {b}, {DataType::Double, false}});
        }
        break;
      }
      for (DataType d : kAllDataTypes) {
        c.push_back({{d}, {d}, {d}});
        c.push_back({{d}, {DataType::Double, false}, {DataType::Double, false}});
        c.push_back({{d}, {DataType::Int64, false}, {DataType::Int64, false}});
        c.push_back({{d}, {d}, {DataType::Double, false}});
      }
      for (DataType a : kCore) {
        for (DataType b : kCore) {
          c.push_back({{DataType::Bool}, {a}, {b}});
          c.push_back({{a}, {b}, {DataType::Double, false}});
        }
      }
      c.push_back({{DataType::Double, false}, {DataType::Double, false}, {DataType::Double, false}});
      c.push_back({{DataType::Int64, false}, {DataType::Double, false}, {DataType::Double, false}});
      break;
    default: break;
  }
  return c;
}

// Every elementwise op (allOps(), so a new op cannot be forgotten) on every candidate its builder accepts.
const std::vector<Signature>& allSignatures() {
  static const std::vector<Signature> signatures = [] {
    std::vector<Signature> all;
    for (const OpInfo& op : allOps()) {
      if (!isElementwise(op.kind)) continue;
      const bool is_cast = op.kind == OpKind::CastOp;
      for (const auto& operands : candidates(op.kind)) {
        for (DataType to : kAllDataTypes) {
          try {
            Fusion fusion;
            Val* out = defineOp(fusion, op.kind, operands, to);
            all.push_back({op.kind, operands, out->dtype()});
          } catch (const Error&) {
            // the builder rejects this combination
          }
          if (!is_cast) break;
        }
      }
    }
    return all;
  }();
  return signatures;
}

// Whether the emitter (and the reference) has math for the signature: silu of an integer has none.
bool emittable(const Signature& s) {
  std::vector<Operand> operands;
  for (const OperandSpec& o : s.operands) operands.push_back({"x", o.dtype});
  try {
    elementwiseExpr(s.kind, s.result, operands);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string arrayOf(DataType dtype) {
  switch (computeTypeOf(dtype)) {
    case DataType::Float: return "f";
    case DataType::Double: return "d";
    case DataType::Bool: return "b";
    default: return "i";
  }
}

// `auto name = expr;` and a check that expr has exactly the type `type` (the contract of source_ops.h).
std::string typed(std::string_view name, std::string_view expr, std::string_view type) {
  return fmt::format("auto {} = {}; static_assert(braze_same<decltype({}), {}>::value, \"{}\");", name, expr, name, type,
                     type);
}

// One kernel per op evaluating every accepted signature into an output, then one kernel that loads,
// stores and spells literals of every storage type; each expression's type is checked. Compiled by the
// test below (NVRTC later).
std::string allOpsTestKernel(SourceDialect dialect) {
  std::ostringstream src;
  src << opsPreamble(dialect, /*fp8=*/true) << "\n";
  src << "template <class A, class B> struct braze_same { static constexpr bool value = false; };\n"
         "template <class A> struct braze_same<A, A> { static constexpr bool value = true; };\n\n";
  std::optional<OpKind> open;
  std::map<std::string, int> next;  // output slots used in the open kernel, per output array
  std::set<std::string> emitted;
  auto close = [&] {
    if (open) src << "}\n\n";
    open.reset();
  };
  for (const Signature& s : allSignatures()) {
    if (!emittable(s)) continue;
    if (open != s.kind) {
      close();
      open = s.kind;
      next.clear();
      src << fmt::format(
          "extern \"C\" __global__ void op_{}(const float* f, const double* d, const long long* i, const bool* b,\n"
          "    float* of, double* od, long long* oi, bool* ob) {{\n",
          opName(s.kind));
    }
    // Operands are locals, as an emitter loads them: an expression that ignored one would leave an unused variable.
    std::vector<Operand> operands;
    std::string loads;
    for (size_t k = 0; k < s.operands.size(); ++k) {
      const DataType d = s.operands[k].dtype;
      operands.push_back({fmt::format("x{}", k), d});
      loads += fmt::format("const {} x{} = {}[{}]; ", computeTypeName(d), k, arrayOf(d), k);
    }
    const std::string out = "o" + arrayOf(s.result);
    const std::string statement = loads + typed("v", elementwiseExpr(s.kind, s.result, operands), computeTypeName(s.result));
    // Many signatures emit the same text (add of Int8 and Int16 either way round); compile each once.
    if (!emitted.insert(out + statement).second) continue;
    src << fmt::format("  {{ {} {}[{}] = v; }}  // {}\n", statement, out, next[out]++, describe(s));
  }
  close();

  src << "extern \"C\" __global__ void storage(\n";
  for (size_t k = 0; k < std::size(kAllDataTypes); ++k) {
    const std::string_view type = storageTypeName(kAllDataTypes[k]);
    src << fmt::format("    const {}* s{}, {}* o{}{}\n", type, k, type, k, k + 1 < std::size(kAllDataTypes) ? "," : ") {");
  }
  for (size_t k = 0; k < std::size(kAllDataTypes); ++k) {
    const DataType d = kAllDataTypes[k];
    const std::string_view compute = computeTypeName(d);
    const std::string_view storage = storageTypeName(d);
    src << fmt::format("  {{  // {}\n", toString(d));
    src << fmt::format("    {}\n", typed("v", fromStorageExpr(fmt::format("s{}[0]", k), d), compute));
    int slot = 0;
    src << fmt::format("    {{ {} o{}[{}] = s; }}\n", typed("s", toStorageExpr("v", d), storage), k, slot++);
    std::vector<std::string> literals;
    for (double x : {0.0, -0.0, 1.5, -2.75, 0.1, 1e30, -1e-40, 4e-45, kInf, -kInf, kNaN}) literals.push_back(literalExpr(x, d));
    for (int64_t x : {int64_t{0}, int64_t{-1}, int64_t{300}, kI64Min, kI64Max}) literals.push_back(literalExpr(x, d));
    for (const std::string& literal : literals) {
      src << fmt::format("    {{ {} {} o{}[{}] = s; }}\n", typed("c", literal, compute), typed("s", toStorageExpr("c", d), storage),
                         k, slot++);
    }
    src << "  }\n";
  }
  src << "}\n";
  return src.str();
}

std::optional<std::string> findNvcc() {
  std::vector<std::filesystem::path> dirs;
  if (const char* home = std::getenv("CUDA_HOME")) dirs.emplace_back(std::filesystem::path(home) / "bin");
  dirs.emplace_back("/usr/local/cuda/bin");
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string dir; std::getline(ss, dir, ':');) {
      if (!dir.empty()) dirs.emplace_back(dir);
    }
  }
  for (const auto& dir : dirs) {
    const auto nvcc = dir / "nvcc";
    if (::access(nvcc.c_str(), X_OK) == 0) return nvcc.string();
  }
  return std::nullopt;
}

TEST(SourceOps, EveryOpOnEveryAcceptedDtypeCompilesWithoutWarnings) {
  const std::optional<std::string> nvcc = findNvcc();
  if (!nvcc) GTEST_SKIP() << "nvcc not found ($CUDA_HOME/bin, /usr/local/cuda/bin, PATH)";
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("braze_cuda_ops_{}", ::getpid());
  std::filesystem::create_directories(dir);
  const auto source = dir / "all_ops.cu";
  std::ofstream(source) << allOpsTestKernel(SourceDialect::Cuda);
  for (std::string_view arch : {"sm_90", "sm_80"}) {
    const auto log = dir / fmt::format("nvcc_{}.log", arch);
    const std::string command =
        fmt::format("'{}' -arch={} -std=c++17 -cubin -Werror all-warnings -o '{}' '{}' > '{}' 2>&1", *nvcc, arch,
                    (dir / fmt::format("all_ops_{}.cubin", arch)).string(), source.string(), log.string());
    const int status = std::system(command.c_str());
    std::stringstream text;
    text << std::ifstream(log).rdbuf();
    EXPECT_EQ(status, 0) << command << "\n" << text.str().substr(0, 20000);
    EXPECT_EQ(text.str(), "") << "nvcc printed diagnostics for " << arch;
  }
  std::filesystem::remove_all(dir);
}

// The same kernels in HIP: hiprtc compiles every op's expressions and the narrow types' conversions
// (braze's own in HIP) for gfx90a without a diagnostic.
TEST(SourceOps, EveryOpOnEveryAcceptedDtypeCompilesAsHipForGfx90a) {
  if (!device::hiprtcAvailable()) GTEST_SKIP() << "hiprtc not found: HIP compilation not checked";
  const auto compiled = device::compileHip(allOpsTestKernel(SourceDialect::Hip), "all_ops", {.arch = "gfx90a"});
  EXPECT_EQ(compiled.log, "");
  EXPECT_FALSE(compiled.cubin.empty());
}

TEST(SourceOps, EveryElementwiseOpHasSignatures) {
  std::set<OpKind> covered;
  for (const Signature& s : allSignatures()) covered.insert(s.kind);
  for (const OpInfo& op : allOps()) {
    if (!isElementwise(op.kind)) continue;
    EXPECT_TRUE(covered.count(op.kind)) << op.name << " has no accepted signature";
  }
}

// ---- the simulator against the reference -------------------------------------------------------------

// Values of a dtype worth checking, rounded or wrapped to it (so they are values it holds).
std::vector<SimValue> valuesOf(DataType dtype, bool tensor) {
  std::vector<SimValue> values;
  if (isFloating(dtype)) {
    const std::vector<double> all = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 0.1, -7.25, 1e-3, 100.0,
                                     448.0, 500.0, 6e4, 1e10, 1e30, -1e30, 1e-40, kInf, -kInf, kNaN};
    const std::vector<double> few = {0.5, -2.5, -0.0, 1e10, kInf, kNaN};
    for (double v : tensor ? all : few) values.push_back({.f = reference::roundToType(v, dtype)});
  } else if (isBool(dtype)) {
    values = {{.i = 0}, {.i = 1}};
  } else {
    const std::vector<int64_t> all = {0, 1, -1, 2, 3, -3, 7, 8, 31, 63, 64, 100, 127, -128, 255, 32767, -32768,
                                      2147483647, -2147483647 - 1, kI64Max, kI64Min};
    const std::vector<int64_t> few = {0, 3, -1, 1000, kI64Min};
    for (int64_t v : tensor ? all : few) values.push_back({.i = reference::wrapToType(v, dtype)});
  }
  return values;
}

HostTensor tensorOfValues(DataType dtype, const std::vector<SimValue>& values) {
  HostTensor t = HostTensor::empty(dtype, {static_cast<int64_t>(values.size())});
  for (size_t k = 0; k < values.size(); ++k) {
    if (isFloating(dtype)) {
      t.writeDouble(static_cast<int64_t>(k), values[k].f);
    } else {
      t.writeInt(static_cast<int64_t>(k), values[k].i);
    }
  }
  return t;
}

HostValue hostValue(const OperandSpec& spec, const std::vector<SimValue>& values) {
  if (spec.tensor) return tensorOfValues(spec.dtype, values);
  const SimValue v = values.at(0);
  if (isFloating(spec.dtype)) return ScalarValue{v.f};
  if (isBool(spec.dtype)) return ScalarValue{v.i != 0};
  return ScalarValue{v.i};
}

SimValue resultAt(const HostValue& out, DataType dtype, int64_t k) {
  if (const auto* t = std::get_if<HostTensor>(&out)) {
    if (isFloating(dtype)) return {.f = t->readDouble(k)};
    return {.i = t->readInt(k)};
  }
  const ScalarValue& s = std::get<ScalarValue>(out);
  if (isFloating(dtype)) return {.f = toDouble(s)};
  return {.i = toInt(s)};
}

// Bit for bit, except that every NaN is the same (x86 and CUDA give NaNs different signs).
bool sameResult(SimValue a, SimValue b, DataType dtype) {
  if (!isFloating(dtype)) return a.i == b.i;
  if (std::isnan(a.f) || std::isnan(b.f)) return std::isnan(a.f) && std::isnan(b.f);
  return std::bit_cast<uint64_t>(a.f) == std::bit_cast<uint64_t>(b.f);
}

std::string show(SimValue v, DataType dtype) {
  return isFloating(dtype) ? fmt::format("{}", v.f) : fmt::format("{}", v.i);
}

// Runs a signature through the reference on every combination of its operands' values (tensor
// operands crossed elementwise, scalars one value per run) and through simElementwise, and returns
// the mismatches. Where the reference rejects a run (integer division by zero), each element is
// retried alone, and the simulator must throw exactly where the reference does.
std::vector<std::string> compareWithReference(const Signature& s) {
  const size_t n = s.operands.size();
  std::vector<std::vector<SimValue>> values;
  for (const OperandSpec& o : s.operands) {
    // Ternary ops cross three tables: keep them short.
    std::vector<SimValue> v = valuesOf(o.dtype, o.tensor);
    if (n >= 3 && v.size() > 9) v.resize(9);
    values.push_back(std::move(v));
  }
  // Every combination, as one index per operand.
  std::vector<std::vector<size_t>> combos{{}};
  for (size_t k = 0; k < n; ++k) {
    std::vector<std::vector<size_t>> grown;
    for (const auto& c : combos) {
      for (size_t j = 0; j < values[k].size(); ++j) {
        grown.push_back(c);
        grown.back().push_back(j);
      }
    }
    combos = std::move(grown);
  }
  std::vector<DataType> dtypes;
  for (const OperandSpec& o : s.operands) dtypes.push_back(o.dtype);

  Fusion fusion;
  fusion.addOutput(defineOp(fusion, s.kind, s.operands, s.result));
  std::vector<std::string> mismatches;
  // The builder converts a scalar operand beside tensors to the op's compute type first (a cast the
  // reference evaluates): the simulator gets the converted value, as a kernel's cast gives it.
  const Expr* op = fusion.outputs()[0]->definition();
  std::vector<DataType> op_dtypes;
  for (const Val* in : op->inputs()) op_dtypes.push_back(in->dtype());

  // Runs the reference on a batch of combos that share their scalar operands' values.
  auto runBatch = [&](const std::vector<std::vector<size_t>>& batch) {
    std::vector<HostValue> inputs;
    for (size_t k = 0; k < n; ++k) {
      std::vector<SimValue> column;
      for (const auto& c : batch) column.push_back(values[k][c[k]]);
      inputs.push_back(hostValue(s.operands[k], column));
    }
    return evaluate(fusion, inputs).at(0);
  };
  auto check = [&](const std::vector<size_t>& c, std::optional<SimValue> expected) {
    std::vector<SimValue> operands;
    for (size_t k = 0; k < n; ++k) operands.push_back(values[k][c[k]]);
    std::optional<SimValue> got;
    try {
      for (size_t k = 0; k < n; ++k) {
        if (op_dtypes[k] != dtypes[k]) operands[k] = simCast(operands[k], dtypes[k], op_dtypes[k]);
      }
      got = simElementwise(s.kind, s.result, operands, op_dtypes);
    } catch (const Error&) {
    }
    std::string where;
    for (size_t k = 0; k < n; ++k) where += (k ? ", " : "") + show(operands[k], dtypes[k]);
    if (expected.has_value() != got.has_value()) {
      mismatches.push_back(fmt::format("{} at ({}): reference {}, simulator {}", describe(s), where,
                                       expected ? show(*expected, s.result) : "throws", got ? show(*got, s.result) : "throws"));
    } else if (expected && !sameResult(*expected, *got, s.result)) {
      mismatches.push_back(fmt::format("{} at ({}): reference {}, simulator {}", describe(s), where, show(*expected, s.result),
                                       show(*got, s.result)));
    }
  };

  // Batches: combos grouped by the values of their scalar operands.
  std::map<std::vector<size_t>, std::vector<std::vector<size_t>>> batches;
  for (const auto& c : combos) {
    std::vector<size_t> key;
    for (size_t k = 0; k < n; ++k) key.push_back(s.operands[k].tensor ? 0 : c[k]);
    batches[key].push_back(c);
  }
  const bool any_tensor = std::any_of(s.operands.begin(), s.operands.end(), [](const OperandSpec& o) { return o.tensor; });
  for (const auto& [key, batch] : batches) {
    std::optional<HostValue> out;
    if (any_tensor) {
      try {
        out = runBatch(batch);
      } catch (const Error&) {
      }
    }
    for (size_t j = 0; j < batch.size(); ++j) {
      if (out) {
        check(batch[j], resultAt(*out, s.result, static_cast<int64_t>(j)));
        continue;
      }
      std::optional<SimValue> expected;
      try {
        expected = resultAt(runBatch({batch[j]}), s.result, 0);
      } catch (const Error&) {
      }
      check(batch[j], expected);
    }
  }
  return mismatches;
}

TEST(ElementMath, SimulatorMatchesTheReferenceOnEverySignature) {
  int64_t mismatches = 0;
  for (const Signature& s : allSignatures()) {
    for (const std::string& m : compareWithReference(s)) {
      if (++mismatches <= 30) ADD_FAILURE() << m;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(SourceOps, EveryOperandAppearsExactlyOnce) {
  for (const Signature& s : allSignatures()) {
    if (!emittable(s)) continue;
    std::vector<Operand> operands;
    for (size_t k = 0; k < s.operands.size(); ++k) operands.push_back({fmt::format("OPERAND{}_", k), s.operands[k].dtype});
    const std::string expr = elementwiseExpr(s.kind, s.result, operands);
    for (const Operand& o : operands) {
      size_t count = 0;
      for (size_t at = expr.find(o.expr); at != std::string::npos; at = expr.find(o.expr, at + 1)) ++count;
      EXPECT_EQ(count, 1u) << describe(s) << ": " << expr;
    }
  }
}

TEST(ElementMath, TheEmitterRejectsExactlyWhatTheSimulatorCannotCompute) {
  for (const Signature& s : allSignatures()) {
    std::vector<SimValue> operands(s.operands.size(), SimValue{.f = 1.0, .i = 1});
    std::vector<DataType> dtypes;
    for (const OperandSpec& o : s.operands) dtypes.push_back(o.dtype);
    bool simulates = true;
    try {
      simElementwise(s.kind, s.result, operands, dtypes);
    } catch (const Error&) {
      simulates = false;
    }
    EXPECT_EQ(emittable(s), simulates) << describe(s);
  }
}

// ---- the semantics pinned by hand -----------------------------------------------------------------

SimValue sim(OpKind kind, DataType result, std::vector<SimValue> operands, std::vector<DataType> dtypes) {
  return simElementwise(kind, result, operands, dtypes);
}

TEST(ElementMath, FloatEdgeCases) {
  const DataType F = DataType::Float;
  EXPECT_TRUE(std::isnan(sim(OpKind::Maximum, F, {{.f = kNaN}, {.f = 1.0}}, {F, F}).f));
  EXPECT_TRUE(std::signbit(sim(OpKind::Relu, F, {{.f = -0.0}}, {F}).f) == false);  // relu(-0.0) is +0.0
  EXPECT_TRUE(std::signbit(sim(OpKind::Neg, F, {{.f = 0.0}}, {F}).f));
  EXPECT_EQ(sim(OpKind::Remainder, F, {{.f = -7.0}, {.f = 3.0}}, {F, F}).f, 2.0);  // the sign of the divisor
  EXPECT_EQ(sim(OpKind::Fmod, F, {{.f = -7.0}, {.f = 3.0}}, {F, F}).f, -1.0);      // the sign of the dividend
  EXPECT_EQ(sim(OpKind::Add, F, {{.f = kInf}, {.f = 1.0}}, {F, F}).f, kInf);
  EXPECT_EQ(sim(OpKind::IsNan, DataType::Bool, {{.f = kNaN}}, {F}).i, 1);
  // The next float after 1, not the next double (the reference steps in the result's type).
  EXPECT_EQ(sim(OpKind::NextAfter, F, {{.f = 1.0}, {.f = 2.0}}, {F, F}).f, 1.0 + 0x1p-23);
  EXPECT_EQ(sim(OpKind::NextAfter, DataType::Double, {{.f = 1.0}, {.f = 2.0}}, {DataType::Double, DataType::Double}).f,
            1.0 + 0x1p-52);
  // bf16 results round to nearest even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(sim(OpKind::Abs, DataType::BFloat16, {{.f = -1.0 - 0x1p-8}}, {DataType::Double}).f, 1.0);
  // fp8 e4m3fn saturates: 1000 is stored as 448, inf too.
  EXPECT_EQ(simCast({.f = 1000.0}, F, DataType::Float8_e4m3fn).f, 448.0);
  EXPECT_EQ(simCast({.f = -kInf}, F, DataType::Float8_e4m3fn).f, -448.0);
  // fnuz has no -0.0.
  EXPECT_FALSE(std::signbit(simCast({.f = -0.0}, F, DataType::Float8_e4m3fnuz).f));
}

TEST(ElementMath, IntegerWrapAndSaturation) {
  const DataType I8 = DataType::Int8, I32 = DataType::Int32, I64 = DataType::Int64;
  EXPECT_EQ(sim(OpKind::Add, I8, {{.i = 127}, {.i = 1}}, {I8, I8}).i, -128);
  EXPECT_EQ(sim(OpKind::Mul, I64, {{.i = kI64Max}, {.i = 2}}, {I64, I64}).i, -2);
  EXPECT_EQ(sim(OpKind::Neg, I64, {{.i = kI64Min}}, {I64}).i, kI64Min);
  EXPECT_EQ(sim(OpKind::Div, I64, {{.i = kI64Min}, {.i = -1}}, {I64, I64}).i, kI64Min);
  EXPECT_EQ(sim(OpKind::Div, I32, {{.i = -7}, {.i = 2}}, {I32, I32}).i, -3);  // truncates toward zero
  EXPECT_EQ(sim(OpKind::Remainder, I32, {{.i = -7}, {.i = 3}}, {I32, I32}).i, 2);
  EXPECT_EQ(sim(OpKind::Pow, I32, {{.i = 3}, {.i = 40}}, {I32, I32}).i, static_cast<int32_t>(12157665459056928801ULL));
  EXPECT_EQ(sim(OpKind::Pow, I32, {{.i = -1}, {.i = -3}}, {I32, I32}).i, -1);
  EXPECT_EQ(sim(OpKind::Pow, I32, {{.i = 2}, {.i = -3}}, {I32, I32}).i, 0);
  EXPECT_THROW(sim(OpKind::Div, I32, {{.i = 1}, {.i = 0}}, {I32, I32}), Error);
  EXPECT_EQ(sim(OpKind::LogicalRightShift, I8, {{.i = -1}, {.i = 1}}, {I8, I8}).i, 127);  // on the type's own width
  EXPECT_EQ(sim(OpKind::BitwiseLeftShift, I32, {{.i = 1}, {.i = 40}}, {I32, I32}).i, 0);
  EXPECT_EQ(sim(OpKind::BitwiseRightShift, I32, {{.i = -8}, {.i = 40}}, {I32, I32}).i, -1);
  EXPECT_EQ(sim(OpKind::Gcd, I64, {{.i = -12}, {.i = 18}}, {I64, I64}).i, 6);
  // Float -> integer truncates and saturates, NaN -> 0; integer -> integer wraps.
  EXPECT_EQ(simCast({.f = 1e10}, DataType::Float, I32).i, 2147483647);
  EXPECT_EQ(simCast({.f = -1e30}, DataType::Float, I64).i, kI64Min);
  EXPECT_EQ(simCast({.f = -2.9}, DataType::Float, I8).i, -2);
  EXPECT_EQ(simCast({.f = kNaN}, DataType::Float, I32).i, 0);
  EXPECT_EQ(simCast({.f = kNaN}, DataType::Float, DataType::Bool).i, 1);
  EXPECT_EQ(simCast({.i = 300}, I32, DataType::UInt8).i, 44);
  // int64 -> float rounds through double, as the reference writes it.
  EXPECT_EQ(simCast({.i = kI64Max}, I64, DataType::Float).f, 0x1p63);
}

// ---- what the emitter writes, where the text is the contract ------------------------------------

TEST(SourceOps, TypeNames) {
  EXPECT_EQ(computeTypeName(DataType::BFloat16), "float");
  EXPECT_EQ(computeTypeName(DataType::Float8_e5m2fnuz), "float");
  EXPECT_EQ(computeTypeName(DataType::Double), "double");
  EXPECT_EQ(computeTypeName(DataType::UInt8), "long long");
  EXPECT_EQ(computeTypeName(DataType::Bool), "bool");
  EXPECT_EQ(storageTypeName(DataType::BFloat16), "braze_bf16");
  EXPECT_EQ(storageTypeName(DataType::Float8_e4m3fn), "braze_e4m3fn");
  EXPECT_EQ(storageTypeName(DataType::Float8_e4m3fnuz), "braze_e4m3fnuz");
  EXPECT_EQ(storageTypeName(DataType::Int8), "signed char");
}

TEST(SourceOps, Literals) {
  EXPECT_EQ(literalExpr(0.1, DataType::Double), "0.1");
  EXPECT_EQ(literalExpr(0.1, DataType::Float), "0.1f");
  EXPECT_EQ(literalExpr(2.0, DataType::Float), "2.0f");
  EXPECT_EQ(literalExpr(-0.0, DataType::Float), "(-0.0f)");
  EXPECT_EQ(literalExpr(1.0 + 0x1p-9, DataType::BFloat16), "1.0f");  // rounded to the dtype
  EXPECT_EQ(literalExpr(kInf, DataType::Float), "__int_as_float(0x7f800000)");
  EXPECT_EQ(literalExpr(kNaN, DataType::Double), "__longlong_as_double(0x7ff8000000000000LL)");
  EXPECT_EQ(literalExpr(int64_t{300}, DataType::Int8), "44LL");
  EXPECT_EQ(literalExpr(int64_t{-5}, DataType::Int64), "(-5LL)");
  EXPECT_EQ(literalExpr(kI64Min, DataType::Int64), "(-9223372036854775807LL - 1)");
  EXPECT_EQ(literalExpr(1e10, DataType::Int32), "2147483647LL");
  EXPECT_EQ(literalExpr(int64_t{2}, DataType::Bool), "true");
}

TEST(SourceOps, ExpressionsFollowTheReferenceDomains) {
  const DataType F = DataType::Float, H = DataType::Half, I32 = DataType::Int32;
  // Float operands: float math, one rounding per op.
  const Operand a{"a", F}, b{"b", F};
  EXPECT_EQ(elementwiseExpr(OpKind::Add, F, std::vector<Operand>{a, b}), "braze_add((a), (b))");
  // A Double operand (a Python float) makes the math double, rounded once to the Float result.
  EXPECT_EQ(elementwiseExpr(OpKind::Mul, F, std::vector<Operand>{a, {"s", DataType::Double}}),
            "__double2float_rn(braze_mul(((double)(a)), (s)))");
  // A Half result (relu keeps its input's type) is rounded to half.
  EXPECT_EQ(elementwiseExpr(OpKind::Relu, H, std::vector<Operand>{{"h", H}}), "braze_round_half(braze_relu((h)))");
  // Integer ops wrap to the result's width.
  EXPECT_EQ(elementwiseExpr(OpKind::Add, I32, std::vector<Operand>{{"i", I32}, {"j", I32}}),
            "braze_wrap_i32(braze_add_i((i), (j)))");
  // truediv of integers is float math, on the integers converted to float first (as torch divides them).
  EXPECT_EQ(elementwiseExpr(OpKind::TrueDiv, F, std::vector<Operand>{{"i", I32}, {"j", I32}}),
            "braze_div(((float)(i)), ((float)(j)))");
  EXPECT_EQ(castExpr({"x", F}, I32), "braze_float_to_int((double)(x), (-2147483648LL), 2147483647LL)");
  EXPECT_THROW(elementwiseExpr(OpKind::Silu, I32, std::vector<Operand>{{"i", I32}}), Error);
}

}  // namespace
}  // namespace braze::codegen
