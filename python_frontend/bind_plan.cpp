// Plans in Python: the Plan that fd.explain returns, and planning for a named GPU without running
// (the kernels' sources and launch bindings, for tests and tools). Segments are handed over as plain
// records of names and strings, so a Python object never points into a plan that has gone away.
#include "bindings.h"
#include "host_values.h"
#include "scalar_value.h"

#include "support/dump.h"
#include "codegen/source_emitter.h"
#include "exec/pipeline.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;

namespace braze::python {

DeviceInfo deviceNamed(const std::string& name) {
  // "h100", or "h100:max_chunks_per_thread=2,block_threads=256" for a preset with other tuning.
  const size_t colon = name.find(':');
  auto device = DeviceInfo::preset(name.substr(0, colon));
  BRAZE_CHECK(device.has_value(), "device={}: expected one of h100, h200, a100, l4, mi300x, mi250x, mi210 (optionally followed by "
              "':key=value,...' tuning)", name);
  if (colon != std::string::npos) device->tuning = HeuristicTuning::parse(std::string_view(name).substr(colon + 1));
  return *device;
}

namespace {

struct SegmentRecord {
  int64_t id = 0;
  std::string kind;
  std::optional<std::string> scheduler;
  std::optional<int64_t> vectorize;
  std::string heuristics;
  std::vector<std::string> inputs, outputs, ops;
  std::vector<std::pair<std::string, std::string>> refusals;  // (scheduler, reason)
};

std::vector<std::string> namesOf(const std::vector<const Val*>& vals) {
  std::vector<std::string> names;
  for (const Val* v : vals) names.push_back(v->name());
  return names;
}

SegmentRecord recordOf(const Segment& s) {
  SegmentRecord r;
  r.id = s.id;
  r.kind = std::string(toString(s.kind));
  if (s.scheduler) r.scheduler = std::string(toString(*s.scheduler));
  r.vectorize = s.vectorize;
  r.heuristics = s.heuristics;
  r.inputs = namesOf(s.inputs);
  r.outputs = namesOf(s.outputs);
  for (const Expr* e : s.exprs) r.ops.emplace_back(e->name());
  for (const auto& [kind, reason] : s.refusals) r.refusals.emplace_back(std::string(toString(kind)), reason);
  return r;
}

std::vector<HostValue> hostInputs(nb::list py_inputs) {
  std::vector<HostValue> inputs;
  for (size_t i = 0; i < py_inputs.size(); ++i) inputs.push_back(hostValueFromPython(py_inputs[i], i));
  return inputs;
}

// The plan with the heuristics' choices filled in (vectorize, launch shape) for the device.
SegmentedFusion explainHost(const Fusion& fusion, nb::list py_inputs, const std::string& bookend,
                            const std::string& device) {
  const PlanOptions options{bookendPolicyFromString(bookend)};
  const DeviceInfo target = deviceNamed(device);
  const auto inputs = hostInputs(py_inputs);
  nb::gil_scoped_release release;
  return lowerPlan(planSegments(fusion, inputs, options), target).plan;
}

std::vector<std::string> sourceCodeFor(const Fusion& fusion, nb::list py_inputs, const std::string& bookend,
                                       const std::string& device, codegen::SourceDialect dialect) {
  const PlanOptions options{bookendPolicyFromString(bookend)};
  const DeviceInfo target = deviceNamed(device);
  BRAZE_CHECK(codegen::dialectFor(target) == dialect, "{} compiles {} kernels, not {}: ask for {}_code_for", device,
              codegen::toString(codegen::dialectFor(target)), codegen::toString(dialect),
              dialect == codegen::SourceDialect::Cuda ? "hip" : "cuda");
  const auto inputs = hostInputs(py_inputs);
  nb::gil_scoped_release release;
  std::vector<std::string> sources;
  for (auto& k : emitPlan(lowerPlan(planSegments(fusion, inputs, options), target), target, options).kernels) {
    if (k) sources.push_back(std::move(k->source));
  }
  return sources;
}

// Each kernel of the plan as a launcher needs it: source, name, launch shape, and what each parameter
// binds to ("input" i / "output" i of the fusion, "intermediate", or "workspace" of n elements).
nb::list kernelsFor(const Fusion& fusion, nb::list py_inputs, const std::string& bookend, const std::string& device) {
  ExecuteOptions options{{bookendPolicyFromString(bookend)}, deviceNamed(device)};
  const auto inputs = hostInputs(py_inputs);
  const EmittedPlan emitted =
      emitPlan(lowerPlan(planSegments(fusion, inputs, options.plan), options.device), options.device, options.plan);
  const LoweredPlan& compiled = emitted.lowered;
  auto position = [](const std::vector<Val*>& vals, const Val* v) -> int64_t {
    const auto it = std::find(vals.begin(), vals.end(), v);
    return it == vals.end() ? -1 : it - vals.begin();
  };
  nb::list kernels;
  for (size_t s = 0; s < compiled.kernels.size(); ++s) {
    if (!emitted.kernels[s]) continue;  // no kernel, or nothing to launch
    const kernel::Kernel* k = &*compiled.kernels[s];
    nb::list params;
    for (const kernel::TensorParam& p : k->tensors) {
      nb::dict d;
      d["name"] = p.name;
      d["dtype"] = std::string(toString(p.dtype));
      d["numel"] = p.layout.numel();
      d["zeroed"] = p.zeroed;
      const int64_t in = p.workspace ? -1 : position(compiled.plan.fusion->inputs(), p.storage);
      const int64_t out = p.workspace ? -1 : position(compiled.plan.fusion->outputs(), p.val);
      d["role"] = p.workspace ? "workspace" : in >= 0 ? "input" : out >= 0 && p.output ? "output" : "intermediate";
      d["index"] = in >= 0 ? in : out;
      params.append(d);
    }
    nb::dict d;
    d["name"] = k->name;
    d["source"] = emitted.kernels[s]->source;  // what the device's compiler takes
    d["arch"] = emitted.kernels[s]->options.arch;
    d["grid"] = nb::make_tuple(k->grid[0], k->grid[1]);
    d["block"] = nb::make_tuple(k->block[0], k->block[1]);
    d["shared_bytes"] = k->shared_bytes;
    d["summary"] = kernel::launchSummary(*k);
    d["params"] = params;
    // Scalar arguments after the tensors: (name, value, word), the word being what a launcher passes
    // (8 bytes; a narrower parameter reads its low bytes).
    nb::list arguments;
    const std::vector<uint64_t> words = kernel::argumentWords(*k);
    for (size_t a = 0; a < k->arguments.size(); ++a) {
      const kernel::ScalarArgument& arg = k->arguments[a];
      arguments.append(nb::make_tuple(arg.name, scalarValueToPython(arg.value), words[a]));
    }
    d["arguments"] = arguments;
    d["index64"] = k->index64;
    kernels.append(d);
  }
  return kernels;
}

}  // namespace

void bindPlan(nb::module_& m) {
  nb::class_<SegmentRecord>(m, "Segment", "one segment of a plan: an alias segment (views) or a kernel")
      .def_ro("id", &SegmentRecord::id)
      .def_ro("kind", &SegmentRecord::kind, "'alias' (host-side views, no kernel) or 'kernel'")
      .def_ro("scheduler", &SegmentRecord::scheduler, "'pointwise', 'inner_persistent', ...; None if none accepts")
      .def_ro("vectorize", &SegmentRecord::vectorize, "the vectorize factor the heuristics chose; None for aliases")
      .def_ro("heuristics", &SegmentRecord::heuristics, "the heuristics' parameters, one line")
      .def_ro("inputs", &SegmentRecord::inputs, "names of the tensors it reads (as in fd's repr)")
      .def_ro("outputs", &SegmentRecord::outputs, "names of the tensors it writes for others")
      .def_ro("ops", &SegmentRecord::ops, "its ops, in evaluation order")
      .def_ro("refusals", &SegmentRecord::refusals, "(scheduler, reason) for each scheduler tried before")
      .def("__repr__", [](const SegmentRecord& s) {
        return fmt::format("Segment(id={}, kind='{}', scheduler={}, inputs=[{}], outputs=[{}])", s.id, s.kind,
                           s.scheduler ? "'" + *s.scheduler + "'" : "None", fmt::join(s.inputs, ", "),
                           fmt::join(s.outputs, ", "));
      });
  nb::class_<SegmentedFusion>(m, "Plan", "how braze will run a fusion for given inputs (fd.explain)")
      .def_prop_ro("segments",
                   [](const SegmentedFusion& p) {
                     std::vector<SegmentRecord> records;
                     for (const Segment& s : p.segments) records.push_back(recordOf(s));
                     return records;
                   })
      .def_prop_ro("kernel_count", &SegmentedFusion::kernelCount)
      .def_ro("device", &SegmentedFusion::device, "the GPU the heuristics planned for (name, arch, sizes)")
      .def_prop_ro("alias_count", &SegmentedFusion::aliasCount)
      .def_prop_ro("cuts",
                   [](const SegmentedFusion& p) {
                     std::vector<std::tuple<int64_t, int64_t, std::string, std::string, std::string>> cuts;
                     for (const SegmentEdge& e : p.edges) {
                       cuts.emplace_back(e.producer, e.consumer, e.tensor->name(), std::string(toString(e.reason)),
                                         e.detail);
                     }
                     return cuts;
                   },
                   "(producer id, consumer id, tensor, reason, detail) for every tensor passed between segments")
      .def_prop_ro("bookending",
                   [](const SegmentedFusion& p) {
                     std::vector<std::tuple<std::string, std::string, bool, std::string>> rows;
                     for (const BookendDecision& d : p.bookending.decisions) {
                       rows.emplace_back(d.side == BookendDecision::Side::Input ? "input" : "output", d.chain,
                                         d.bookended, d.reason);
                     }
                     return rows;
                   },
                   "(side, chain, bookended, reason) for every meta-op chain at an input or output")
      .def("__str__", &SegmentedFusion::toString)
      .def("__repr__", &SegmentedFusion::toString)
      .def("to_dot", &SegmentedFusion::toDot, "the plan as a Graphviz digraph");
  m.def("explain", &explainHost, nb::arg("fusion"), nb::arg("inputs"), nb::arg("bookend") = "auto",
        nb::arg("device") = "h100", "plans the fusion for these inputs and a device, without running it");
  m.def(
      "cuda_code_for",
      [](const Fusion& fusion, nb::list inputs, const std::string& bookend, const std::string& device) {
        return sourceCodeFor(fusion, inputs, bookend, device, codegen::SourceDialect::Cuda);
      },
      nb::arg("fusion"), nb::arg("inputs"), nb::arg("bookend") = "auto", nb::arg("device") = "h100",
      "the CUDA source of each kernel the plan for these inputs generates");
  m.def(
      "hip_code_for",
      [](const Fusion& fusion, nb::list inputs, const std::string& bookend, const std::string& device) {
        return sourceCodeFor(fusion, inputs, bookend, device, codegen::SourceDialect::Hip);
      },
      nb::arg("fusion"), nb::arg("inputs"), nb::arg("bookend") = "auto", nb::arg("device") = "mi300x",
      "the HIP source of each kernel the plan for these inputs generates");
  m.def("kernels_for", &kernelsFor, nb::arg("fusion"), nb::arg("inputs"), nb::arg("bookend") = "auto",
        nb::arg("device") = "h100",
        "each kernel of the plan: name, source, grid, block, shared_bytes, summary, arguments ((name, value, word) "
        "scalars after the tensors: row counts and scalar inputs), index64 and params (role, index, dtype, "
        "numel, zeroed), for launching it outside braze");
}

}  // namespace braze::python
