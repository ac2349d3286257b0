// NVRTC compilation of generated CUDA C++ and the SASS it becomes: vectorized bf16 copies must turn
// into 128-bit global loads and stores on sm_80 and sm_90, and a broken kernel must fail loudly with
// its log and a saved copy of its source. Skips where NVRTC (or cuobjdump, for SASS) is missing.
#include "support/error.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"
#include "runtime/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace braze::device {
namespace {

#define SKIP_WITHOUT_NVRTC()                                                                             \
  if (!nvrtcAvailable()) {                                                                               \
    GTEST_SKIP() << "NVRTC not found (no libnvrtc, or no CUDA include dir with cuda_bf16.h: set CUDA_HOME)"; \
  }

// Eight bf16 per thread through one 16-byte uint4: the shape of a pointwise kernel vectorized by 8.
constexpr const char* kVectorizedBf16Copy = R"(
#include <cuda_bf16.h>
extern "C" __global__ void copy_bf16_x8(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out,
                                        long long n) {
  long long i = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i + 8 <= n) {
    *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(in + i);
  }
}
)";

constexpr const char* kScalarBf16Copy = R"(
#include <cuda_bf16.h>
extern "C" __global__ void copy_bf16(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out,
                                     long long n) {
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}
)";

TEST(Nvrtc, ReportsItsVersionAndIncludeDir) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_NE(nvrtcVersion(), "");
  EXPECT_TRUE(std::filesystem::exists(cudaIncludeDir() + "/cuda_bf16.h")) << cudaIncludeDir();
}

TEST(Nvrtc, VectorizedBf16CopyUses128BitGlobalAccessesOnSm80AndSm90) {
  SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    const CompiledKernel kernel = compileCuda(kVectorizedBf16Copy, "copy_bf16_x8", {.arch = arch});
    EXPECT_EQ(kernel.log, "");
    EXPECT_FALSE(kernel.cubin.empty());
    EXPECT_NE(kernel.options.find(std::string("--gpu-architecture=") + arch), std::string::npos) << kernel.options;
    const std::optional<std::string> sass = disassemble(kernel.cubin);
    if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
    const GlobalAccessCounts counts = countGlobalAccesses(*sass);
    EXPECT_GE(counts.load_bits.count(128) ? counts.load_bits.at(128) : 0, 1) << *sass;
    EXPECT_GE(counts.store_bits.count(128) ? counts.store_bits.at(128) : 0, 1) << *sass;
  }
}

TEST(Nvrtc, ScalarBf16CopyHasNo128BitGlobalAccesses) {
  SKIP_WITHOUT_NVRTC();
  const CompiledKernel kernel = compileCuda(kScalarBf16Copy, "copy_bf16", {.arch = "sm_90"});
  EXPECT_EQ(kernel.log, "");
  const std::optional<std::string> sass = disassemble(kernel.cubin);
  if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
  const GlobalAccessCounts counts = countGlobalAccesses(*sass);
  EXPECT_EQ(counts.load_bits.count(128), 0u) << *sass;
  EXPECT_EQ(counts.store_bits.count(128), 0u) << *sass;
  EXPECT_EQ(counts.load_bits, (std::map<int, int>{{16, 1}})) << *sass;  // one LDG.E.U16
  EXPECT_EQ(counts.store_bits, (std::map<int, int>{{16, 1}})) << *sass;
}

TEST(Nvrtc, Fp8AndFp16HeadersCompile) {
  SKIP_WITHOUT_NVRTC();
  constexpr const char* source = R"(
#include <cuda_fp16.h>
#include <cuda_fp8.h>
extern "C" __global__ void quantize(const __half* in, __nv_fp8_e4m3* out, float scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __nv_fp8_e4m3(__half2float(in[i]) * scale);
}
)";
  for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
    SCOPED_TRACE(arch);
    const CompiledKernel kernel = compileCuda(source, "quantize", {.arch = arch, .fmad = false, .lineinfo = true});
    EXPECT_EQ(kernel.log, "");
    EXPECT_FALSE(kernel.cubin.empty());
    EXPECT_NE(kernel.options.find("--fmad=false"), std::string::npos) << kernel.options;
    EXPECT_NE(kernel.options.find("-lineinfo"), std::string::npos) << kernel.options;
  }
}

// A profiler shows a kernel's source from the file its line table names: with -lineinfo that file is
// written, named after the kernel, and without it nothing is written.
TEST(Nvrtc, LineinfoSavesTheSourceItsLineTableNames) {
  SKIP_WITHOUT_NVRTC();
  testing::TempDir dir;
  testing::ScopedEnv tmpdir("TMPDIR", dir.path().string());
  const std::string source = "extern \"C\" __global__ void profiled(float* x) { x[threadIdx.x] *= 2.0f; }\n";
  compileCuda(source, "profiled_kernel", {.arch = "sm_90"});
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  const CompiledKernel kernel = compileCuda(source, "profiled_kernel", {.arch = "sm_90", .lineinfo = true});
  std::vector<std::filesystem::path> saved;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) saved.push_back(entry.path());
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_TRUE(saved[0].filename().string().starts_with("braze_profiled_kernel_")) << saved[0];
  std::ifstream file(saved[0]);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(file), {}), source);
  const std::string_view cubin(kernel.cubin.data(), kernel.cubin.size());
  EXPECT_NE(cubin.find(saved[0].filename().string()), std::string_view::npos) << "the line table names another file";
}

TEST(Nvrtc, SyntaxErrorNamesTheKernelShowsTheLogAndSavesTheSource) {
  SKIP_WITHOUT_NVRTC();
  constexpr const char* source = R"(
extern "C" __global__ void broken(float* out) {
  out[threadIdx.x] = 1.0f
}
)";
  try {
    compileCuda(source, "broken_fusion", {.maxrregcount = 64});
    FAIL() << "a kernel with a syntax error compiled";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.kind(), ErrorKind::Runtime);
    EXPECT_NE(message.find("'broken_fusion'"), std::string::npos) << message;
    EXPECT_NE(message.find("error: expected a \";\""), std::string::npos) << message;
    EXPECT_NE(message.find("--maxrregcount=64"), std::string::npos) << message;
    const std::string marker = "Source saved to ";
    const size_t at = message.find(marker);
    ASSERT_NE(at, std::string::npos) << message;
    const std::string path = message.substr(at + marker.size(), message.find('\n', at) - at - marker.size());
    EXPECT_NE(path.find("braze_broken_fusion_"), std::string::npos) << path;
    // The log's "file(line)" is the saved file, so an editor jumps straight to the error.
    EXPECT_NE(message.find(path + "(4): error"), std::string::npos) << message;
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    std::filesystem::remove(path);
  }
}

TEST(Nvrtc, VirtualArchIsRejected) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_THROW(compileCuda(kScalarBf16Copy, "copy_bf16", {.arch = "compute_90"}), Error);
}

// The parser on cuobjdump's own text (from CUDA 13: sm_80 without and sm_90 with memory descriptors),
// so it is tested where cuobjdump is missing too.
TEST(Sass, CountsGlobalAccessesByWidth) {
  constexpr const char* sass = R"(
        code for sm_90
                Function : mix
        /*00c0*/                   LDG.E.128.CONSTANT R8, desc[UR4][R4.64] ;                  /* 0x0000000404087981 */
                                                                                              /* 0x000ea8000c1e9d00 */
        /*00e0*/                   STG.E.128 desc[UR4][R2.64], R8 ;                           /* 0x0000000802007986 */
        /*0100*/                   LDG.E.U8 R6, desc[UR4][R6.64] ;                            /* 0x0000000406067981 */
        /*0110*/                   LDG.E.S16 R3, [R2.64] ;                                    /* 0x0000000402037981 */
        /*0120*/              @!P0 STG.E.64 [R8.64], R4 ;                                     /* 0x0000000408008986 */
        /*0130*/                   LDG.E.LTC256B.U16 R2, [R2.64+0x190] ;                      /* 0x0001900402027981 */
        /*0140*/                   LDG.E.NA R4, [R4.64+0xfac] ;                               /* 0x000fac0404047981 */
        /*0150*/                   STG.E desc[UR4][R2.64], R13 ;                              /* 0x0000000d02007986 */
        /*0160*/                   STG.E.S8 desc[UR4][R8.64], R15 ;                           /* 0x0000000f08007986 */
        /*0170*/                   LDGSTS.E.BYPASS.128 [R7], desc[UR6][R2.64] ;               /* 0x0000000002077fae */
        /*0180*/                   LDGDEPBAR ;                                                /* 0x00000000000079af */
        /*0190*/                   REDG.E.ADD.F32.FTZ.RN.STRONG.GPU desc[UR4][R10.64], R19 ;  /* 0x000000130a0079a6 */
        /*01a0*/                   LDG.E.ENL2.256 R12, R8, desc[UR4][R2.64] ;                 /* 0xfe0000040208797e */
)";
  const GlobalAccessCounts counts = countGlobalAccesses(sass);
  EXPECT_EQ(counts.load_bits, (std::map<int, int>{{8, 1}, {16, 2}, {32, 1}, {128, 1}, {256, 1}}));
  EXPECT_EQ(counts.store_bits, (std::map<int, int>{{8, 1}, {32, 1}, {64, 1}, {128, 1}}));
}

}  // namespace
}  // namespace braze::device
