// Bookending: chains of meta ops that start at a fusion input or end at a fusion output become
// host-side views, so kernels see only compute. The pass inserts a segment_set where such a chain
// meets compute; the segmenter cuts there and the chain becomes an alias segment. Which chains
// qualify is decided by the policy and, under Auto, by the cost model in bookend_cost.h.
#pragma once

#include "ir/fusion.h"
#include "passes/bind_shapes.h"

#include <functional>
#include <string>
#include <vector>

namespace braze {

enum class BookendPolicy {
  Auto,     // the cost model decides each chain
  None,     // no segment_set is inserted
  Outputs,  // every eligible chain that ends at an output (nvFuser's behaviour)
  Both,     // every eligible chain, from inputs and to outputs (nvFuser's closed PR #2815)
};
std::string_view toString(BookendPolicy policy);
BookendPolicy bookendPolicyFromString(std::string_view name);  // "auto", "none", "outputs", "both"

struct BookendDecision {
  enum class Side { Input, Output } side = Side::Output;
  std::string chain;     // "T0 -> reshape -> T3 -> permute -> T4"
  bool bookended = false;
  std::string reason;    // the rule or the cost model's numbers
};

struct BookendReport {
  BookendPolicy policy = BookendPolicy::Auto;
  std::vector<BookendDecision> decisions;
  std::string toString() const;
};

// Which kernel (by any stable id) each expr would land in if no input chain were bookended: the
// double-read rule asks whether two views of one input would feed the same kernel.
using KernelOfExpr = std::function<int64_t(const Expr*)>;

// Output chains: decided and marked first (they do not depend on the segmentation).
void markOutputChains(Fusion& fusion, BoundShapes& bound, BookendPolicy policy, BookendReport& report);

// A segment_set to insert: `readers` read `tensor` through it.
struct SegmentCut {
  Val* tensor = nullptr;
  std::vector<const Expr*> readers;
};
// Input chains: decided with the kernels of a segmentation made without them. Returns the cuts to make
// (insertSegmentCuts; the caller then segments again); none under policies other than both.
std::vector<SegmentCut> decideInputChains(const Fusion& fusion, const BoundShapes& bound, BookendPolicy policy,
                                          const KernelOfExpr& kernel_of, BookendReport& report);
void insertSegmentCuts(Fusion& fusion, BoundShapes& bound, const std::vector<SegmentCut>& cuts);

// Whether bookending may insert a segment_set into `fusion` under `policy`: where a chain of view ops
// ends at an output, or (policy both) starts at an input. Where it may not, planning reads the fusion
// as defined rather than a copy.
bool bookendingMayEdit(const Fusion& fusion, BookendPolicy policy);

}  // namespace braze
