// The HIP side of the runtime without an AMD GPU: the ISA is found in a properties buffer of any
// layout, an ISA picks its preset, and where no AMD GPU is present the HIP device ops and the device
// query say so instead of crashing.
#include "support/error.h"
#include "device/device_ops.h"
#include "device/hip/hip_runtime.h"
#include "device/hip/query_hip_device.h"
#include "exec/config_report.h"

#include <gtest/gtest.h>

#include <string>

namespace braze {
namespace {

using namespace std::string_literals;

TEST(HipRuntime, FindsTheIsaInAPropertiesBufferOfAnyLayout) {
  // A name first (which may mention the product), then the ISA with its feature list, NUL padded.
  std::string buffer = "AMD Instinct MI300X"s + std::string(300, '\0') + "gfx942:sramecc+:xnack-" + std::string(40, '\0');
  EXPECT_EQ(gfxArchIn(buffer), "gfx942");
  EXPECT_EQ(gfxArchIn("gfx90a"s + std::string(8, '\0')), "gfx90a");
  EXPECT_EQ(gfxArchIn("gfx"s + std::string(8, '\0') + "gfx1100"), "gfx1100");  // "gfx" alone is no ISA
  EXPECT_EQ(gfxArchIn("gfxfoo gfx90a-x"s), "");
  EXPECT_EQ(gfxArchIn(std::string(64, '\0')), "");
}

TEST(HipRuntime, AnIsaStartsFromItsPreset) {
  EXPECT_EQ(amdPresetFor("gfx942", 304).name, DeviceInfo::mi300x().name);
  EXPECT_EQ(amdPresetFor("gfx942", 304).arch(), "gfx942");
  EXPECT_EQ(amdPresetFor("gfx90a", 104).name, DeviceInfo::mi210().name);
  EXPECT_EQ(amdPresetFor("gfx90a", 110).name, DeviceInfo::mi250x().name);
  const DeviceInfo mi100 = amdPresetFor("gfx908", 120);  // no preset of its own: CDNA numbers, its own ISA
  EXPECT_EQ(mi100.arch(), "gfx908");
  EXPECT_EQ(mi100.warp_size, 64);
  EXPECT_EQ(mi100.vendor, GpuVendor::Amd);
}

TEST(HipRuntime, WithoutAnAmdGpuTheDeviceOpsAndQuerySaySo) {
  if (runtime::hipRuntime() != nullptr) GTEST_SKIP() << "an AMD GPU is present: " << runtime::hipRuntimeVersion();
  EXPECT_EQ(queryHipDevice(0), std::nullopt);
  EXPECT_NE(runtime::hipUnavailableReason(), "");
  try {
    runtime::hipDeviceOps(0);
    FAIL() << "HIP device ops without a HIP runtime";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("no HIP runtime: "), std::string::npos) << e.what();
  }
}

TEST(HipRuntime, TheConfigReportNamesHiprtcAndTheHipRuntime) {
  bool hiprtc = false, runtime_line = false;
  for (const runtime::ConfigEntry& entry : runtime::configReport()) {
    hiprtc = hiprtc || (entry.key == "hiprtc" && !entry.value.empty());
    runtime_line = runtime_line || (entry.key == "hip runtime" && !entry.value.empty());
  }
  EXPECT_TRUE(hiprtc);
  EXPECT_TRUE(runtime_line);
}

}  // namespace
}  // namespace braze
