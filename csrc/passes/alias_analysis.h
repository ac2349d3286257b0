// Alias analysis: whether a meta op's output is a strided view of its operand, for the operand's
// concrete layout, and that view's layout. Bookending asks it before turning a chain into a host
// view; alias segments use it at execute to build the views; the cost model reads the views'
// strides to see what a kernel would load.
#pragma once

#include "ir/expr.h"
#include "ir/strided_layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace braze {

struct ViewResult {
  StridedLayout layout;  // when not a view: the sizes, with row-major strides of a fresh copy
  bool is_view = true;
  std::string reason;    // why it is not a view ("reshape merges dims 1 and 2, which are not contiguous")
};

// `in` is the operand's layout; `scalars` the values of the expr's scalar inputs (after the tensor),
// in input order. Errors in the scalars (a reshape to the wrong element count, a bad expand) are
// reported as the reference evaluator reports them.
ViewResult viewThrough(const Expr& expr, const StridedLayout& in, const std::vector<int64_t>& scalars);

// The fusion input that `tensor` views through meta ops other than segment_set (itself if it is an
// input), or null. Such "input views" cost no kernel: a kernel that reads one composes the chain's
// index maps, and an output that is one is returned as a view.
const Val* inputViewRoot(const Val* tensor);
// The meta exprs from inputViewRoot(tensor) to tensor, in order (empty for an input).
std::vector<const Expr*> inputViewChain(const Val* tensor);

}  // namespace braze
