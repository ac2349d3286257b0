// Defines a fusion with a builder body and evaluates it on the reference: the evaluator tests' helper.
#pragma once

#include "ir/fusion.h"
#include "reference/evaluator.h"

#include <vector>

namespace braze::testing {

// Builds a fusion with `body` (called with the fusion, under its guard), evaluates it on `inputs` and
// returns the outputs.
template <typename Body>
std::vector<HostValue> evaluateDefined(Body&& body, const std::vector<HostValue>& inputs) {
  Fusion fusion;
  {
    FusionGuard guard(&fusion);
    body(fusion);
  }
  return evaluate(fusion, inputs);
}

}  // namespace braze::testing
