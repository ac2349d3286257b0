#include "exec/config_report.h"
#include "device/cuda/query_device.h"

#include "support/error.h"
#include "device/cuda/cuda_driver.h"
#include "device/kernel_cache.h"
#include "device/cuda/nvrtc.h"
#include "device/hip/hip_runtime.h"
#include "device/hip/hiprtc.h"
#include "device/hip/query_hip_device.h"
#include "target/device_info.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>

extern char** environ;

namespace braze::exec {

using namespace device;  // the report reads the device layer's loaders
namespace {

std::string nvrtcLine() {
  if (!nvrtcAvailable()) {
    return nvrtcLibraryPath().empty() ? "not found (kernels cannot be compiled; set CUDA_HOME to a CUDA toolkit)"
                                      : fmt::format("{} ({}), but the CUDA headers were not found", nvrtcVersion(),
                                                    nvrtcLibraryPath());
  }
  return fmt::format("{} ({})", nvrtcVersion(), nvrtcLibraryPath());
}

// hiprtc, the HIP runtime and its AMD GPUs, each with why not where it is missing.
void appendHip(std::vector<ConfigEntry>& report) {
  report.push_back({"hiprtc", hiprtcAvailable()
                                  ? fmt::format("{} ({}){}", hiprtcVersion().empty() ? "version unknown" : hiprtcVersion(),
                                                hiprtcLibraryPath(),
                                                hiprtcArchProblem("gfx942").empty() ? "" : "; gfx942 needs hiprtc 6.0")
                                  : fmt::format("not found (HIP kernels cannot be compiled; looked for {})",
                                                fmt::join(hiprtcCandidates(), ", "))});
  const std::string version = hipRuntimeVersion();
  if (hipRuntime() == nullptr) {
    report.push_back({"hip runtime", version.empty() ? hipUnavailableReason()
                                                     : fmt::format("{} ({}): {}", version, hipRuntimeLibraryPath(),
                                                                   hipUnavailableReason())});
    return;
  }
  report.push_back({"hip runtime", fmt::format("{} ({})", version, hipRuntimeLibraryPath())});
  int count = 0;
  hipRuntime()->getDeviceCount(&count);
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    std::string line;
    try {
      const std::optional<DeviceInfo> device = queryHipDevice(ordinal);
      line = device ? device->toString() : "cannot be queried";
    } catch (const Error& error) {  // a malformed BRAZE_TUNING
      line = error.what();
    }
    report.push_back({fmt::format("hip device {}", ordinal), line});
  }
}

// The process's cache (the one kernels go through), not the environment's answer now: the directory is
// fixed when the process first compiles.
std::string diskCacheLine() {
  const KernelDiskCache* disk = processKernelCache().disk();
  if (disk == nullptr) return "off";
  return disk->writable() ? disk->directory().string()
                          : fmt::format("{} (read only: an earlier write failed)", disk->directory().string());
}

// BRAZE_* variables change dumps, caching and launches: a report without them explains nothing.
void appendBrazeEnvironment(std::vector<ConfigEntry>& report) {
  std::vector<ConfigEntry> variables;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (!text.starts_with("BRAZE_")) continue;
    const size_t equals = text.find('=');
    variables.push_back({fmt::format("env {}", text.substr(0, equals)),
                         equals == std::string_view::npos ? std::string() : std::string(text.substr(equals + 1))});
  }
  std::sort(variables.begin(), variables.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  report.insert(report.end(), variables.begin(), variables.end());
}

}  // namespace

std::vector<ConfigEntry> configReport() {
  std::vector<ConfigEntry> report;
  report.push_back({"braze", BRAZE_VERSION});
  report.push_back({"built with", fmt::format("{} {}, C++ {}", 
#if defined(__clang__)
                                               "clang",
#else
                                               "g++",
#endif
                                               __VERSION__, __cplusplus)});
  report.push_back({"nvrtc", nvrtcLine()});
  const std::string include_dir = cudaIncludeDir();
  report.push_back({"cuda headers", include_dir.empty() ? "not found" : include_dir});
  if (cudaAvailable()) {
    const std::string version = cudaDriverVersion();
    report.push_back({"cuda driver", fmt::format("{} ({})", version.empty() ? "version unknown" : version,
                                                 cudaDriverLibraryPath())});
    int count = 0;
    cudaDriver()->deviceGetCount(&count);
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      std::string line;
      try {
        const std::optional<DeviceInfo> device = queryDevice(ordinal);
        line = device ? device->toString() : "cannot be queried";
      } catch (const Error& error) {  // a malformed BRAZE_TUNING: the report is how one finds out
        line = error.what();
      }
      report.push_back({fmt::format("device {}", ordinal), line});
    }
  } else {
    report.push_back({"cuda driver", cudaUnavailableReason()});
  }
  appendHip(report);
  report.push_back({"kernel disk cache", diskCacheLine()});
  appendBrazeEnvironment(report);
  return report;
}

}  // namespace braze::exec
