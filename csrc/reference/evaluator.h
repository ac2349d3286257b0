// The CPU reference evaluator: the oracle every later stage is compared with. It evaluates a fusion
// op by op on host tensors of any layout, in float64 for floating math (rounded to each result's
// dtype, as CUDA rounds) and exactly, with C++ wrap-around, for integers. Simple, not fast.
#pragma once

#include "ir/fusion.h"
#include "ir/host_tensor.h"

#include <unordered_map>
#include <vector>

namespace braze {

// Checks the inputs against the fusion's definitions (count, kind, dtype, rank, static extents,
// broadcast dims), evaluates, and returns the outputs in order. Outputs that alias an input (declared
// with aliasOutputToInput) are written into that input and, like nvFuser, not returned.
// Outputs are row-major, except outputs that are fusion inputs, which are returned as given.
std::vector<HostValue> evaluate(const Fusion& fusion, const std::vector<HostValue>& inputs);

// Condition estimation for differential tests: while one lives on a thread, the reference scales every
// floating sum, product, mean and sum of squared deviations it computes on that thread by (1 + nudge).
// A kernel accumulates in float32 in another order than the float64 reference; an output that moves by
// more than its tolerance under a nudge of a few float32 ulps is ill-conditioned there (a sine of a large
// sum), whatever the inputs' dtype, and a test compares it with less weight or not at all.
class ScopedReductionNudge {
 public:
  explicit ScopedReductionNudge(double nudge);
  ~ScopedReductionNudge();
  ScopedReductionNudge(const ScopedReductionNudge&) = delete;
  ScopedReductionNudge& operator=(const ScopedReductionNudge&) = delete;
  static double factor();  // 1 + the innermost live nudge, or 1

 private:
  double previous_;
};

// One expr on its operands' values (in the expr's input order): the unit that segmented execution
// and the planner's scalar folding reuse. Meta ops return views, except reshape and set, which copy.
std::vector<HostValue> evaluateExpr(const Expr& expr, const std::vector<const HostValue*>& operands);

// The fusion's outputs from a map holding every output's value: aliased outputs are written into
// their inputs (and not returned, as nvFuser does); other tensors are returned row-major when
// `row_major` is set (the oracle's convention), or as they are (views stay views).
std::vector<HostValue> collectOutputs(const Fusion& fusion, const std::unordered_map<const Val*, HostValue>& values,
                                      bool row_major);

}  // namespace braze
