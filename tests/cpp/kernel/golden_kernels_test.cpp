// Golden kernel IR: the kernels lowered for a few cases that exercise every scheduler (the seed
// layer_norm, litGPT RoPE, a softmax, a grid reduction, a transpose, the layer-norm backward's
// inner-outer pair), printed (kernel/printer.h) and
// compared with tests/cpp/kernel/golden/<case>.txt. A change to lowering or heuristics shows up here
// as a readable diff of loops and index arithmetic; when it is meant, BRAZE_UPDATE_GOLDEN=1 rewrites
// the files, and the diff is reviewed with the change.
#include "exec/pipeline.h"
#include "fusions/kernel_corpus.h"
#include "kernel/printer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace braze {
namespace {

const std::filesystem::path kGoldenDir = std::filesystem::path(__FILE__).parent_path() / "golden";

struct GoldenCase {
  std::string name;
  std::function<testing::KernelCase()> make;
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

std::vector<GoldenCase> goldenCases() {
  return {
      {"layer_norm", [] { return testing::layerNormCase({.batch = 2, .seq = 3, .hidden = 1600}, 1); }},
      {"rope", [] {
         return testing::ropeCase({.batch = 2, .seq = 5, .heads = 4, .groups = 2, .head = 16, .rope_n_elem = 8}, 11);
       }},
      {"softmax", [] { return testing::softmaxCase(9, 1000, DataType::BFloat16, /*column_sums=*/false, 3); }},
      {"grid_reduction", testing::gridInnerCase},
      {"transpose", testing::transposeTilesCase},
      {"layer_norm_backward", [] { return testing::normBackwardCase({.rows = 37, .hidden = 96}, 5); }},
  };
}

// The input with its storage at a 256-byte aligned address (its offset kept): plans depend on the
// alignment of each input's first element, which must not depend on where malloc put the test's data.
HostValue aligned(const HostValue& v) {
  const auto* t = std::get_if<HostTensor>(&v);
  if (t == nullptr) return v;
  int64_t span = t->offset() + 1;
  for (int64_t d = 0; d < t->rank(); ++d) span += (t->sizes()[d] - 1) * t->strides()[d];
  const auto bytes = static_cast<size_t>((span * sizeOf(t->dtype()) + 255) / 256 * 256);
  std::shared_ptr<void> memory(std::aligned_alloc(256, bytes), std::free);
  HostTensor copy = HostTensor::wrap(memory.get(), t->dtype(), t->sizes(), t->strides(), memory)
                        .view(t->sizes(), t->strides(), t->offset());
  forEachIndex(t->sizes(), [&](const std::vector<int64_t>& index) {
    copy.writeDouble(copy.offsetOf(index), t->readDouble(t->offsetOf(index)));
  });
  return copy;
}

std::string printed(const testing::KernelCase& c) {
  std::vector<HostValue> inputs;
  for (const HostValue& v : c.inputs) inputs.push_back(aligned(v));
  const LoweredPlan lowered = planAndLower(*c.fusion, inputs, {c.options.plan, DeviceInfo::h100Sxm()});
  std::string text;
  for (const auto& k : lowered.kernels) {
    if (k) text += kernel::printKernel(*k);
  }
  return text;
}

class GoldenKernels : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenKernels, LoweringMatchesTheGoldenFile) {
  const std::string got = printed(GetParam().make());
  const std::filesystem::path file = kGoldenDir / (GetParam().name + ".txt");
  const char* update = std::getenv("BRAZE_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(file) << got;
    GTEST_SKIP() << "rewrote " << file;
  }
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << file << " is missing: run with BRAZE_UPDATE_GOLDEN=1 to write it";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(got, want.str()) << "the kernels lowered for " << GetParam().name << " differ from " << file
                             << "; if the change is meant, rerun with BRAZE_UPDATE_GOLDEN=1 and review the diff";
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenKernels, ::testing::ValuesIn(goldenCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace braze
