// The staged inner persistent kernel (tuning persistent_staged=1, ReductionParams::staged): blocks walk
// several row groups each, copying the next group's rows into shared memory by cp.async while the passes
// read the current one. On a described one-SM H100 the simulator runs norms, softmax and backward rows
// (several staged inputs, per-row statistics) with many groups per block, against the reference; it
// reports a read of a stage before the wait that covers its copies. Rows cp.async cannot copy whole keep
// the register kernel. NVRTC compiles the kernel into LDGSTS and 16-byte shared reads.
#include "fusions/kernel_corpus.h"
#include "fusions/layer_norm.h"
#include "fusions/wgmma_device.h"
#include "codegen/source_emitter.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"
#include "device/sim/sim_device_ops.h"
#include "kernel/simulator.h"
#include "support/error.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

// An H100 of one SM: at most 16 blocks at once, so a few hundred rows make several row groups per block.
DeviceInfo stagedH100() {
  DeviceInfo device = testing::fourSmH100("persistent_staged=1");
  device.sm_count = 1;
  return device;
}

bool isStaged(const kernel::Kernel& k) { return k.summary.find("staged in shared memory") != std::string::npos; }

int64_t argumentValue(const kernel::Kernel& k, const std::string& name) {
  for (const kernel::ScalarArgument& a : k.arguments) {
    if (a.name == name) return std::get<int64_t>(a.value);
  }
  ADD_FAILURE() << k.name << " has no argument " << name;
  return -1;
}

struct StagedCase {
  std::string name;
  std::function<testing::KernelCase()> make;
};

std::vector<StagedCase> stagedCases() {
  using testing::NormBackward;
  return {
      {"layer_norm_bf16_200x1024", [] { return testing::layerNormCase({.batch = 2, .seq = 100, .hidden = 1024}, 1); }},
      // 16 rows per block of 8 threads each: a stage holds every thread row's chunks.
      {"layer_norm_bf16_2000x256", [] { return testing::layerNormCase({.batch = 4, .seq = 500, .hidden = 256}, 2); }},
      {"softmax_bf16_301x512", [] { return testing::softmaxCase(301, 512, DataType::BFloat16, false, 3); }},
      {"softmax_f32_407x96", [] { return testing::softmaxCase(407, 96, DataType::Float, false, 4); }},
      {"softmax_f64_123x256", [] { return testing::softmaxCase(123, 256, DataType::Double, false, 5); }},
      // Two staged inputs (grad_out, x) beside per-row statistics read once per row.
      {"layer_norm_backward_grad_in_f16_333x640",
       [] {
         return testing::normBackwardCase(
             NormBackward{.rows = 333, .hidden = 640, .dtype = DataType::Half, .weight = false, .bias = false}, 6);
       }},
      {"rms_norm_backward_grad_in_bf16_250x768",
       [] {
         return testing::normBackwardCase(NormBackward{.rows = 250, .hidden = 768, .rms = true, .weight = false, .bias = false},
                                          7);
       }},
      {"softmax_backward_bf16_260x384", [] { return testing::softmaxBackwardCase(260, 384, DataType::BFloat16, 8); }},
      // The inner-outer kernel (grad_in per row, weight and bias grads over the rows), staged, with its
      // finish; and with the next linear's bias grad (rows of another tensor, walked unstaged).
      {"layer_norm_backward_bf16_300x512", [] { return testing::normBackwardCase(NormBackward{.rows = 300, .hidden = 512}, 15); }},
      {"rms_norm_backward_extra_f16_270x256",
       [] {
         return testing::normBackwardCase(
             NormBackward{.rows = 270, .hidden = 256, .dtype = DataType::Half, .rms = true, .extra_width = 96}, 16);
       }},
  };
}

TEST(StagedRows, NormsSoftmaxAndBackwardRowsMatchTheReferenceWithManyRowGroupsPerBlock) {
  for (const StagedCase& sc : stagedCases()) {
    SCOPED_TRACE(sc.name);
    const testing::KernelCase c = sc.make();
    device::SimDeviceOps sim;
    std::unique_ptr<exec::FusionCache> cache;
    const DeviceInfo device = stagedH100();
    cache = std::make_unique<exec::FusionCache>(c.fusion, c.options.plan, &sim, device);
    testing::expectClose(exec::runOnHost(*cache, c.inputs), evaluate(*c.fusion, c.inputs), sc.name);
    int64_t staged = 0;
    for (const auto& k : cache->lastPlan()->compiled().kernels) {
      if (!k || !isStaged(*k)) continue;
      ++staged;
      // The blocks the four SMs hold walk every row group: several each.
      EXPECT_LT(k->grid[0], argumentValue(*k, "row_groups")) << k->summary;
      EXPECT_EQ(k->grid[0], argumentValue(*k, "blocks")) << k->summary;
    }
    EXPECT_EQ(staged, 1) << cache->lastPlan()->compiled().plan.toString();
  }
}

// A launch for another row count relaunches the kernel (the row count, row groups and blocks are its
// arguments) and still matches the reference.
TEST(StagedRows, AnotherRowCountRunsTheSameKernel) {
  device::SimDeviceOps sim;
  const std::shared_ptr<Fusion> fusion = testing::sizelessLayerNorm();  // [-1, -1, -1] bf16
  exec::FusionCache cache(fusion, {}, &sim, stagedH100());
  std::optional<kernel::CodeDigest> digest;
  for (const int64_t seq : {30, 170, 7}) {
    const std::vector<HostValue> inputs = testing::randomInputs(*fusion, 20 + seq, {{2, seq, 640}, {640}, {640}});
    testing::expectClose(exec::runOnHost(cache, inputs), evaluate(*fusion, inputs), std::to_string(seq) + " rows");
    const kernel::Kernel& k = testing::onlyKernel(cache.lastPlan()->compiled());
    EXPECT_TRUE(isStaged(k)) << k.summary;
    EXPECT_EQ(argumentValue(k, "rows"), 2 * seq);
    if (digest) {
      EXPECT_EQ(kernel::codeDigest(k), *digest) << seq;
    }
    digest = kernel::codeDigest(k);
  }
}

// A bf16 row at an odd element offset reads with vectors of 1 (2 bytes): no cp.async copies that. The
// kernel keeps its rows in registers, and the heuristics do not claim staging.
TEST(StagedRows, RowsCpAsyncCannotCopyWholeKeepTheRegisterKernel) {
  const testing::KernelCase c = testing::layerNormCase({.batch = 2, .seq = 50, .hidden = 512}, 11, /*x_offset=*/1);
  device::SimDeviceOps sim;
  exec::FusionCache cache(c.fusion, c.options.plan, &sim, stagedH100());
  testing::expectClose(exec::runOnHost(cache, c.inputs), evaluate(*c.fusion, c.inputs), "misaligned x");
  const kernel::Kernel& k = testing::onlyKernel(cache.lastPlan()->compiled());
  EXPECT_EQ(k.vectorize, 1) << k.summary;
  EXPECT_FALSE(isStaged(k)) << k.summary;
  EXPECT_EQ(k.summary.find("staged"), std::string::npos) << k.summary;
}

// Without the wait, the passes read a stage whose copies may still be in flight: the simulator says so.
void dropWaits(std::vector<kernel::Stmt>& stmts) {
  std::erase_if(stmts, [](const kernel::Stmt& s) { return s.kind == kernel::SKind::CpAsyncWait; });
  for (kernel::Stmt& s : stmts) {
    dropWaits(s.body);
    dropWaits(s.orelse);
  }
}

TEST(StagedRows, TheSimulatorReportsAStageReadBeforeItsWait) {
  const testing::KernelCase c = testing::softmaxCase(64, 256, DataType::BFloat16, false, 12);
  const LoweredPlan compiled = lowerPlan(planSegments(*c.fusion, c.inputs), stagedH100());
  kernel::Kernel k = testing::onlyKernel(compiled);
  ASSERT_TRUE(isStaged(k)) << k.summary;
  HostTensor x = std::get<HostTensor>(c.inputs[0]);
  HostTensor out = HostTensor::empty(DataType::BFloat16, {64, 256});
  kernel::simulate(k, {&x, &out});  // the kernel as lowered runs
  dropWaits(k.body.mut());
  try {
    kernel::simulate(k, {&x, &out});
    FAIL() << "expected the simulator to report the read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("while a cp.async into it is in flight"), std::string::npos) << e.what();
  }
}

// NVRTC compiles the staged kernels with an empty log, for sm_80 and sm_90: each row chunk is one LDGSTS
// of 16 bytes and one 16-byte shared read per pass, and nothing spills to local memory. The layer_norm
// and its backward (inner-outer) need fewer registers than the kernels keeping their rows in registers;
// softmax keeps exp(x - max) in registers across its passes either way. The forward kernels stay within
// 64 registers (8 blocks of 128 threads per SM), the backward within 128.
TEST(StagedRows, CompilesIntoCpAsyncAnd128BitSharedReads) {
  if (!device::nvrtcAvailable()) GTEST_SKIP() << "NVRTC not found: kernel compilation not checked";
  struct Compiled {
    testing::KernelCase c;
    bool fewer_registers;
    int most_registers;
  };
  for (const auto& [c, fewer_registers, most_registers] :
       {Compiled{testing::layerNormCase({.batch = 2, .seq = 4, .hidden = 4096}, 13), true, 64},
        Compiled{testing::softmaxCase(8, 4096, DataType::BFloat16, false, 14), false, 64},
        Compiled{testing::normBackwardCase({.rows = 8, .hidden = 4096}, 17), true, 128}}) {
    const LoweredPlan staged_plan = lowerPlan(planSegments(*c.fusion, c.inputs), stagedH100());
    const LoweredPlan kept_plan = lowerPlan(planSegments(*c.fusion, c.inputs), DeviceInfo::h100Sxm());
    const kernel::Kernel& staged = *staged_plan.kernels.front();  // (the inner-outer kernel's finish follows)
    const kernel::Kernel& kept = *kept_plan.kernels.front();
    ASSERT_TRUE(isStaged(staged)) << staged.summary;
    for (const char* arch : {"sm_80", "sm_90"}) {
      const auto cubin = device::compileCuda(codegen::emitCuda(staged), staged.name, {.arch = arch});
      EXPECT_TRUE(cubin.log.empty()) << cubin.log;
      const auto sass = device::disassemble(cubin.cubin);
      if (!sass) GTEST_SKIP() << "cuobjdump not found: SASS not checked";
      EXPECT_NE(sass->find("LDGSTS.E.BYPASS.128"), std::string::npos) << arch << "\n" << *sass;
      EXPECT_NE(sass->find("LDS.128"), std::string::npos) << arch;
      EXPECT_EQ(sass->find("LDS.U16"), std::string::npos) << arch << ": a row element read from shared alone";
      EXPECT_EQ(sass->find("LDL"), std::string::npos) << arch;
      EXPECT_EQ(sass->find("STL"), std::string::npos) << arch;
    }
    const auto staged_cubin = device::compileCuda(codegen::emitCuda(staged), staged.name, {.arch = "sm_90"});
    const auto kept_cubin = device::compileCuda(codegen::emitCuda(kept), kept.name, {.arch = "sm_90"});
    const std::optional<int> staged_registers = device::registersPerThread(staged_cubin.cubin);
    const std::optional<int> kept_registers = device::registersPerThread(kept_cubin.cubin);
    if (!staged_registers || !kept_registers) GTEST_SKIP() << "cuobjdump not found: registers not checked";
    EXPECT_LE(*staged_registers, most_registers) << staged.summary;
    if (fewer_registers) {
      EXPECT_LT(*staged_registers, *kept_registers) << staged.summary;
    }
  }
}

}  // namespace
}  // namespace braze
