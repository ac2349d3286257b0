// The tests run with the IR verifiers on (BRAZE_VERIFY=1, unless set otherwise): every fusion, plan
// and kernel a test plans is checked at each stage boundary of the pipeline (exec/pipeline.h).
#include <gtest/gtest.h>

#include <cstdlib>

namespace braze::testing {
namespace {

class VerifiersOn : public ::testing::Environment {
 public:
  void SetUp() override { ::setenv("BRAZE_VERIFY", "1", /*overwrite=*/0); }
};

[[maybe_unused]] ::testing::Environment* const kVerifiers = ::testing::AddGlobalTestEnvironment(new VerifiersOn);

}  // namespace
}  // namespace braze::testing
