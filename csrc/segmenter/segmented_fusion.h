// The segmenter's result: the prepared fusion (after bookending) cut into segments, each either an
// alias segment (host-side views of its inputs, no kernel) or a kernel segment with the scheduler
// that accepted it. Segments are in an order that respects their dependencies.
#pragma once

#include "ir/fusion.h"
#include "passes/bind_shapes.h"
#include "passes/mark_aliases_prepare.h"
#include "scheduler/registry.h"

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace braze {

enum class SegmentKind { Alias, Kernel };
std::string_view toString(SegmentKind kind);

struct Segment {
  int64_t id = 0;
  SegmentKind kind = SegmentKind::Kernel;
  std::optional<SchedulerKind> scheduler;  // Alias for alias segments; empty when no scheduler accepts
  std::vector<const Expr*> exprs;          // in evaluation order, with the input views it reads inlined
  std::vector<const Val*> inputs;          // tensors read from fusion inputs or other segments
  std::vector<const Val*> outputs;         // tensors other segments or the user read
  std::vector<std::pair<SchedulerKind, std::string>> refusals;  // schedulers tried before, with reasons
  std::optional<int64_t> vectorize;        // set by the schedulers' heuristics when the plan is compiled
  std::string heuristics;                  // the heuristics' parameters, one line, once compiled
  // Kernels launched after the segment's own to finish its work (the inner-outer scheduler's sum of
  // partials), known once compiled: a kernel segment launches 1 + follow_up_kernels.
  int64_t follow_up_kernels = 0;
  // Its kernels were lowered for other sizes and given these inputs' launch values (a FusionCache's
  // canonical row count, exec/canonical_rows.h): which sizes, for the plan's text; empty otherwise.
  std::string kernels_lowered_for;
};

// Why two segments joined by a tensor were not merged: one of a closed list, and the detail. NotReached:
// a scheduler takes both, but the merges made first left them apart.
enum class CutReason { SchedulerRefused, SegmentSet, WouldCreateCycle, MoreTraffic, NotReached };
std::string_view toString(CutReason reason);
struct SegmentEdge {
  int64_t producer = 0;  // segment ids
  int64_t consumer = 0;
  const Val* tensor = nullptr;
  CutReason reason = CutReason::SchedulerRefused;
  std::string detail;
};

// A plan's decisions, without the sizes they were made for: what a plan kept for other inputs of its
// shape class copies (reuseSegments binds the new sizes rather than copying the old ones first).
struct SegmentedPlan {
  std::shared_ptr<const Fusion> fusion;  // the prepared fusion; every pointer below points into it
  std::vector<Segment> segments;
  std::vector<SegmentEdge> edges;
  BookendReport bookending;
  std::string device;  // the GPU the heuristics planned for (DeviceInfo::toString), once lowered
  // In-place updates the kernel computing the new value writes into its input itself (value -> input:
  // updatesWrittenByKernels, segmenter/in_place_copies.h); the others are copied after the kernels.
  std::unordered_map<const Val*, const Val*> written_in_place;
  // The tensor sizes of the inputs it was segmented for, one list per tensor input (planSegments).
  std::string segmented_for;
  // Segmented for other inputs of the same shape class and kept for these (segmenter/reuse_segments.h):
  // the refusals, cuts and bookending decisions shown are then those of the inputs `segmented_for` lists.
  bool reused = false;
};

// `segmented_for` of a plan of `fusion` for inputs of these sizes.
std::string segmentedForText(const Fusion& fusion, const BoundShapes& bound);

struct SegmentedFusion : SegmentedPlan {
  BoundShapes bound;  // the sizes and scalars the plan was made for (the fusion's vals)

  int64_t kernelCount() const;  // kernels launched: a kernel segment's own and its follow-ups
  int64_t aliasCount() const;
  // The segment that writes `tensor` (by name, "T5"), or null if it is a fusion input.
  const Segment* producerOf(const Val* tensor) const;
  // A readable table: one row per segment (kind, scheduler, vectorize, inputs, outputs, ops), then the
  // cuts with their reasons and the bookending decisions.
  std::string toString() const;
  std::string toDot() const;  // Graphviz
};

}  // namespace braze
