// The test binary's kernel disk cache: tests that run kernels on a GPU go through the process's kernel
// cache, which would otherwise write to ~/.cache/braze. Unless BRAZE_CACHE_DIR is set already (to test
// against a chosen cache), it points at a directory made for this run and removed at its end.
#include "runtime/temp_dir.h"

#include <gtest/gtest.h>

#include <memory>

namespace braze::testing {
namespace {

class TemporaryKernelCacheDir : public ::testing::Environment {
 public:
  void SetUp() override {
    if (std::getenv("BRAZE_CACHE_DIR") != nullptr) return;
    dir_ = std::make_unique<TempDir>();
    ::setenv("BRAZE_CACHE_DIR", dir_->path().c_str(), 1);
  }
  void TearDown() override { dir_.reset(); }

 private:
  std::unique_ptr<TempDir> dir_;
};

// gtest owns the environment; registering it before main() runs is the documented way.
[[maybe_unused]] ::testing::Environment* const kCacheDir =
    ::testing::AddGlobalTestEnvironment(new TemporaryKernelCacheDir);

}  // namespace
}  // namespace braze::testing
