"""FusionDefinition.execute's cached torch path, written in C (_C.torch_fast_method): once a GPU execute has
put the fusion's torch runner in the definition's __dict__, calls on torch tensors in nvFuser's and
Thunder's call forms reach it without entering the Python function; everything else goes to the function.
Without a GPU: a cache that plans for an H100 and launches nothing, and the stand-in torch module of
test_gpu_binding_no_device."""

from __future__ import annotations

import gc
import inspect
import types
import weakref

import numpy as np
import pytest

from braze import DataType, FusionDefinition, _C, execute, fusion_definition, repro
from braze import generator as braze_generator
from test_gpu_binding_no_device import BF16, Output, StandInTensor, cached_stand_in_layer_norm, stand_in_torch


def cached_layer_norm(monkeypatch):
    """A bf16 layer norm whose first execute on stand-in tensors opened the fast path, and its inputs."""
    torch, fd, cache, x, w = cached_stand_in_layer_norm(monkeypatch)
    assert callable(fd.__dict__["_torch_fast"])
    return torch, fd, cache, x, w


def counted_runner(fd):
    """Replaces the definition's runner with one that records each call's outcome."""
    runner, calls = fd.__dict__["_torch_fast"], []

    def counting(inputs):
        outputs = runner(inputs)
        calls.append(outputs is not None)
        return outputs

    fd.__dict__["_torch_fast"] = counting
    return calls


def test_the_method_looks_like_the_function_it_wraps():
    method = FusionDefinition.execute
    function = method.__wrapped__
    assert inspect.isfunction(function) and function.__name__ == "execute"
    assert method.__name__ == "execute" and method.__qualname__ == "FusionDefinition.execute"
    assert method.__doc__ == function.__doc__ and "Runs the fusion" in method.__doc__
    assert method.__module__ == function.__module__
    with FusionDefinition() as fd:
        fd.add_output(fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float))
    assert inspect.signature(fd.execute) == inspect.signature(function.__get__(fd))
    assert "device" in inspect.signature(fd.execute).parameters
    (out,) = fd.execute([np.arange(3, dtype=np.float32)])  # host inputs: the function's own path
    np.testing.assert_array_equal(out, np.arange(3, dtype=np.float32))


def test_calls_in_the_fast_forms_reach_the_runner_and_the_rest_the_function(monkeypatch):
    torch, fd, cache, x, w = cached_layer_norm(monkeypatch)
    calls = counted_runner(fd)
    bound = fd.execute  # a bound method of the C method, called later
    thunder = {"save_repro_inputs": False, "_enable_options": None, "_disable_options": None}
    for args, kwargs in [(([x, w],), {}), (([x, w], 0), {}), (([x, w],), {"device": None}),
                         (((x, w),), {"device": 0, **thunder}), (([x, w], "cuda:0"), {"profile": False})]:
        torch.made.clear()
        (out,) = fd.execute(*args, **kwargs)
        assert isinstance(out, Output) and len(torch.made) == 1, (args, kwargs)
    (out,) = bound([x, w])
    assert isinstance(out, Output)
    assert calls == [True] * 6 and len(cache) == 1
    # Not the runner's: the CPU as the device, a keyword braze does not ignore, device twice, no inputs.
    with pytest.raises(RuntimeError, match=r"execute\(device='cpu'\): the inputs are on a GPU"):
        fd.execute([x, w], device="cpu")
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        fd.execute([x, w], _enable_option=[])
    with pytest.raises(TypeError, match="multiple values for argument 'device'"):
        fd.execute([x, w], 0, device=0)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        fd.execute()
    assert calls == [True] * 6


def test_inputs_the_runner_declines_go_the_general_way(monkeypatch):
    _, fd, cache, x, w = cached_layer_norm(monkeypatch)
    calls = counted_runner(fd)
    (out,) = fd.execute([x.array, w.array])  # numpy arrays: the simulator, through the function
    assert out.shape == (3, 5, 1600) and calls == [False]
    # The host run closed the fast path (the last run is the host's: last_cuda_code shows it); the next
    # torch execute opens it again.
    assert "_torch_fast" not in fd.__dict__ and fd.__dict__["_last_run_was_gpu"] is False
    fd.execute([x, w])
    assert callable(fd.__dict__["_torch_fast"]) and fd.__dict__["_last_gpu_cache"] is cache
    assert fd.__dict__["_last_run_was_gpu"] is True


def test_an_error_on_the_fast_path_is_reported_as_the_function_reports_it(monkeypatch):
    _, fd, _, x, w = cached_layer_norm(monkeypatch)
    reported = []
    monkeypatch.setattr(repro, "report", lambda *args: reported.append(args))
    x.negative = True
    with pytest.raises(ValueError, match="input 0: a torch tensor with its negative bit set") as raised:
        fd.execute((x, w), device=0, _enable_options=None)
    with pytest.raises(ValueError, match="input 0: a torch tensor with its negative bit set") as general:
        fd.execute((x, w), device=0, _enable_options=None, bookend="auto")  # the Python function's own path
    fast_report, general_report = reported
    assert fast_report[0] is fd and fast_report[1] == (x, w) and fast_report[2] is raised.value
    # The keywords a reproducer records: those the function does not name, as its own path passes them.
    assert fast_report[3:] == (False, None)
    assert general_report[2] is general.value and general_report[3:] == (False, {"bookend": "auto"})
    x.negative = False

    def interrupted(inputs):
        raise KeyboardInterrupt

    fd.__dict__["_torch_fast"] = interrupted
    with pytest.raises(KeyboardInterrupt):
        fd.execute([x, w])
    assert len(reported) == 2  # an interrupt is not an execute error: no reproducer


def test_a_failing_report_raises_its_own_error(monkeypatch):
    _, fd, _, x, w = cached_layer_norm(monkeypatch)

    def broken(*args):
        raise RuntimeError("the report failed")

    fd.__dict__["_torch_fast"] = lambda inputs: 1 / 0
    monkeypatch.setattr(repro, "report", broken)  # what the C method's hook calls
    with pytest.raises(RuntimeError, match="the report failed") as raised:
        fd.execute([x, w])
    assert isinstance(raised.value.__context__, ZeroDivisionError)


def test_a_subclass_keeps_its_own_execute(monkeypatch):
    torch = stand_in_torch(monkeypatch)

    class Logged(FusionDefinition):
        seen = []

        def execute(self, inputs, **kwargs):
            self.seen.append(len(inputs))
            return super().execute(inputs, **kwargs)

    with Logged() as fd:
        from test_shape_generic import sizeless_layer_norm

        sizeless_layer_norm(fd, DataType.BFloat16)
    fd.__dict__["_gpu_caches"] = {"auto": _C.FusionCache(fd._fusion, "auto", no_device="h100")}
    x = StandInTensor(np.zeros((3, 5, 1600), BF16), torch)
    w = StandInTensor(np.zeros(1600, BF16), torch)
    fd.execute([x, w])
    calls = counted_runner(fd)
    fd.execute([x, w])
    assert Logged.seen == [2, 2] and calls == [True]  # the override, then FusionDefinition's fast path


def test_the_class_level_call_and_print_repro(monkeypatch, capsys):
    """FusionDefinition.execute(fd, ...) (how tools/thunder_on_cpu.py calls it) takes the fast path too;
    print_repro=True is the function's (it prints a reproducer first)."""
    _, fd, _, x, w = cached_layer_norm(monkeypatch)
    calls = counted_runner(fd)
    (out,) = FusionDefinition.execute(fd, [x, w], device=0)
    assert isinstance(out, Output) and calls == [True]
    (out,) = fd.execute([x, w], print_repro=True)
    assert calls == [True]  # the function's general path, which prints the reproducer (or why it cannot) first
    assert "reproducer" in capsys.readouterr().out
    class LooksFast:
        _torch_fast = staticmethod(lambda inputs: ["ran"])

    with pytest.raises(AttributeError):
        FusionDefinition.execute(LooksFast, [x, w])  # a class, not a definition: its dict is not looked in
    with pytest.raises(TypeError):
        type(FusionDefinition.execute)()  # made only by torch_fast_method


def test_fusions_that_update_inputs_keep_torchs_version_rules_on_their_fast_path(monkeypatch):
    """An in-place update (add_output(alias_input=)) takes the C fast path too, with torch's rules: the
    updated input's autograd version bumped after each run (an inference tensor's not), and a leaf tensor
    that requires grad, while grad is enabled, left to the Python path, which refuses it before running."""
    torch = stand_in_torch(monkeypatch)
    bumped, grad = [], [True]
    torch.is_grad_enabled = lambda: grad[0]
    torch.autograd = types.SimpleNamespace(graph=types.SimpleNamespace(increment_version=bumped.append))
    inference = set()
    monkeypatch.setattr(StandInTensor, "is_inference", lambda self: id(self) in inference, raising=False)
    monkeypatch.setattr(StandInTensor, "is_leaf", True, raising=False)
    monkeypatch.setattr(StandInTensor, "requires_grad", False, raising=False)
    with FusionDefinition() as fd:
        acc = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        step = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.cast(fd.ops.add(acc, step), DataType.BFloat16), alias_input=acc)
    cache = _C.FusionCache(fd._fusion, "auto", no_device="h100")
    fd.__dict__["_gpu_caches"] = {"auto": cache}
    a, b = (StandInTensor(np.zeros(64, BF16), torch) for _ in range(2))
    fd.execute([a, b])
    assert "_torch_fast" in fd.__dict__
    calls = counted_runner(fd)
    fd.execute((a, b), device=0, _enable_options=None)
    assert calls == [True] and bumped == [[a], [a]] and len(cache) == 1
    inference.add(id(a))
    fd.execute([a, b])
    assert calls == [True, True] and len(bumped) == 2
    inference.clear()
    monkeypatch.setattr(StandInTensor, "requires_grad", True)
    with pytest.raises(Exception, match="leaf tensor that requires grad"):
        fd.execute([a, b])
    assert calls == [True, True, False] and len(bumped) == 2  # declined; the Python path raised before running
    grad[0] = False  # torch.no_grad(): an optimizer step's updates
    fd.execute([a, b])
    assert calls == [True, True, False, True] and bumped[-1] == [a] and len(bumped) == 3


def test_a_cycle_through_the_method_is_collected():
    """The method's references are visible to the collector: a cycle through it is freed."""

    class Holder:
        pass

    holder = Holder()
    holder.method = _C.torch_fast_method(lambda *args: holder, lambda device: True, {}, lambda *args: None, set())
    gone = weakref.ref(holder)
    del holder
    gc.collect()
    assert gone() is None


def test_a_device_seen_before_is_answered_without_asking_again(monkeypatch):
    """device= as an object (a torch.device): names_a_gpu answers once and keeps its answer in the dict the C
    method reads; later calls find it there without calling names_a_gpu."""
    _, fd, _, x, w = cached_layer_norm(monkeypatch)
    calls = counted_runner(fd)
    known, asked = {}, []

    def names_a_gpu(device):
        asked.append(device)
        known[device] = True
        return True

    method = _C.torch_fast_method(FusionDefinition.execute.__wrapped__, names_a_gpu, known,
                                  fusion_definition._fast_path_failed, execute.FAST_KWARGS)
    device = object()
    for _ in range(3):
        (out,) = method(fd, [x, w], device=device)
        assert isinstance(out, Output)
    assert calls == [True] * 3 and asked == [device]
    known[device] = False  # an answer that says no: the function's general path, which ignores the device
    (out,) = method(fd, [x, w], device=device)
    assert calls == [True] * 3 and asked == [device]
    # An int is an index without asking; a bool or a float equal to one is asked about by its name.
    assert execute.names_a_gpu(0) and not execute.names_a_gpu(True) and not execute.names_a_gpu(0.0)
    assert 0 not in execute.GPU_DEVICE_NAMES or execute.GPU_DEVICE_NAMES[0] is False


class StandInGenerator:
    """torch.cuda.default_generators[i] as generator.py reads it: a Philox seed and an offset."""

    def __init__(self, seed):
        self.seed, self.offset = seed, 0

    def initial_seed(self):
        return self.seed

    def get_offset(self):
        return self.offset

    def set_offset(self, offset):
        self.offset = offset


def test_a_fusion_drawing_seeds_takes_the_runner_which_draws_once_per_run(monkeypatch):
    """Two random ops without seeds (Thunder's dropout): the runner reads the inputs, then draws each op's seed
    and offset from the device's generator as the function does, once per execute; a call it declines draws
    nothing."""
    torch = stand_in_torch(monkeypatch)
    generator = StandInGenerator(2**63 + 5)  # past int64: drawn as its bits
    torch.cuda = types.SimpleNamespace(default_generators=[generator], current_device=lambda: 0)
    monkeypatch.setattr(StandInTensor, "device", types.SimpleNamespace(index=0), raising=False)
    drawn, devices = [], []
    draw_for = braze_generator.drawer

    def recording_drawer(ops):
        draw = draw_for(ops)

        def recording(flat, device=-1):
            values = draw(flat, device)
            drawn.append(values)
            devices.append(device)
            return values
        return recording

    monkeypatch.setattr(braze_generator, "drawer", recording_drawer)
    with FusionDefinition() as fd:
        noise = fd.ops.uniform(0.0, 1.0, [64], dtype=DataType.Float)
        keep = fd.ops.lt(fd.ops.uniform(0.0, 1.0, [64], dtype=DataType.Float), 0.9)
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.cast(fd.ops.where(keep, fd.ops.add(x, noise), 0.0), DataType.BFloat16))
    assert braze_generator.drawn_positions(fd) == [0, 2]  # each op's seed, its offset after it; x is input 4
    cache = _C.FusionCache(fd._fusion, "auto", no_device="h100")
    fd.__dict__["_gpu_caches"] = {"auto": cache}
    xs = StandInTensor(np.zeros(64, BF16), torch)
    fd.execute([xs])  # the function's path: it draws, runs, then opens the runner
    assert generator.offset == 8 and drawn == []
    calls = counted_runner(fd)
    for k in range(3):
        (out,) = fd.execute((xs,), device=0, _enable_options=None)
        assert isinstance(out, Output)
        assert drawn[-1] == [5 - 2**63, 8 * (k + 1), 5 - 2**63, 8 * (k + 1) + 4]
    assert calls == [True] * 3 and generator.offset == 32 and len(cache) == 1  # one plan: the seeds in place
    assert devices == [0] * 3  # the runner names the inputs' GPU: the drawer reads no input again
    # Declined before drawing: the function says what is wrong, drawing nothing either.
    with pytest.raises(Exception, match="expected 1 inputs, got 2"):
        fd.execute([xs, xs])
    assert calls == [True] * 3 + [False] and len(drawn) == 3 and generator.offset == 32
    # An input's error from the runner names it as the caller passed it.
    monkeypatch.setattr(xs, "negative", True, raising=False)
    with pytest.raises(Exception, match="input 0: a torch tensor with its negative bit set"):
        fd.execute([xs])
    assert len(drawn) == 3 and generator.offset == 32
    # Positions that overlap (a seed where the previous offset is) are refused when the runner is made.
    with pytest.raises(Exception, match="drawn positions 0 and 1 overlap"):
        cache.torch_runner(True, [], [0, 1], lambda flat: [])
