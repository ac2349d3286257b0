// The code digest (kernel/code_digest.h) stands for the emitted source: kernels with equal digests emit
// the same CUDA and HIP source, and kernels that emit the same source have equal digests (so a shape
// that shares a compiled kernel is known to by its digest, without emitting anything).
#include "fusions/backward_cases.h"
#include "fusions/kernel_corpus.h"
#include "fusions/layer_norm.h"
#include "codegen/source_emitter.h"
#include "kernel/code_digest.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <utility>

namespace braze {
namespace {

struct DigestKey {
  uint64_t low, high;
  auto operator<=>(const DigestKey&) const = default;
};

DigestKey keyOf(const kernel::Kernel& k) {
  const kernel::CodeDigest d = kernel::codeDigest(k);
  return {d.low, d.high};
}

// The HIP source, or none where the kernel has no HIP spelling (warp-level matrix instructions).
std::optional<std::string> hipOf(const kernel::Kernel& k) {
  try {
    return codegen::emitHip(k);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Digests and sources of kernels seen so far; each kernel added is checked against both.
class DigestsAndSources {
 public:
  void add(const kernel::Kernel& k, const std::string& where) {
    std::string cuda = codegen::emitCuda(k);
    const DigestKey digest = keyOf(k);
    auto [by_digest, new_digest] = source_of_.try_emplace(digest, cuda, hipOf(k));
    // (Not EXPECT_EQ: a failure would print two sources of many KB.)
    EXPECT_TRUE(by_digest->second.first == cuda) << where << ": " << k.name << " has the digest of another source";
    auto [by_source, new_source] = digest_of_.try_emplace(std::move(cuda), digest);
    EXPECT_TRUE(by_source->second == digest) << where << ": " << k.name << " emits a known source with a new digest";
    if (!new_digest) {
      EXPECT_TRUE(by_digest->second.second == hipOf(k)) << where << ": " << k.name << " (HIP)";
    }
  }
  size_t distinct() const { return source_of_.size(); }

 private:
  std::map<DigestKey, std::pair<std::string, std::optional<std::string>>> source_of_;  // CUDA, HIP
  std::map<std::string, DigestKey> digest_of_;
};

TEST(CodeDigest, EqualDigestsAreEqualSourcesAcrossTheCorpus) {
  std::vector<testing::KernelCaseMaker> makers = testing::smallKernelCorpus();
  for (testing::KernelCaseMaker& maker : testing::backwardCases()) makers.push_back(std::move(maker));
  DigestsAndSources seen;
  size_t kernels = 0;
  for (const testing::KernelCaseMaker& maker : makers) {
    const testing::KernelCase c = maker.make();
    const LoweredPlan lowered = planAndLower(*c.fusion, c.inputs, c.options);
    for (const std::optional<kernel::Kernel>& k : lowered.kernels) {
      if (!k) continue;
      seen.add(*k, maker.name);
      ++kernels;
    }
  }
  // Kernel names repeat across cases (braze_seg0...), so distinct sources are fewer than kernels but many.
  EXPECT_GT(kernels, 100u);
  EXPECT_GT(seen.distinct(), 50u);
}

TEST(CodeDigest, RowCountsThatShareASourceShareADigest) {
  const auto f = testing::sizelessLayerNormBackward();
  DigestsAndSources seen;
  std::set<DigestKey> digests;
  size_t kernels = 0;
  for (int64_t rows : {1, 2, 3, 31, 127, 128, 129, 1000, 2048, 2049, 4099}) {
    const std::vector<HostValue> inputs{HostTensor::empty(DataType::BFloat16, {rows, 768}),
                                        HostTensor::empty(DataType::BFloat16, {rows, 768}),
                                        HostTensor::empty(DataType::Float, {rows, 1}),
                                        HostTensor::empty(DataType::Float, {rows, 1}),
                                        HostTensor::empty(DataType::BFloat16, {768})};
    const LoweredPlan lowered = planAndLower(*f, inputs, {{}, DeviceInfo::h100Sxm()});
    for (const std::optional<kernel::Kernel>& k : lowered.kernels) {
      if (!k) continue;
      seen.add(*k, fmt::format("{} rows", rows));
      digests.insert(keyOf(*k));
      ++kernels;
    }
  }
  // Most row counts run kernels another count compiled: far fewer digests than kernels.
  EXPECT_LE(digests.size() * 2, kernels) << digests.size() << " digests for " << kernels << " kernels";
}

}  // namespace
}  // namespace braze
