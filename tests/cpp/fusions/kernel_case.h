// A kernel corpus case (kernel_corpus.h): a fusion, its inputs and what its plan must look like, and
// the named maker gtest registers.
#pragma once

#include "exec/pipeline.h"
#include "ir/fusion.h"
#include "ir/host_tensor.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace braze::testing {

struct KernelCase {
  std::shared_ptr<Fusion> fusion = std::make_shared<Fusion>();
  std::vector<HostValue> inputs;
  ExecuteOptions options;
  // What the plan must look like (vectorize factor, kernel count), checked on every target.
  std::function<void(const LoweredPlan&)> expect;
};

// A named case, built only when its test runs: gtest registers every parameter at start-up, and the
// large cases hold megabytes of inputs.
struct KernelCaseMaker {
  std::string name;  // a gtest parameter name: letters, digits and '_'
  std::function<KernelCase()> make;
};

inline std::string caseName(const ::testing::TestParamInfo<KernelCaseMaker>& info) { return info.param.name; }
// How gtest prints a failing case's parameter (instead of its bytes).
inline void PrintTo(const KernelCaseMaker& maker, std::ostream* os) { *os << maker.name; }

}  // namespace braze::testing
