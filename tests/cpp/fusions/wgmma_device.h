// Test helpers of the wgmma schedules: a described H100 small enough that the simulator's problems take
// wgmma where tuned on, and a run of a case through the whole execute path on the simulated device.
#pragma once

#include "fusions/kernel_corpus.h"
#include "codegen/source_emitter.h"
#include "device/cuda/nvrtc.h"
#include "device/cuda/sass.h"
#include "exec/host_execute.h"
#include "kernel/simulator.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braze::testing {

// An H100 with four SMs (a small problem then fills a quarter of them), with `tuning` (HeuristicTuning).
inline DeviceInfo fourSmH100(const std::string& tuning) {
  DeviceInfo device = DeviceInfo::h100Sxm();
  device.sm_count = 4;
  device.tuning = HeuristicTuning::parse(tuning);
  return device;
}

// Runs `c` through a FusionCache for `device` on `sim` (the cache is kept in `cache`), checks its outputs
// against the reference and returns its one kernel.
inline const kernel::Kernel& runOnSimulator(const KernelCase& c, const DeviceInfo& device,
                                            std::unique_ptr<exec::FusionCache>& cache, device::SimDeviceOps& sim,
                                            const std::string& what) {
  cache = std::make_unique<exec::FusionCache>(c.fusion, c.options.plan, &sim, device);
  expectClose(exec::runOnHost(*cache, c.inputs), evaluate(*c.fusion, c.inputs), what);
  return onlyKernel(cache->lastPlan()->compiled());
}

// Drops the statements `drop` matches, wherever they are; the count dropped.
inline int dropStatements(std::vector<kernel::Stmt>& stmts, const std::function<bool(const kernel::Stmt&)>& drop) {
  const size_t before = stmts.size();
  std::erase_if(stmts, drop);
  int dropped = static_cast<int>(before - stmts.size());
  for (kernel::Stmt& s : stmts) {
    dropped += dropStatements(s.body, drop);
    dropped += dropStatements(s.orelse, drop);
  }
  return dropped;
}

// The kernel's var called `name` (a test failure and -1 if none).
inline kernel::VarId varNamed(const kernel::Kernel& k, const std::string& name) {
  for (size_t v = 0; v < k.vars.size(); ++v) {
    if (k.vars[v].name == name) return static_cast<kernel::VarId>(v);
  }
  ADD_FAILURE() << "no var " << name;
  return -1;
}

// Simulates `k` (lowered for `c`, one output) on the case's inputs; what the simulator reported ("" if
// nothing).
inline std::string simulatedReport(const kernel::Kernel& k, const KernelCase& c) {
  std::vector<HostTensor> inputs;
  for (const HostValue& v : c.inputs) inputs.push_back(asTensor(v));
  HostTensor out;
  std::vector<HostTensor*> tensors;
  for (const kernel::TensorParam& p : k.tensors) {
    if (p.output) {
      out = HostTensor::empty(p.dtype, p.layout.sizes);
      tensors.push_back(&out);
      continue;
    }
    const auto& ins = c.fusion->inputs();
    tensors.push_back(&inputs[std::find(ins.begin(), ins.end(), p.val) - ins.begin()]);
  }
  try {
    kernel::simulate(k, tensors);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A warp-specialized kernel of two compute warpgroups, emitted and compiled for sm_90a: the registers
// moved by setmaxnreg (launched with 168 a thread, 65536 / 384: the producer keeps 40 and the compute
// warpgroups take 232), an empty NVRTC log, and SASS with its wgmmas fed by TMA, the registers moved and
// nothing spilled. The SASS, or none where NVRTC or cuobjdump is missing (`missing` says which).
inline std::optional<std::string> warpSpecializedSass(const kernel::Kernel& k, std::string& missing) {
  const std::string source = codegen::emitCuda(k);
  EXPECT_NE(source.find("setmaxnreg.dec.sync.aligned.u32 40;"), std::string::npos) << k.summary;
  EXPECT_NE(source.find("setmaxnreg.inc.sync.aligned.u32 232;"), std::string::npos) << k.summary;
  EXPECT_NE(source.find("__launch_bounds__(384, 1)"), std::string::npos) << k.summary;
  if (!device::nvrtcAvailable()) {
    missing = "NVRTC not found: not compiled";
    return std::nullopt;
  }
  const auto cubin = device::compileCuda(source, k.name, {.arch = "sm_90a"});
  EXPECT_TRUE(cubin.log.empty()) << cubin.log;
  auto sass = device::disassemble(cubin.cubin);
  if (!sass) {
    missing = "cuobjdump not found: SASS not checked";
    return std::nullopt;
  }
  for (const char* op : {"HGMMA", "UTMALDG", "SYNCS", "USETMAXREG"}) EXPECT_NE(sass->find(op), std::string::npos) << op;
  EXPECT_EQ(sass->find("STL"), std::string::npos) << k.summary << ": registers spilled to local memory";
  return sass;
}

}  // namespace braze::testing
