// Every kernel of the test corpus, planned for AMD GPUs (a wavefront of 64) and emitted as HIP, compiles
// with hiprtc for gfx90a without a warning; where the heuristics vectorize by 16 bytes (layer_norm, RoPE)
// the code object has global_load_dwordx4 and global_store_dwordx4. No GPU is needed: hiprtc and
// llvm-objdump run on any machine with Debian's HIP packages (scripts/install_deps.sh installs them).
// gfx942 (MI300X) needs a newer hiprtc than Debian's; the MI300X plans are compiled for gfx90a here, the
// same ISA family's previous member, and on ROCm 6 the same test compiles them for gfx942.
#include "fusions/kernel_corpus.h"
#include "codegen/source_emitter.h"
#include "device/hip/amdgcn.h"
#include "device/hip/hiprtc.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace braze {
namespace {

#define SKIP_WITHOUT_HIPRTC() \
  if (!device::hiprtcAvailable()) GTEST_SKIP() << "hiprtc not found: HIP compilation not checked"

// gfx90a, and gfx942 where the loaded hiprtc knows it.
std::vector<std::string> archs() {
  std::vector<std::string> archs = {"gfx90a"};
  if (device::hiprtcArchProblem("gfx942").empty()) archs.push_back("gfx942");
  return archs;
}

TEST(HiprtcCorpus, EveryKernelCompilesForGfx90aWithoutWarnings) {
  SKIP_WITHOUT_HIPRTC();
  int compiled_kernels = 0;
  // A source planned alike for both devices (most are: the SM count changes only launch sizes) is
  // compiled once per arch.
  std::set<std::pair<std::string, std::string>> compiled_sources;
  for (const DeviceInfo& device : {DeviceInfo::mi250x(), DeviceInfo::mi300x()}) {
    for (const auto& corpus : {testing::smallKernelCorpus(), testing::largeKernelCorpus()}) {
      for (const testing::KernelCaseMaker& maker : corpus) {
        const testing::KernelCase c = maker.make();
        const auto plan = lowerPlan(planSegments(*c.fusion, c.inputs, c.options.plan), device);
        for (const auto& k : plan.kernels) {
          if (!k) continue;
          ASSERT_EQ(k->warp_size, 64) << maker.name;
          const std::string source = codegen::emitHip(*k);
          for (const std::string& arch : archs()) {
            if (!compiled_sources.emplace(source, arch).second) continue;
            const auto compiled = device::compileHip(source, k->name, {.arch = arch});
            EXPECT_TRUE(compiled.log.empty()) << maker.name << " on " << device.name << " for " << arch << ":\n"
                                              << compiled.log << "\n" << source;
            EXPECT_FALSE(compiled.cubin.empty());
            ++compiled_kernels;
          }
        }
      }
    }
  }
  RecordProperty("kernels_compiled", compiled_kernels);  // in --gtest_output=xml
  EXPECT_GE(compiled_kernels, 80);
}

// The 16-byte vectors of the heuristics reach the ISA: dwordx4 loads of the row and stores of the result.
TEST(HiprtcCorpus, LayerNormAndRopeUse128BitGlobalLoads) {
  SKIP_WITHOUT_HIPRTC();
  const std::pair<const char*, testing::KernelCase> cases[] = {
      {"layer_norm", testing::layerNormCase({.batch = 16, .seq = 128, .hidden = 1600}, 1)},
      {"rope", testing::ropeCase({.batch = 1, .seq = 64, .heads = 32, .groups = 32, .head = 128, .rope_n_elem = 128}, 2)},
  };
  for (const auto& [name, c] : cases) {
    const auto plan = lowerPlan(planSegments(*c.fusion, c.inputs, c.options.plan), DeviceInfo::mi250x());
    bool vectorized = false;
    for (const auto& k : plan.kernels) {
      if (!k || k->vectorize * 2 < 16) continue;  // 8 bf16 values: one 16-byte access
      vectorized = true;
      const auto compiled = device::compileHip(codegen::emitHip(*k), k->name, {.arch = "gfx90a"});
      const auto text = device::disassembleAmdgcn(compiled.cubin, "gfx90a");
      if (!text) GTEST_SKIP() << "llvm-objdump not found: the ISA not checked";
      const auto counts = device::countAmdgcnGlobalAccesses(*text);
      EXPECT_GT(counts.load_bits.count(128) ? counts.load_bits.at(128) : 0, 0) << name << ": " << k->summary << "\n"
                                                                              << *text;
      EXPECT_GT(counts.store_bits.count(128) ? counts.store_bits.at(128) : 0, 0) << name << ": " << k->summary;
      EXPECT_EQ(counts.store_bits.count(16), 0u) << name << ": no 2-byte stores of the output";
    }
    EXPECT_TRUE(vectorized) << name << " has no kernel vectorized by 8";
  }
}

// The gfx90a code of the one kernel of `outputs(x, y, z)` on three float vectors, planned for an MI250X.
std::optional<std::string> floatKernelIsa(const std::function<std::vector<Val*>(TensorView*, TensorView*, TensorView*)>& outputs) {
  testing::KernelCase c;
  {
    FusionGuard g(c.fusion.get());
    TensorView* x = defineTensor({-1}, {true}, DataType::Float);
    TensorView* y = defineTensor({-1}, {true}, DataType::Float);
    TensorView* z = defineTensor({-1}, {true}, DataType::Float);
    for (Val* out : outputs(x, y, z)) c.fusion->addOutput(out);
  }
  c.inputs = testing::randomInputs(*c.fusion, 3, {{4096}, {4096}, {4096}});
  const auto plan = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::mi250x());
  const kernel::Kernel& k = testing::onlyKernel(plan);
  return device::disassembleAmdgcn(device::compileHip(codegen::emitHip(k), k.name, {.arch = "gfx90a"}).cubin, "gfx90a");
}

// The reference rounds a product before adding it: the HIP code keeps the multiply and the add apart
// (HIP's __fmul_rn and __fadd_rn are the plain operators, which -ffp-contract=fast would fuse).
TEST(HiprtcCorpus, AProductIsRoundedBeforeItIsAdded) {
  SKIP_WITHOUT_HIPRTC();
  const auto text = floatKernelIsa([](TensorView* x, TensorView* y, TensorView* z) {
    return std::vector<Val*>{braze::add(braze::mul(x, y), z)};
  });
  if (!text) GTEST_SKIP() << "llvm-objdump not found: the ISA not checked";
  // gfx90a also has packed forms (v_pk_mul_f32, v_pk_fma_f32): matched by the part after "v_".
  for (const char* fused : {"fma_f32", "fmac_f32", "mac_f32", "mad_f32"}) {
    EXPECT_EQ(text->find(fused), std::string::npos) << fused << " in\n" << *text;
  }
  EXPECT_NE(text->find("mul_f32"), std::string::npos) << *text;
  EXPECT_NE(text->find("add_f32"), std::string::npos) << *text;
}

// Float sqrt and division are correctly rounded, as the reference's: sqrt through double (never the
// hardware's v_sqrt_f32 approximation), division by the div_scale/div_fmas/div_fixup sequence (never a
// bare reciprocal).
TEST(HiprtcCorpus, FloatSqrtAndDivisionAreCorrectlyRounded) {
  SKIP_WITHOUT_HIPRTC();
  const auto text = floatKernelIsa([](TensorView* x, TensorView* y, TensorView*) {
    return std::vector<Val*>{unaryOp(OpKind::Sqrt, x), braze::div(x, y)};
  });
  if (!text) GTEST_SKIP() << "llvm-objdump not found: the ISA not checked";
  EXPECT_EQ(text->find("v_sqrt_f32"), std::string::npos) << *text;
  EXPECT_NE(text->find("v_rsq_f64"), std::string::npos) << "no double sqrt:\n" << *text;
  EXPECT_NE(text->find("v_div_fixup_f32"), std::string::npos) << "no correctly rounded division:\n" << *text;
}

TEST(HiprtcCorpus, CountsGlobalAccessesByWidth) {
  const std::string text =
      "\tglobal_load_dwordx4 v[0:3], v[0:1], off // 00000000176C: DC5C8000 007F0000\n"
      "\tglobal_load_ushort v2, v[0:1], off\n"
      "\tglobal_store_dwordx4 v[4:5], v[0:3], off\n"
      "\tglobal_store_short_d16_hi v[4:5], v2, off\n"
      "\tglobal_atomic_add v1, v2, s[0:1]\n"
      "\ts_load_dwordx4 s[0:3], s[4:5], 0x0\n";
  const auto counts = device::countAmdgcnGlobalAccesses(text);
  EXPECT_EQ(counts.load_bits, (std::map<int, int>{{128, 1}, {16, 1}}));
  EXPECT_EQ(counts.store_bits, (std::map<int, int>{{128, 1}, {16, 1}}));
}

TEST(HiprtcCorpus, AnArchNewerThanTheCompilerIsRefusedWithoutTryingIt) {
  SKIP_WITHOUT_HIPRTC();
  if (device::hiprtcArchProblem("gfx942").empty()) GTEST_SKIP() << "hiprtc " << device::hiprtcVersion() << " knows gfx942";
  try {
    device::compileHip("extern \"C\" __global__ void k() {}", "k", {.arch = "gfx942"});
    FAIL() << "gfx942 compiled by hiprtc " << device::hiprtcVersion();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs hiprtc 6.0 or newer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braze
