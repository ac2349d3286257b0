// SegmentedFusion's queries and its two printed forms: a table for people, Graphviz for pictures.
#include "segmenter/segmented_fusion.h"

#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iterator>

namespace braze {
namespace {

std::string names(const std::vector<const Val*>& vals) {
  std::vector<std::string> out;
  for (const Val* v : vals) out.push_back(v->name());
  return fmt::format("{}", fmt::join(out, ", "));
}

std::string opNames(const std::vector<const Expr*>& exprs) {
  std::vector<std::string> out;
  for (const Expr* e : exprs) out.emplace_back(e->name());
  return fmt::format("{}", fmt::join(out, " "));
}

std::string schedulerName(const Segment& s) {
  return s.scheduler ? std::string(braze::toString(*s.scheduler)) : std::string("none");
}

}  // namespace

std::string_view toString(SegmentKind kind) { return kind == SegmentKind::Alias ? "alias" : "kernel"; }

std::string_view toString(CutReason reason) {
  switch (reason) {
    case CutReason::SchedulerRefused: return "scheduler refused";
    case CutReason::SegmentSet: return "segment_set";
    case CutReason::WouldCreateCycle: return "would create a cycle";
    case CutReason::MoreTraffic: return "cost model: more traffic";
    case CutReason::NotReached: return "not reached";
  }
  BRAZE_UNREACHABLE("CutReason {}", static_cast<int>(reason));
}

int64_t SegmentedFusion::kernelCount() const {
  int64_t n = 0;
  for (const Segment& s : segments) n += s.kind == SegmentKind::Kernel ? 1 + s.follow_up_kernels : 0;
  return n;
}

int64_t SegmentedFusion::aliasCount() const {
  int64_t n = 0;
  for (const Segment& s : segments) n += s.kind == SegmentKind::Alias ? 1 : 0;
  return n;
}

const Segment* SegmentedFusion::producerOf(const Val* tensor) const {
  for (const Segment& s : segments) {
    for (const Val* out : s.outputs) {
      if (out == tensor) return &s;
    }
  }
  return nullptr;
}

std::string segmentedForText(const Fusion& fusion, const BoundShapes& bound) {
  std::string text;
  for (const Val* in : fusion.inputs()) {
    if (!in->isTensor()) continue;
    if (!text.empty()) text += ' ';
    fmt::format_to(std::back_inserter(text), "[{}]", fmt::join(bound.sizesOf(in), ", "));
  }
  return text;
}

std::string SegmentedFusion::toString() const {
  std::string text = fmt::format("plan: {} segment(s), {} kernel(s), {} alias\n", segments.size(), kernelCount(),
                                 aliasCount());
  if (!device.empty()) text += fmt::format("device: {}\n", device);
  if (reused) {
    text += fmt::format("segmented for other sizes of the same shape class, {} (its refusals, cuts and bookending "
                        "are theirs); every segment's scheduler takes it at these\n", segmented_for);
  }
  text += fmt::format("  {:<3} {:<6} {:<16} {:<9} {:<22} {:<22} {}\n", "id", "kind", "scheduler", "vectorize", "inputs",
                      "outputs", "ops");
  for (const Segment& s : segments) {
    text += fmt::format("  {:<3} {:<6} {:<16} {:<9} {:<22} {:<22} {}\n", s.id, braze::toString(s.kind),
                        schedulerName(s), s.vectorize ? fmt::format("{}", *s.vectorize) : "-", names(s.inputs),
                        names(s.outputs), opNames(s.exprs));
    if (!s.heuristics.empty()) text += fmt::format("        heuristics: {}\n", s.heuristics);
    if (!s.kernels_lowered_for.empty()) text += fmt::format("        kernels: {}\n", s.kernels_lowered_for);
    for (const auto& [kind, reason] : s.refusals) {
      text += fmt::format("        {} refused: {}\n", braze::toString(kind), reason);
    }
  }
  if (!edges.empty()) text += "cuts:\n";
  for (const SegmentEdge& e : edges) {
    text += fmt::format("  {} -> {} via {}: {} ({})\n", e.producer, e.consumer, e.tensor->name(),
                        braze::toString(e.reason), e.detail);
  }
  text += bookending.toString();
  return text;
}

std::string SegmentedFusion::toDot() const {
  auto quote = [](std::string s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  };
  std::string dot = "digraph plan {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (const Val* in : fusion->inputs()) {
    dot += fmt::format("  {} [shape=ellipse, label=\"{}\"];\n", in->name(), in->name());
  }
  for (const Segment& s : segments) {
    const bool alias = s.kind == SegmentKind::Alias;
    dot += fmt::format("  seg{} [label=\"segment {}: {}\\n{}\", style={}];\n", s.id, s.id,
                       alias ? "alias (views)" : "kernel " + schedulerName(s), quote(opNames(s.exprs)),
                       alias ? "dashed" : "solid");
    for (const Val* in : s.inputs) {
      if (in->isFusionInput()) dot += fmt::format("  {} -> seg{};\n", in->name(), s.id);
    }
  }
  for (const SegmentEdge& e : edges) {
    dot += fmt::format("  seg{} -> seg{} [label=\"{}: {}\"];\n", e.producer, e.consumer, e.tensor->name(),
                       braze::toString(e.reason));
  }
  for (const Val* out : fusion->outputs()) {
    dot += fmt::format("  out_{} [shape=ellipse, label=\"{} (output)\"];\n", out->name(), out->name());
    if (const Segment* s = producerOf(out)) dot += fmt::format("  seg{} -> out_{};\n", s->id, out->name());
    if (out->isFusionInput()) dot += fmt::format("  {} -> out_{};\n", out->name(), out->name());
  }
  return dot + "}\n";
}

}  // namespace braze
