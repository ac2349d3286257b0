"""FusionDefinition: nvFuser's legacy Python frontend, on braze.

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.mul(t0, 2.0))
    (out,) = fd.execute([np.ones((2, 3), np.float32)])

The definition methods check their Python arguments here and leave the IR checks (shapes,
dtypes, dims) to the C++ builders, whose errors already name the op and the operands.
"""

from __future__ import annotations

import threading
import warnings

from . import _C
from ._C import BrazeValueError
from . import _convert as cv
from . import dtypes, execute as _execute, generator as _generator, repro as _repro
from . import tensor_descriptor as td
from .handles import Scalar, Tensor, wrap
from .definition_cache import definitions as _definitions
from .ops import Operators

# Held while a subclass's definition() builds its fusion on a first execute.
_SUBCLASS_DEFINITION = threading.RLock()

_FAST_KWARGS = _execute.FAST_KWARGS

DataType = _C.DataType

_NO_SCHEDULED_IR = (
    "{}: braze keeps no scheduled fusion IR (its schedules are kernel IR); fd.last_cuda_code() (fd.last_hip_code()) and "
    "fd.cuda_code_for(inputs) show the generated kernels, fd.explain(inputs) the plan and heuristics."
)


def _fast_path_failed(fd, inputs, error, keywords) -> None:
    """What FusionDefinition.execute does with an error of its C fast path, before it is raised: the input
    positions renumbered to the caller's, and the reproducer saved where BRAZE_REPRO_DIR asks for it, with
    the keywords the Python function would have kept (those not named in its signature)."""
    _execute.renumber_input_error(fd, error)
    kept = {k: v for k, v in (keywords or {}).items() if k not in _NAMED_EXECUTE_PARAMETERS}
    _repro.report(fd, inputs, error, False, kept or None)


_NAMED_EXECUTE_PARAMETERS = frozenset({"device", "save_repro_inputs", "_enable_options", "_disable_options"})


class FusionDefinition:
    """A fusion being defined (inside `with`) or defined (after it), and its execution."""

    def __init__(self, id=None, max_length=9999, use_multidevice_executor=False, backend_type=None):
        """FusionDefinition() starts a definition (fill it in `with fd:`); FusionDefinition(id) is the
        finished definition with that id in this process's cache (fd.id() of an earlier one).
        max_length and the multidevice arguments exist for nvFuser compatibility and change nothing."""
        self._fusion = _C.Fusion()
        self._guard = None
        self._state = "new"  # -> "open" inside `with` -> "done"
        self._id = None
        self.ops = Operators(self)
        if id is not None:
            _definitions.adopt(self, cv.integer(id, "FusionDefinition", "id"))

    # ---- definition scope ------------------------------------------------------------------------
    def __enter__(self):
        if self._state != "new":
            raise RuntimeError("FusionDefinition: a definition can only be entered once")
        self._guard = _C.FusionGuard(self._fusion)
        self._guard.__enter__()
        self._state = "open"
        return self

    def __exit__(self, exc_type, exc, tb):
        self._guard.__exit__(None, None, None)
        self._guard = None
        self._state = "done"
        if exc_type is None:
            _definitions.register(self)
        return False

    def id(self) -> int:
        """The definition's number in this process's cache of definitions: identical definitions get
        the same id and share their prepared plans and compiled kernels."""
        if self._id is None:
            raise RuntimeError("id: the FusionDefinition has no definition yet (the `with` block has not ended)")
        return self._id

    def _check_open(self, what: str):
        if self._state == "open":
            return
        if self._state == "new":
            raise RuntimeError(f"{what}: the definition is not open; define inside `with FusionDefinition() as fd:`")
        raise RuntimeError(f"{what}: attempting to add to a completed definition (the `with` block has ended)")

    # ---- inputs ----------------------------------------------------------------------------------
    def define_tensor(
        self,
        shape=None,
        contiguity=None,
        dtype=DataType.Float,
        is_cpu=False,
        stride_order=None,
        *,
        sizes=None,
        strides=None,
        static_sizes=False,
    ) -> Tensor:
        """A tensor input. nvFuser's overloads:

        - define_tensor(shape, contiguity: list[bool|None], dtype, is_cpu, stride_order)
        - define_tensor(shape, contiguity: bool = False, ...): True on every dim of shape != 1
        - define_tensor(sizes=, strides=, dtype, static_sizes=False, is_cpu): from a strided array

        shape entries: -1 symbolic, 1 broadcast, n static. With stride_order, contiguity is listed
        in allocation order (outermost first).
        """
        self._check_open("define_tensor")
        dtype = cv.data_type(dtype, "define_tensor", "dtype")
        is_cpu = cv.flag(is_cpu, "define_tensor", "is_cpu")
        if sizes is not None or strides is not None:
            if shape is not None or contiguity is not None or stride_order:
                raise TypeError("define_tensor: give either sizes= and strides=, or shape= (with contiguity=)")
            if sizes is None or strides is None:
                raise TypeError("define_tensor: sizes= and strides= must be given together")
            sizes = cv.ints(sizes, "define_tensor", "sizes", allow_single=False)
            strides = cv.ints(strides, "define_tensor", "strides", allow_single=False)
            contiguity, stride_order = td.compute_tensor_descriptor(sizes, strides)
            shape = td.descriptor_shape(sizes, strides, cv.flag(static_sizes, "define_tensor", "static_sizes"))
        else:
            if shape is None:
                raise TypeError("define_tensor: shape is required (or sizes= and strides=)")
            shape = cv.ints(shape, "define_tensor", "shape", allow_single=False)
            contiguity, stride_order = td.define_tensor_layout(contiguity, stride_order)
        return Tensor(_C.define_tensor(self._fusion, shape, contiguity, dtype, is_cpu, stride_order), self)

    def from_pytorch(self, tensor, static_sizes=False) -> Tensor:
        """A tensor input described by a torch tensor: its sizes, strides and dtype (nvFuser's
        from_pytorch). A 0-D CPU tensor becomes an is_cpu input, as in nvFuser; other CPU tensors are
        ordinary inputs here (they run on the simulated device)."""
        from . import pytorch_utils

        torch = pytorch_utils._torch()
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"from_pytorch: expected a torch.Tensor, got {cv.describe(tensor)}")
        return self.define_tensor(
            sizes=list(tensor.size()),
            strides=list(tensor.stride()),
            dtype=pytorch_utils.torch_dtype_to_nvfuser_dtype(tensor.dtype),
            static_sizes=static_sizes,
            is_cpu=tensor.device.type == "cpu" and tensor.dim() == 0,
        )

    def define_scalar(self, value=None, dtype=None) -> Scalar:
        """A constant (value given; dtype inferred bool -> Bool, int -> Int64, float -> Double, or cast
        to dtype), or a symbolic scalar input bound at execute. nvFuser's forms of the latter:
        define_scalar(dtype=DataType.Int), define_scalar(DataType.Int) (the dtype first) and
        define_scalar() (a Double)."""
        self._check_open("define_scalar")
        if isinstance(value, (DataType, dtypes.UnsupportedDataType)) and dtype is None:
            value, dtype = None, value
        if dtype is not None:
            dtype = cv.data_type(dtype, "define_scalar", "dtype")
        if dtype == DataType.Null:
            dtype = None
        if value is None:
            return Scalar(_C.define_scalar(self._fusion, DataType.Double if dtype is None else dtype), self)
        if isinstance(value, complex):
            raise TypeError(f"define_scalar: {value!r} is complex, and braze has no complex dtypes (see the README)")
        if not dtypes.is_python_number(value):
            raise TypeError(f"define_scalar: value must be a bool, int or float, got {cv.describe(value)}")
        return Scalar(cv.constant(self, value, dtype), self)

    def _drawn_seed_and_offset(self):
        """Two Int64 scalar inputs the caller does not pass: a random op's seed and offset, which each
        execute draws (generator.py)."""
        seed = Scalar(_C.define_scalar(self._fusion, DataType.Int64), self)
        offset = Scalar(_C.define_scalar(self._fusion, DataType.Int64), self)
        self.__dict__.setdefault("_drawn_inputs", []).append(len(self._fusion.inputs()) - 2)
        return seed, offset

    def define_constant(self, value, dtype=None) -> Scalar:
        """Deprecated nvFuser spelling of define_scalar(value, dtype)."""
        return self.define_scalar(value, dtype)

    def define_vector(self, values=None, dtype=DataType.Int, *, size=None) -> list:
        """A list of Int64 scalars: define_vector(n) makes n symbolic inputs (execute takes a list there),
        define_vector([16, s1, 1]) mixes constants (ints >= -1) and Scalars."""
        self._check_open("define_vector")
        if cv.data_type(dtype, "define_vector", "dtype") != DataType.Int64:
            raise TypeError(f"define_vector: only DataType.Int vectors are supported, got DataType.{dtype.name}")
        if size is not None:
            if values is not None:
                raise TypeError("define_vector: give values or size=, not both")
            values = size
        if isinstance(values, (list, tuple)):
            for i, v in enumerate(values):
                if isinstance(v, int) and not isinstance(v, bool) and v < -1:
                    raise BrazeValueError(f"define_vector: values[{i}] = {v} (expected -1 or a size >= 0)")
            # nvFuser casts a floating Scalar entry to Int (a size computed in floating point).
            values = [self.ops.cast(v, DataType.Int64) if isinstance(v, Scalar) and dtypes.is_floating(v.dtype) else v
                      for v in values]
            return [wrap(v, self) for v in cv.shape(self, values, "define_vector", "values")]
        n = cv.integer(values, "define_vector", "size")
        if n < 0:
            raise BrazeValueError(f"define_vector: size must be >= 0, got {n}")
        # execute takes the vector as one list at its place among the inputs: which place, and its length.
        vectors = self.__dict__.setdefault("_vector_sizes", {})
        drawn = 2 * len(self.__dict__.get("_drawn_inputs", []))  # a random op's seed and offset, not passed
        position = len(self._fusion.inputs()) - drawn - sum(size - 1 for size in vectors.values())
        vectors[position] = n
        return [Scalar(_C.define_scalar(self._fusion, DataType.Int64), self) for _ in range(n)]

    # ---- outputs ---------------------------------------------------------------------------------
    def add_output(self, output, alias_input=None, *, stride_order=None):
        """Marks a Tensor or Scalar as a fusion output. With alias_input (a fusion input tensor), the
        result is written into that input's array in place and not returned by execute. With
        stride_order (nvFuser's order: [1, 0] row-major, [0, 1] column-major), the output comes back
        with strides in that order (recorded as fd.ops.stride_order); a list in alias_input's place is a
        stride order, as nvFuser's add_output(output, stride_order) takes it."""
        if isinstance(alias_input, (list, tuple)) and stride_order is None:
            alias_input, stride_order = None, alias_input
        self._check_open("add_output")
        if stride_order:
            if alias_input is not None:
                raise BrazeValueError("add_output: stride_order= and alias_input= together (an in-place update "
                                      "keeps the input's layout)")
            output = self.ops.stride_order(output, stride_order)
        if alias_input is not None:
            out = cv.tensor(self, output, "add_output", "output")
            self._fusion.alias_output_to_input(out, cv.tensor(self, alias_input, "add_output", "alias_input"))
            return
        self._fusion.add_output(cv.val(self, output, "add_output", "output"))

    # ---- execution -------------------------------------------------------------------------------
    def execute(self, inputs, device=None, *, save_repro_inputs=False, _enable_options=None,
                _disable_options=None, **kwargs) -> list:
        """Runs the fusion on host inputs (numpy arrays, ml_dtypes arrays for bf16/fp8, Python numbers
        for symbolic scalars, lists for define_vector inputs) and returns the outputs as a list."""
        # save_repro_inputs, _enable_options and _disable_options (nvFuser's: inputs kept for its
        # reproducer, its own switches) are taken and ignored, as the other keywords in FAST_KWARGS are.
        # Thunder passes the three on every call: named here, they make no keyword dict.
        # The cached execute of CUDA torch tensors, in every call form nvFuser scripts and Thunder use
        # (positional, device=, the option keywords they pass), goes straight to the one C++ pass that reads
        # the tensors, finds the plan and launches (_execute_torch opens it, and says when), without entering
        # this function (torch_fast_method below), in-place updates and drawn seeds included. Anything else
        # goes the general way.
        state = self.__dict__
        user_inputs = inputs  # what a reproducer records: the drawn seeds are drawn again when it runs
        if "_drawn_inputs" in state:
            inputs = _generator.with_drawn(self, _execute._flatten(inputs, self), device)
        if self._state != "done" and hasattr(self, "definition"):
            # nvFuser's subclass style: `def definition(self)` builds the fusion on first execute, once,
            # while the threads that execute it too at the same time wait for it.
            with _SUBCLASS_DEFINITION:
                if self._state == "new":
                    with self:
                        self.definition()
                    if hasattr(self, "schedule"):
                        warnings.warn(f"{type(self).__name__}.schedule() is not called: braze chooses and lowers "
                                      "each kernel's schedule itself (nvFuser's user schedules have no equivalent)",
                                      stacklevel=2)
            if "_drawn_inputs" in state:
                inputs = _generator.with_drawn(self, _execute._flatten(inputs, self), device)
        if self._state == "open":
            raise RuntimeError("execute: the definition is still open; call execute after the `with` block")
        keywords = kwargs or None  # the reproducer repeats them (execute reads them, consuming none)
        print_repro = bool(keywords and keywords.get("print_repro"))
        if print_repro:
            # As nvFuser does: the script that reruns this execute, printed before it runs (an in-place
            # update would change the inputs it records), whether or not it then fails.
            try:
                print(_repro.script(self, user_inputs, keywords=keywords))
            except Exception as failure:  # noqa: BLE001 - a reproducer that cannot be made must not stop the run
                print(f"# braze: no reproducer could be made ({type(failure).__name__}: {failure})")
        updated = _execute.updated_inputs(self)
        flat = _execute._flatten(inputs) if updated else None
        try:
            if updated:
                _execute.check_torch_updates(self, flat, updated)
            outputs = _execute.execute(self, inputs, device, kwargs)
            if updated:
                _execute.bump_torch_versions(flat, updated)
            return outputs
        except Exception as error:
            _execute.renumber_input_error(self, error)
            # BRAZE_REPRO_DIR saves a script that raises this again (repro.py).
            _repro.report(self, user_inputs, error, print_repro, keywords)
            raise

    # Its cached torch path in C: the calls above that the fusion's torch runner takes never enter the
    # Python function (whose frame and argument binding cost about what reading two tensors does).
    execute = _C.torch_fast_method(execute, _execute.names_a_gpu, _execute.GPU_DEVICE_NAMES, _fast_path_failed,
                                   _FAST_KWARGS)

    def repro_script(self, inputs) -> str:
        """A runnable script that rebuilds this fusion, recreates `inputs` (values, sizes, strides,
        alignment, GPU) and executes them: what print_repro=True prints when execute raises."""
        return _repro.script(self, inputs)

    def repro_script_for(self, inputs=None) -> str:
        """nvFuser's name for repro_script (Lightning Thunder's examine and dynamo reports call it, or
        the legacy getReproString): without inputs, the script that rebuilds the definition."""
        return repr(self) if inputs is None else self.repro_script(inputs)

    getReproString = repro_script_for

    def debug_output(self):
        """nvFuser's debug output of an execute(capture_debug_output=True): braze captures none (execute
        accepts the keyword and ignores it; BRAZE_DUMP=<pass> prints what braze can show, to stderr)."""
        return None

    def profile(self):
        """nvFuser's FusionProfile of an execute(profile=True): braze does not collect one (execute accepts
        and ignores profile=True). Its kernels are named braze_* in torch.profiler and Nsight Systems."""
        raise NotImplementedError("braze does not collect nvFuser's FusionProfile: time kernels with torch.profiler "
                                  "(they are named braze_*) or Nsight Systems, and see the plan with fd.explain(inputs)")

    def explain(self, inputs, *, bookend="auto", target="h100"):
        """How braze would run this fusion for these inputs, without running it: a Plan whose
        `segments` each have `kind` ("alias" or "kernel"), `scheduler`, `vectorize`, `inputs`,
        `outputs`, `ops` and the `refusals` of the schedulers tried before. `str(plan)` is a table,
        `plan.to_dot()` Graphviz. `bookend` forces the bookending policy: "auto" (the cost model),
        "none", "outputs" or "both"; execute takes the same keyword. `target` names the GPU the
        heuristics plan for ("h100", "h200", "a100", "l4", "mi300x", "mi250x", "mi210"); each kernel segment shows its `vectorize`
        and `heuristics`."""
        if self._state == "open":
            raise RuntimeError("explain: the definition is still open; call explain after the `with` block")
        return _execute.explain(self, inputs, bookend, target)

    def last_cuda_code(self, intrinsic_code=False, override_user_schedule=False) -> str:
        """The CUDA C++ of the kernels the last execute generated (one translation unit each)."""
        return "\n".join(self._last_cache("last_cuda_code").last_cuda_code())

    def last_hip_code(self) -> str:
        """The HIP C++ of the kernels the last execute generated (one translation unit each): what
        hiprtc compiles on an AMD GPU. The kernels are those last_cuda_code shows, in the other dialect;
        execute(..., target="mi300x") on host inputs plans them for an AMD GPU."""
        return "\n".join(self._last_cache("last_hip_code").last_hip_code())

    def _last_cache(self, what):
        on_gpu = self.__dict__.get("_last_run_was_gpu")
        cache = self.__dict__.get("_last_gpu_cache" if on_gpu else "_last_host_cache")
        if cache is None:
            raise RuntimeError(f"{what}: nothing has been executed yet")
        return cache

    # ---- introspection ---------------------------------------------------------------------------
    def fusion_ir(self) -> str:
        """The unscheduled fusion, one op per line."""
        return self._fusion.to_string()

    def inputs(self) -> list:
        """The inputs' indices, in order (nvFuser's state indices: T3 and S3 are 3)."""
        return [v.id for v in self._fusion.inputs()]

    def outputs(self) -> list:
        """The outputs' indices, in order (an output aliasing an input included)."""
        return [v.id for v in self._fusion.outputs()]

    def input_handles(self) -> list:
        """The inputs as Tensor and Scalar handles (braze's addition to inputs())."""
        return [wrap(v, self) for v in self._fusion.inputs()]

    def output_handles(self) -> list:
        """The outputs as Tensor and Scalar handles (braze's addition to outputs())."""
        return [wrap(v, self) for v in self._fusion.outputs()]

    def __repr__(self) -> str:
        """A runnable Python script that rebuilds this fusion (random ops without seeds stay so)."""
        seeds = _generator.drawn_positions(self)
        return self._fusion.to_python(sorted(seeds + [p + 1 for p in seeds]))

    __str__ = __repr__

    def cuda_code_for(self, inputs, intrinsic_code=False, override_user_schedule=False) -> str:
        """The CUDA C++ of the kernels braze generates for these inputs, without running them."""
        return _execute.cuda_code_for(self, inputs)

    def hip_code_for(self, inputs, *, target="mi300x") -> str:
        """The HIP C++ of the kernels braze generates for these inputs on an AMD GPU (`target`: "mi300x",
        "mi250x", "mi210"), without running them."""
        return _execute.hip_code_for(self, inputs, target=target)

    def last_scheduled_fusion_ir(self, tensor_transforms=False, override_user_schedule=False) -> str:
        raise RuntimeError(_NO_SCHEDULED_IR.format("last_scheduled_fusion_ir"))

    def scheduled_fusion_ir_for(self, inputs, tensor_transforms=False, override_user_schedule=False) -> str:
        raise RuntimeError(_NO_SCHEDULED_IR.format("scheduled_fusion_ir_for"))
