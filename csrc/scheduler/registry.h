// What the segmenter asks the schedulers: which one can turn a group of exprs into one kernel (or, for
// the alias scheduler, into host-side views), in the scheduler table's order (scheduler/scheduler.h),
// each by its structural check; heuristics and size-dependent limits (does a row fit in registers) come
// with each scheduler's heuristics. The segmenter asks chooseScheduler for every union it considers,
// so it must stay cheap: one pass over the group's exprs.
#pragma once

#include "ir/val_set.h"
#include "support/error.h"
#include "passes/bind_shapes.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace braze {

// The kinds; the scheduler table (scheduler/scheduler.h) holds their order and what each registers.
enum class SchedulerKind { Alias, InnerPersistent, InnerOuterPersistent, Reduction, Transpose, Scan, Pointwise, Matmul };
std::string_view toString(SchedulerKind kind);  // "alias", "inner_persistent", ...: the table's names

// A group of exprs the segmenter proposes as one segment: exprs in evaluation order, the tensors
// it reads from outside and the tensors it must write (read by another segment, or fusion outputs).
struct Candidate {
  std::vector<const Expr*> exprs;
  std::vector<const Val*> inputs;
  std::vector<const Val*> outputs;
};

// Facts every scheduler's check needs, computed once per candidate.
struct CandidateFacts {
  std::vector<const Expr*> reductions;               // reduction and normalization exprs
  ValSet after_reduction;                            // tensors of the group that depend on a reduction
  // An expr the elementwise and reduction schedulers cannot take: a matmul (the matmul scheduler's), a
  // cumsum, topk, argsort, scatter or index_put_accumulate (the scan scheduler's).
  const Expr* unsupported = nullptr;
  bool all_meta = true;
  // Whether refusals spell out why. The segmenter's merge attempts need only the verdict, and naming
  // the exprs involved in every refusal of every attempt took a twentieth of planning a new signature.
  bool reasons = true;
};
CandidateFacts analyzeCandidate(const Candidate& candidate);
// A scalar, or a 0-dim tensor: one element wherever a kernel reads it (a loss term computed on the host),
// which groups that read nothing else take as they take scalars.
bool readsAsScalar(const Val* v);
// Why the elementwise and reduction schedulers refuse a group holding `unsupported` (CandidateFacts).
std::string unsupportedReason(const Expr& unsupported);

struct Verdict {
  bool ok = false;
  std::string reason;  // why not, when !ok
  static Verdict yes() { return {true, ""}; }
  static Verdict no(std::string why) { return {false, std::move(why)}; }
};

struct SchedulerChoice {
  std::optional<SchedulerKind> kind;                            // none: no scheduler accepts the group
  std::vector<std::pair<SchedulerKind, std::string>> refusals;  // the schedulers before it, with reasons
};
// `reasons` false: the refusals' texts may be placeholders (CandidateFacts::reasons).
SchedulerChoice chooseScheduler(const Candidate& candidate, const BoundShapes& bound, bool reasons = true);

}  // namespace braze

namespace braze {
// "T5 = sum(T3)": how refusal reasons name an expr.
std::string exprLabel(const Expr& expr);
}  // namespace braze
