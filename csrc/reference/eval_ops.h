// The evaluator's per-category functions (internal to csrc/reference). Each evaluates one expr given
// its operands' values (in the expr's input order) and returns its outputs' values.
#pragma once

#include "ir/expr.h"
#include "ir/val.h"
#include "ir/host_tensor.h"

#include <vector>

namespace braze::reference {

using Operands = std::vector<const HostValue*>;

std::vector<HostValue> evalElementwise(const Expr& expr, const Operands& operands);
std::vector<HostValue> evalReduction(const Expr& expr, const Operands& operands);
std::vector<HostValue> evalShapeOp(const Expr& expr, const Operands& operands);      // meta ops, pad, cat, size
std::vector<HostValue> evalCreation(const Expr& expr, const Operands& operands);     // full, iota
std::vector<HostValue> evalIndexing(const Expr& expr, const Operands& operands);     // index_select, gather...
std::vector<HostValue> evalMatmul(const Expr& expr, const Operands& operands);
std::vector<HostValue> evalQuantize(const Expr& expr, const Operands& operands);
// cumsum, scatter, index_put_accumulate, uniform, normal
std::vector<HostValue> evalScanScatter(const Expr& expr, const Operands& operands);

// Helpers shared by the files above.
const HostTensor& tensorOf(const HostValue& value);
ScalarValue scalarOf(const HostValue& value);
int64_t intOf(const HostValue& value);
// Copies one element's bytes (same dtype on both sides).
void copyElement(HostTensor& out, int64_t out_offset, const HostTensor& in, int64_t in_offset);

}  // namespace braze::reference
