// Entry point of the braze._C extension. Order matters: the DataType enum and the IR classes must
// be registered before any function whose signature mentions them.
#include "bindings.h"

NB_MODULE(_C, m) {
  m.doc() = "braze: C++ core of the tensor-fusion library (the Python API is the `braze` package)";
#ifdef BRAZE_VERSION
  m.attr("__version__") = BRAZE_VERSION;
#endif
  braze::python::bindErrors(m);
  braze::python::bindIr(m);
  braze::python::bindOps(m);
  braze::python::bindExecute(m);
  braze::python::bindPlan(m);
  braze::python::bindGpu(m);
  braze::python::bindFastMethod(m);
  // A definition's prepared plans are a process-wide cache, and the callers that hold definitions
  // (Thunder's traces, torch objects they hang from) may outlive the interpreter's teardown, which
  // frees no extension's memory anyway: nanobind's report of instances alive at exit would be noise in
  // every such program's output.
  nanobind::set_leak_warnings(false);
}
