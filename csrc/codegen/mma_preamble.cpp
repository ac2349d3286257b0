#include "codegen/mma_preamble.h"

#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <vector>

namespace braze::codegen {

using namespace kernel;  // the emitter prints kernel IR
namespace {

std::string_view operandSuffix(DataType dtype) {
  switch (dtype) {
    case DataType::BFloat16: return "bf16";
    case DataType::Half: return "f16";
    case DataType::Int8: return "s8";
    case DataType::UInt8: return "u8";
    case DataType::Float8_e4m3fn: return "e4m3";
    case DataType::Float8_e5m2: return "e5m2";
    default: BRAZE_UNREACHABLE("mma operand dtype {}", toString(dtype));
  }
}

// Packing: a kernel holds bf16/f16 values in floats (already rounded) and 8-bit integers in long longs.
// The value with the lower fragment index goes in the lower bits of the register, as PTX orders them.
constexpr std::string_view kPacking = R"(
__device__ __forceinline__ unsigned braze_pack_bf16x2(float lo, float hi) {
  // Exact: the values are bf16. One byte permute takes both high halves (two logic ops otherwise).
  return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);
}
__device__ __forceinline__ unsigned braze_pack_f16x2(float lo, float hi) {
  return (unsigned)__half_as_ushort(__float2half_rn(lo)) | ((unsigned)__half_as_ushort(__float2half_rn(hi)) << 16);
}
__device__ __forceinline__ unsigned braze_pack_8x4(const long long* v) {
  return (unsigned)(v[0] & 0xff) | ((unsigned)(v[1] & 0xff) << 8) | ((unsigned)(v[2] & 0xff) << 16) |
         ((unsigned)(v[3] & 0xff) << 24);
}
)";

// Four functions per shape and operand type: `<name>_w` takes each lane's fragments as the 32-bit
// registers PTX's mma.sync reads (what ldmatrix or a vector load of the operand's type fills, for
// fragments nothing else writes or reads: the emitter keeps those packed), `<name>` takes both as values
// and packs them first, and `<name>_wv` / `<name>_vw` take one operand each way (A first).
std::string function(MmaShape shape, DataType operand) {
  const std::string name = fmt::format("braze_mma_{}_{}", toString(shape), operandSuffix(operand));
  const std::string_view suffix = operandSuffix(operand);
  const bool integer = operand == DataType::Int8 || operand == DataType::UInt8;
  std::string out;
  std::string pack;  // register i of a value array v
  if (operand == DataType::Float8_e4m3fn || operand == DataType::Float8_e5m2) {
    // fp8 values are held in floats (already rounded): their bits by CUDA's conversion, exact here. The
    // kernel moves fp8 values, so the preamble has BRAZE_FP8's conversions.
    const std::string_view format = operand == DataType::Float8_e4m3fn ? "e4m3fn" : "e5m2";
    out += fmt::format(R"(
__device__ __forceinline__ unsigned braze_pack_{0}x4(const float* v) {{
  return (unsigned)braze_to_{1}(v[0]) | ((unsigned)braze_to_{1}(v[1]) << 8) | ((unsigned)braze_to_{1}(v[2]) << 16) |
         ((unsigned)braze_to_{1}(v[3]) << 24);
}}
)",
                       suffix, format);
    pack = fmt::format("braze_pack_{}x4(v + 4 * i)", suffix);
  } else if (integer) {
    pack = "braze_pack_8x4(v + 4 * i)";
  } else {
    pack = fmt::format("braze_pack_{}x2(v[2 * i], v[2 * i + 1])", suffix);
  }
  const std::string_view value = integer ? "long long" : "float";
  const std::string kind = shape == MmaShape::M16N8K16 ? "m16n8k16" : "m16n8k32";
  const std::string accumulate = integer ? fmt::format("s32.{0}.{0}.s32", suffix) : fmt::format("f32.{0}.{0}.f32", suffix);
  // s32 accumulators without .satfinite wrap, as the simulator's.
  const std::string body = integer ? R"(  int r0, r1, r2, r3;
  asm volatile("mma.sync.aligned.{0}.row.col.{1} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, "
               "{{%10, %11, %12, %13}};\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                 "r"((int)c[0]), "r"((int)c[1]), "r"((int)c[2]), "r"((int)c[3]));
  d[0] = r0;
  d[1] = r1;
  d[2] = r2;
  d[3] = r3;
)"
                                   : R"(  asm volatile("mma.sync.aligned.{0}.row.col.{1} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, "
               "{{%10, %11, %12, %13}};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
)";
  out += fmt::format("\n__device__ __forceinline__ void {}_w({}* d, const unsigned* a, const unsigned* b, const {}* c) {{\n",
                     name, value, value);
  out += fmt::format(fmt::runtime(body), kind, accumulate);
  out += "}\n";
  // `<name>_wv` and `<name>_vw`: one operand as registers, the other as values.
  out += fmt::format(R"(__device__ __forceinline__ void {0}_wv({1}* d, const unsigned* a, const {2}* b, const {1}* c) {{
  unsigned bw[2];
  auto packed = [](const {2}* v, int i) {{ return {3}; }};
#pragma unroll
  for (int i = 0; i < 2; ++i) bw[i] = packed(b, i);
  {0}_w(d, a, bw, c);
}}
__device__ __forceinline__ void {0}_vw({1}* d, const {2}* a, const unsigned* b, const {1}* c) {{
  unsigned aw[4];
  auto packed = [](const {2}* v, int i) {{ return {3}; }};
#pragma unroll
  for (int i = 0; i < 4; ++i) aw[i] = packed(a, i);
  {0}_w(d, aw, b, c);
}}
__device__ __forceinline__ void {0}({1}* d, const {2}* a, const {2}* b, const {1}* c) {{
  unsigned bw[2];
  auto packed = [](const {2}* v, int i) {{ return {3}; }};
#pragma unroll
  for (int i = 0; i < 2; ++i) bw[i] = packed(b, i);
  {0}_vw(d, a, bw, c);
}}
)",
                     name, value, integer ? "long long" : "float", pack);
  return out;
}

// cp.async (16 bytes through L2 only, .cg; 4 and 8 through L1, .ca), its group commit and wait
// (ldmatrixFunction writes ldmatrix). `src_bytes` below the copy's size zero-fills the rest; 0 reads
// nothing. Each clobbers "memory": the compiler may not move shared-memory accesses of the kernel across
// them.
constexpr std::string_view kAsyncCopy = R"(
template <int Bytes> __device__ __forceinline__ void braze_cp_async(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(gmem), "n"(Bytes), "r"(src_bytes)
                 : "memory");
  }
}
__device__ __forceinline__ void braze_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending> __device__ __forceinline__ void braze_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}
)";

// braze_ldmatrix_x<matrices>[_trans](r, smem): ldmatrix of 1, 2 or 4 matrices into r[0 .. matrices).
std::string ldmatrixFunction(int matrices, bool transpose) {
  std::vector<std::string> registers, outputs;
  for (int i = 0; i < matrices; ++i) {
    registers.push_back(fmt::format("%{}", i));
    outputs.push_back(fmt::format("\"=r\"(r[{}])", i));
  }
  return fmt::format(R"(
__device__ __forceinline__ void braze_ldmatrix_x{0}{1}(unsigned* r, const void* smem) {{
  asm volatile("ldmatrix.sync.aligned.m8n8.x{0}{2}.shared.b16 {{{3}}}, [%{4}];\n"
               : {5}
               : "r"((unsigned)__cvta_generic_to_shared(smem))
               : "memory");
}}
)",
                     matrices, transpose ? "_trans" : "", transpose ? ".trans" : "", fmt::join(registers, ", "), matrices,
                     fmt::join(outputs, ", "));
}

// wgmma's helpers: the descriptor of an operand at a shared address (fields already encoded: 16-byte
// units; 128-byte swizzle), the fence, commit and wait, and the proxy fence that makes this thread's
// shared writes visible to wgmma's reads. braze_wgmma_hold pins accumulator registers after a wait:
// the compiler may not move reads of them above it (the wgmma writing them has no data dependence the
// compiler sees).
constexpr std::string_view kWgmmaSupport = R"(
__device__ __forceinline__ unsigned long long braze_wgmma_desc(const void* smem, unsigned leading, unsigned stride) {
  const unsigned long long start = ((unsigned)__cvta_generic_to_shared(smem) & 0x3FFFF) >> 4;
  return start | ((unsigned long long)leading << 16) | ((unsigned long long)stride << 32) | (1ull << 62);
}
__device__ __forceinline__ void braze_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void braze_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int Pending> __device__ __forceinline__ void braze_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}
template <int N> __device__ __forceinline__ void braze_wgmma_hold(float* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N> __device__ __forceinline__ void braze_wgmma_hold(int* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}
__device__ __forceinline__ void braze_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
)";

struct WgmmaForm {
  int n;
  DataType operand;
  bool a_mn_major, b_mn_major;
  auto operator<=>(const WgmmaForm&) const = default;
};

std::string wgmmaName(const WgmmaForm& f) {
  return fmt::format("braze_wgmma_m64n{}k{}_{}_{}{}", f.n, wgmmaK(sizeOf(f.operand)), operandSuffix(f.operand),
                     f.a_mn_major ? "m" : "k", f.b_mn_major ? "m" : "k");
}

// d[0 .. n/2) += A B: one wgmma.mma_async of two shared-memory descriptors. Its scale-d operand is a
// predicate (true: accumulate into d), set from a register holding 1. 16-bit operands take scales of A
// and B (1) and their orders (transposed: mn-major); fp8 ones the scales only (k-major); integer ones
// neither, with s32 accumulators (which wrap without .satfinite, as the simulator's).
std::string wgmmaFunction(const WgmmaForm& f) {
  const bool integer = f.operand == DataType::Int8 || f.operand == DataType::UInt8;
  const bool sixteen = sizeOf(f.operand) == 2;
  std::vector<std::string> registers, outputs;
  for (int i = 0; i < f.n / 2; ++i) {
    registers.push_back(fmt::format("%{}", i));
    outputs.push_back(fmt::format("\"+{}\"(d[{}])", integer ? "r" : "f", i));
  }
  const std::string modifiers = sixteen ? fmt::format(", 1, 1, {}, {}", f.a_mn_major ? 1 : 0, f.b_mn_major ? 1 : 0)
                                : integer ? "" : ", 1, 1";
  return fmt::format(R"(
__device__ __forceinline__ void {0}({1}* d, unsigned long long a, unsigned long long b) {{
  asm volatile("{{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %{2}, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n{3}k{4}.{5}.{6}.{6} {{{7}}}, %{8}, %{9}, accumulate{10};\n}}\n"
               : {11}
               : "l"(a), "l"(b), "r"(1));
}}
)",
                     wgmmaName(f), integer ? "int" : "float", f.n / 2 + 2, f.n, wgmmaK(sizeOf(f.operand)),
                     integer ? "s32" : "f32", operandSuffix(f.operand), fmt::join(registers, ", "), f.n / 2, f.n / 2 + 1,
                     modifiers, fmt::join(outputs, ", "));
}

struct Used {
  std::set<std::pair<MmaShape, DataType>> mma;
  bool async_copy = false;  // cp.async or ldmatrix
  std::set<WgmmaForm> wgmma;
};

WgmmaForm wgmmaForm(const Kernel& k, const Stmt& s) {
  return {s.width, k.vars[s.mma_operands[0]].dtype, s.wgmma_operands[0].mn_major, s.wgmma_operands[1].mn_major};
}

void collect(const Kernel& k, const std::vector<Stmt>& stmts, Used& used) {
  for (const Stmt& s : stmts) {
    if (s.kind == SKind::Mma) used.mma.insert({s.mma_shape, k.vars[s.mma_operands[0]].dtype});
    if (s.kind == SKind::CpAsync || s.kind == SKind::CpAsyncCommit || s.kind == SKind::CpAsyncWait ||
        s.kind == SKind::Ldmatrix) {
      used.async_copy = true;
    }
    if (s.kind == SKind::Wgmma) used.wgmma.insert(wgmmaForm(k, s));
    collect(k, s.body, used);
    collect(k, s.orelse, used);
  }
}

}  // namespace

std::string mmaFunctionName(const Kernel& kernel, const Stmt& mma) {
  return fmt::format("braze_mma_{}_{}", toString(mma.mma_shape), operandSuffix(kernel.vars[mma.mma_operands[0]].dtype));
}

std::string wgmmaFunctionName(const Kernel& kernel, const Stmt& wgmma) { return wgmmaName(wgmmaForm(kernel, wgmma)); }

std::string mmaPreamble(const Kernel& kernel, SourceDialect dialect) {
  Used used;
  collect(kernel, kernel.body, used);
  if (used.mma.empty() && !used.async_copy && used.wgmma.empty()) return "";
  BRAZE_CHECK(dialect == SourceDialect::Cuda,
              "kernel {} uses mma.sync, wgmma, cp.async or ldmatrix, which have no HIP spelling (AMD's matrix instructions, "
              "MFMA, are not emitted)",
              kernel.name);
  std::string out;
  if (!used.mma.empty()) out += kPacking;
  for (const auto& [shape, operand] : used.mma) out += function(shape, operand);
  if (used.async_copy) {
    out += kAsyncCopy;
    for (int matrices : {1, 2, 4}) {
      for (bool transpose : {false, true}) out += ldmatrixFunction(matrices, transpose);
    }
  }
  if (!used.wgmma.empty()) out += kWgmmaSupport;
  for (const WgmmaForm& f : used.wgmma) out += wgmmaFunction(f);
  return out;
}

}  // namespace braze::codegen
