// Every op's size relations on concrete sizes: the sizes of an expr's result given its operands' sizes,
// and the checks that make the op well defined (a matmul's K, a cat's other dims, a quantize's scale,
// an index tensor's extents). One place, used by the binder (every plan, every scheduler, host and
// GPU) and by the reference evaluator, so a size the reference refuses is refused on every path with
// the same message, naming the op, the operands and the sizes.
//
// Meta ops (reshape, slice, expand, broadcast_in_dim, permute, squeeze, set) are the exception: their
// sizes come with their views (passes/alias_analysis.h), whose arithmetic lives in ir/shape_rules.h.
#pragma once

#include "ir/expr.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace braze {

using Sizes = std::vector<int64_t>;

// The sizes of `expr`'s outputs (all of an expr's outputs share them), or nullopt for a meta op or a
// scalar query. `operand(i)`: input i's sizes (i a tensor input); `scalar(i)`: input i's value as an
// integer (i a scalar input). Throws a Value error naming the op when the sizes do not fit together.
std::optional<Sizes> resultSizes(const Expr& expr, const std::function<const Sizes&(size_t)>& operand,
                                 const std::function<int64_t(size_t)>& scalar);

// "[2, 3]": how size messages print a shape.
std::string sizesString(const Sizes& sizes);

// How size messages name a tensor: "T13", and where it is computed from one fusion input through ops of
// one tensor operand (a cast, a broadcast), that input too: "T13 (from input 4, T4)".
std::string operandName(const Val* tensor);

}  // namespace braze
