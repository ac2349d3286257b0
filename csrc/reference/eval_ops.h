// The evaluator's per-category functions (internal to csrc/reference). Each evaluates one expr given
// its operands' values (in the expr's input order) and returns its outputs' values.
#pragma once

#include "ir/expr.h"
#include "ir/val.h"
#include "reference/host_tensor.h"

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

// Helpers shared by the files above.
const HostTensor& tensorOf(const HostValue& value);
ScalarValue scalarOf(const HostValue& value);
int64_t intOf(const HostValue& value);
// Reads any element as float64 (for floating math), and writes a float64 into any dtype.
double readAsDouble(const HostTensor& t, int64_t element_offset);
void writeFromDouble(HostTensor& t, int64_t element_offset, double value);
// A scalar value converted to a dtype's representation, for writing into a tensor.
double scalarAsDouble(const ScalarValue& v);

}  // namespace braze::reference
