#include "codegen/source_emitter.h"

#include "support/error.h"
#include "codegen/source_ops.h"
#include "codegen/source_preamble.h"
#include "codegen/mma_preamble.h"
#include "codegen/tma_preamble.h"
#include "codegen/var_uses.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace braze::codegen {

using namespace kernel;  // the emitter prints kernel IR
namespace {

// Shared by every kernel: an aligned vector type (so one access is one 8- or 16-byte instruction) and a
// block reduction over threadIdx.x or threadIdx.y. Threads with the same threadIdx.y are consecutive
// lanes of a warp (WARP lanes: the kernel's warp_size, which the device names: 32, or a wavefront of 64
// on AMD; braze_shfl_xor exchanges within groups of a width that divides the hardware's), so an x-reduction of up
// to a warp's threads is a shuffle butterfly, and one over whole warps a butterfly per warp and a pass
// over the warps' results; a y-reduction of up to 32 rows has each thread combine its column from shared
// memory in order; otherwise a tree in shared memory.
constexpr std::string_view kKernelPreamble = R"(
template <typename T, int N>
struct __align__(sizeof(T) * N) BrazeVec {
  T v[N];
};

// Four bytes to a 4-byte-aligned address, as one store.
template <typename T> __device__ __forceinline__ void braze_store_4_bytes(T* p, T a, T b, T c, T d) {
  static_assert(sizeof(T) == 1, "bytes");
  const unsigned ab = __byte_perm((unsigned)a, (unsigned)b, 0x0040), cd = __byte_perm((unsigned)c, (unsigned)d, 0x0040);
  *reinterpret_cast<unsigned*>(p) = __byte_perm(ab, cd, 0x5410);
}

// Byte `byte` of each of four words, in that order, to a 4-byte-aligned address as one store
// (__byte_perm's bytes 0-3 are its first operand's, 4-7 its second's).
__device__ __forceinline__ void braze_store_4_bytes_of_words(void* p, unsigned a, unsigned b, unsigned c, unsigned d,
                                                             unsigned byte) {
  const unsigned select = byte | (byte + 4u) << 4;
  *reinterpret_cast<unsigned*>(p) = __byte_perm(__byte_perm(a, b, select), __byte_perm(c, d, select), 0x5410);
}

template <typename T> struct BrazeIsBool { static constexpr bool value = false; };
template <> struct BrazeIsBool<bool> { static constexpr bool value = true; };

template <int WARP, int BX, int BY, int AXIS, typename T, typename F>
__device__ __forceinline__ T braze_block_reduce(T v, F combine) {
  static_assert(WARP <= BRAZE_WARP_LANES && BRAZE_WARP_LANES % WARP == 0, "a warp of the kernel is a group of the hardware's lanes");
  if constexpr (AXIS == 0 && BX <= WARP && !BrazeIsBool<T>::value) {
#pragma unroll
    for (int offset = BX / 2; offset > 0; offset /= 2) v = combine(v, braze_shfl_xor(v, offset, BX));
    return v;
  } else if constexpr (AXIS == 0 && BX % WARP == 0 && !BrazeIsBool<T>::value) {
    // Whole warps along x: a butterfly in each warp, then every thread combines its row's warp
    // results from shared memory (broadcast reads): two barriers instead of one per tree level.
    constexpr int W = BX / WARP;
    __shared__ T warp_results[BY * W];
#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2) v = combine(v, braze_shfl_xor(v, offset, WARP));
    if (threadIdx.x % WARP == 0) warp_results[threadIdx.y * W + threadIdx.x / WARP] = v;
    __syncthreads();
    T result = warp_results[threadIdx.y * W];
#pragma unroll
    for (int w = 1; w < W; ++w) result = combine(result, warp_results[threadIdx.y * W + w]);
    __syncthreads();
    return result;
  } else if constexpr (AXIS == 1 && BY <= 32) {
    // A short column: each thread combines its column's values from shared memory in order (reads along
    // x, conflict free), two barriers where a tree of pairs takes one per level.
    __shared__ T smem[BX * BY];
    smem[threadIdx.y * BX + threadIdx.x] = v;
    __syncthreads();
    T result = smem[threadIdx.x];
#pragma unroll
    for (int y = 1; y < BY; ++y) result = combine(result, smem[y * BX + threadIdx.x]);
    __syncthreads();
    return result;
  } else {
    __shared__ T smem[BX * BY];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int n = AXIS == 0 ? BX : BY;
    const int m = AXIS == 0 ? tx : ty;
    smem[ty * BX + tx] = v;
    __syncthreads();
    for (int step = 1; step < n; step *= 2) {
      if (m % (2 * step) == 0 && m + step < n) {
        const int partner = AXIS == 0 ? ty * BX + tx + step : (ty + step) * BX + tx;
        smem[ty * BX + tx] = combine(smem[ty * BX + tx], smem[partner]);
      }
      __syncthreads();
    }
    const T result = AXIS == 0 ? smem[ty * BX] : smem[tx];
    __syncthreads();
    return result;
  }
}
)";

bool movesRegisters(const std::vector<Stmt>& stmts) {
  return std::any_of(stmts.begin(), stmts.end(), [](const Stmt& s) {
    return s.kind == SKind::SetMaxNReg || movesRegisters(s.body) || movesRegisters(s.orelse);
  });
}

class Emitter {
 public:
  Emitter(const Kernel& k, SourceDialect dialect) : k_(k), uses_(k), dialect_(dialect) {}

  // A Let's value for a stored-only narrow scalar: the float before its rounding, where the Let's
  // expression is a rounding of a float (or a quotient for fp8). Empty otherwise.
  std::string unrounded(const Stmt& s) const {
    if (!uses_.storedOnly(s.var)) return "";
    const KExpr& x = k_.exprs[s.a];
    if (!isCast(x) || x.dtype != k_.vars[s.var].dtype) return "";
    if (std::string quotient = fp8QuotientUnrounded(x); !quotient.empty()) return quotient;
    if (k_.exprs[x.args[0]].dtype == DataType::Float) return e(x.args[0]);
    return "";
  }

  std::string run() {
    BRAZE_CHECK(dialect_ == SourceDialect::Hip || k_.warp_size == 32,
                "kernel {} was planned for a wavefront of {} lanes (an AMD GPU): it has no CUDA spelling; its HIP "
                "code is what runs there (fd.last_hip_code(), fd.hip_code_for(inputs))",
                k_.name, k_.warp_size);
    std::string out = fmt::format("// {}: {}\n", k_.name, k_.summary);
    out += opsPreamble(dialect_, usesFp8());
    if (usesRandom()) out += randomPreamble();
    if (k_.index_errors) out += indexCheckPreamble();
    out += mmaPreamble(k_, dialect_);
    out += tmaPreamble(k_, dialect_);
    out += kKernelPreamble;
    out += fmt::format("\ntypedef {} idx_t;\n\n", k_.index64 ? "long long" : "int");
    std::vector<std::string> params;
    for (const TensorParam& t : k_.tensors) {
      const bool written = t.output || t.workspace || t.index_errors;
      // An input updated in place is read and written through two parameters: no __restrict__ on either.
      const bool shared =
          t.storage != nullptr && std::any_of(k_.tensors.begin(), k_.tensors.end(), [&](const TensorParam& u) {
            return &u != &t && u.storage == t.storage && (u.output || t.output);
          });
      params.push_back(fmt::format("{}{}* {}{}", written ? "" : "const ", storageTypeName(t.dtype),
                                   shared ? "" : "__restrict__ ", t.name));
    }
    for (const ScalarArgument& a : k_.arguments) {
      params.push_back(fmt::format("const {} {}", a.index ? std::string_view("idx_t") : computeTypeName(a.dtype),
                                   a.name));
    }
    // Tensor maps last: 128 bytes each, in parameter space where TMA reads them.
    for (const TensorParam& t : k_.tensors) {
      if (t.tma) params.push_back(fmt::format("const __grid_constant__ BrazeTensorMap {}", tensorMapName(t)));
    }
    // A kernel whose warpgroups move registers between them (setmaxnreg) is compiled for one block per SM:
    // the registers it hands around are the block's share of the register file.
    // A cluster's size is the kernel's own: a plain launch of a grid of whole clusters runs it so.
    const std::string cluster = k_.cluster > 1 ? fmt::format("__cluster_dims__({}, 1, 1) ", k_.cluster) : "";
    out += fmt::format("extern \"C\" __global__ void {}__launch_bounds__({}{}) {}({}) {{\n", cluster,
                       k_.threadsPerBlock(), movesRegisters(k_.body) ? ", 1" : "", k_.name, fmt::join(params, ", "));
    body_ = &out;
    // Shared arrays live in dynamic shared memory: a block may use more than the 48 KiB a static
    // declaration allows (the launch sets the size and, above 48 KiB, the function's limit).
    // wgmma operands' and swizzled TMA boxes' patterns are placed at multiples of 1024 bytes from this base.
    if (k_.shared_bytes > 0) {
      line(1, fmt::format("extern __shared__ __align__({}) unsigned char braze_smem[];",
                          k_.arch_specific || usesTma(k_) ? 1024 : 16));
    }
    block(k_.body, 1);
    out += "}\n";
    return out;
  }

 private:
  // (Over the expressions the statements use: the source names no other.)
  bool usesRandom() const {
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      if (uses_.reached(static_cast<ExprId>(id)) && k_.exprs[id].kind == EKind::RandomUnit) return true;
    }
    return false;
  }

  // Whether any value of the kernel is e4m3fn or e5m2 (CUDA's fp8 types and conversions needed).
  bool usesFp8() const {
    auto fp8 = [](DataType d) { return d == DataType::Float8_e4m3fn || d == DataType::Float8_e5m2; };
    for (const TensorParam& t : k_.tensors) {
      if (fp8(t.dtype)) return true;
    }
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      const KExpr& e = k_.exprs[id];
      if (uses_.reached(static_cast<ExprId>(id)) && (fp8(e.dtype) || fp8(e.from))) return true;
    }
    for (const KVar& v : k_.vars) {
      if (fp8(v.dtype)) return true;
    }
    return false;
  }

  static bool isCast(const KExpr& x) {
    return x.kind == EKind::Cast || (x.kind == EKind::Elementwise && x.op == OpKind::CastOp);
  }

  // The expression `id` stands for, to be emitted again here: itself, or the definition of the single-Let
  // scalar it reads when every operand of that definition reads the same value here (null otherwise).
  const KExpr* emittableDefinition(ExprId id) const {
    if (k_.exprs[id].kind != EKind::VarRef) return &k_.exprs[id];
    const KExpr& x = defined(id);
    for (ExprId arg : x.args) {
      if (!stable(arg)) return nullptr;
    }
    return &x;
  }

  // `id`, or the expression a single-Let scalar it reads was defined by.
  const KExpr& defined(ExprId id) const {
    const KExpr& x = k_.exprs[id];
    if (x.kind == EKind::VarRef && uses_.singleLet(x.ref)) return defined(uses_.definition(x.ref));
    return x;
  }

  // Whether the value of `id` is one bf16 holds exactly: a bf16 or 8-bit integer element, or such a value
  // converted to a floating type.
  bool bf16Exact(ExprId id) const {
    const KExpr& x = defined(id);
    auto exactType = [](DataType d) { return d == DataType::BFloat16 || d == DataType::Int8 || d == DataType::UInt8; };
    switch (x.kind) {
      case EKind::Load:
      case EKind::LocalRead: return exactType(x.dtype);
      case EKind::Cast: return isFloating(x.dtype) && exactType(x.from) && bf16Exact(x.args[0]);
      case EKind::Elementwise:
        return x.op == OpKind::CastOp && isFloating(x.dtype) && exactType(k_.exprs[x.args[0]].dtype) && bf16Exact(x.args[0]);
      default: return false;
    }
  }

  // A cast to e4m3fn or e5m2 of a double quotient of two values that float holds exactly (quantize's
  // x / scale): braze_quotient_for_fp8 gives the same float8 value from float math (a double division and
  // the software double-to-fp8 rounding cost dozens of instructions per element). Empty for anything else.
  std::string fp8Quotient(const KExpr& x) const {
    const std::string quotient = fp8QuotientUnrounded(x);
    if (quotient.empty()) return "";
    return fmt::format("{}({})", x.dtype == DataType::Float8_e4m3fn ? "braze_round_e4m3fn" : "braze_round_e5m2", quotient);
  }

  // fp8Quotient's float, before its rounding to the fp8 type.
  std::string fp8QuotientUnrounded(const KExpr& x) const {
    if (x.dtype != DataType::Float8_e4m3fn && x.dtype != DataType::Float8_e5m2) return "";
    if (!isCast(x)) return "";
    const KExpr* quotient = emittableDefinition(x.args[0]);
    if (quotient == nullptr || quotient->kind != EKind::Elementwise || quotient->op != OpKind::TrueDiv ||
        quotient->dtype != DataType::Double) {
      return "";
    }
    std::array<std::string, 2> operands;
    for (size_t i = 0; i < 2; ++i) {
      // Each operand a float-held value widened to double, read where the quotient is.
      const KExpr& widened = k_.exprs[quotient->args[i]];
      if (!isCast(widened) || widened.dtype != DataType::Double) return "";
      const DataType from = k_.exprs[widened.args[0]].dtype;
      if (computeTypeOf(from) != DataType::Float) return "";
      operands[i] = e(widened.args[0]);
    }
    return fmt::format("braze_quotient_for_fp8({}, {})", operands[0], operands[1]);
  }

  // Whether emitting `id` again, later than where it was written, reads the same value: a constant, or a
  // scalar that a single Let defines.
  bool stable(ExprId id) const {
    const KExpr& x = k_.exprs[id];
    if (x.kind == EKind::VarRef) return uses_.singleLet(x.ref);
    return x.kind == EKind::ConstFloat || x.kind == EKind::ConstInt;
  }

  // An 8-bit integer array element converted to float: its float copy, which the array's vector loads fill
  // (see vector()). Empty for anything else.
  std::string byteAsFloat(const KExpr& x) const {
    if (x.dtype != DataType::Float || (x.from != DataType::Int8 && x.from != DataType::UInt8)) return "";
    const KExpr& element = k_.exprs[x.args[0]];
    if (element.kind != EKind::LocalRead || !uses_.floatCopy(element.ref)) return "";
    return fmt::format("{}_f[{}]", k_.vars[element.ref].name, e(element.args[0]));
  }

  // A product of two bf16-exact values rounded to bf16 (a bf16 mul, or a float one cast to bf16): one bf16
  // multiply (braze_mul_bf16), the same value without a float-to-bf16 conversion. Empty for anything else.
  std::string bf16Product(const KExpr& x) const {
    if (x.dtype != DataType::BFloat16) return "";
    const KExpr* product = &x;
    if (isCast(x)) {
      product = emittableDefinition(x.args[0]);
      if (product == nullptr || product->kind != EKind::Elementwise || product->op != OpKind::Mul ||
          product->dtype != DataType::Float) {
        return "";
      }
    } else if (x.kind != EKind::Elementwise || x.op != OpKind::Mul) {
      return "";
    }
    if (product->args.size() != 2 || !bf16Exact(product->args[0]) || !bf16Exact(product->args[1])) return "";
    return fmt::format("braze_mul_bf16({}, {})", e(product->args[0]), e(product->args[1]));
  }

  std::string type(VarId var) const {
    const KVar& v = k_.vars[var];
    return v.index ? "idx_t" : std::string(computeTypeName(v.dtype));
  }

  std::string e(ExprId id) const {
    const KExpr& x = k_.exprs[id];
    auto a = [&](size_t i) { return e(x.args[i]); };
    switch (x.kind) {
      case EKind::ConstInt:
        if (x.index) return k_.index64 ? fmt::format("{}LL", x.i) : fmt::format("{}", x.i);
        return literalExpr(x.i, x.dtype);
      case EKind::ConstBool: return x.i ? "true" : "false";
      case EKind::ConstFloat: return literalExpr(x.f, x.dtype);
      case EKind::VarRef: return k_.vars[x.ref].name;
      case EKind::Argument: return k_.arguments[x.ref].name;
      case EKind::ThreadIdx: return x.i == 0 ? "(idx_t)threadIdx.x" : "(idx_t)threadIdx.y";
      case EKind::BlockIdx: return x.i == 0 ? "(idx_t)blockIdx.x" : "(idx_t)blockIdx.y";
      case EKind::Add: return fmt::format("({} + {})", a(0), a(1));
      case EKind::Sub: return fmt::format("({} - {})", a(0), a(1));
      case EKind::Mul: return fmt::format("({} * {})", a(0), a(1));
      case EKind::Div: return fmt::format("({} / {})", a(0), a(1));
      case EKind::Mod: return fmt::format("({} % {})", a(0), a(1));
      case EKind::Min: return fmt::format("min({}, {})", a(0), a(1));
      case EKind::Xor: return fmt::format("({} ^ {})", a(0), a(1));
      case EKind::BitAnd: return fmt::format("({} & {})", a(0), a(1));
      case EKind::OrderKey: return fmt::format("(idx_t)braze_order_key({})", a(0));
      case EKind::ClusterRank: return "(idx_t)braze_cluster_rank()";
      case EKind::WarpUniform:
        // As a 32-bit value (a warp's role, say): one shuffle, whose result the compiler knows is uniform.
        return dialect_ == SourceDialect::Cuda ? fmt::format("(idx_t)__shfl_sync(0xffffffffu, (int){}, 0)", a(0))
                                               : fmt::format("(idx_t)__shfl((int){}, 0)", a(0));
      case EKind::Lt: return fmt::format("({} < {})", a(0), a(1));
      case EKind::Le: return fmt::format("({} <= {})", a(0), a(1));
      case EKind::Eq: return fmt::format("({} == {})", a(0), a(1));
      case EKind::And: return fmt::format("({} && {})", a(0), a(1));
      case EKind::Or: return fmt::format("({} || {})", a(0), a(1));
      case EKind::Not: return fmt::format("(!{})", a(0));
      case EKind::Select: return fmt::format("({} ? {} : {})", a(0), a(1), a(2));
      case EKind::Elementwise: {
        if (std::string product = bf16Product(x); !product.empty()) return product;
        if (std::string quotient = fp8Quotient(x); !quotient.empty()) return quotient;
        std::vector<Operand> ops;
        for (ExprId arg : x.args) ops.push_back({e(arg), k_.exprs[arg].dtype});
        return elementwiseExpr(x.op, x.dtype, ops);
      }
      case EKind::Cast: {
        if (std::string byte = byteAsFloat(x); !byte.empty()) return byte;
        if (std::string product = bf16Product(x); !product.empty()) return product;
        if (std::string quotient = fp8Quotient(x); !quotient.empty()) return quotient;
        return castExpr({a(0), x.from}, x.dtype);
      }
      case EKind::Fma: return fmt::format("__fmaf_rn({}, {}, {})", a(0), a(1), a(2));
      case EKind::IndexToValue: return fmt::format("static_cast<{}>({})", computeTypeName(x.dtype), a(0));
      case EKind::RandomUnit:
        return fmt::format("{}({}, {}, {})", x.op == OpKind::Uniform ? "braze_uniform_unit" : "braze_standard_normal",
                           a(0), a(1), a(2));
      case EKind::ValueToIndex: return fmt::format("static_cast<idx_t>({})", a(0));
      case EKind::CheckedIndex:
        return fmt::format("static_cast<idx_t>(braze_checked_index({}, {}, {}, {}ll))", a(0), a(1),
                           k_.tensors[*k_.index_errors].name, x.i);
      case EKind::Load: {
        const TensorParam& t = k_.tensors[x.ref];
        // Workspace values come from other blocks of this launch: read them from L2, never a stale L1 line.
        const std::string at = t.workspace ? fmt::format("braze_load_l2(&{}[{}])", t.name, a(0))
                                           : fmt::format("{}[{}]", t.name, a(0));
        return fromStorageExpr(at, x.dtype);
      }
      case EKind::LocalRead: {
        const KVar& v = k_.vars[x.ref];
        if (uses_.byteWords(x.ref)) return byteOfWords(x.ref, a(0));
        const std::string element = fmt::format("{}[{}]", v.name, a(0));
        return v.storage ? fromStorageExpr(element, v.dtype) : element;
      }
    }
    BRAZE_UNREACHABLE("emitter: expression kind {}", static_cast<int>(x.kind));
  }

  // Element `index` of a byte-words array (VarUses::byteWords), as its compute value.
  std::string byteOfWords(VarId var, const std::string& index) const {
    const KVar& v = k_.vars[var];
    return fmt::format("(long long)({})({}_w[({}) / 4] >> (8 * (({}) % 4)))",
                       v.dtype == DataType::Int8 ? "signed char" : "unsigned char", v.name, index, index);
  }

  void line(int depth, const std::string& text) {
    body_->append(static_cast<size_t>(depth) * 2, ' ');
    *body_ += text;
    *body_ += '\n';
  }

  void block(const std::vector<Stmt>& stmts, int depth) {
    for (size_t i = 0; i < stmts.size(); ++i) {
      if (i + 4 <= stmts.size() && fourBytes(stmts, i, depth)) {
        i += 3;
        continue;
      }
      stmt(stmts[i], depth);
    }
  }

  // Four writes of consecutive int8 / uint8 elements of a shared tile from a 4-aligned index (base, base + 1,
  // + 2, + 3): one 4-byte store (the lowering writes a row-major B's four k bytes of an n so). Emits it and
  // returns true, or returns false and emits nothing.
  bool fourBytes(const std::vector<Stmt>& stmts, size_t first, int depth) {
    const Stmt& s0 = stmts[first];
    if (s0.kind != SKind::LocalWrite) return false;
    const KVar& v = k_.vars[s0.var];
    if (!v.storage || (v.dtype != DataType::Int8 && v.dtype != DataType::UInt8)) return false;
    const ExprId base = s0.a;
    if (divisibility(k_, base) % 4 != 0) return false;
    std::array<std::string, 4> bytes;
    std::array<ExprId, 4> values;
    for (size_t j = 0; j < 4; ++j) {
      const Stmt& s = stmts[first + j];
      if (s.kind != SKind::LocalWrite || s.var != s0.var) return false;
      if (j > 0) {
        const KExpr& at = k_.exprs[s.a];
        if (at.kind != EKind::Add || at.args[0] != base || k_.exprs[at.args[1]].kind != EKind::ConstInt ||
            k_.exprs[at.args[1]].i != static_cast<int64_t>(j)) {
          return false;
        }
      }
      bytes[j] = toStorageExpr(e(s.b), v.dtype);
      values[j] = s.b;
    }
    // The same element of four byte-words arrays: one byte perm of each word pair, none to take bytes out.
    auto wordsAt = [&](ExprId value) {
      const KExpr& x = k_.exprs[value];
      return x.kind == EKind::LocalRead && uses_.byteWords(x.ref) ? x.args[0] : ExprId{-1};
    };
    const ExprId index = wordsAt(values[0]);
    if (index >= 0 && wordsAt(values[1]) == index && wordsAt(values[2]) == index && wordsAt(values[3]) == index) {
      const std::string at = e(index);
      std::array<std::string, 4> words;
      for (size_t j = 0; j < 4; ++j) words[j] = fmt::format("{}_w[({}) / 4]", k_.vars[k_.exprs[values[j]].ref].name, at);
      line(depth, fmt::format("braze_store_4_bytes_of_words(&{}[{}], {}, {}, {}, {}, (unsigned)(({}) % 4));", v.name, e(base),
                              words[0], words[1], words[2], words[3], at));
      return true;
    }
    line(depth, fmt::format("braze_store_4_bytes(&{}[{}], {}, {}, {}, {});", v.name, e(base), bytes[0], bytes[1], bytes[2],
                            bytes[3]));
    return true;
  }

  void stmt(const Stmt& s, int depth) {
    switch (s.kind) {
      case SKind::Let: {
        const std::string value = unrounded(s);
        line(depth, fmt::format("{} {} = {};{}", type(s.var), k_.vars[s.var].name, value.empty() ? e(s.a) : value,
                                value.empty() ? "" : "  // rounded where it is stored"));
        return;
      }
      case SKind::Assign: line(depth, fmt::format("{} = {};", k_.vars[s.var].name, e(s.a))); return;
      case SKind::Declare: {
        const KVar& v = k_.vars[s.var];
        if (v.kind == VarKind::Mbarriers) {
          line(depth, fmt::format("unsigned long long* {} = reinterpret_cast<unsigned long long*>(braze_smem + {});  // {} "
                                  "mbarriers",
                                  v.name, v.shared_offset, v.size));
        } else if (v.kind == VarKind::SharedArray) {
          const std::string t = v.storage ? std::string(storageTypeName(v.dtype)) : type(s.var);
          line(depth, fmt::format("{}* {} = reinterpret_cast<{}*>(braze_smem + {});  // {} elements, shared{}", t, v.name,
                                  t, v.shared_offset, v.size, v.storage ? " (as stored)" : ""));
        } else {
          if (uses_.byteWords(s.var)) {
            line(depth, fmt::format("unsigned {}_w[{}];  // bytes, 4 per word", v.name, v.size / 4));
          } else if (uses_.packedFragment(s.var)) {
            line(depth, fmt::format("unsigned {}[{}];  // packed: {} values per register", v.name,
                                    v.size / VarUses::valuesPerRegister(v.dtype), VarUses::valuesPerRegister(v.dtype)));
          } else if (uses_.wgmmaAccumulator(s.var) && v.dtype == DataType::Int32) {
            line(depth, fmt::format("int {}[{}];  // s32 wgmma accumulators", v.name, v.size));
          } else if (!uses_.onlyAsFloat(s.var)) {
            line(depth, fmt::format("{} {}[{}];", type(s.var), v.name, v.size));
          }
          if (uses_.floatCopy(s.var)) line(depth, fmt::format("float {}_f[{}];  // as floats", v.name, v.size));
        }
        return;
      }
      case SKind::LocalWrite: {
        const KVar& v = k_.vars[s.var];
        line(depth, fmt::format("{}[{}] = {};", v.name, e(s.a), v.storage ? toStorageExpr(e(s.b), v.dtype) : e(s.b)));
        return;
      }
      case SKind::For: {
        const std::string& v = k_.vars[s.var].name;
        // A wgmma loop stays a loop: unrolled (a short constant trip count), ptxas moved the accumulators
        // between the wgmmas and their wait and had to make the warpgroup wait there (its C7519 note).
        const bool wgmma_loop =
            std::any_of(s.body.begin(), s.body.end(), [](const Stmt& b) { return b.kind == SKind::Wgmma; });
        if (s.unroll) line(depth, "#pragma unroll");
        if (!s.unroll && wgmma_loop) line(depth, "#pragma unroll 1");
        line(depth, fmt::format("for (idx_t {} = {}; {} < {}; {} += {}) {{", v, e(s.a), v, e(s.b), v, e(s.c)));
        block(s.body, depth + 1);
        line(depth, "}");
        return;
      }
      case SKind::If:
        line(depth, fmt::format("if ({}) {{", e(s.a)));
        block(s.body, depth + 1);
        if (!s.orelse.empty()) {
          line(depth, "} else {");
          block(s.orelse, depth + 1);
        }
        line(depth, "}");
        return;
      case SKind::Store: {
        const TensorParam& t = k_.tensors[s.tensor];
        line(depth, fmt::format("{}[{}] = {};", t.name, e(s.a), toStorageExpr(e(s.b), t.dtype)));
        return;
      }
      case SKind::VecLoad:
      case SKind::VecStore: vector(s, depth); return;
      case SKind::BlockReduce: {
        const std::string t = type(s.var);
        const DataType dtype = k_.vars[s.var].dtype;
        const Operand ops[2] = {{"a", dtype}, {"b", dtype}};
        line(depth, fmt::format("{} = braze_block_reduce<{}, {}, {}, {}>({}, []({} a, {} b) {{ return {}; }});",
                                k_.vars[s.var].name, k_.warp_size, k_.block[0], k_.block[1], s.axis, k_.vars[s.var].name, t, t,
                                elementwiseExpr(combineOf(s.reduce), dtype, ops)));
        return;
      }
      case SKind::Barrier: line(depth, "__syncthreads();"); return;
      case SKind::ClusterBarrier: line(depth, "braze_cluster_sync();"); return;
      case SKind::Fence: line(depth, "__threadfence();"); return;
      case SKind::Mma: {
        // Each operand as registers (packed, VarUses) or as values: the function's suffix says which (w or
        // v, A then B; none: both values). A packed B counts its offset in registers.
        const bool packed_a = uses_.packedFragment(s.mma_operands[0]), packed_b = uses_.packedFragment(s.mma_operands[1]);
        const std::string suffix = packed_a && packed_b ? "_w" : packed_a ? "_wv" : packed_b ? "_vw" : "";
        const int64_t b_offset =
            packed_b ? s.b_offset / VarUses::valuesPerRegister(k_.vars[s.mma_operands[1]].dtype) : s.b_offset;
        line(depth, fmt::format("{}{}({}, {}, {}{}, {});", mmaFunctionName(k_, s), suffix, k_.vars[s.var].name,
                                k_.vars[s.mma_operands[0]].name, k_.vars[s.mma_operands[1]].name,
                                b_offset != 0 ? fmt::format(" + {}", b_offset) : "", k_.vars[s.mma_operands[2]].name));
        return;
      }
      case SKind::AtomicAdd:
        line(depth, fmt::format("idx_t {} = (idx_t)atomicAdd(&{}[{}], (int){});", k_.vars[s.var].name,
                                k_.tensors[s.tensor].name, e(s.a), e(s.b)));
        return;
      case SKind::SharedVecLoad: {
        const KVar& from = k_.vars[s.target];
        const std::string vec = fmt::format("BrazeVec<{}, {}>", storageTypeName(from.dtype), s.width);
        line(depth, "{");
        line(depth + 1, fmt::format("const {} raw = *reinterpret_cast<const {}*>(&{}[{}]);", vec, vec, from.name, e(s.a)));
        line(depth + 1, "#pragma unroll");
        line(depth + 1, fmt::format("for (int j = 0; j < {}; ++j) {}[{} + j] = {};", s.width, k_.vars[s.var].name, e(s.b),
                                    fromStorageExpr("raw.v[j]", from.dtype)));
        line(depth, "}");
        return;
      }
      case SKind::SharedAtomicAdd: {
        const std::string add = fmt::format("atomicAdd(&{}[{}], (int){})", k_.vars[s.target].name, e(s.a), e(s.b));
        line(depth, s.var >= 0 ? fmt::format("idx_t {} = (idx_t){};", k_.vars[s.var].name, add) : add + ";");
        return;
      }
      case SKind::CpAsync:
        line(depth, fmt::format("braze_cp_async<{}>(&{}[{}], &{}[{}], {});", s.width * sizeOf(k_.vars[s.var].dtype),
                                k_.vars[s.var].name, e(s.b), k_.tensors[s.tensor].name, e(s.a), e(s.c)));
        return;
      case SKind::CpAsyncCommit: line(depth, "braze_cp_async_commit();"); return;
      case SKind::CpAsyncWait: line(depth, fmt::format("braze_cp_async_wait<{}>();", s.width)); return;
      case SKind::Ldmatrix: ldmatrix(s, depth); return;
      case SKind::Wgmma: {
        auto descriptor = [&](int i, ExprId at) {
          const WgmmaOperand& o = s.wgmma_operands[i];
          return fmt::format("braze_wgmma_desc(&{}[{}], {}, {})", k_.vars[s.mma_operands[i]].name, e(at),
                             o.mn_major ? o.leading_bytes >> 4 : 1, o.stride_bytes >> 4);
        };
        line(depth, fmt::format("{}({}, {}, {});", wgmmaFunctionName(k_, s), k_.vars[s.var].name, descriptor(0, s.a),
                                descriptor(1, s.b)));
        return;
      }
      case SKind::WgmmaFence:
        // The accumulators' last writes (their zeros) before the fence, not moved between it and the wgmma.
        if (s.var >= 0) line(depth, fmt::format("braze_wgmma_hold<{}>({});", k_.vars[s.var].size, k_.vars[s.var].name));
        line(depth, "braze_wgmma_fence();");
        return;
      case SKind::WgmmaCommit: line(depth, "braze_wgmma_commit();"); return;
      case SKind::WgmmaWait:
        line(depth, fmt::format("braze_wgmma_wait<{}>();", s.width));
        if (s.var >= 0) line(depth, fmt::format("braze_wgmma_hold<{}>({});", k_.vars[s.var].size, k_.vars[s.var].name));
        return;
      case SKind::ProxyFence: line(depth, "braze_fence_proxy_async();"); return;
      case SKind::SetMaxNReg:
        BRAZE_CHECK(dialect_ == SourceDialect::Cuda, "kernel {} moves registers between warpgroups (setmaxnreg, sm_90a), "
                    "which has no HIP spelling", k_.name);
        line(depth, fmt::format("asm volatile(\"setmaxnreg.{}.sync.aligned.u32 {};\\n\" ::: \"memory\");",
                                s.axis == 1 ? "inc" : "dec", s.width));
        return;
      case SKind::MbarrierInit:
        line(depth, fmt::format("braze_mbarrier_init(&{}[{}], {});", k_.vars[s.var].name, e(s.a), s.width));
        return;
      case SKind::MbarrierArriveExpectTx:
        if (s.c >= 0) {
          line(depth, fmt::format("braze_mbarrier_arrive_remote(&{}[{}], {});", k_.vars[s.var].name, e(s.a), e(s.c)));
          return;
        }
        line(depth, fmt::format("braze_mbarrier_arrive_expect_tx(&{}[{}], {});", k_.vars[s.var].name, e(s.a), e(s.b)));
        return;
      case SKind::MbarrierWait:
        line(depth, fmt::format("braze_mbarrier_wait(&{}[{}], {});", k_.vars[s.var].name, e(s.a), e(s.b)));
        return;
      case SKind::TmaLoad:
        line(depth, fmt::format("braze_tma_load_{}d{}(&{}[{}], &{}, {}, {}{}, &{}[{}]{});", s.e >= 0 ? 3 : 2,
                                s.multicast != 0 ? "_multicast" : "", k_.vars[s.var].name, e(s.a),
                                tensorMapName(k_.tensors[s.tensor]), e(s.b), e(s.c),
                                s.e >= 0 ? ", " + e(s.e) : std::string(), k_.vars[s.mma_operands[0]].name, e(s.d),
                                s.multicast != 0 ? fmt::format(", {}", s.multicast) : std::string()));
        return;
    }
  }

  // ldmatrix into 32-bit registers, then each register's values into the fragment's compute values (or
  // straight into a packed fragment's registers).
  void ldmatrix(const Stmt& s, int depth) {
    const KVar& from = k_.vars[s.mma_operands[0]];
    const std::string& to = k_.vars[s.var].name;
    const int64_t per = VarUses::valuesPerRegister(from.dtype);
    if (uses_.packedFragment(s.var)) {
      line(depth, fmt::format("braze_ldmatrix_x{}{}(&{}[{}], &{}[{}]);", s.width, s.transpose ? "_trans" : "", to,
                              k_.exprs[s.b].i / per, from.name, e(s.a)));
      return;
    }
    line(depth, "{");
    line(depth + 1, fmt::format("unsigned r[{}];", s.width));
    line(depth + 1, fmt::format("braze_ldmatrix_x{}{}(r, &{}[{}]);", s.width, s.transpose ? "_trans" : "", from.name, e(s.a)));
    for (int64_t m = 0; m < s.width; ++m) {
      for (int64_t i = 0; i < per; ++i) {
        line(depth + 1, fmt::format("{}[{} + {}] = {};", to, e(s.b), m * per + i, unpackExpr(from.dtype, m, i)));
      }
    }
    line(depth, "}");
  }

  // Value i of register r[m] (the lowest bits first) as its compute type.
  static std::string unpackExpr(DataType dtype, int64_t m, int64_t i) {
    const std::string reg = fmt::format("r[{}]", m);
    switch (dtype) {
      case DataType::BFloat16:
        return i == 0 ? fmt::format("__uint_as_float({} << 16)", reg) : fmt::format("__uint_as_float({} & 0xffff0000u)", reg);
      case DataType::Half:
        return fmt::format("__half2float(__ushort_as_half((unsigned short)({} >> {})))", reg, 16 * i);
      case DataType::Int8: return fmt::format("(long long)(signed char)({} >> {})", reg, 8 * i);
      case DataType::UInt8: return fmt::format("(long long)(unsigned char)({} >> {})", reg, 8 * i);
      case DataType::Float8_e4m3fn:
        return fmt::format("braze_e4m3fn_to_float((__nv_fp8_storage_t)({} >> {}))", reg, 8 * i);
      case DataType::Float8_e5m2: return fmt::format("braze_e5m2_to_float((__nv_fp8_storage_t)({} >> {}))", reg, 8 * i);
      default: BRAZE_UNREACHABLE("ldmatrix of {} (the verifier allows bf16, f16, s8, u8, e4m3fn, e5m2)", toString(dtype));
    }
  }

  void vector(const Stmt& s, int depth) {
    const TensorParam& t = k_.tensors[s.tensor];
    const std::string vec = fmt::format("BrazeVec<{}, {}>", storageTypeName(t.dtype), s.width);
    const std::string& arr = k_.vars[s.var].name;
    line(depth, "{");
    const bool byte_words = uses_.byteWords(s.var);
    if (s.kind == SKind::VecLoad && uses_.packedFragment(s.var)) {
      // Into a packed fragment's registers as loaded (whole registers of its own type, VarUses).
      const int64_t per = VarUses::valuesPerRegister(k_.vars[s.var].dtype), words = s.width / per;
      const std::string type = fmt::format("BrazeVec<unsigned, {}>", words);
      line(depth + 1, fmt::format("const {} raw = *reinterpret_cast<const {}*>(&{}[{}]);", type, type, t.name, e(s.a)));
      line(depth + 1, "#pragma unroll");
      line(depth + 1, fmt::format("for (int w = 0; w < {}; ++w) {}[{} + w] = raw.v[w];", words, arr, k_.exprs[s.b].i / per));
    } else if (s.kind == SKind::VecLoad && (byte_words || (uses_.onlyAsFloat(s.var) && s.width % 4 == 0))) {
      // Loaded as words: the compiler then does not split the vector into bytes and join them again.
      const std::string words = fmt::format("BrazeVec<unsigned, {}>", s.width / 4);
      line(depth + 1, fmt::format("const {} raw = *reinterpret_cast<const {}*>(&{}[{}]);", words, words, t.name, e(s.a)));
      if (byte_words) {
        line(depth + 1, "#pragma unroll");
        line(depth + 1, fmt::format("for (int w = 0; w < {}; ++w) {}_w[{} + w] = raw.v[w];", s.width / 4, arr,
                                    k_.exprs[s.b].i / 4));
      } else {
        floatsOfBytes(s, depth + 1);
      }
    } else if (s.kind == SKind::VecLoad) {
      line(depth + 1, fmt::format("const {} raw = *reinterpret_cast<const {}*>(&{}[{}]);", vec, vec, t.name, e(s.a)));
      if (!uses_.onlyAsFloat(s.var)) {
        line(depth + 1, "#pragma unroll");
        line(depth + 1, fmt::format("for (int j = 0; j < {}; ++j) {}[{} + j] = {};", s.width, arr, e(s.b),
                                    fromStorageExpr("raw.v[j]", t.dtype)));
      }
      if (uses_.floatCopy(s.var)) floatsOfBytes(s, depth + 1);
    } else {
      line(depth + 1, fmt::format("{} raw;", vec));
      line(depth + 1, "#pragma unroll");
      line(depth + 1, fmt::format("for (int j = 0; j < {}; ++j) raw.v[j] = {};", s.width,
                                  toStorageExpr(fmt::format("{}[{} + j]", arr, e(s.b)), t.dtype)));
      line(depth + 1, fmt::format("*reinterpret_cast<{}*>(&{}[{}]) = raw;", vec, t.name, e(s.a)));
    }
    line(depth, "}");
  }

  // The float copy of an 8-bit integer array's vector load, 4 bytes a word: a byte perm puts each byte (its
  // sign bit flipped, for int8) in the low mantissa of a float of exponent 2^23, and one subtraction gives
  // the value. A conversion instruction per element is quarter rate on sm_90, and so is pulling each byte
  // out sign-extended before braze_i8_to_float.
  void floatsOfBytes(const Stmt& s, int depth) {
    const std::string& arr = k_.vars[s.var].name;
    const bool is_signed = k_.vars[s.var].dtype == DataType::Int8;
    if (s.width % 4 != 0) {
      line(depth, "#pragma unroll");
      line(depth, fmt::format("for (int j = 0; j < {}; ++j) {}_f[{} + j] = braze_i8_to_float((int)raw.v[j]);", s.width, arr, e(s.b)));
      return;
    }
    line(depth, "#pragma unroll");
    line(depth, fmt::format("for (int w = 0; w < {}; ++w) {{", s.width / 4));
    const std::string word = uses_.onlyAsFloat(s.var) ? "raw.v[w]" : "reinterpret_cast<const unsigned*>(&raw)[w]";
    line(depth + 1, fmt::format("const unsigned word = {}{};", word, is_signed ? " ^ 0x80808080u" : ""));
    line(depth + 1, "#pragma unroll");
    line(depth + 1, fmt::format("for (int b = 0; b < 4; ++b) {}_f[{} + 4 * w + b] = __uint_as_float(__byte_perm(word, 0x4B000000u, "
                                "0x7650 | b)) - {};", arr, e(s.b), is_signed ? "8388736.0f" : "8388608.0f"));
    line(depth, "}");
  }

  const Kernel& k_;
  const VarUses uses_;
  const SourceDialect dialect_;
  std::string* body_ = nullptr;
};

}  // namespace

std::string emitSource(const Kernel& kernel, SourceDialect dialect) { return Emitter(kernel, dialect).run(); }

}  // namespace braze::codegen
