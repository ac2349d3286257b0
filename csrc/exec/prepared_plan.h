// A fusion made ready to launch for one input signature: a compiled plan (exec/pipeline.h: planned,
// lowered, emitted and loaded once) with everything a launch needs decided up front (which buffer each
// kernel parameter binds to, what to allocate, which outputs are views of inputs). Running it binds
// pointers, allocates outputs and intermediates from the stream-ordered pool, and launches: no
// planning, no strings, no maps.
#pragma once

#include "codegen/source_preamble.h"
#include "exec/pipeline.h"
#include "device/device_ops.h"
#include "device/device_tensor.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace braze::exec {

using namespace device;  // exec runs plans through the device layer: its names are exec's vocabulary

// The host stand-ins planning reads for inputs on a device: their sizes, strides, pointer alignment and
// scalar values, never their data.
std::vector<HostValue> planningValues(const std::vector<DeviceValue>& inputs);
// The plan and kernels (lowered, not compiled) for inputs on a device.
LoweredPlan planForDevice(const Fusion& fusion, const std::vector<DeviceValue>& inputs,
                                   const PlanOptions& options, const DeviceInfo& device);

// A kernel a plan launches: what its source is known by (on the plan's device, which fixes the arch and
// so the compile options, plans with equal digests run the same loaded function), the function, and its
// heuristics' summary.
struct LaunchedKernel {
  kernel::CodeDigest digest;
  KernelHandle function = nullptr;
  std::string summary;
};

// Made with std::make_shared (host steps queued on a stream hold the plan).
class PreparedPlan : public std::enable_shared_from_this<PreparedPlan> {
 public:
  // Lays out the launches of a plan compiled for device `device_ordinal`. Steps without a kernel (a
  // segment no kernel scheduler accepts, which the reference evaluator runs) need a device whose memory
  // the host reaches (`host_memory`, DeviceOps::hostMemory): on a GPU they throw, naming the segment. Scalar outputs are known from the plan and come
  // back on any device.
  PreparedPlan(CompiledPlan compiled, int device_ordinal, bool host_memory);

  // Launches the kernels in order on `stream` for inputs with the signature it was prepared for.
  // Outputs a kernel writes are fresh pool allocations, or the allocator's memory where one is given
  // (for each output that is a whole buffer of its own); views of inputs come back as views. With
  // `as_graph`, a plan of several kernels launches them as one CUDA graph, made on the first such run
  // and updated (only the kernels whose pointers or arguments changed) on the later ones; one by one
  // where the driver has no graphs or the caller is capturing `stream`.
  std::vector<DeviceOutput> run(const std::vector<DeviceValue>& inputs, StreamHandle stream, DeviceOps& ops,
                                const OutputAllocator* allocator = nullptr, bool as_graph = false) const;
  // The same, the outputs written over `outputs` (resized to the plan's outputs): a caller that runs
  // again and again reuses the vectors in them.
  void run(const std::vector<DeviceValue>& inputs, std::vector<DeviceOutput>& outputs, StreamHandle stream,
           DeviceOps& ops, const OutputAllocator* allocator = nullptr, bool as_graph = false) const;

  const LoweredPlan& compiled() const { return compiled_; }
  // The source of each kernel in `dialect` (the plan's device compiles its own: HIP for an AMD GPU),
  // emitted again when asked (a plan per shape keeps no copy).
  std::vector<std::string> sourceCode(codegen::SourceDialect dialect) const;
  std::vector<std::string> cudaCode() const { return sourceCode(codegen::SourceDialect::Cuda); }
  const std::vector<LaunchedKernel>& launchedKernels() const { return launched_kernels_; }

 private:
  // IndexErrors: the device's index-error record (DeviceOps::indexErrorRecord), not allocated per run.
  // Zeroed: a workspace that must start zeroed, at `offset` in the stream's zeroed scratch
  // (DeviceOps::zeroedScratch), allocated and zeroed by the run only where the stream has none.
  enum class SlotKind : uint8_t { Input, Buffer, Workspace, IndexErrors, Zeroed };
  struct Slot {
    SlotKind kind = SlotKind::Buffer;
    int64_t input = -1;   // Input: the fusion input's index
    size_t bytes = 0;     // Buffer, Workspace, Zeroed
    size_t offset = 0;    // Zeroed
    bool returned = false;  // a fusion output's memory: owned by the caller after the run
    int32_t sole_output = -1;  // the output that is exactly this buffer (offset 0, row-major), if one is
  };
  // Memory a run allocates (and releases, unless it returns it).
  static bool owned(const Slot& slot) {
    return slot.kind == SlotKind::Buffer || slot.kind == SlotKind::Workspace || slot.kind == SlotKind::Zeroed;
  }
  struct Launch {
    KernelHandle function = nullptr;
    LaunchShape shape;
    std::vector<int32_t> slots;    // the slot each tensor parameter binds to
    std::vector<uint64_t> words;   // the scalar arguments after them (kernel::argumentWords)
    // Words that carry a scalar input of the fusion: each run passes that input's value of its own.
    struct InputWord {
      size_t word = 0;
      size_t input = 0;
      kernel::ScalarArgument argument;
      bool cpu_tensor = false;  // the input is a 0-d CPU tensor: its value is read from host memory
    };
    std::vector<InputWord> input_words;
    // The tensor parameters read through TMA: each run encodes their maps (kernel/tensor_map.h) for the
    // pointers bound to them and passes them after the words.
    struct MapArg {
      size_t tensor = 0;  // the parameter's position among the kernel's tensors
      const kernel::TensorParam* param = nullptr;
    };
    std::vector<MapArg> maps;
    size_t params() const { return slots.size() + words.size() + maps.size(); }
    int32_t host_step = -1;        // or: host_steps_[host_step], run on the host in stream order
  };
  // A tensor in a slot's memory: its layout in elements from the slot's address.
  struct Binding {
    int32_t slot = -1;
    const Val* val = nullptr;
    DataType dtype = DataType::Float;
    StridedLayout layout;
  };
  // A step without a kernel: a segment the reference evaluator runs (`segment` >= 0), or a copy of
  // reads[0] into writes[0] (an in-place copy, where kernels run on the reference evaluator).
  struct HostStep {
    int64_t segment = -1;
    std::vector<Binding> reads, writes;
  };
  struct Output {
    int32_t slot = -1;
    int64_t byte_offset = 0;
    DeviceTensor tensor;  // dtype, sizes and strides (data is filled per run)
    std::optional<ScalarValue> scalar;  // a scalar output: known when planned (scalars are in the signature)
  };

  int32_t addSlot(Slot slot);
  // Encodes a launch's tensor maps for the pointers bound to its tensor parameters (`pointers`, in their
  // order) into `maps`, and points its map parameters (`args`, after its words) at them. Kept out of
  // run's inlined code: most launches have none.
  [[gnu::noinline]] static void encodeMaps(const Launch& launch, DeviceOps& ops, const DevicePtr* pointers,
                                           kernel::TensorMapBytes* maps, void** args);
  // The launch of kernel `index` of the plan (a segment's, or a follow-up's): its parameters bound to slots
  // (outputs and workspaces added), its arguments packed. A shared workspace binds by name within the segment.
  void addKernelLaunch(const CompiledPlan& compiled, size_t index,
                       std::unordered_map<const Val*, int32_t>& slot_of, int32_t& index_errors_slot,
                       std::unordered_map<std::string, int32_t>& shared_workspaces);
  // The words of kernel `k`'s arguments that carry the fusion's scalar inputs (and CPU scalars).
  std::vector<Launch::InputWord> inputWordsOf(const kernel::Kernel& k) const;
  // Refuses, naming the input, a CPU scalar input (is_cpu=True) given as a GPU tensor, where kernels
  // would read host memory.
  void checkCpuScalars(const std::vector<DeviceValue>& inputs) const;
  // Refuses, naming both, an input whose memory overlaps an input a kernel writes in place
  // (LoweredPlan's written_in_place): that kernel would read elements another thread already wrote.
  void checkWrittenInputsOverlapNothing(const std::vector<DeviceValue>& inputs) const;
  // Refuses, naming both, two updated inputs whose memory overlaps where one is written by a copy after
  // the kernels (which update the shared elements end with would depend on the order of the writes), and
  // an input a returned output views whose memory such a copy writes (the view would show new values).
  void checkCopiedInputsOverlapNoUpdate(const std::vector<DeviceValue>& inputs) const;
  Binding bindingOf(const Val* val, const std::unordered_map<const Val*, int32_t>& slot_of) const;
  // Where `input` is among the fusion's inputs.
  size_t inputPosition(const Val* input) const;
  // `scalars`: every bound scalar, with the run's values of the scalar inputs.
  void runHostStep(const HostStep& step, const std::vector<DevicePtr>& pointers,
                   const std::unordered_map<const Val*, HostValue>& scalars) const;
  // The launches of the in-place updates' copies (LoweredPlan::copies), each a copy kernel or, where
  // none was compiled, a host step; returns the outputs saved before an input they view is written.
  std::unordered_map<const Val*, Binding> addInPlaceCopies(const CompiledPlan& compiled,
                                                           std::unordered_map<const Val*, int32_t>& slot_of);

  LoweredPlan compiled_;
  int device_ordinal_ = 0;     // what outputs are on when no input tensor says (a fusion without any)
  bool host_memory_ = false;  // the device's memory is the host's (the simulator)
  std::vector<size_t> cpu_scalar_inputs_;  // positions of the fusion's is_cpu inputs
  // The inputs kernels write in place, by position, each with the other inputs that may be the very same
  // tensor (inputsThatMayBeTheUpdatedInput); any other input sharing its memory is refused.
  struct WrittenInput {
    size_t input = 0;
    std::vector<size_t> may_be_same;
  };
  std::vector<WrittenInput> written_inputs_;
  std::vector<size_t> copied_inputs_;   // the inputs copies write after the kernels, by position
  std::vector<size_t> updated_inputs_;  // every input the fusion updates in place (kernels or copies), by position
  std::vector<size_t> viewed_inputs_;   // the inputs not updated that returned outputs view, by position
  std::vector<LaunchedKernel> launched_kernels_;
  std::vector<Slot> slots_;
  size_t zeroed_bytes_ = 0;  // the zeroed slots' scratch: each at its own offset, as one kernel may take several
  std::vector<Launch> launches_;
  std::vector<HostStep> host_steps_;
  // Every bound scalar, as planned, where the host runs steps (the reference reads them); else empty.
  std::unordered_map<const Val*, HostValue> scalars_;
  std::vector<Output> outputs_;
  size_t max_params_ = 0;
  // Over all launches: a graph binds every kernel's arguments (and tensor maps) at once.
  size_t total_params_ = 0, total_maps_ = 0;
  // The plan's CUDA graph, made by the first run that asks for one; runs on several threads take turns.
  mutable std::mutex graph_mutex_;
  mutable std::unique_ptr<LaunchGraph> graph_;
};

}  // namespace braze::exec
