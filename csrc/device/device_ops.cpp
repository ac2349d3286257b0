#include "device/device_ops.h"

#include "support/error.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace braze::device {
namespace {

struct NoOpGraph final : LaunchGraph {
  std::vector<std::vector<uint64_t>> arguments;
};

}  // namespace

std::vector<uint64_t> argumentValues(const KernelLaunch& k) {
  std::vector<uint64_t> values(k.arg_count);
  for (size_t i = 0; i < k.arg_count; ++i) std::memcpy(&values[i], k.args[i], sizeof(uint64_t));
  return values;
}

std::vector<size_t> changedKernels(std::vector<std::vector<uint64_t>>& recorded, const std::vector<KernelLaunch>& kernels) {
  BRAZE_ASSERT(recorded.size() == kernels.size(), "a graph of {} kernels launched with {}", recorded.size(),
               kernels.size());
  std::vector<size_t> changed;
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::vector<uint64_t>& before = recorded[i];
    BRAZE_ASSERT(before.size() == kernels[i].arg_count, "graph kernel {}: {} arguments, then {}", i, before.size(),
                 kernels[i].arg_count);
    bool same = true;
    for (size_t a = 0; a < before.size() && same; ++a) same = std::memcmp(&before[a], kernels[i].args[a], 8) == 0;
    if (same) continue;
    before = argumentValues(kernels[i]);
    changed.push_back(i);
  }
  return changed;
}

void DeviceOps::encodeTensorMap(const kernel::TensorMapSpec&, kernel::TensorMapBytes&) {
  throwError(ErrorKind::Runtime, __FILE__, __LINE__,
             "this device encodes no TMA tensor maps: a kernel planned for sm_90's TMA loads cannot run on it");
}

bool NoOpDeviceOps::launchGraph(std::unique_ptr<LaunchGraph>& graph, const std::vector<KernelLaunch>& kernels,
                                StreamHandle) {
  if (!graph) {
    auto made = std::make_unique<NoOpGraph>();
    for (const KernelLaunch& k : kernels) made->arguments.push_back(argumentValues(k));
    graph = std::move(made);
    ++graphs_made;
  } else {
    graph_nodes_updated += static_cast<int64_t>(changedKernels(static_cast<NoOpGraph&>(*graph).arguments, kernels).size());
  }
  ++graph_launches;
  return true;
}

}  // namespace braze::device
