#include "exec/pipeline.h"
#include "exec/segment_kernel_source.h"

#include "ir/verifier.h"
#include "kernel/printer.h"
#include "kernel/verifier.h"
#include "passes/bind_shapes.h"
#include "passes/mark_aliases_prepare.h"
#include "segmenter/in_place_copies.h"
#include "segmenter/segment_views.h"
#include "segmenter/segmenter.h"
#include "segmenter/verify_plan.h"
#include "scheduler/copy_kernel.h"
#include "scheduler/scheduler.h"
#include "codegen/source_emitter.h"
#include "support/dump.h"
#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <unordered_map>

namespace braze {

void dumpAfter(std::string_view step, const std::function<std::string()>& make_text) {
  if (!dumpEnabledAfter(step)) return;
  const std::string text = make_text();
  std::fprintf(stderr, "== after %.*s ==\n%s", static_cast<int>(step.size()), step.data(), text.c_str());
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stderr);
}

namespace {

// The device's description each lowered plan shows: formatted once per device a thread plans for, since
// a new input signature is lowered on the execute that meets it.
const std::string& deviceDescription(const DeviceInfo& device) {
  thread_local std::optional<std::pair<DeviceInfo, std::string>> last;
  if (!last || !(last->first == device)) last.emplace(device, device.toString());
  return last->second;
}

}  // namespace

SegmentedFusion planSegments(const Fusion& fusion, const std::vector<HostValue>& inputs, const PlanOptions& options) {
  if (verifiersEnabled()) verifyFusion(fusion);
  // Passes edit a copy (the user's fusion stays as defined), made only where bookending may cut: other
  // plans read the fusion itself, when it is shared (a FusionCache's).
  std::shared_ptr<Fusion> edited;
  std::shared_ptr<const Fusion> prepared = fusion.weak_from_this().lock();
  if (prepared == nullptr || bookendingMayEdit(fusion, options.bookend)) {
    edited = std::make_shared<Fusion>(fusion);
    prepared = edited;
  }
  BoundShapes bound = bindShapes(*prepared, inputs);
  dumpAfter("bind", [&] { return bound.toString(*prepared); });

  BookendReport report;
  report.policy = options.bookend;
  // Output chains first: their decisions do not depend on the kernels.
  if (edited != nullptr) markOutputChains(*edited, bound, options.bookend, report);
  if (verifiersEnabled()) verifyFusion(*prepared);
  dumpAfter("bookend-outputs", [&] { return prepared->toString(); });

  SegmentedFusion plan = segmentFusion(prepared, bound);
  dumpAfter("segment", [&] { return plan.toString(); });

  // Input chains need the kernels (the double-read rule), so they are decided on a first plan.
  std::unordered_map<const Expr*, int64_t> kernel_of;
  for (const Segment& s : plan.segments) {
    for (const Expr* e : s.exprs) kernel_of[e] = s.id;
  }
  const auto kernelOf = [&](const Expr* e) { return kernel_of.count(e) ? kernel_of.at(e) : -1; };
  const std::vector<SegmentCut> cuts = decideInputChains(*prepared, bound, options.bookend, kernelOf, report);
  if (!cuts.empty()) {
    BRAZE_ASSERT(edited != nullptr, "bookending cut an input chain of a fusion it expected to leave as defined");
    insertSegmentCuts(*edited, bound, cuts);
    plan = segmentFusion(prepared, bound);
  }
  plan.bookending = std::move(report);
  plan.segmented_for = segmentedForText(*prepared, plan.bound);
  // Kernels run on the reference write no inputs: their updates are copied after them.
  if (!options.kernels_on_reference) plan.written_in_place = updatesWrittenByKernels(plan);
  if (verifiersEnabled()) verifyPlan(plan);
  dumpAfter("bookend-inputs", [&] { return plan.toString(); });
  if (dumpEnabled("segments")) std::fprintf(stderr, "%s", plan.toString().c_str());
  return plan;
}

namespace {

// Under the verifiers: the kernels a source gives a segment are the code the segment's own lowering makes
// with the same heuristics (a kernel lowered for other sizes must not name the sizes that differ).
void verifyGivenCode(const Segment& segment, scheduler::SegmentLowering& lowering,
                     const SegmentKernelSource::Given& given) {
  const std::vector<kernel::Kernel> own = lowering.lowerAll(given.heuristics);
  BRAZE_ASSERT(own.size() == given.digests.size(), "segment {}: {} kernels given, its own lowering makes {}",
               segment.id, given.digests.size(), own.size());
  for (size_t i = 0; i < own.size(); ++i) {
    BRAZE_ASSERT(kernel::codeDigest(own[i]) == given.digests[i],
                 "segment {}: kernel {} ({}) is not the code its own lowering makes", segment.id, own[i].name,
                 given.lowered_for);
  }
}

}  // namespace

namespace {

// A kernel's grid is its scheduler's choice from the sizes: sizes past what one launch's grid covers
// (far more elements than a device holds, from expanded or huge requested shapes) are the caller's.
void checkGridFits(const kernel::Kernel& k, const Segment& segment) {
  // A negative extent is one whose arithmetic overflowed: a count still larger.
  if (k.grid[0] >= 0 && k.grid[1] >= 0 && k.grid[0] <= 2147483647 && k.grid[1] <= 65535) return;
  std::vector<std::string> outputs;  // named only when it fails
  for (const Val* out : segment.outputs) outputs.push_back(out->name());
  throwError(ErrorKind::Value, __FILE__, __LINE__,
             fmt::format("segment {} (writing {}): its kernel {} would need more blocks than one launch holds "
                         "(2^31-1 x 65535): the tensors are too large",
                         segment.id, fmt::join(outputs, ", "), k.name));
}

}  // namespace

LoweredPlan lowerPlan(SegmentedFusion plan, const DeviceInfo& device, SegmentKernelSource* source) {
  LoweredPlan lowered{std::move(plan), {}, {}, {}, {}};
  struct FollowUpKernel {
    size_t segment_kernel = 0;
    kernel::Kernel kernel;
    std::optional<kernel::CodeDigest> digest;
  };
  std::vector<FollowUpKernel> follow_ups;  // appended after the copies
  // Each given kernel's digest, which the verifiers check.
  const auto givenDigest = [](const kernel::Kernel& k, const SegmentKernelSource::Given& given, size_t i) {
    BRAZE_ASSERT(!verifiersEnabled() || kernel::codeDigest(k) == given.digests.at(i),
                 "kernel {} was given with the digest of another", k.name);
    return std::optional<kernel::CodeDigest>(given.digests.at(i));
  };
  lowered.plan.device = deviceDescription(device);
  for (Segment& segment : lowered.plan.segments) {
    if (segment.kind != SegmentKind::Kernel || !segment.scheduler) {
      lowered.kernels.emplace_back();
      lowered.digests.emplace_back();
      continue;
    }
    const scheduler::SegmentToLower to_lower = segmentToLower(lowered.plan, segment);
    scheduler::SegmentLowering lowering(to_lower, device);
    // The device's say first: a segment it has no kernel for runs where the reference can run it.
    if (std::optional<std::string> why = lowering.refusal()) {
      segment.refusals.emplace_back(*segment.scheduler, std::move(*why));
      segment.scheduler.reset();
      for (const Val* out : segment.outputs) lowered.plan.written_in_place.erase(out);  // copied after it
      lowered.kernels.emplace_back();
      lowered.digests.emplace_back();
      continue;
    }
    std::optional<SegmentKernelSource::Given> given =
        source != nullptr ? source->kernelsFor(segment, lowering) : std::nullopt;
    if (given && verifiersEnabled()) verifyGivenCode(segment, lowering, *given);
    const SegmentHeuristics heuristics = given ? given->heuristics : lowering.heuristics();
    dumpAfter("heuristics", [&] { return fmt::format("segment {}: {}", segment.id, heuristics.toString()); });
    kernel::Kernel k = given ? std::move(given->kernels.front()) : lowering.lower(heuristics);
    std::vector<kernel::Kernel> next_kernels;
    if (given) {
      next_kernels.assign(std::make_move_iterator(given->kernels.begin() + 1),
                          std::make_move_iterator(given->kernels.end()));
      segment.kernels_lowered_for = std::move(given->lowered_for);
    } else {
      next_kernels = lowering.takeFollowUps();
    }
    checkGridFits(k, segment);
    if (verifiersEnabled()) kernel::verifyKernel(k);
    // The plan shows what the heuristics chose.
    segment.vectorize = k.vectorize;
    segment.heuristics = kernel::launchSummary(k);
    dumpAfter("lower", [&] { return kernel::printKernel(k); });
    if (dumpEnabled("heuristics")) std::fprintf(stderr, "%s: %s\n", k.name.c_str(), segment.heuristics.c_str());
    const size_t s = lowered.kernels.size();
    lowered.digests.push_back(given ? givenDigest(k, *given, 0) : std::nullopt);
    lowered.kernels.emplace_back(std::move(k));
    for (size_t f = 0; f < next_kernels.size(); ++f) {
      kernel::Kernel& next = next_kernels[f];
      ++segment.follow_up_kernels;
      checkGridFits(next, segment);
      if (verifiersEnabled()) kernel::verifyKernel(next);
      dumpAfter("lower", [&] { return kernel::printKernel(next); });
      std::optional<kernel::CodeDigest> digest = given ? givenDigest(next, *given, f + 1) : std::nullopt;
      follow_ups.push_back({s, std::move(next), digest});
    }
  }
  lowered.copies = inPlaceCopies(lowered.plan);
  for (size_t i = 0; i < lowered.copies.size(); ++i) {
    const InPlaceCopy& copy = lowered.copies[i];
    kernel::Kernel k = scheduler::lowerCopyKernel(fmt::format("braze_copy{}", i), copy.value->dtype(), copy.from,
                                                  copy.to, device);
    if (verifiersEnabled()) kernel::verifyKernel(k);
    dumpAfter("lower", [&] { return kernel::printKernel(k); });
    lowered.kernels.emplace_back(std::move(k));
    lowered.digests.emplace_back();
  }
  for (FollowUpKernel& f : follow_ups) {
    lowered.follow_ups.push_back({f.segment_kernel, lowered.kernels.size()});
    lowered.kernels.emplace_back(std::move(f.kernel));
    lowered.digests.push_back(f.digest);
  }
  return lowered;
}

bool launchesKernel(const std::optional<kernel::Kernel>& k, const PlanOptions& options) {
  return k && k->grid[0] * k->grid[1] != 0 && !options.kernels_on_reference;
}

EmittedPlan emitPlan(LoweredPlan plan, const DeviceInfo& target, const PlanOptions& options) {
  EmittedPlan emitted{std::move(plan), options, {}};
  std::string dump;
  for (const std::optional<kernel::Kernel>& k : emitted.lowered.kernels) {
    if (!launchesKernel(k, options)) {
      emitted.kernels.emplace_back();
      continue;
    }
    EmittedKernel e{codegen::emitSource(*k, codegen::dialectFor(target)),
                    device::kernelCompileOptions(kernel::compileArch(*k, target.arch()))};
    if (dumpEnabled("after:emit")) dump += fmt::format("// {} ({})\n{}", k->name, e.options.arch, e.source);
    emitted.kernels.emplace_back(std::move(e));
  }
  dumpAfter("emit", [&] { return dump; });
  return emitted;
}

CompiledPlan compilePlan(EmittedPlan plan, device::DeviceOps& ops) {
  std::vector<device::KernelImage> images;
  std::vector<size_t> segments;  // the segment of each image
  for (size_t s = 0; s < plan.kernels.size(); ++s) {
    if (!plan.kernels[s]) continue;
    const kernel::Kernel& k = *plan.lowered.kernels[s];
    images.push_back({&k, {plan.kernels[s]->source, k.name, plan.kernels[s]->options}, k.shared_bytes});
    segments.push_back(s);
  }
  const std::vector<device::KernelHandle> loaded = ops.load(images);
  CompiledPlan compiled{std::move(plan.lowered), plan.options, {}};
  compiled.kernels.resize(plan.kernels.size());
  for (size_t i = 0; i < loaded.size(); ++i) {
    compiled.kernels[segments[i]] = LoadedKernel{loaded[i], compiled.lowered.digestOf(segments[i])};
  }
  return compiled;
}

LoweredPlan planAndLower(const Fusion& fusion, const std::vector<HostValue>& inputs, const ExecuteOptions& options) {
  return lowerPlan(planSegments(fusion, inputs, options.plan), options.device);
}

}  // namespace braze
