// What the fusion JSON reader (ir/json.cpp) checks of a record's exprs beyond their fields: that each
// expr's results are what the builders would make of its operands (every op but the views with size
// operands is rebuilt in a scratch fusion; those keep their operand's dtype and read integer sizes: one
// per result dim, or a start, an end and a step per dim for a slice), and that every value an expr reads
// or the fusion returns is computed: an input, a constant, or some expr's result. A record edited by hand
// then gets an error naming the expr, instead of kernels and the reference computing different things.
#pragma once

#include "ir/fusion.h"

#include <string>
#include <vector>

namespace braze {

// `kind` over `inputs` declared to give `outputs` (attributes `attrs`); `where` names the expr.
void checkResultsAsBuilt(OpKind kind, const std::vector<Val*>& inputs, const std::vector<Val*>& outputs,
                         const Attributes& attrs, const std::string& where);

// Every value the exprs read and the fusion returns: a fusion input, a constant or an expr's result; CPU
// tensors (is_cpu) only as 0-d inputs.
void checkEveryValueIsComputed(const Fusion& fusion);

}  // namespace braze
