// The fusion IR's invariants, checked where a stage hands the IR on (exec/pipeline.cpp): every node
// belongs to the fusion, definitions and uses agree, the order to evaluate defines each operand before
// its use, inputs have no definition, in-place outputs alias inputs of their dtype and rank (sizes are checked when bound), and
// tensors' layouts match their rank. A broken invariant is a bug in braze: an Internal error naming
// the node and what is wrong.
#pragma once

#include "ir/fusion.h"

namespace braze {

void verifyFusion(const Fusion& fusion);

// Whether the verifiers run: in debug builds always, else when BRAZE_VERIFY=1 (the tests set it).
bool verifiersEnabled();

}  // namespace braze
