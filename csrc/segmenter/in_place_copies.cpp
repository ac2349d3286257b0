#include "segmenter/in_place_copies.h"

#include "segmenter/segment_views.h"
#include "support/error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <unordered_set>

namespace braze {

std::vector<InPlaceCopy> inPlaceCopies(const SegmentedFusion& plan) {
  const Fusion& fusion = *plan.fusion;
  std::vector<InPlaceCopy> copies;
  if (fusion.outputAliases().empty()) return copies;
  std::vector<const Val*> updated;
  for (const auto& [out, in] : fusion.outputAliases()) updated.push_back(in);
  const auto isUpdated = [&](const Val* storage) {
    return std::find(updated.begin(), updated.end(), storage) != updated.end();
  };
  const auto buffer = [](const std::vector<int64_t>& sizes) { return InputLayout{StridedLayout::rowMajor(sizes), 16}; };
  for (size_t i = 0; i < fusion.outputs().size(); ++i) {
    const Val* out = fusion.outputs()[i];
    if (!out->isTensor() || fusion.outputUse(i) != Fusion::OutputUse::Returned) continue;
    const scheduler::SegmentInputView view = segmentInputView(plan, out);
    if (!isUpdated(view.storage)) continue;
    const bool already = std::any_of(copies.begin(), copies.end(), [&](const InPlaceCopy& c) { return c.value == out; });
    if (!already) copies.push_back({InPlaceCopy::Target::SavedOutput, out, -1, nullptr, view.layout, buffer(view.layout.layout.sizes)});
  }
  std::vector<InPlaceCopy> writes;
  for (const auto& [out, in] : fusion.outputAliases()) {
    if (plan.written_in_place.count(out) != 0) continue;  // its kernel writes it
    const scheduler::SegmentInputView from = segmentInputView(plan, out);
    const InputLayout to = plan.bound.inputLayout(in);
    BRAZE_CHECK(from.layout.layout.sizes == to.layout.sizes, "output {} has shape [{}] but aliases input {} of shape [{}]",
                out->name(), fmt::join(from.layout.layout.sizes, ", "), in->name(), fmt::join(to.layout.sizes, ", "));
    const bool empty = std::find(to.layout.sizes.begin(), to.layout.sizes.end(), 0) != to.layout.sizes.end();
    for (size_t d = 0; d < to.layout.sizes.size() && !empty; ++d) {  // numpy gives an empty array 0 strides
      BRAZE_CHECK(to.layout.sizes[d] <= 1 || to.layout.strides[d] != 0,
                  "input {} is updated in place (add_output({}, alias_input={})) but its dim {} is expanded (size {}, "
                  "stride 0): its elements share memory, so they cannot hold different values",
                  in->name(), out->name(), in->name(), d, to.layout.sizes[d]);
    }
    InPlaceCopy write{InPlaceCopy::Target::Input, out, -1, in, from.layout, to};
    if (fusion.isInput(from.storage)) {
      write.staged = static_cast<int32_t>(copies.size());
      copies.push_back({InPlaceCopy::Target::Staged, out, -1, nullptr, from.layout, buffer(from.layout.layout.sizes)});
      write.from = copies.back().to;
    }
    writes.push_back(write);
  }
  copies.insert(copies.end(), writes.begin(), writes.end());
  return copies;
}

}  // namespace braze

namespace braze {
namespace {

// Whether `input` is read by its kernel (`producer`) alone, as itself, and no returned output or other
// update views it.
bool readOnlyByItsProducer(const SegmentedFusion& plan, const Segment& producer, const Val* input) {
  const Fusion& fusion = *plan.fusion;
  // Nothing returned views the input (it shows the old value).
  for (size_t i = 0; i < fusion.outputs().size(); ++i) {
    const Val* out = fusion.outputs()[i];
    if (!out->isTensor() || fusion.outputUse(i) != Fusion::OutputUse::Returned) continue;
    if (segmentInputView(plan, out).storage == input) return false;
  }
  // No update copies the input as it was (b <- a while a is updated): the copies run after the kernels.
  for (const auto& [out, in] : fusion.outputAliases()) {
    if (segmentInputView(plan, out).storage == input) return false;
  }
  // No other segment reads the input; the producer reads it only as itself.
  for (const Segment& s : plan.segments) {
    for (const Val* in : s.inputs) {
      if (in->isTensor() && segmentInputView(plan, in).storage == input && (&s != &producer || in != input)) return false;
    }
  }
  return true;
}

// Whether `value` is a scatter (or index_put_accumulate) into `input` itself in `producer`, a scan kernel,
// where nothing else there reads `input`: that kernel then writes only the entries into the input's
// memory, whose other elements already hold their values.
bool scattersIntoItself(const Segment& producer, const Val* value, const Val* input) {
  if (producer.scheduler != SchedulerKind::Scan) return false;
  const Expr* op = nullptr;
  for (const Expr* e : producer.exprs) {
    const auto& outputs = e->outputs();
    if (std::find(outputs.begin(), outputs.end(), value) != outputs.end()) op = e;
  }
  if (op == nullptr || opInfo(op->kind()).category != OpCategory::Scatter || op->input(0) != input) return false;
  for (const Expr* e : producer.exprs) {
    for (size_t i = 0; i < e->inputs().size(); ++i) {
      if (e->input(i) == input && (e != op || i != 0)) return false;  // the entries would read new values
    }
  }
  return true;
}

// Whether `value` (a new value of `input`) can be written into `input` by the kernel computing it.
bool writableByItsKernel(const SegmentedFusion& plan, const Val* value, const Val* input) {
  const Fusion& fusion = *plan.fusion;
  const std::vector<int64_t>& sizes = plan.bound.sizesOf(input);
  const StridedLayout& layout = plan.bound.inputLayout(input).layout;
  if (plan.bound.sizesOf(value) != sizes) return false;  // inPlaceCopies reports it
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1 && layout.strides[d] == 0) return false;  // expanded: inPlaceCopies reports it
  }
  if (input->asTensor()->isCpu()) return false;
  const Segment* producer = plan.producerOf(value);
  if (producer == nullptr || producer->kind != SegmentKind::Kernel || !producer->scheduler) return false;
  const bool scatter = scattersIntoItself(*producer, value, input);
  if (producer->scheduler != SchedulerKind::Pointwise && !scatter) return false;
  if (segmentInputView(plan, value).storage != value) return false;  // a view of something else
  int64_t updates = 0;
  for (const auto& [out, in] : fusion.outputAliases()) updates += in == input ? 1 : 0;
  if (updates != 1) return false;
  // Nothing returned, and no other segment, reads the new value's buffer.
  for (size_t i = 0; i < fusion.outputs().size(); ++i) {
    const Val* out = fusion.outputs()[i];
    if (out->isTensor() && fusion.outputUse(i) == Fusion::OutputUse::Returned &&
        segmentInputView(plan, out).storage == value) {
      return false;
    }
  }
  for (const Segment& s : plan.segments) {
    for (const Val* in : s.inputs) {
      if (in->isTensor() && segmentInputView(plan, in).storage == value) return false;
    }
  }
  return scatter ? readOnlyByItsProducer(plan, *producer, input) : readOnlyWhereTheUpdateIsComputed(plan, *producer, input, sizes);
}

}  // namespace

bool readOnlyWhereTheUpdateIsComputed(const SegmentedFusion& plan, const Segment& producer, const Val* input,
                                      const std::vector<int64_t>& sizes) {
  if (plan.bound.sizesOf(input) != sizes || !readOnlyByItsProducer(plan, producer, input)) return false;
  // In the producer, the input flows only through elementwise ops at its own shape: each element is
  // read where its new value is computed.
  std::unordered_set<const Val*> from_input{input};
  for (const Expr* e : producer.exprs) {
    const bool reads = std::any_of(e->inputs().begin(), e->inputs().end(),
                                   [&](const Val* v) { return from_input.count(v) != 0; });
    if (!reads) continue;
    if (!isElementwise(e->kind()) || plan.bound.sizesOf(e->output(0)) != sizes) return false;
    from_input.insert(e->outputs().begin(), e->outputs().end());
  }
  return true;
}

std::vector<const Val*> inputsThatMayBeTheUpdatedInput(const SegmentedFusion& plan, const Val* value, const Val* input) {
  const Fusion& fusion = *plan.fusion;
  std::vector<const Val*> may;
  const Segment* producer = plan.producerOf(value);
  if (producer == nullptr) return may;
  for (const Val* other : fusion.inputs()) {
    if (other == input || !other->isTensor()) continue;
    const bool updated = std::any_of(fusion.outputAliases().begin(), fusion.outputAliases().end(),
                                     [&](const auto& alias) { return alias.second == other; });
    if (!updated && readOnlyWhereTheUpdateIsComputed(plan, *producer, other, plan.bound.sizesOf(input))) {
      may.push_back(other);
    }
  }
  return may;
}

std::unordered_map<const Val*, const Val*> updatesWrittenByKernels(const SegmentedFusion& plan) {
  std::unordered_map<const Val*, const Val*> written;
  for (const auto& [out, in] : plan.fusion->outputAliases()) {
    if (writableByItsKernel(plan, out, in)) written.emplace(out, in);
  }
  return written;
}

}  // namespace braze
