// The HIP side of the runtime without an AMD GPU: the ISA is found in a properties buffer of any
// layout, an ISA picks its preset, where no AMD GPU is present the HIP device ops and the device query
// say so instead of crashing, and a ROCm library's version is read from its file without loading it.
#include "support/error.h"
#include "device/device_ops.h"
#include "device/hip/hip_runtime.h"
#include "device/hip/query_hip_device.h"
#include "device/hip/rocm_paths.h"
#include "exec/config_report.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace braze {
namespace {

using namespace std::string_literals;

TEST(RocmPaths, ALibrarysVersionIsReadFromTheFileItsSymlinksEndAt) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("braze_rocm_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "libfakehip.so.5.7.31921") << "not a library";
  std::filesystem::create_symlink("libfakehip.so.5.7.31921", dir / "libfakehip.so.5");
  std::ofstream(dir / "libunversioned.so") << "not a library";
  EXPECT_EQ(device::installedLibraryVersion((dir / "libfakehip.so.5").string()), std::make_pair(5, 7));
  EXPECT_EQ(device::installedLibraryVersion((dir / "libunversioned.so").string()), std::nullopt);
  EXPECT_EQ(device::installedLibraryVersion((dir / "libmissing.so.6").string()), std::nullopt);
  // A bare name: found through LD_LIBRARY_PATH.
  const char* old = std::getenv("LD_LIBRARY_PATH");
  const std::string saved = old == nullptr ? "" : old;
  ::setenv("LD_LIBRARY_PATH", ("/nonexistent:" + dir.string()).c_str(), 1);
  EXPECT_EQ(device::installedLibraryVersion("libfakehip.so.5"), std::make_pair(5, 7));
  old == nullptr ? ::unsetenv("LD_LIBRARY_PATH") : ::setenv("LD_LIBRARY_PATH", saved.c_str(), 1);
  std::filesystem::remove_all(dir);
}

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
  if (device::hipRuntime() != nullptr) GTEST_SKIP() << "an AMD GPU is present: " << device::hipRuntimeVersion();
  EXPECT_EQ(queryHipDevice(0), std::nullopt);
  EXPECT_NE(device::hipUnavailableReason(), "");
  try {
    device::hipDeviceOps(0);
    FAIL() << "HIP device ops without a HIP runtime";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("no HIP runtime: "), std::string::npos) << e.what();
  }
}

TEST(HipRuntime, TheConfigReportNamesHiprtcAndTheHipRuntime) {
  bool hiprtc = false, runtime_line = false;
  for (const exec::ConfigEntry& entry : exec::configReport()) {
    hiprtc = hiprtc || (entry.key == "hiprtc" && !entry.value.empty());
    runtime_line = runtime_line || (entry.key == "hip runtime" && !entry.value.empty());
  }
  EXPECT_TRUE(hiprtc);
  EXPECT_TRUE(runtime_line);
}

}  // namespace
}  // namespace braze
