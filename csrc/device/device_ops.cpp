#include "device/device_ops.h"

#include "support/error.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
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

constexpr size_t kMapWords = sizeof(kernel::TensorMapBytes) / sizeof(uint64_t);

size_t wordsOf(const KernelLaunch& k, size_t i) { return i + k.maps < k.arg_count ? 1 : kMapWords; }

}  // namespace

std::vector<uint64_t> argumentValues(const KernelLaunch& k) {
  std::vector<uint64_t> values;
  values.reserve(k.arg_count + k.maps * (kMapWords - 1));
  for (size_t i = 0; i < k.arg_count; ++i) {
    const size_t words = wordsOf(k, i);
    values.resize(values.size() + words);
    std::memcpy(&values[values.size() - words], k.args[i], words * sizeof(uint64_t));
  }
  return values;
}

std::vector<size_t> changedKernels(std::vector<std::vector<uint64_t>>& recorded, const std::vector<KernelLaunch>& kernels) {
  BRAZE_ASSERT(recorded.size() == kernels.size(), "a graph of {} kernels launched with {}", recorded.size(),
               kernels.size());
  std::vector<size_t> changed;
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::vector<uint64_t>& before = recorded[i];
    const KernelLaunch& k = kernels[i];
    BRAZE_ASSERT(before.size() == k.arg_count + k.maps * (kMapWords - 1), "graph kernel {}: {} argument words, then {}",
                 i, before.size(), k.arg_count + k.maps * (kMapWords - 1));
    bool same = true;
    for (size_t a = 0, word = 0; a < k.arg_count && same; word += wordsOf(k, a), ++a) {
      same = std::memcmp(&before[word], k.args[a], wordsOf(k, a) * sizeof(uint64_t)) == 0;
    }
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

size_t releaseAllCachedBlocks() {
  size_t returned = 0;
  std::exception_ptr first_error;
  for (size_t (*trim)() : {&releaseCudaCachedBlocks, &releaseHipCachedBlocks}) {
    try {
      returned += trim();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
  return returned;
}

}  // namespace braze::device
