// The execute path in Python: a FusionCache per fusion (and bookending policy). On a GPU it is fed with
// any object that speaks DLPack and lives on a CUDA device (torch, CuPy, JAX), and outputs are handed
// back through DLPack as the caller's framework's tensors; made with simulate=<gpu name> it runs host
// arrays on the simulated device (run_host). Views of inputs come back as views: their owner is the
// input object itself.
#include "bindings.h"
#include "host_values.h"
#include "scalar_value.h"
#include "torch_abi.h"
#include "torch_tensors.h"

#include "support/error.h"
#include "support/thread_scratch.h"
#include "passes/mark_aliases_prepare.h"
#include "exec/config_report.h"
#include "exec/fusion_cache.h"
#include "exec/host_execute.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>

#include <algorithm>

namespace braze::python {
namespace {

namespace nb = nanobind;
using device::DeviceOutput;
using device::DeviceTensor;
using device::DeviceValue;

constexpr int kDLCUDA = 2;
constexpr int kDLROCM = 10;  // AMD GPUs (torch's ROCm build reports its "cuda" tensors so)

// The DLPack device type of the GPUs a cache runs on.
int dlpackDeviceType(const exec::FusionCache& cache) {
  return cache.platform() == GpuVendor::Amd ? kDLROCM : kDLCUDA;
}

DataType dataTypeOf(nb::dlpack::dtype d, size_t input) {
  BRAZE_TYPE_CHECK(d.lanes == 1, "input {}: vector dtypes (lanes {}) are not supported", input, d.lanes);
  const std::optional<DataType> dtype = dataTypeFromDlpack(d.code, d.bits);
  BRAZE_TYPE_CHECK(dtype.has_value(), "input {}: DLPack dtype (code {}, {} bits) has no braze dtype", input, d.code,
                   d.bits);
  return *dtype;
}

nb::dlpack::dtype dlpackOf(DataType dtype) {
  return {static_cast<uint8_t>(dlpackCode(dtype)), static_cast<uint8_t>(sizeOf(dtype) * 8), 1};
}

// The device of caches made with no_device=<gpu name>: plans, loads and launches nothing. Those made with
// torch_cpu_stand_ins=True have their own, by which run_torch knows to take CPU tensors as stand-ins.
device::NoOpDeviceOps& noOpDevice() {
  static device::NoOpDeviceOps& ops = *new device::NoOpDeviceOps;
  return ops;
}

device::NoOpDeviceOps& noOpDeviceTakingCpuTensors() {
  static device::NoOpDeviceOps& ops = *new device::NoOpDeviceOps;
  return ops;
}

// A device tensor of input i, or a clear error for one on the CPU or on another kind of device.
// `host_ok`: a cache that launches nothing takes host arrays as stand-ins (their addresses are never
// dereferenced). `cpu_scalar`: the fusion's input i is a 0-d is_cpu tensor, which a 0-d CPU array is
// (device -1: kernels get its value).
DeviceTensor deviceTensorOf(nb::handle object, size_t i, std::vector<nb::ndarray<nb::ro>>& imported, bool host_ok,
                            bool cpu_scalar, int device_type) {
  nb::ndarray<nb::ro> array;  // braze never writes its inputs; read-only producers are accepted
  if (!nb::try_cast(object, array)) {
    PyErr_Clear();  // what __dlpack__ raised, if it did: replaced by the error below
    const std::string type = nb::cast<std::string>(nb::type_name(object.type()));
    throw Error(ErrorKind::Type,
                fmt::format("input {}: a {} is neither a number nor a tensor readable through DLPack", i, type));
  }
  const bool on_cpu = array.device_type() == nb::device::cpu::value;
  BRAZE_CHECK(array.device_type() == device_type || (on_cpu && (host_ok || (cpu_scalar && array.ndim() == 0))),
              "input {}: on DLPack device type {}, not {}: give every tensor input on one GPU, or every one on the "
              "CPU (numpy), which runs on the CPU simulator",
              i, array.device_type(), device_type == kDLROCM ? "ROCm (10)" : "CUDA (2)");
  DeviceTensor t;
  t.data = reinterpret_cast<uintptr_t>(array.data_handle()) + array.byte_offset();
  imported.push_back(array);  // __dlpack__ may hand out a copy: keep it alive for the run
  t.dtype = dataTypeOf(array.dtype(), i);
  t.device = on_cpu && cpu_scalar ? -1 : static_cast<int>(array.device_id());
  t.sizes.assign(array.shape_ptr(), array.shape_ptr() + array.ndim());
  if (array.stride_ptr() != nullptr) {
    t.strides.assign(array.stride_ptr(), array.stride_ptr() + array.ndim());
  } else {  // DLPack: no strides means row-major
    t.strides = StridedLayout::rowMajor(t.sizes).strides;
  }
  return t;
}

template <typename Framework>
nb::object exportAs(const DeviceOutput& out, nb::handle owner, int device_type) {
  std::vector<size_t> shape(out.tensor.sizes.begin(), out.tensor.sizes.end());
  nb::ndarray<Framework> array(reinterpret_cast<void*>(static_cast<uintptr_t>(out.tensor.data)), shape.size(),
                               shape.data(), owner, out.tensor.strides.data(), dlpackOf(out.tensor.dtype), device_type,
                               out.tensor.device);
  return nb::cast(array, nb::rv_policy::reference);
}

// The inputs as the FusionCache takes them: Python numbers as scalars, everything else a device tensor.
// A cache that launches nothing takes host arrays as stand-ins for device tensors.
std::vector<DeviceValue> deviceValues(nb::list py_inputs, std::vector<nb::ndarray<nb::ro>>& imported,
                                      const exec::FusionCache& cache) {
  const bool host_ok = cache.launchesNothing();
  std::vector<DeviceValue> inputs;
  inputs.reserve(py_inputs.size());
  imported.reserve(py_inputs.size());
  for (size_t i = 0; i < py_inputs.size(); ++i) {
    nb::handle item = py_inputs[i];
    if (nb::isinstance<nb::bool_>(item)) {
      inputs.emplace_back(ScalarValue{nb::cast<bool>(item)});
    } else if (nb::isinstance<nb::int_>(item)) {
      inputs.emplace_back(ScalarValue{int64FromPython(item, static_cast<int64_t>(i))});
    } else if (nb::isinstance<nb::float_>(item)) {
      inputs.emplace_back(ScalarValue{nb::cast<double>(item)});
    } else if (std::optional<DeviceTensor> t = torchTensorOf(item, i, cache.cpuScalarInput(i))) {
      inputs.emplace_back(std::move(*t));  // read through its attributes: no DLPack capsule
    } else {
      inputs.emplace_back(deviceTensorOf(item, i, imported, host_ok, cache.cpuScalarInput(i), dlpackDeviceType(cache)));
    }
  }
  return inputs;
}

// Runs the cached fusion; outputs as `framework` ("torch", "cupy", "jax", or "dlpack": objects with
// __dlpack__ for any consumer). With `allocate` (a callable (sizes, strides, dtype name, device) ->
// (tensor, address), or None for braze's pool), outputs that are buffers of their own are written into
// the tensors it returns, which come back as they are: torch's caching allocator then owns them. With
// `torch_outputs`, torch.empty_strided makes them, called from here.
// `held`: the input objects, kept here because the caller's list may change (another thread) while the
// GIL is released, and views of inputs take them as owners afterwards. `host_outputs`: torch's outputs
// in host memory (those of CPU tensors standing in for device ones in a cache that launches nothing).
// Where runValues' outputs come from: `allocate` (a Python callable), or with `torch` torch's allocation
// calls (torch_tensors.h), in host memory where `host_outputs`; `allocated` keeps what each made.
struct OutputMaker {
  nb::object allocate;
  const TorchTypes* torch = nullptr;
  bool host_outputs = false;
  std::vector<nb::object> allocated;

  device::DevicePtr make(size_t output, const DeviceTensor& spec) {
    nb::gil_scoped_acquire acquire;  // called from run, which may have released the GIL
    if (torch != nullptr) {
      std::optional<TorchOutput> made = torchEmptyStrided(*torch, spec, host_outputs);
      if (!made) return device::DevicePtr{0};  // this one from braze's pool
      allocated.at(output) = std::move(made->tensor);
      return static_cast<device::DevicePtr>(made->address);
    }
    nb::object sizes = nb::cast(spec.sizes);
    nb::object strides = nb::cast(spec.strides);
    nb::object got = allocate(sizes, strides, std::string(toString(spec.dtype)), spec.device);
    if (got.is_none()) return device::DevicePtr{0};  // this one from braze's pool
    nb::tuple pair = nb::cast<nb::tuple>(got);
    BRAZE_CHECK(pair.size() == 2, "the output allocator returned {} values, expected (tensor, address)", pair.size());
    allocated.at(output) = pair[0];
    return static_cast<device::DevicePtr>(nb::cast<uint64_t>(pair[1]));
  }
};

// runValues' outputs and their maker, reused by the runs on a thread (RunOutputsLease).
struct RunOutputs {
  std::vector<DeviceOutput> outputs;
  OutputMaker maker;
};

// The thread's RunOutputs for one run, left holding nothing when the run is over: the outputs' memory and
// the tensors made for them belong to the caller's results alone (the vectors keep their capacity).
class RunOutputsLease {
 public:
  ~RunOutputsLease() {
    RunOutputs& run = lease_.get();
    for (DeviceOutput& out : run.outputs) out.owner.reset();
    run.maker.allocate = nb::object();
    run.maker.allocated.clear();
  }
  RunOutputs& get() { return lease_.get(); }

 private:
  ThreadScratch<RunOutputs> lease_;
};

nb::list runValues(exec::FusionCache& cache, const std::vector<DeviceValue>& inputs,
                   const std::vector<nb::object>& held, uintptr_t stream, const std::string& framework,
                   nb::object allocate, const TorchTypes* torch_outputs = nullptr, bool host_outputs = false) {
  // JAX reads what it imports on its own stream without waiting on ours: hand it finished outputs.
  const bool wait = framework == "jax";
  RunOutputsLease lease;
  std::vector<DeviceOutput>& outputs = lease.get().outputs;
  OutputMaker& maker = lease.get().maker;
  maker.allocate = std::move(allocate);
  maker.torch = torch_outputs;
  maker.host_outputs = host_outputs;
  maker.allocated.resize(cache.outputCount());
  std::vector<nb::object>& allocated = maker.allocated;
  // One pointer: the std::function holds it without a heap allocation of its own.
  const device::OutputAllocator allocator = [m = &maker](size_t output, const DeviceTensor& spec) {
    return m->make(output, spec);
  };
  const auto* allocator_or_none = maker.allocate.is_none() && torch_outputs == nullptr ? nullptr : &allocator;
  const auto handle = reinterpret_cast<device::StreamHandle>(stream);
  // A prepared plan launches in microseconds: with the GIL held (as torch launches), which saves giving
  // it up and taking it back around the run and around each output the allocator makes. A miss plans
  // and compiles for milliseconds, and a wait blocks on the GPU: without it.
  if (wait || !cache.runIfPrepared(inputs, outputs, handle, wait, allocator_or_none)) {
    nb::gil_scoped_release release;
    outputs = cache.run(inputs, handle, wait, allocator_or_none);
  }
  nb::list result;
  for (size_t i = 0; i < outputs.size(); ++i) {
    DeviceOutput& out = outputs[i];
    if (out.scalar) {  // known when planned: a Python number, as from host inputs
      result.append(scalarValueToPython(*out.scalar));
      continue;
    }
    if (out.caller_allocated) {
      result.append(allocated.at(i));
      continue;
    }
    nb::object owner;
    if (out.alias_of >= 0) {
      owner = held.at(static_cast<size_t>(out.alias_of));  // a view: the input keeps the memory
    } else {
      auto* keep = new std::shared_ptr<void>(std::move(out.owner));
      owner = nb::capsule(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<void>*>(p); });
    }
    if (framework == "torch") {
      // The capsule straight to torch's C++ import where torch has it; else through nanobind's export,
      // which calls torch.utils.dlpack.from_dlpack.
      result.append(torchImportsCapsules()
                        ? torchFromCapsule(exportAs<nb::no_framework>(out, owner, dlpackDeviceType(cache)))
                        : exportAs<nb::pytorch>(out, owner, dlpackDeviceType(cache)));
    } else if (framework == "cupy") {
      result.append(exportAs<nb::cupy>(out, owner, dlpackDeviceType(cache)));
    } else if (framework == "jax") {
      result.append(exportAs<nb::jax>(out, owner, dlpackDeviceType(cache)));
    } else {
      result.append(exportAs<nb::array_api>(out, owner, dlpackDeviceType(cache)));  // an object with __dlpack__, for any consumer
    }
  }
  return result;
}

// The items of a list or tuple, each held, written over `held`.
void hold(nb::handle py_inputs, std::vector<nb::object>& held) {
  PyObject* sequence = py_inputs.ptr();
  const bool list = PyList_Check(sequence);
  const Py_ssize_t n = list ? PyList_GET_SIZE(sequence) : PyTuple_GET_SIZE(sequence);
  held.clear();
  held.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    held.push_back(nb::borrow(list ? PyList_GET_ITEM(sequence, i) : PyTuple_GET_ITEM(sequence, i)));
  }
}

nb::list run(exec::FusionCache& cache, nb::list py_inputs, uintptr_t stream, const std::string& framework,
             nb::object allocate) {
  std::vector<nb::object> held;
  hold(py_inputs, held);
  std::vector<nb::ndarray<nb::ro>> imported;  // DLPack imports, alive until the run is over
  const std::vector<DeviceValue> inputs = deviceValues(py_inputs, imported, cache);
  return runValues(cache, inputs, held, stream, framework, allocate);
}

// What runTorch reads before it runs: the held items, their values and the stream to run on. Read into
// the thread's reused one (TorchRunLease), so that reading tensors allocates nothing after the first run.
struct TorchRun {
  std::vector<nb::object> held;
  std::vector<DeviceValue> inputs;
  uintptr_t stream = 0;
  int device = -1;        // the GPU of the tensors; -1 for CPU tensors standing in
  bool stood_in = false;  // CPU tensors standing in (see runTorch): outputs on the CPU, the legacy stream
};

// The thread's TorchRun for one run, its held items released when the run is over (nothing of the caller's
// is kept alive between runs; the vectors keep their capacity).
class TorchRunLease {
 public:
  ~TorchRunLease() { lease_.get().held.clear(); }
  TorchRun& get() { return lease_.get(); }

 private:
  ThreadScratch<TorchRun> lease_;
};

// `slot` as a tensor to read into: the tensor it holds (its vectors reused), or a new one.
DeviceTensor& tensorSlot(DeviceValue& slot) {
  if (auto* t = std::get_if<DeviceTensor>(&slot)) return *t;
  return slot.emplace<DeviceTensor>();
}

// runTorch's reading into `run`: false, having read nothing the caller uses, for inputs the general path
// takes.
bool readTorchRun(exec::FusionCache& cache, nb::handle py_inputs, const TorchTypes& torch, TorchRun& run) {
  if (!PyList_CheckExact(py_inputs.ptr()) && !PyTuple_CheckExact(py_inputs.ptr())) return false;
  // Held before anything is read: reading a torch attribute may run Python code (a TorchFunctionMode),
  // which could let another thread change the caller's list.
  hold(py_inputs, run.held);
  const size_t n = run.held.size();
  if (run.inputs.size() > n) run.inputs.resize(n);
  run.inputs.reserve(n);
  int device = -1;
  const bool host_ok = cache.deviceOps() == &noOpDeviceTakingCpuTensors();
  TorchRead read;
  for (size_t i = 0; i < n; ++i) {
    nb::handle item = run.held[i];
    DeviceValue& slot = i < run.inputs.size() ? run.inputs[i] : run.inputs.emplace_back();
    PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(item.ptr()));
    if (type == reinterpret_cast<PyObject*>(&PyFloat_Type)) {
      slot = ScalarValue{PyFloat_AS_DOUBLE(item.ptr())};
    } else if (type == reinterpret_cast<PyObject*>(&PyBool_Type)) {
      slot = ScalarValue{item.ptr() == Py_True};
    } else if (type == reinterpret_cast<PyObject*>(&PyLong_Type)) {
      slot = ScalarValue{int64FromPython(item, static_cast<int64_t>(i))};
    } else if (!isPlainTorchTensor(torch, item)) {
      return false;
    } else {
      DeviceTensor& t = tensorSlot(slot);
      // A CPU tensor, or a dtype braze lacks: the general path says so.
      if (!torchTensorInto(torch, item, i, cache.cpuScalarInput(i), host_ok, &read, t)) return false;
      if (device < 0) device = t.device;  // a CPU scalar's -1 names none
    }
  }
  if (device < 0) return false;
  run.stood_in = read.stood_in;
  run.device = run.stood_in ? -1 : device;
  run.stream = 0;
  if (!run.stood_in) {
    const std::optional<uintptr_t> stream = torchCurrentStream(torch, device);
    if (!stream) return false;
    run.stream = *stream;
  }
  return true;
}

nb::object runRead(exec::FusionCache& cache, const TorchRun& run, nb::object allocate,
                   const TorchTypes* torch_outputs) {
  return runValues(cache, run.inputs, run.held, run.stream, "torch", std::move(allocate), torch_outputs, run.stood_in);
}

// fd.execute's common case in one pass: a list or tuple (Thunder passes its arguments' tuple) of CUDA
// torch.Tensors (exactly that type) and Python numbers, run on torch's current stream of their device.
// None, having done nothing, for anything else (the general path then decides); the inputs' own errors
// (mixed devices, a negative bit) raise.
// A cache made with torch_cpu_stand_ins takes CPU tensors as stand-ins (on the legacy stream, outputs on
// the CPU), so that the host benchmark times torch's own tensors.
nb::object runTorch(exec::FusionCache& cache, nb::handle py_inputs, nb::object allocate, bool torch_outputs) {
  const TorchTypes* torch = importedTorch();  // once for every input and output of the run
  if (torch == nullptr) return nb::none();
  TorchRunLease run;
  if (!readTorchRun(cache, py_inputs, *torch, run.get())) return nb::none();
  return runRead(cache, run.get(), std::move(allocate), torch_outputs ? torch : nullptr);
}

// What a torch runner of a fusion does besides runTorch: the inputs it updates in place (torch's rule
// checked before, versions bumped after), and the seed and offset its random ops draw on each execute.
struct RunnerSteps {
  bool torch_outputs = true;
  std::vector<size_t> updated;  // positions among the fusion's inputs, drawn ones included
  std::vector<size_t> drawn;    // each random op's seed position (its offset follows), ascending
  nb::object draw;              // (the caller's inputs, their GPU or -1) -> [seed, offset] per random op, in order
};

// runTorch with those steps, for the caller's inputs (without the drawn ones). The inputs, with a
// placeholder at each drawn position, are read before anything is drawn: inputs the general path takes
// (which draws for itself) draw nothing here.
nb::object runWithSteps(exec::FusionCache& cache, nb::handle inputs, const RunnerSteps& steps) {
  if (!PyList_Check(inputs.ptr()) && !PyTuple_Check(inputs.ptr())) return nb::none();
  // One owned snapshot for the check, the draw, the run and the bump: Python code runs between them (and
  // the run may release the GIL), and another thread may change a list meanwhile.
  const nb::object given = nb::steal(PySequence_Tuple(inputs.ptr()));
  if (!given.is_valid()) throw nb::python_error();
  const auto n_given = static_cast<size_t>(PyTuple_GET_SIZE(given.ptr()));
  const size_t n = n_given + 2 * steps.drawn.size();
  if (n != cache.inputCount()) return nb::none();  // the general path says what the count should be
  nb::object full = given;
  if (!steps.drawn.empty()) {
    full = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(n)));
    if (!full.is_valid()) throw nb::python_error();
    size_t next = 0, k = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool drawn = k < steps.drawn.size() && (i == steps.drawn[k] || i == steps.drawn[k] + 1);
      if (drawn && i == steps.drawn[k] + 1) ++k;
      if (!drawn && next == n_given) return nb::none();  // positions past the inputs: not this fusion's
      PyObject* item = drawn ? PyLong_FromLong(0) : Py_NewRef(PyTuple_GET_ITEM(given.ptr(), next++));
      if (item == nullptr) throw nb::python_error();
      PyTuple_SET_ITEM(full.ptr(), static_cast<Py_ssize_t>(i), item);
    }
  }
  if (!steps.updated.empty() && !torchAllowsUpdates(full, steps.updated)) return nb::none();
  const TorchTypes* torch = importedTorch();
  if (torch == nullptr) return nb::none();
  TorchRunLease lease;
  TorchRun* run = &lease.get();
  if (!readTorchRun(cache, full, *torch, *run)) return nb::none();
  if (!steps.drawn.empty()) {
    const nb::object values = steps.draw(given, run->device);
    BRAZE_CHECK(nb::len(values) == 2 * steps.drawn.size(), "the seed draw gave {} values for {} random ops",
                nb::len(values), steps.drawn.size());
    for (size_t k = 0; k < 2 * steps.drawn.size(); ++k) {
      const size_t at = steps.drawn[k / 2] + k % 2;
      const nb::object value = values[k];
      run->inputs.at(at) = ScalarValue{int64FromPython(value, static_cast<int64_t>(at))};
      run->held.at(at) = value;
    }
  }
  nb::object outputs = runRead(cache, *run, nb::none(), steps.torch_outputs ? torch : nullptr);
  if (!steps.updated.empty() && !outputs.is_none()) bumpTorchVersions(full, steps.updated);
  return outputs;
}

// (plan, cache, why): what FusionCache::explain says of these inputs, planned without the GIL.
nb::tuple explanationTuple(exec::FusionCache& cache, const std::vector<DeviceValue>& inputs) {
  exec::CacheExplanation explanation;
  {
    nb::gil_scoped_release release;
    explanation = cache.explain(inputs);
  }
  return nb::make_tuple(std::move(explanation.plan), std::string(toString(explanation.lookup)), explanation.why);
}

}  // namespace

void bindGpu(nb::module_& m) {
  nb::class_<exec::FusionCache>(m, "FusionCache",
                                   "a fusion's GPU executions: input signature -> prepared plan (kernels compiled once)")
      .def(
          "__init__",
          [](exec::FusionCache* self, const Fusion& fusion, const std::string& bookend, const std::string& no_device,
             const std::string& simulate, const std::string& platform, int device, bool torch_cpu_stand_ins) {
            const PlanOptions options{bookendPolicyFromString(bookend)};
            if (!simulate.empty()) {
              // Host arrays on the simulated device, planned for the named GPU: run_host.
              new (self) exec::FusionCache(std::make_shared<Fusion>(fusion), options, &device::simDeviceOps(),
                                              deviceNamed(simulate));
              return;
            }
            if (no_device.empty()) {
              BRAZE_CHECK(platform == "cuda" || platform == "hip", "platform='{}': expected 'cuda' or 'hip'", platform);
              new (self) exec::FusionCache(std::make_shared<Fusion>(fusion), options, nullptr, std::nullopt,
                                              platform == "hip" ? GpuVendor::Amd : GpuVendor::Nvidia);
              self->setTensorlessDevice(device);
              return;
            }
            // Tests and host benchmarks of this binding: plans for the named GPU, loads and launches
            // nothing, and takes host (CPU) arrays as if they were on the device.
            device::NoOpDeviceOps& no_op = torch_cpu_stand_ins ? noOpDeviceTakingCpuTensors() : noOpDevice();
            new (self) exec::FusionCache(std::make_shared<Fusion>(fusion), options, &no_op, deviceNamed(no_device));
          },
          nb::arg("fusion"), nb::arg("bookend") = "auto", nb::arg("no_device") = "", nb::arg("simulate") = "",
          nb::arg("platform") = "cuda", nb::arg("device") = 0, nb::arg("torch_cpu_stand_ins") = false,
          "platform: 'cuda' (NVIDIA GPUs: the CUDA driver, NVRTC) or 'hip' (AMD GPUs: the HIP runtime, hiprtc); "
          "device: the GPU ordinal that runs without GPU tensor inputs (only numbers and CPU scalars) use; "
          "no_device: a GPU name (h100, a100, ...) to plan for without a GPU: nothing is launched, and host "
          "arrays stand for device tensors (for testing and timing the binding), and with torch_cpu_stand_ins "
          "CPU torch tensors too in run_torch (outputs on the CPU); simulate: a GPU name (with "
          "optional tuning) to plan for on the simulated device, which run_host and explain_host use")
      .def(
          "run_host",
          [](exec::FusionCache& cache, nb::list py_inputs) {
            BRAZE_CHECK(dynamic_cast<device::SimDeviceOps*>(cache.deviceOps()) != nullptr,
                        "run_host: this FusionCache was not made with simulate=<gpu name>");
            std::vector<HostValue> inputs;
            inputs.reserve(py_inputs.size());
            for (size_t i = 0; i < py_inputs.size(); ++i) inputs.push_back(hostValueFromPython(py_inputs[i], i));
            std::vector<HostValue> outputs;
            {
              nb::gil_scoped_release release;  // the simulator is slow; let other threads run
              outputs = exec::runOnHost(cache, inputs);
            }
            return hostValuesToPython(std::move(outputs));
          },
          nb::arg("inputs"),
          "runs host inputs (HostTensors and numbers) on the simulated device through this cache; returns "
          "HostTensors (views of inputs where the plan makes views) and numbers")
      .def(
          "explain_host",
          [](exec::FusionCache& cache, nb::list py_inputs) {
            std::vector<DeviceValue> inputs;
            for (size_t i = 0; i < py_inputs.size(); ++i) {
              inputs.push_back(exec::deviceValueOf(hostValueFromPython(py_inputs[i], i)));
            }
            return explanationTuple(cache, inputs);
          },
          nb::arg("inputs"), "explain for host inputs: (plan, cache, why), as explain gives for GPU inputs")
      .def("run", &run, nb::arg("inputs"), nb::arg("stream") = 0, nb::arg("framework") = "torch",
           nb::arg("allocate") = nb::none(),
           "runs on the inputs' GPU on `stream` (a CUstream handle; 0: the legacy default stream); returns the "
           "outputs as `framework` tensors, those that are buffers of their own allocated by `allocate` (sizes, "
           "strides, dtype name, device) -> (tensor, address) when it is given")
      .def("run_torch", &runTorch, nb::arg("inputs"), nb::arg("allocate") = nb::none(),
           nb::arg("torch_outputs") = false,
           "run(inputs, torch's current stream, 'torch', allocate) when `inputs` is a list or tuple of CUDA "
           "torch.Tensors and Python numbers; None, having done nothing, otherwise. torch_outputs: outputs from "
           "torch.empty_strided (torch's caching allocator), called without a Python allocate in between")
      .def(
          "torch_runner",
          [](nb::handle self, bool torch_outputs, std::vector<size_t> updated, std::vector<size_t> drawn,
             nb::object draw) -> nb::object {
            // A function of the inputs alone, holding the cache: what fd.execute calls on every cached execute,
            // with no argument to convert but the inputs and no bound method to make.
            exec::FusionCache* cache = &nb::cast<exec::FusionCache&>(self);
            BRAZE_CHECK(drawn.empty() || !draw.is_none(), "torch_runner: drawn positions without a draw function");
            for (size_t k = 1; k < drawn.size(); ++k) {  // each seed and its offset apart from the next pair
              BRAZE_CHECK(drawn[k] >= drawn[k - 1] + 2, "torch_runner: drawn positions {} and {} overlap or descend",
                          drawn[k - 1], drawn[k]);
            }
            if (updated.empty() && drawn.empty()) {
              return nb::cpp_function(
                  [owner = nb::borrow(self), cache, torch_outputs](nb::handle inputs) {
                    return runTorch(*cache, inputs, nb::none(), torch_outputs);
                  },
                  nb::arg("inputs"));
            }
            RunnerSteps steps{torch_outputs, std::move(updated), std::move(drawn), std::move(draw)};
            return nb::cpp_function(
                [owner = nb::borrow(self), cache, steps = std::move(steps)](nb::handle inputs) {
                  return runWithSteps(*cache, inputs, steps);
                },
                nb::arg("inputs"));
          },
          nb::arg("torch_outputs") = true, nb::arg("updated") = std::vector<size_t>{},
          nb::arg("drawn") = std::vector<size_t>{}, nb::arg("draw") = nb::none(),
          "run_torch(inputs, None, torch_outputs) as a function of the inputs alone (fd.execute's fast path); "
          "updated: the positions of the inputs the fusion updates in place, whose torch rules it then follows; "
          "drawn: the positions of its random ops' seeds (each offset after its seed), which the caller does not "
          "pass and draw(inputs) gives, [seed, offset] per op, once the inputs are read")
      .def(
          "cuda_code",
          [](exec::FusionCache& cache, nb::list py_inputs) {
            std::vector<nb::ndarray<nb::ro>> imported;
            const std::vector<DeviceValue> inputs = deviceValues(py_inputs, imported, cache);
            nb::gil_scoped_release release;
            return cache.prepare(inputs)->cudaCode();
          },
          "the CUDA source of each kernel of the plan for these inputs")
      .def(
          "hip_code",
          [](exec::FusionCache& cache, nb::list py_inputs) {
            std::vector<nb::ndarray<nb::ro>> imported;
            const std::vector<DeviceValue> inputs = deviceValues(py_inputs, imported, cache);
            nb::gil_scoped_release release;
            return cache.prepare(inputs)->sourceCode(codegen::SourceDialect::Hip);
          },
          "the HIP source of each kernel of the plan for these inputs")
      .def(
          "explain",
          [](exec::FusionCache& cache, nb::list py_inputs) {
            std::vector<nb::ndarray<nb::ro>> imported;
            const std::vector<DeviceValue> inputs = deviceValues(py_inputs, imported, cache);
            return explanationTuple(cache, inputs);
          },
          "(plan, cache, why): the plan for these inputs, and whether running them hits a prepared plan ('hit'), "
          "needs only new launch parameters ('new launch parameters') or a new kernel ('new kernel')")
      .def_prop_rw("cuda_graphs", &exec::FusionCache::usesCudaGraphs, &exec::FusionCache::useCudaGraphs,
                   "whether plans of several kernels launch them as one CUDA graph (default: BRAZE_CUDA_GRAPHS=1)")
      .def("kernel_count", &exec::FusionCache::kernelCount, "distinct kernels the prepared plans run")
      .def(
          "last_cuda_code", [](const exec::FusionCache& cache) { return cache.lastSourceCode(codegen::SourceDialect::Cuda); },
          "the CUDA of the plan the last run used")
      .def(
          "last_hip_code", [](const exec::FusionCache& cache) { return cache.lastSourceCode(codegen::SourceDialect::Hip); },
          "the HIP of the plan the last run used (what hiprtc compiles on an AMD GPU)")
      .def("__len__", &exec::FusionCache::size, "prepared plans (one per input signature)");

  m.def(
      "empty_cache",
      [] {
        nb::gil_scoped_release release;  // it waits for the GPU, whose host callbacks may want the GIL
        return device::releaseAllCachedBlocks();
      },
      "waits for the GPUs braze has used (CUDA and AMD), then returns the freed device memory braze keeps per "
      "stream for reuse (its outputs, intermediates and workspaces) to the device's default memory pool, where "
      "other users of that pool can allocate it; the bytes returned. Not while a graph is being captured (the "
      "wait would end the capture)");
  m.def(
      "block_cache_counts",
      [](int device) {
        const device::BlockCacheCounts counts = device::cudaDeviceOps(device).blockCacheCounts();
        return std::make_tuple(counts.hits, counts.misses, counts.cached_bytes, counts.cached_blocks);
      },
      nb::arg("device") = 0,
      "(hits, misses, cached bytes, cached blocks) of braze's cache of freed memory on CUDA device `device`");
  m.def(
      "_torch_c_abi",
      [](std::optional<bool> enabled) {
        const bool was = torchAbiEnabled();
        if (enabled) setTorchAbiEnabled(*enabled);
        return was;
      },
      nb::arg("enabled") = nb::none(),
      "whether torch.Tensors are read (and torch outputs made) through torch's stable C ABI where torch has it "
      "(default: BRAZE_TORCH_C_ABI, on); `enabled` switches it, for tests and benchmarks. Returns the setting "
      "before the call");
  m.def("_torch_has_current_stream_abi", &torchHasCurrentStreamAbi,
        "whether the torch module imported gives its current CUDA stream through its C ABI (a CUDA build)");
  m.def(
      "_torch_current_stream", [](int device) { return torchCurrentStream(device); }, nb::arg("device"),
      "torch's current stream on CUDA device `device` as the fast path reads it (through the C ABI where "
      "_torch_c_abi is on and torch has it), or None where torch has no way to tell");
  m.def("_torch_has_c_abi", &torchHasCAbi,
        "whether the torch module imported has torch's stable C ABI for Python tensors (torch 2.14 on)");
  m.def(
      "_read_torch_tensor",
      [](nb::handle tensor, bool cpu_scalar, bool host_stand_in) -> nb::object {
        TorchRead read;
        std::optional<DeviceTensor> t = torchTensorOf(tensor, 0, cpu_scalar, host_stand_in, &read);
        if (!t) return nb::none();
        return nb::make_tuple(static_cast<uint64_t>(t->data), std::string(toString(t->dtype)), t->device, t->sizes,
                              t->strides, read.stood_in, read.through_abi);
      },
      nb::arg("tensor"), nb::arg("cpu_scalar") = false, nb::arg("host_stand_in") = false,
      "(address, dtype, device, sizes, strides, stood in, through the C ABI) as the execute path reads a torch "
      "tensor, or None where it leaves it to the DLPack path (for tests)");
  m.def(
      "_release_torch_types", [] { releaseTorchTypes(); },
      "drops braze's references to the torch module (registered with atexit by braze/__init__.py)");
  m.def(
      "config_report",
      [] {
        std::vector<std::pair<std::string, std::string>> entries;
        for (exec::ConfigEntry& entry : exec::configReport()) {
          entries.emplace_back(std::move(entry.key), std::move(entry.value));
        }
        return entries;
      },
      "[(key, value)]: braze's version, NVRTC, the CUDA headers, driver and devices, the kernel disk cache and "
      "the BRAZE_* variables set (what braze.show_config() prints)");
}

}  // namespace braze::python
