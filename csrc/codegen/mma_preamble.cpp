#include "codegen/mma_preamble.h"

#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <vector>

namespace braze::kernel {
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
  return (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);  // exact: the values are bf16
}
__device__ __forceinline__ unsigned braze_pack_f16x2(float lo, float hi) {
  return (unsigned)__half_as_ushort(__float2half_rn(lo)) | ((unsigned)__half_as_ushort(__float2half_rn(hi)) << 16);
}
__device__ __forceinline__ unsigned braze_pack_8x4(const long long* v) {
  return (unsigned)(v[0] & 0xff) | ((unsigned)(v[1] & 0xff) << 8) | ((unsigned)(v[2] & 0xff) << 16) |
         ((unsigned)(v[3] & 0xff) << 24);
}
)";

std::string function(MmaShape shape, DataType operand) {
  const std::string name = fmt::format("braze_mma_{}_{}", toString(shape), operandSuffix(operand));
  if (shape == MmaShape::M16N8K16) {
    const std::string pack = operand == DataType::BFloat16 ? "braze_pack_bf16x2" : "braze_pack_f16x2";
    return fmt::format(R"(
__device__ __forceinline__ void {0}(float* d, const float* a, const float* b, const float* c) {{
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{1}.{1}.f32 {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, "
               "{{%8, %9}}, {{%10, %11, %12, %13}};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"({2}(a[0], a[1])), "r"({2}(a[2], a[3])), "r"({2}(a[4], a[5])), "r"({2}(a[6], a[7])),
                 "r"({2}(b[0], b[1])), "r"({2}(b[2], b[3])), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}}
)",
                       name, operandSuffix(operand), pack);
  }
  if (operand == DataType::Float8_e4m3fn || operand == DataType::Float8_e5m2) {
    // fp8 values are held in floats (already rounded): their bits by CUDA's conversion, exact here. The
    // kernel moves fp8 values, so the preamble has BRAZE_FP8's conversions.
    const std::string_view format = operandSuffix(operand);
    return fmt::format(R"(
__device__ __forceinline__ unsigned braze_pack_{1}x4(const float* v) {{
  return (unsigned)braze_to_{2}(v[0]) | ((unsigned)braze_to_{2}(v[1]) << 8) | ((unsigned)braze_to_{2}(v[2]) << 16) |
         ((unsigned)braze_to_{2}(v[3]) << 24);
}}
__device__ __forceinline__ void {0}(float* d, const float* a, const float* b, const float* c) {{
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.{1}.{1}.f32 {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, "
               "{{%8, %9}}, {{%10, %11, %12, %13}};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(braze_pack_{1}x4(a)), "r"(braze_pack_{1}x4(a + 4)), "r"(braze_pack_{1}x4(a + 8)),
                 "r"(braze_pack_{1}x4(a + 12)), "r"(braze_pack_{1}x4(b)), "r"(braze_pack_{1}x4(b + 4)),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}}
)",
                       name, format, operand == DataType::Float8_e4m3fn ? "e4m3fn" : "e5m2");
  }
  // s32 accumulators without .satfinite wrap, as the simulator's.
  return fmt::format(R"(
__device__ __forceinline__ void {0}(long long* d, const long long* a, const long long* b, const long long* c) {{
  int r0, r1, r2, r3;
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.{1}.{1}.s32 {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, "
               "{{%8, %9}}, {{%10, %11, %12, %13}};\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(braze_pack_8x4(a)), "r"(braze_pack_8x4(a + 4)), "r"(braze_pack_8x4(a + 8)),
                 "r"(braze_pack_8x4(a + 12)), "r"(braze_pack_8x4(b)), "r"(braze_pack_8x4(b + 4)),
                 "r"((int)c[0]), "r"((int)c[1]), "r"((int)c[2]), "r"((int)c[3]));
  d[0] = r0;
  d[1] = r1;
  d[2] = r2;
  d[3] = r3;
}}
)",
                     name, operandSuffix(operand));
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

struct Used {
  std::set<std::pair<MmaShape, DataType>> mma;
  bool async_copy = false;  // cp.async or ldmatrix
};

void collect(const Kernel& k, const std::vector<Stmt>& stmts, Used& used) {
  for (const Stmt& s : stmts) {
    if (s.kind == SKind::Mma) used.mma.insert({s.mma_shape, k.vars[s.mma_operands[0]].dtype});
    if (s.kind == SKind::CpAsync || s.kind == SKind::CpAsyncCommit || s.kind == SKind::CpAsyncWait ||
        s.kind == SKind::Ldmatrix) {
      used.async_copy = true;
    }
    collect(k, s.body, used);
    collect(k, s.orelse, used);
  }
}

}  // namespace

std::string mmaFunctionName(const Kernel& kernel, const Stmt& mma) {
  return fmt::format("braze_mma_{}_{}", toString(mma.mma_shape), operandSuffix(kernel.vars[mma.mma_operands[0]].dtype));
}

std::string mmaPreamble(const Kernel& kernel, SourceDialect dialect) {
  Used used;
  collect(kernel, kernel.body, used);
  if (used.mma.empty() && !used.async_copy) return "";
  BRAZE_CHECK(dialect == SourceDialect::Cuda,
              "kernel {} uses mma.sync, cp.async or ldmatrix, which have no HIP spelling (AMD's matrix instructions, "
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
  return out;
}

}  // namespace braze::kernel
