// Hand-edited fusion records (ir/json.h): each case of the small kernel corpus written as JSON, one field
// of it changed at random (an attribute's, a size's or an id's int, a flag, a dtype, an operand's or an
// output's id), read back and run with the case's inputs on the simulated device and on the reference
// evaluator. Each must end as a braze::Error that is not an internal one (the record or the inputs are
// wrong, and the message says so), or as a run that gives the reference's outputs: never another
// exception (std::bad_alloc aside), a crash or an answer for a record the reference refuses.
#include "fusions/kernel_corpus.h"
#include "device/sim/sim_device_ops.h"
#include "exec/host_execute.h"
#include "ir/json.h"
#include "reference/evaluator.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <new>
#include <random>
#include <string>
#include <vector>

namespace braze {
namespace {

using json = nlohmann::json;

// Every leaf a mutation may change: ints, bools, nulls (an unknown contiguity) and dtype names.
void leaves(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if (key != "version") leaves(value, at / key, out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) leaves(j[i], at / i, out);
  } else if (j.is_number_integer() || j.is_boolean() || j.is_null() ||
             (j.is_string() && dataTypeFromString(j.get<std::string>()))) {
    out.push_back(at);
  }
}

// `leaf` changed to another value of its kind, or one of another kind now and then; what was done.
std::string mutate(json& leaf, std::mt19937_64& rng) {
  const std::string before = leaf.dump();
  const auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  if (leaf.is_number_integer()) {
    const int64_t v = leaf.get<int64_t>();
    const int64_t choices[] = {v + 1, v - 1, 0, -1, 1, 2, 2 * v + 1, -v - 2, int64_t{1} << 40};
    leaf = choices[pick(std::size(choices))];
  } else if (leaf.is_boolean()) {
    leaf = !leaf.get<bool>();
  } else if (leaf.is_null()) {
    leaf = pick(2) == 0;
  } else {
    static const char* const dtypes[] = {"Float", "Double", "Half", "BFloat16", "Int32", "Int64", "Int8",
                                         "UInt8", "Bool", "Float8_e4m3fn", "ComplexFloat"};
    leaf = dtypes[pick(std::size(dtypes))];
  }
  return before + " -> " + leaf.dump();
}

// A failure's description, or "" where the mutated record ended as it must.
std::string runMutated(const json& record, const std::vector<HostValue>& inputs, const ExecuteOptions& options) {
  std::shared_ptr<Fusion> fusion;
  try {
    fusion = std::make_shared<Fusion>(fusionFromJson(record));
  } catch (const Error& e) {
    return e.kind() == ErrorKind::Internal ? std::string("reading it: internal error: ") + e.what() : "";
  }
  std::optional<std::vector<HostValue>> want;
  std::string refused;
  try {
    want = evaluate(*fusion, inputs);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Internal) return std::string("the reference: internal error: ") + e.what();
    refused = e.what();
  }
  try {
    device::SimDeviceOps device;
    exec::FusionCache cache(fusion, options.plan, &device, DeviceInfo::h100Sxm());
    const std::vector<HostValue> got = exec::runOnHost(cache, inputs);
    if (!want) return "the reference refuses it (" + refused + "), the pipeline ran it";
    if (got.size() != want->size()) return fmt::format("{} outputs, the reference's {}", got.size(), want->size());
    for (size_t i = 0; i < got.size(); ++i) {
      const auto* got_scalar = std::get_if<ScalarValue>(&got[i]);
      const auto* want_scalar = std::get_if<ScalarValue>(&(*want)[i]);
      if (got_scalar == nullptr && want_scalar == nullptr) {
        testing::expectClose({got[i]}, {(*want)[i]}, fmt::format("output {} of the mutated record", i));
      } else if (got_scalar == nullptr || want_scalar == nullptr || toString(*got_scalar) != toString(*want_scalar)) {
        return fmt::format("output {} differs from the reference's (a scalar on one side)", i);
      }
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Internal) return std::string("the pipeline: internal error: ") + e.what();
  }
  return "";
}

TEST(JsonMutation, EveryChangedFieldIsAnErrorOrTheReferencesAnswer) {
  constexpr int kMutationsPerCase = 16;
  for (const testing::KernelCaseMaker& maker : testing::smallKernelCorpus()) {
    const testing::KernelCase c = maker.make();
    const json record = toJson(*c.fusion);
    std::vector<json::json_pointer> paths;
    leaves(record, json::json_pointer(), paths);
    ASSERT_FALSE(paths.empty()) << maker.name;
    std::mt19937_64 rng(std::hash<std::string>{}(maker.name));
    for (int m = 0; m < kMutationsPerCase; ++m) {
      json mutated = record;
      const json::json_pointer& at = paths[rng() % paths.size()];
      const std::string change = mutate(mutated[at], rng);
      SCOPED_TRACE(maker.name + ": " + at.to_string() + " " + change);
      std::string failure;
      try {
        failure = runMutated(mutated, c.inputs, c.options);
      } catch (const std::bad_alloc&) {
        // A size made huge (a constant 1 -> 2^40) asks for more memory than there is: std::bad_alloc (Python's
        // MemoryError) names that, and nothing ran on it.
      } catch (const std::exception& e) {
        failure = std::string("an exception that is no braze::Error: ") + e.what();
      }
      EXPECT_EQ(failure, "");
    }
  }
}

}  // namespace
}  // namespace braze
