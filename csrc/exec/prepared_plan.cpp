#include "exec/prepared_plan.h"

#include "support/error.h"
#include "support/thread_scratch.h"
#include "reference/evaluator.h"
#include "codegen/source_emitter.h"
#include "segmenter/in_place_copies.h"
#include "segmenter/segment_views.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace braze::exec {
namespace {

// Where each zeroed workspace starts in the zeroed scratch: apart by whole cache lines.
constexpr size_t kZeroedAlignment = 128;

// Runs a segment's exprs on the reference evaluator: it sees only its inputs and the bound scalars in
// `values`, and leaves its outputs there as fresh row-major tensors, as a kernel would write them.
void runSegmentOnReference(const Segment& segment, std::unordered_map<const Val*, HostValue>& values) {
  std::unordered_map<const Val*, HostValue> local;
  for (const Val* in : segment.inputs) local.emplace(in, values.at(in));
  for (const Expr* e : segment.exprs) {
    std::vector<const HostValue*> operands;
    for (const Val* in : e->inputs()) {
      auto it = in->isScalar() ? values.find(in) : local.find(in);
      BRAZE_ASSERT(it != (in->isScalar() ? values.end() : local.end()), "segment {}: {} reads {}, which it has no "
                   "value for", segment.id, e->name(), in->name());
      operands.push_back(&it->second);
    }
    std::vector<HostValue> results = evaluateExpr(*e, operands);
    for (size_t i = 0; i < results.size(); ++i) local.insert_or_assign(e->output(i), std::move(results[i]));
  }
  for (const Val* out : segment.outputs) {
    values.insert_or_assign(out, std::get<HostTensor>(local.at(out)).contiguous());
  }
}


// A host stand-in for a device tensor: planning reads sizes, strides and the pointer's alignment,
// never the data, so the device address itself is what it is given.
HostValue planningValue(const DeviceValue& v) {
  if (const auto* t = std::get_if<DeviceTensor>(&v)) {
    return HostTensor::wrap(reinterpret_cast<void*>(static_cast<uintptr_t>(t->data)), t->dtype, t->sizes, t->strides);
  }
  return std::get<ScalarValue>(v);
}

// The value of a 0-d CPU tensor input, read from its host memory.
ScalarValue cpuScalarValue(const DeviceTensor& t) {
  const HostTensor host = HostTensor::wrap(reinterpret_cast<void*>(static_cast<uintptr_t>(t.data)), t.dtype, {}, {});
  if (isFloating(t.dtype)) return host.readDouble(0);
  if (t.dtype == DataType::Bool) return host.readInt(0) != 0;
  return host.readInt(0);
}

size_t bytesOf(const StridedLayout& layout, DataType dtype) {
  return static_cast<size_t>(bufferBytes(layout.numel(), dtype));
}

}  // namespace

LoweredPlan planForDevice(const Fusion& fusion, const std::vector<DeviceValue>& inputs,
                                   const PlanOptions& options, const DeviceInfo& device) {
  return planAndLower(fusion, planningValues(inputs), {options, device});
}

std::vector<HostValue> planningValues(const std::vector<DeviceValue>& inputs) {
  std::vector<HostValue> host;
  host.reserve(inputs.size());
  for (const DeviceValue& v : inputs) host.push_back(planningValue(v));
  return host;
}

int32_t PreparedPlan::addSlot(Slot slot) {
  slots_.push_back(slot);
  return static_cast<int32_t>(slots_.size() - 1);
}

PreparedPlan::Binding PreparedPlan::bindingOf(const Val* val,
                                              const std::unordered_map<const Val*, int32_t>& slot_of) const {
  // Where the tensor's elements live: its own buffer, or (a view) the buffer of what it views.
  const scheduler::SegmentInputView view = segmentInputView(compiled_.plan, val);
  auto it = slot_of.find(view.storage);
  BRAZE_ASSERT(it != slot_of.end(), "{} is read before anything writes it", view.storage->name());
  return {it->second, val, val->dtype(), view.layout.layout};
}

std::vector<PreparedPlan::Launch::InputWord> PreparedPlan::inputWordsOf(const kernel::Kernel& k) const {
  std::vector<Launch::InputWord> words;
  const auto& inputs = compiled_.plan.fusion->inputs();
  for (size_t w = 0; w < k.arguments.size(); ++w) {
    if (k.arguments[w].input == nullptr) continue;
    const auto at = std::find(inputs.begin(), inputs.end(), k.arguments[w].input);
    BRAZE_ASSERT(at != inputs.end(), "kernel {} argument {} names no fusion input", k.name, k.arguments[w].name);
    words.push_back({w, static_cast<size_t>(at - inputs.begin()), k.arguments[w], (*at)->isTensor()});
  }
  return words;
}

namespace {

// The bytes [first, last] a tensor's elements span; nothing for an empty tensor.
std::optional<std::pair<DevicePtr, DevicePtr>> byteSpan(const DeviceTensor& t) {
  int64_t low = 0, high = 0;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] == 0) return std::nullopt;
    (t.strides[d] < 0 ? low : high) += (t.sizes[d] - 1) * t.strides[d];
  }
  const int64_t item = sizeOf(t.dtype);
  return std::make_pair(t.data + static_cast<DevicePtr>(low * item), t.data + static_cast<DevicePtr>((high + 1) * item - 1));
}

// Whether the byte ranges two tensors on the same device span overlap (interleaved tensors, even and odd
// columns, overlap so without an element in common: refused too, as the checks cannot tell cheaply).
bool overlap(const DeviceTensor& a, const DeviceTensor& b) {
  if (a.device != b.device) return false;
  const auto span_a = byteSpan(a), span_b = byteSpan(b);
  return span_a && span_b && !(span_a->second < span_b->first || span_b->second < span_a->first);
}

}  // namespace

size_t PreparedPlan::inputPosition(const Val* input) const {
  const auto& ins = compiled_.plan.fusion->inputs();
  const auto at = std::find(ins.begin(), ins.end(), input);
  BRAZE_ASSERT(at != ins.end(), "{} is not an input of the fusion", input->name());
  return static_cast<size_t>(at - ins.begin());
}

void PreparedPlan::checkWrittenInputsOverlapNothing(const std::vector<DeviceValue>& inputs) const {
  for (const WrittenInput& entry : written_inputs_) {
    const size_t w = entry.input;
    const auto& written = std::get<DeviceTensor>(inputs[w]);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto* t = std::get_if<DeviceTensor>(&inputs[i]);
      if (i == w || t == nullptr) continue;
      // The same tensor passed again, read element for element where the one written is: fine.
      if (t->data == written.data && t->strides == written.strides && t->sizes == written.sizes &&
          t->dtype == written.dtype &&
          std::find(entry.may_be_same.begin(), entry.may_be_same.end(), i) != entry.may_be_same.end()) {
        continue;
      }
      BRAZE_CHECK(!overlap(*t, written),
                  "input {} ({}) lies in the memory range of input {} ({}), which the fusion updates in place: its "
                  "kernel writes it while input {} may still be read; pass a copy of one of them",
                  i, compiled_.plan.fusion->inputs()[i]->name(), w, compiled_.plan.fusion->inputs()[w]->name(), i);
    }
  }
}

void PreparedPlan::checkCopiedInputsOverlapNoUpdate(const std::vector<DeviceValue>& inputs) const {
  for (size_t c : copied_inputs_) {
    for (size_t v : viewed_inputs_) {
      BRAZE_CHECK(!overlap(std::get<DeviceTensor>(inputs[v]), std::get<DeviceTensor>(inputs[c])),
                  "input {} ({}) lies in the memory range of input {} ({}), which the fusion updates in place "
                  "after its kernels: an output that views input {} would show the new values, not the ones it is "
                  "computed from; pass a copy of one of them",
                  v, compiled_.plan.fusion->inputs()[v]->name(), c, compiled_.plan.fusion->inputs()[c]->name(), v);
    }
    for (size_t u : updated_inputs_) {
      if (u == c) continue;
      const size_t first = std::min(u, c), second = std::max(u, c);
      BRAZE_CHECK(!overlap(std::get<DeviceTensor>(inputs[first]), std::get<DeviceTensor>(inputs[second])),
                  "input {} ({}) lies in the memory range of input {} ({}), and the fusion updates both in place: "
                  "an element they share could not hold both new values; pass a copy of one of them",
                  first, compiled_.plan.fusion->inputs()[first]->name(), second,
                  compiled_.plan.fusion->inputs()[second]->name());
    }
  }
}

void PreparedPlan::checkCpuScalars(const std::vector<DeviceValue>& inputs) const {
  if (host_memory_) return;  // the simulator's tensors are all in host memory
  for (size_t i : cpu_scalar_inputs_) {
    const auto* t = std::get_if<DeviceTensor>(&inputs[i]);
    BRAZE_CHECK(t == nullptr || t->device < 0,
                "input {}: {} is defined as a CPU scalar (define_tensor(is_cpu=True)) but is on cuda:{}: pass a 0-d "
                "CPU tensor, or define it without is_cpu",
                i, compiled_.plan.fusion->inputs()[i]->name(), t == nullptr ? 0 : t->device);
  }
}

PreparedPlan::PreparedPlan(CompiledPlan compiled, int device_ordinal, bool host_memory)
    : compiled_(std::move(compiled.lowered)), device_ordinal_(device_ordinal), host_memory_(host_memory) {
  const SegmentedFusion& plan = compiled_.plan;
  std::unordered_map<const Val*, int32_t> slot_of;
  int32_t index_errors_slot = -1;  // one for every kernel that checks index values
  for (size_t i = 0; i < plan.fusion->inputs().size(); ++i) {
    const Val* in = plan.fusion->inputs()[i];
    if (in->isTensor()) slot_of[in] = addSlot({SlotKind::Input, static_cast<int64_t>(i)});
    if (in->isTensor() && in->asTensor()->isCpu()) cpu_scalar_inputs_.push_back(i);
  }
  for (size_t s = 0; s < plan.segments.size(); ++s) {
    const Segment& segment = plan.segments[s];
    if (segment.kind == SegmentKind::Alias) continue;  // views: resolved where kernels and outputs read them
    if (!compiled_.kernels[s] || compiled.options.kernels_on_reference) {
      BRAZE_CHECK_KIND(ErrorKind::Runtime, host_memory,
                       "segment {} ({}) has no GPU kernel: no scheduler accepts it ({}); run this fusion with host "
                       "(numpy) inputs, on the CPU",
                       segment.id, segment.exprs.empty() ? "" : opName(segment.exprs.front()->kind()),
                       segment.refusals.empty() ? "no reason given" : segment.refusals.back().second);
      HostStep step{static_cast<int64_t>(s), {}, {}};
      for (const Val* in : segment.inputs) {
        if (in->isTensor()) step.reads.push_back(bindingOf(in, slot_of));
      }
      for (const Val* out : segment.outputs) {
        const StridedLayout layout = plan.bound.allocatedLayout(out);
        slot_of[out] = addSlot({SlotKind::Buffer, -1, bytesOf(layout, out->dtype())});
        step.writes.push_back({slot_of[out], out, out->dtype(), layout});
      }
      Launch launch;
      launch.host_step = static_cast<int32_t>(host_steps_.size());
      host_steps_.push_back(std::move(step));
      launches_.push_back(std::move(launch));
      continue;
    }
    std::unordered_map<std::string, int32_t> shared_workspaces;  // this segment's, by name
    addKernelLaunch(compiled, s, slot_of, index_errors_slot, shared_workspaces);
    for (const LoweredPlan::FollowUp& next : compiled_.follow_ups) {
      if (next.segment == s) addKernelLaunch(compiled, next.kernel, slot_of, index_errors_slot,
                                             shared_workspaces);
    }
  }
  for (const auto& [value, input] : plan.written_in_place) {
    WrittenInput written{inputPosition(input), {}};
    for (const Val* other : inputsThatMayBeTheUpdatedInput(plan, value, input)) {
      written.may_be_same.push_back(inputPosition(other));
    }
    written_inputs_.push_back(std::move(written));
    updated_inputs_.push_back(written_inputs_.back().input);
  }
  const std::unordered_map<const Val*, Binding> saved = addInPlaceCopies(compiled, slot_of);
  updated_inputs_.insert(updated_inputs_.end(), copied_inputs_.begin(), copied_inputs_.end());
  if (!host_steps_.empty()) {  // what the reference reads for the segments the host runs
    for (const auto& val : plan.fusion->vals()) {
      if (!val->isScalar() || !plan.bound.hasScalar(val.get())) continue;
      scalars_.emplace(val.get(), plan.bound.scalarOf(val.get()));
    }
  }
  for (size_t i = 0; i < plan.fusion->outputs().size(); ++i) {
    const Val* out = plan.fusion->outputs()[i];
    const Fusion::OutputUse use = plan.fusion->outputUse(i);
    if (use == Fusion::OutputUse::WrittenIntoInput) continue;  // like nvFuser, not returned
    Output o;
    if (out->isScalar()) {
      o.scalar = plan.bound.scalarOf(out);
      outputs_.push_back(std::move(o));
      continue;
    }
    // The same value added again as a plain output: the input it updated, itself.
    const bool updated_input = use == Fusion::OutputUse::UpdatedInput;
    const Val* value = updated_input ? plan.fusion->outputAliases().at(const_cast<Val*>(out)) : out;
    // A saved copy of the input is its value before the update, which only a plain output of it shows.
    const Binding where = !updated_input && saved.count(value) != 0 ? saved.at(value) : bindingOf(value, slot_of);
    BRAZE_CHECK(host_memory || cpuScalarInputOf(value) == nullptr,
                "output {} ({}) is a view of {}, a CPU scalar input (is_cpu=True): a GPU execute returns GPU tensors; "
                "compute the output (e.g. fd.ops.set of it) rather than return the scalar's own memory",
                i, out->name(), cpuScalarInputOf(value)->name());
    o.slot = where.slot;
    o.byte_offset = where.layout.offset * sizeOf(out->dtype());
    o.tensor.dtype = out->dtype();
    o.tensor.sizes = where.layout.sizes;
    o.tensor.strides = where.layout.strides;
    Slot& slot = slots_[o.slot];
    if (slot.kind == SlotKind::Buffer) {
      // A caller's allocator can provide the buffer when this output is all of it and the only one.
      const StridedLayout allocated = plan.bound.allocatedLayout(out);
      const bool whole = o.byte_offset == 0 && o.tensor.strides == allocated.strides &&
                         bytesOf(allocated, o.tensor.dtype) == slot.bytes;
      slot.sole_output = !slot.returned && whole ? static_cast<int32_t>(outputs_.size()) : -1;
      slot.returned = true;
    }
    if (slot.kind == SlotKind::Input) {
      const auto input = static_cast<size_t>(slot.input);
      if (std::find(updated_inputs_.begin(), updated_inputs_.end(), input) == updated_inputs_.end()) {
        viewed_inputs_.push_back(input);  // a view of an input no update writes
      }
    }
    outputs_.push_back(std::move(o));
  }
}

void PreparedPlan::addKernelLaunch(const CompiledPlan& compiled, size_t index,
                                   std::unordered_map<const Val*, int32_t>& slot_of, int32_t& index_errors_slot,
                                   std::unordered_map<std::string, int32_t>& shared_workspaces) {
  const kernel::Kernel& k = *compiled_.kernels[index];
  Launch launch;
  for (size_t t = 0; t < k.tensors.size(); ++t) {
    if (k.tensors[t].tma) launch.maps.push_back({t, &k.tensors[t]});
  }
  launch.shape = {k.grid, k.block, k.shared_bytes};
  for (const kernel::TensorParam& p : k.tensors) {
    if (p.index_errors) {
      if (index_errors_slot < 0) index_errors_slot = addSlot({SlotKind::IndexErrors});
      launch.slots.push_back(index_errors_slot);
    } else if (p.workspace) {
      auto [it, fresh] = shared_workspaces.try_emplace(p.name, -1);
      if (!p.shared || fresh) {
        const size_t bytes = bytesOf(p.layout, p.dtype);
        if (p.zeroed) {
          it->second = addSlot({SlotKind::Zeroed, -1, bytes, zeroed_bytes_});
          zeroed_bytes_ += (bytes + kZeroedAlignment - 1) / kZeroedAlignment * kZeroedAlignment;
        } else {
          it->second = addSlot({SlotKind::Workspace, -1, bytes});
        }
      } else {
        BRAZE_ASSERT(slots_[it->second].bytes == bytesOf(p.layout, p.dtype), "kernel {} reads workspace {} at "
                     "another size than the kernel that wrote it", k.name, p.name);
      }
      launch.slots.push_back(it->second);
    } else if (p.output && p.storage != nullptr && p.storage != p.val) {
      launch.slots.push_back(slot_of.at(p.storage));  // an update written into its input's memory
    } else if (p.output) {
      // A follow-up kernel writes outputs its segment's first kernel has a parameter for, but leaves alone.
      auto it = slot_of.find(p.val);
      const int32_t slot = it != slot_of.end() && p.val != nullptr && slots_[it->second].kind == SlotKind::Buffer
                               ? it->second
                               : addSlot({SlotKind::Buffer, -1, bytesOf(p.layout, p.dtype)});
      slot_of[p.val] = slot;
      launch.slots.push_back(slot);
    } else {
      auto it = slot_of.find(p.storage);
      BRAZE_ASSERT(it != slot_of.end(), "kernel {} reads {} before anything writes it", k.name, p.storage->name());
      launch.slots.push_back(it->second);
    }
  }
  // No block to run (a zero-size dim): its outputs exist (empty) but nothing is compiled or launched.
  if (k.grid[0] * k.grid[1] == 0) return;
  const LoadedKernel& loaded = *compiled.kernels[index];
  launched_kernels_.push_back({loaded.digest, loaded.function, k.summary});
  launch.function = loaded.function;
  launch.words = kernel::argumentWords(k);
  launch.input_words = inputWordsOf(k);
  max_params_ = std::max(max_params_, launch.params());
  total_maps_ += launch.maps.size();
  total_params_ += launch.params();
  launches_.push_back(std::move(launch));
}

void PreparedPlan::encodeMaps(const Launch& launch, DeviceOps& ops, const DevicePtr* pointers,
                              kernel::TensorMapBytes* maps, void** args) {
  for (size_t m = 0; m < launch.maps.size(); ++m) {
    const Launch::MapArg& map = launch.maps[m];
    ops.encodeTensorMap(kernel::tensorMapSpec(*map.param, pointers[map.tensor]), maps[m]);
    args[m] = &maps[m];
  }
}

std::unordered_map<const Val*, PreparedPlan::Binding> PreparedPlan::addInPlaceCopies(
    const CompiledPlan& compiled, std::unordered_map<const Val*, int32_t>& slot_of) {
  const SegmentedFusion& plan = compiled_.plan;
  std::unordered_map<const Val*, Binding> saved;  // outputs copied out before an input they view is written
  std::vector<Binding> written;                   // per copy: where it wrote
  for (size_t i = 0; i < compiled_.copies.size(); ++i) {
    const InPlaceCopy& copy = compiled_.copies[i];
    const Binding from = copy.staged >= 0 ? written[static_cast<size_t>(copy.staged)] : bindingOf(copy.value, slot_of);
    BRAZE_CHECK(host_memory_ || (cpuScalarInputOf(copy.value) == nullptr &&
                                 (copy.input == nullptr || !copy.input->asTensor()->isCpu())),
                "{} updates {} in place, and one of them is a CPU scalar input (is_cpu=True), which GPU kernels do not "
                "read or write as memory",
                copy.value->name(), copy.input == nullptr ? "a buffer" : copy.input->name());
    Binding to;
    if (copy.target == InPlaceCopy::Target::Input) {
      to = bindingOf(copy.input, slot_of);
      copied_inputs_.push_back(inputPosition(copy.input));
    } else {
      to = {addSlot({SlotKind::Buffer, -1, bytesOf(copy.to.layout, copy.value->dtype())}), copy.value,
            copy.value->dtype(), copy.to.layout};
      if (copy.target == InPlaceCopy::Target::SavedOutput) saved.emplace(copy.value, to);
    }
    written.push_back(to);
    const size_t k = plan.segments.size() + i;
    const std::optional<kernel::Kernel>& kernel = compiled_.kernels[k];
    if (kernel && kernel->grid[0] * kernel->grid[1] == 0) continue;  // nothing to copy
    Launch launch;
    if (!compiled.kernels[k]) {
      // No copy kernel was compiled (kernels run on the reference evaluator): the host copies.
      launch.host_step = static_cast<int32_t>(host_steps_.size());
      host_steps_.push_back({-1, {from}, {to}});
    } else {
      launch.shape = {kernel->grid, kernel->block, kernel->shared_bytes};
      launch.slots = {from.slot, to.slot};
      launch.words = kernel::argumentWords(*kernel);
      launch.function = compiled.kernels[k]->function;
      launched_kernels_.push_back({compiled.kernels[k]->digest, launch.function, kernel->summary});
      max_params_ = std::max(max_params_, launch.params());
      total_params_ += launch.params();
    }
    launches_.push_back(std::move(launch));
  }
  return saved;
}

void PreparedPlan::runHostStep(const HostStep& step, const std::vector<DevicePtr>& pointers,
                               const std::unordered_map<const Val*, HostValue>& scalars) const {
  auto tensorAt = [&](const Binding& b) {
    void* base = reinterpret_cast<void*>(static_cast<uintptr_t>(pointers[b.slot]));
    return HostTensor::wrap(base, b.dtype, b.layout.sizes, b.layout.strides).view(b.layout.sizes, b.layout.strides,
                                                                                   b.layout.offset);
  };
  if (step.segment < 0) {
    const HostTensor from = tensorAt(step.reads[0]);
    HostTensor to = tensorAt(step.writes[0]);
    forEachIndex(from.sizes(), [&](const std::vector<int64_t>& index) {
      if (isFloating(from.dtype())) {
        to.writeDouble(to.offsetOf(index), from.readDouble(from.offsetOf(index)));
      } else {
        to.writeInt(to.offsetOf(index), from.readInt(from.offsetOf(index)));
      }
    });
    return;
  }
  std::unordered_map<const Val*, HostValue> values = scalars;
  for (const Binding& b : step.reads) values.insert_or_assign(b.val, tensorAt(b));
  runSegmentOnReference(compiled_.plan.segments[step.segment], values);
  for (const Binding& b : step.writes) {
    const HostTensor& result = std::get<HostTensor>(values.at(b.val));
    std::memcpy(tensorAt(b).data(), result.data(), static_cast<size_t>(result.numel() * sizeOf(b.dtype)));
  }
}

std::vector<std::string> PreparedPlan::sourceCode(codegen::SourceDialect dialect) const {
  std::vector<std::string> sources;
  for (const auto& k : compiled_.kernels) {
    if (k) sources.push_back(codegen::emitSource(*k, dialect));
  }
  return sources;
}

std::vector<DeviceOutput> PreparedPlan::run(const std::vector<DeviceValue>& inputs, StreamHandle stream, DeviceOps& ops,
                                            const OutputAllocator* allocator, bool as_graph) const {
  std::vector<DeviceOutput> outputs;
  run(inputs, outputs, stream, ops, allocator, as_graph);
  return outputs;
}

namespace {
// `out` as a DeviceOutput{} is, its vectors' capacity kept for the sizes and strides written next.
void clearKeepingCapacity(DeviceOutput& out) {
  std::vector<int64_t> sizes = std::move(out.tensor.sizes);
  std::vector<int64_t> strides = std::move(out.tensor.strides);
  sizes.clear();
  strides.clear();
  out = DeviceOutput{};
  out.tensor.sizes = std::move(sizes);
  out.tensor.strides = std::move(strides);
}
}  // namespace

void PreparedPlan::run(const std::vector<DeviceValue>& inputs, std::vector<DeviceOutput>& outputs, StreamHandle stream,
                       DeviceOps& ops, const OutputAllocator* allocator, bool as_graph) const {
  if (!cpu_scalar_inputs_.empty()) checkCpuScalars(inputs);
  if (!written_inputs_.empty()) checkWrittenInputsOverlapNothing(inputs);
  if (!copied_inputs_.empty() && (updated_inputs_.size() > 1 || !viewed_inputs_.empty())) {
    checkCopiedInputsOverlapNoUpdate(inputs);
  }
  // Scratch reused by every run on this thread: after the first, binding allocates nothing. A run
  // entered again from inside the allocator (Python code that executes a fusion) gets its own.
  struct Scratch {
    std::vector<DevicePtr> pointers, values;
    std::vector<void*> args;
    std::vector<KernelLaunch> chain;
    std::vector<kernel::TensorMapBytes> maps;
    std::vector<std::shared_ptr<void>> owners;
    std::vector<char> external;  // not ours to free: the allocator's memory (the caller's), the zeroed scratch
    DeviceTensor spec;           // what the allocator is asked for
  };
  ThreadScratch<Scratch> lease;
  auto& [pointers, values, args, chain, maps, owners, external, spec] = lease.get();
  pointers.assign(slots_.size(), 0);
  owners.assign(slots_.size(), nullptr);
  external.assign(slots_.size(), 0);
  int device = device_ordinal_;
  size_t allocated = 0;  // slots [0, allocated) are bound: released again if a launch fails
  DevicePtr zeroed_scratch = 0;  // asked for at the first zeroed slot (0: none, the run zeroes its own)
  bool scratch_asked = false;
  try {
    for (; allocated < slots_.size(); ++allocated) {
      const Slot& slot = slots_[allocated];
      if (slot.kind == SlotKind::Input) {
        const auto& t = std::get<DeviceTensor>(inputs[slot.input]);
        pointers[allocated] = t.data;
        if (t.device >= 0) device = t.device;  // not a CPU scalar's -1
        continue;
      }
      if (slot.kind == SlotKind::IndexErrors) {
        pointers[allocated] = ops.indexErrorRecord().device;
        continue;
      }
      if (slot.kind == SlotKind::Zeroed) {
        if (!scratch_asked) zeroed_scratch = ops.zeroedScratch(zeroed_bytes_, stream);
        scratch_asked = true;
        if (zeroed_scratch != 0) {
          pointers[allocated] = zeroed_scratch + static_cast<DevicePtr>(slot.offset);
          external[allocated] = 1;
          continue;
        }
      }
      if (allocator != nullptr && slot.sole_output >= 0) {
        spec = outputs_[slot.sole_output].tensor;
        spec.device = device;  // the inputs' (input slots come first)
        pointers[allocated] = (*allocator)(static_cast<size_t>(slot.sole_output), spec);
        // Kernels store outputs with 16-byte vectors where the dtype and sizes allow.
        BRAZE_CHECK(pointers[allocated] % 16 == 0,
                    "the output allocator gave output {} the address {:#x}, which is not 16-byte aligned",
                    slot.sole_output, pointers[allocated]);
        if (pointers[allocated] != 0) {
          external[allocated] = 1;
          continue;
        }
      }
      pointers[allocated] = ops.allocate(slot.bytes, stream);
      if (slot.kind == SlotKind::Zeroed) {
        try {
          ops.zero(pointers[allocated], slot.bytes, stream);
        } catch (...) {
          ops.release(pointers[allocated], stream);  // not yet among the bound slots the handler below frees
          throw;
        }
      }
    }
    // Each kernel's arguments: pointers to 8-byte values (one per tensor, then the scalar words), at
    // `at` in the scratch arrays, then to its tensor maps, at `map_at` in theirs.
    auto bind = [&](const Launch& launch, size_t at, size_t map_at) {
      const size_t tensors = launch.slots.size();
      for (size_t p = 0; p < tensors; ++p) values[at + p] = pointers[launch.slots[p]];
      for (size_t w = 0; w < launch.words.size(); ++w) values[at + tensors + w] = static_cast<DevicePtr>(launch.words[w]);
      for (const Launch::InputWord& w : launch.input_words) {
        const ScalarValue value = w.cpu_tensor ? cpuScalarValue(std::get<DeviceTensor>(inputs[w.input]))
                                               : std::get<ScalarValue>(inputs[w.input]);
        values[at + tensors + w.word] = kernel::argumentWord(w.argument, value);
      }
      for (size_t p = 0; p < tensors + launch.words.size(); ++p) args[at + p] = &values[at + p];
      if (!launch.maps.empty()) encodeMaps(launch, ops, &values[at], &maps[map_at], &args[at + tensors + launch.words.size()]);
      return KernelLaunch{launch.function, launch.shape, &args[at], launch.params(), launch.maps.size()};
    };
    maps.resize(total_maps_);
    bool launched = false;
    if (as_graph && launches_.size() > 1 && host_steps_.empty()) {
      values.resize(total_params_);
      args.resize(total_params_);
      chain.clear();
      size_t at = 0, map_at = 0;
      for (const Launch& launch : launches_) {
        chain.push_back(bind(launch, at, map_at));
        at += chain.back().arg_count;
        map_at += launch.maps.size();
      }
      std::lock_guard<std::mutex> lock(graph_mutex_);
      launched = ops.launchGraph(graph_, chain, stream);
    }
    if (!launched) {
      values.resize(std::max(max_params_, values.size()));
      args.resize(values.size());
      std::shared_ptr<const std::unordered_map<const Val*, HostValue>> scalars;
      if (!host_steps_.empty()) {
        auto with_inputs = std::make_shared<std::unordered_map<const Val*, HostValue>>(scalars_);
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (const auto* v = std::get_if<ScalarValue>(&inputs[i])) {
            (*with_inputs)[compiled_.plan.fusion->inputs()[i]] = *v;
          }
        }
        scalars = std::move(with_inputs);
      }
      for (const Launch& launch : launches_) {
        if (launch.host_step >= 0) {
          // Runs when the stream gets to it, holding the plan (a cache may drop it meanwhile).
          ops.enqueueHost(stream, [plan = shared_from_this(), step = &host_steps_[launch.host_step], bound = pointers,
                                   scalars] { plan->runHostStep(*step, bound, *scalars); });
        } else {
          ops.launch(launch.function, launch.shape, bind(launch, 0, 0).args, stream);
        }
      }
    }
  } catch (...) {
    for (size_t i = 0; i < allocated; ++i) {
      if (owned(slots_[i]) && !external[i]) ops.release(pointers[i], stream);
    }
    // A kernel queued before the failure resets its counts; one that failed to launch never took them.
    // Zeroing the scratch again costs one memset and keeps a wrong guess about that from lasting.
    if (zeroed_scratch != 0) ops.spoilZeroedScratch(stream);
    throw;
  }
  outputs.resize(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Output& o = outputs_[i];
    DeviceOutput& out = outputs[i];
    clearKeepingCapacity(out);
    if (o.scalar) {
      out.scalar = o.scalar;
      continue;
    }
    out.tensor = o.tensor;
    out.tensor.data = pointers[o.slot] + static_cast<DevicePtr>(o.byte_offset);
    out.tensor.device = device;
    const Slot& slot = slots_[o.slot];
    if (slot.kind == SlotKind::Input) {
      out.alias_of = slot.input;
    } else if (external[o.slot]) {
      out.caller_allocated = true;
    } else {
      if (!owners[o.slot]) {
        // Freed on the stream it was allocated on (ordered after the kernels that wrote it, and after
        // whatever the caller queued there since), from whichever thread drops it last.
        const DevicePtr pointer = pointers[o.slot];
        DeviceOps* device_ops = &ops;
        owners[o.slot] = std::shared_ptr<void>(reinterpret_cast<void*>(static_cast<uintptr_t>(pointer)),
                                               [device_ops, pointer, stream](void*) {
                                                 try {
                                                   device_ops->release(pointer, stream);
                                                 } catch (...) {
                                                   // At exit the context may be gone: nothing to free then.
                                                 }
                                               });
      }
      out.owner = owners[o.slot];
    }
  }
  // Intermediates and workspaces go back to the pool after the launches that use them (stream order).
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (owned(slots_[i]) && !slots_[i].returned && !external[i]) ops.release(pointers[i], stream);
  }
  owners.assign(slots_.size(), nullptr);
}

}  // namespace braze::exec
