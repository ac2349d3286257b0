"""In-place updates (add_output(..., alias_input=)), as Thunder's nvFuser executor uses them for every
in-place op (optimizer steps, x.add_(...)), with nvFuser's output convention: the aliased output is not
returned, and the same value added again comes back as the updated input itself. On torch CPU tensors
(the simulated device) and on CUDA tensors where torch sees a GPU: the same plans, copy kernels and
outputs."""

from __future__ import annotations

import numpy as np
import pytest

from braze import DataType, FusionDefinition

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def test_returning_an_aliased_output_returns_the_updated_input(device):
    # nvFuser's test_returning_aliased_outputs: relu written into the input, then returned twice.
    x = torch.randn(1, 2, 3, 4, device=device)
    want = x.relu()

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=DataType.Float)
        zero = fd.define_scalar(0.0, dtype=DataType.Double)
        t4 = fd.ops.where(fd.ops.gt(t0, zero), t0, zero)
        fd.add_output(t4, t0)
        fd.add_output(t4)
        fd.add_output(t4)
    outputs = fd.execute([x])
    assert len(outputs) == 2
    for out in outputs:
        assert out.data_ptr() == x.data_ptr()
    torch.testing.assert_close(x, want)


def test_an_update_added_after_the_definition_was_printed_is_made(device):
    # Printing the definition part way (repr, fusion_ir) reads its evaluation order; the update added after
    # it is part of the order that printing and executing use.
    x = torch.randn(3, 5, device=device)
    want = x.relu()
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t1 = fd.ops.relu(t0)
        assert "relu" not in fd.fusion_ir()  # not an output yet: nothing to evaluate
        fd.add_output(t1, alias_input=t0)
    assert "= relu(T0)" in fd.fusion_ir()
    assert fd.execute([x]) == []
    torch.testing.assert_close(x, want)


def test_an_update_of_a_non_contiguous_input_writes_through_its_strides(device):
    # nvFuser's test_inplace_update_on_non_contiguous_inputs: a 2x2 view with strides (1, 3) of a 5-vector.
    storage = torch.randn(5, device=device)
    x = storage.as_strided((2, 2), (1, 3))
    before = storage.clone()
    want = x.relu()

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[2, 2], contiguity=[False, True], dtype=DataType.Float, stride_order=[0, 1])
        zero = fd.define_scalar(0.0, dtype=DataType.Double)
        t6 = fd.ops.set(fd.ops.cast(fd.ops.where(fd.ops.gt(t0, zero), t0, zero), DataType.Float))
        fd.add_output(t6, t0)
        fd.add_output(t6)
    (out,) = fd.execute([x])
    assert out.data_ptr() == x.data_ptr()
    torch.testing.assert_close(x, want)
    untouched = [i for i in range(5) if i not in (0, 1, 3, 4)]
    torch.testing.assert_close(storage[untouched], before[untouched])  # element 2 is outside the view


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_an_sgd_step_updates_every_parameter_and_returns_nothing(device, dtype):
    params = [torch.randn(shape, device=device, dtype=dtype) for shape in [(64, 33), (33,), (7, 5, 3)]]
    grads = [torch.randn_like(p) for p in params]
    want = [p.float() - 0.1 * g.float() for p, g in zip(params, grads)]

    with FusionDefinition() as fd:
        handles = []
        for p in params:
            handles.append(fd.from_pytorch(p))
        grad_handles = [fd.from_pytorch(g) for g in grads]
        lr = fd.define_scalar(0.1, dtype=DataType.Double)
        for p, g in zip(handles, grad_handles):
            stepped = fd.ops.sub(fd.ops.cast(p, DataType.Float), fd.ops.mul(fd.ops.cast(g, DataType.Float), lr))
            fd.add_output(fd.ops.cast(stepped, p.dtype), alias_input=p)
    for _ in range(2):  # the second run takes the cached plan
        assert fd.execute(params + grads) == []
    for p, g, w in zip(params, grads, want):
        w = w - 0.1 * g.float()
        torch.testing.assert_close(p.float(), w.to(dtype).float(), rtol=2e-2, atol=2e-2)


def test_an_output_that_views_the_updated_input_shows_it_before_the_update(device):
    x = torch.arange(12.0, device=device).reshape(3, 4)
    before = x.clone()

    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.permute(t, [1, 0]))
        fd.add_output(fd.ops.mul(t, 2.0), alias_input=t)
    (transposed,) = fd.execute([x])
    torch.testing.assert_close(transposed, before.t())
    torch.testing.assert_close(x, before * 2)


def test_an_update_through_a_transpose_of_the_same_input(device):
    x = torch.randn(6, 6, device=device)
    before = x.clone()

    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.permute(t, [1, 0]), alias_input=t)
    assert fd.execute([x]) == []
    torch.testing.assert_close(x, before.t())


def test_an_expanded_input_cannot_be_updated(device):
    x = torch.randn(1, 8, device=device).expand(4, 8)

    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[None, True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(t, 1.0), alias_input=t)
    with pytest.raises(ValueError, match=r"T0 is updated in place .* dim 0 is expanded"):
        fd.execute([x])


def test_numpy_inputs_follow_the_same_convention():
    x = np.arange(6, dtype=np.float32)

    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=True)
        y = fd.ops.add(t, 1.0)
        fd.add_output(y, alias_input=t)
        fd.add_output(y)
    (out,) = fd.execute([x])
    assert np.shares_memory(out, x)
    np.testing.assert_array_equal(x, np.arange(6, dtype=np.float32) + 1)


def test_an_output_reading_the_input_a_kernel_overwrites_sees_its_old_value(device):
    # One pointwise kernel writes x in place with a value that does not read x, and computes another
    # output that does: that output must read x before the kernel's store overwrites it.
    x = torch.randn(6, 33, device=device)
    y = torch.randn(6, 33, device=device)
    x_before = x.clone()
    with FusionDefinition() as fd:
        tx = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        ty = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        new = fd.ops.neg(ty)
        fd.add_output(new, alias_input=tx)
        fd.add_output(fd.ops.mul(new, tx))
    (product,) = fd.execute([x, y])
    torch.testing.assert_close(x, -y)
    torch.testing.assert_close(product, -y * x_before)
    assert [s.scheduler for s in fd.explain([x_before.clone(), y]).segments] == ["pointwise"]


def test_the_same_tensor_passed_for_an_updated_input_and_another(device):
    # Read element for element where the update is written (p <- p - 0.1 * p): fine, as separate tensors.
    with FusionDefinition() as fd:
        p = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        g = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.sub(p, fd.ops.mul(g, 0.1)), alias_input=p)
    x = torch.arange(8.0, device=device)
    fd.execute([x, x])
    torch.testing.assert_close(x, torch.arange(8.0, device=device) * 0.9)
    # Read by another kernel (a sum) or updated itself: the other read would see the new values, so the
    # plan refuses the pair by name, and the tensors are left as they were.
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        u = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.add(t, 100.0), alias_input=t)
        fd.add_output(fd.ops.sum(u, dims=[0]))
    y = torch.arange(4.0, device=device)
    with pytest.raises(ValueError, match=r"input 1 \(T1\) lies in the memory range of input 0 \(T0\)"):
        fd.execute([y, y])
    torch.testing.assert_close(y, torch.arange(4.0, device=device))
    (total,) = fd.execute([y, y.clone()])
    assert total.item() == 6.0
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        u = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.add(t, 1.0), alias_input=t)
        fd.add_output(fd.ops.add(u, 10.0), alias_input=u)
    z = torch.zeros(4, device=device)
    with pytest.raises(ValueError, match=r"lies in the memory range of input"):
        fd.execute([z, z])


def test_an_updated_input_returned_as_itself_shows_it_before_the_update():
    # Like any output viewing an updated input (README: saved first), in a plan and in the reference.
    from braze import execute as bx

    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(t)
        fd.add_output(fd.ops.mul(t, 3.0), alias_input=t)
    for run in (fd.execute, lambda inputs: bx.reference(fd, inputs)):
        x = np.arange(4, dtype=np.float32)
        (out,) = run([x])
        np.testing.assert_array_equal(out, np.arange(4, dtype=np.float32))
        np.testing.assert_array_equal(x, 3 * np.arange(4, dtype=np.float32))


def _vec(fd):
    return fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)


def test_the_updated_value_beside_the_input_as_it_was(device):
    """a <- 3a returned again as the updated a, and a itself returned as it was: the updated-a output came
    back as the saved old copy of a."""
    from braze import execute as bx

    with FusionDefinition() as fd:
        a = _vec(fd)
        y = fd.ops.mul(a, 3.0)
        fd.add_output(y, alias_input=a)
        fd.add_output(y)
        fd.add_output(a)
    x = torch.arange(4.0, device=device)
    y_out, a_out = fd.execute([x])
    assert y_out.data_ptr() == x.data_ptr()
    torch.testing.assert_close(x.cpu(), torch.arange(4.0) * 3)
    torch.testing.assert_close(a_out.cpu(), torch.arange(4.0))
    r = np.arange(4, dtype=np.float32)
    y_ref, a_ref = bx.reference(fd, [r])
    np.testing.assert_array_equal(y_ref, np.arange(4) * 3)
    np.testing.assert_array_equal(a_ref, np.arange(4))


def test_an_input_copied_into_another_while_its_kernel_updates_it(device):
    """a <- b + 1 and b <- a (the old a: prev.copy_(cur); cur.add_(d)): b got a's new value when the
    pointwise kernel wrote a in place before the copy into b ran."""
    for update in ("b + 1", "a + 1", "a + b"):
        with FusionDefinition() as fd:
            a, b = _vec(fd), _vec(fd)
            new = {"b + 1": lambda: fd.ops.add(b, 1.0), "a + 1": lambda: fd.ops.add(a, 1.0),
                   "a + b": lambda: fd.ops.add(a, b)}[update]()
            fd.add_output(new, alias_input=a)
            fd.add_output(a, alias_input=b)
        x, w = torch.arange(4.0, device=device), torch.full((4,), 10.0, device=device)
        want_a = {"b + 1": w + 1, "a + 1": x + 1, "a + b": x + w}[update].cpu()
        want_b = x.cpu().clone()
        fd.execute([x, w])
        torch.testing.assert_close(x.cpu(), want_a)
        torch.testing.assert_close(w.cpu(), want_b)


def test_two_updated_inputs_sharing_memory_are_refused_when_copies_write_them(device):
    with FusionDefinition() as fd:
        a, b = _vec(fd), _vec(fd)
        fd.add_output(fd.ops.mul(b, 2.0), alias_input=a)
        fd.add_output(fd.ops.add(a, 1.0), alias_input=b)
    buf = torch.arange(6.0, device=device)
    for pair in ([buf[0:4], buf[0:4]], [buf[0:4], buf[2:6]]):
        with pytest.raises(ValueError, match=r"input 0 \(T0\) lies in the memory range of input 1 \(T1\), and the fusion updates both"):
            fd.execute(pair)
    torch.testing.assert_close(buf.cpu(), torch.arange(6.0))
    x, w = torch.arange(4.0, device=device), torch.arange(4.0, device=device)
    fd.execute([x, w])  # apart: a <- 2b and b <- a + 1, both of the old values
    torch.testing.assert_close(x.cpu(), torch.arange(4.0) * 2)
    torch.testing.assert_close(w.cpu(), torch.arange(4.0) + 1)


def test_an_empty_input_with_zero_strides_is_updated_as_nothing():
    """numpy gives (3, 0) zeros the strides (0, 4): not an expanded dim, since there is nothing to write."""
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(a, 1.0), alias_input=a)
    for x in (np.zeros((3, 0), np.float32), torch.zeros(3, 0), np.zeros((2, 0, 3), np.float32)[0]):
        assert fd.execute([x]) == []


def test_an_output_returned_before_its_update_keeps_its_place():
    """add_output(y), add_output(z), add_output(y, alias_input=a): nvFuser returns [y, z] (the update
    does not move y), and so does braze now, the printed script included."""
    with FusionDefinition() as fd:
        a = _vec(fd)
        y, z = fd.ops.mul(a, 3.0), fd.ops.add(a, 100.0)
        fd.add_output(y)
        fd.add_output(z)
        fd.add_output(y, alias_input=a)
    x = np.arange(4, dtype=np.float32)
    y_out, z_out = fd.execute([x])
    np.testing.assert_array_equal(y_out, np.arange(4) * 3)
    assert np.shares_memory(y_out, x)
    np.testing.assert_array_equal(z_out, np.arange(4) + 100)
    namespace = {}
    exec(repr(fd), namespace)
    x = np.arange(4, dtype=np.float32)
    y_again, z_again = namespace["fd"].execute([x])
    np.testing.assert_array_equal(y_again, np.arange(4) * 3)
    np.testing.assert_array_equal(z_again, np.arange(4) + 100)


def test_an_update_bumps_the_autograd_version_and_refuses_a_leaf_that_requires_grad(device):
    """As torch's own in-place ops: the version counter of an updated tensor goes up (so a backward that
    saved its old value refuses to run, instead of using the new one: the gradient was 202 for 2), and a
    leaf that requires grad is refused while grad is enabled (an optimizer step runs under no_grad)."""
    with FusionDefinition() as fd:
        t = _vec(fd)
        fd.add_output(fd.ops.add(t, 100.0), alias_input=t)
    w = torch.ones(3, device=device, requires_grad=True)
    x = w * 1.0
    y = (x * x).sum()
    before = x._version
    fd.execute([x])
    assert x._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    p = torch.nn.Parameter(torch.ones(3, device=device))
    with pytest.raises(ValueError, match=r"input 0 \(T0\) is updated in place .* leaf tensor that requires grad"):
        fd.execute([p])
    torch.testing.assert_close(p.detach().cpu(), torch.ones(3))
    with torch.no_grad():
        fd.execute([p])
    torch.testing.assert_close(p.detach().cpu(), torch.full((3,), 101.0))
    with torch.inference_mode():
        z = torch.zeros(3, device=device)
        fd.execute([z])
    torch.testing.assert_close(z.cpu(), torch.full((3,), 100.0))


def test_an_update_through_a_copy_refuses_an_input_sharing_its_memory():
    # A negative-stride array is updated through a copy written back after the run, where the plan's
    # overlap checks see only the copy: one of two overlapping updates was lost.
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], contiguity=[False], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], contiguity=[False], dtype=DataType.Float)
        fd.add_output(fd.ops.add(a, 1.0), alias_input=a)
        fd.add_output(fd.ops.mul(b, 10.0), alias_input=b)
    buf = np.arange(4, dtype=np.float32)
    for first, second in ((buf[::-1], buf), (buf, buf[::-1]), (buf[::-1], buf[::-1])):
        with pytest.raises(ValueError, match=r"input 0 \(T0\) shares memory with input 1 \(T1\), and input \d is "
                                             r"updated in place through a copy"):
            fd.execute([first, second])
    np.testing.assert_array_equal(buf, np.arange(4))
    other = np.arange(4, dtype=np.float32)
    fd.execute([buf[::-1], other])
    np.testing.assert_array_equal(buf, np.arange(4) + 1)
    np.testing.assert_array_equal(other, np.arange(4) * 10)


def test_a_view_of_a_read_only_input_is_read_only():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.permute(x, [1, 0]))
        fd.add_output(fd.ops.mul(x, 2.0))
    frozen = np.frombuffer(np.arange(6, dtype=np.float32).tobytes(), dtype=np.float32).reshape(2, 3)
    view, doubled = fd.execute([frozen])
    assert not view.flags.writeable and doubled.flags.writeable
    np.testing.assert_array_equal(view, frozen.T)


def test_a_view_of_an_input_sharing_memory_with_an_update_is_refused():
    # b is a itself: permute(b) would be a live view showing a's update, where the reference computes every
    # output from the inputs as given.
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(a, 2.0), alias_input=a)
        fd.add_output(fd.ops.permute(a, [1, 0]))
        fd.add_output(fd.ops.permute(b, [1, 0]))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(ValueError, match=r"input 1 \(T1\) lies in the memory range of input 0 \(T0\), which the fusion updates "
                                         r"in place after its kernels"):
        fd.execute([x, x])
    np.testing.assert_array_equal(x, np.arange(6).reshape(2, 3))
    y = x.copy()
    ta, tb = fd.execute([x, y])
    np.testing.assert_array_equal(ta, np.arange(6).reshape(2, 3).T)
    np.testing.assert_array_equal(tb, y.T)
    np.testing.assert_array_equal(x, np.arange(6).reshape(2, 3) * 2)


def test_an_update_through_a_copy_beside_interleaved_columns_runs():
    # Even columns reversed (a copy, written back) and odd columns: the same memory range, no element shared.
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], dtype=DataType.Float)
        fd.add_output(fd.ops.add(a, 1.0), alias_input=a)
        fd.add_output(fd.ops.mul(b, 2.0))
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    (doubled,) = fd.execute([x[:, 4::-2], x[:, 1::2]])
    want = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(doubled, want[:, 1::2] * 2)
    want[:, 0::2] += 1
    np.testing.assert_array_equal(x, want)


def test_the_cached_update_follows_torchs_autograd_rules_on_its_fast_path():
    # CPU tensors standing in for CUDA ones (a cache that plans for an H100 and launches nothing): the
    # cached execute of an update goes through the C fast path, which bumps the updated input's autograd
    # version as torch's in-place ops do, leaves inference tensors alone, and leaves a leaf tensor that
    # requires grad to the Python path's error while grad is enabled.
    from braze import _C

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(t0, fd.ops.broadcast(t1, [True, False])), alias_input=t0)
    fd.__dict__["_gpu_caches"] = {"auto": _C.FusionCache(fd._fusion, "auto", no_device="h100",
                                                         torch_cpu_stand_ins=True)}
    x, w = torch.zeros(4, 8), torch.ones(8)
    assert fd.execute([x, w]) == []
    runner, ran = fd.__dict__["_torch_fast"], []  # the next executes take the C path: counted here

    def counting(inputs):
        outputs = runner(inputs)
        ran.append(outputs is not None)
        return outputs

    fd.__dict__["_torch_fast"] = counting
    before = x._version
    fd.execute([x, w])
    fd.execute((x, w), device=0, _enable_options=None, _disable_options=None)
    assert ran == [True, True] and x._version == before + 2 and w._version == 0
    with torch.inference_mode():
        frozen = torch.zeros(4, 8)
    fd.execute([frozen, w])  # an inference tensor has no version to bump
    leaf = torch.zeros(4, 8, requires_grad=True)
    with pytest.raises(ValueError, match="input 0 .* leaf tensor that requires grad"):
        fd.execute([leaf, w])
    assert ran == [True, True, True, False] and leaf._version == 0  # the runner declined, the function refused
    with torch.no_grad():
        fd.execute([leaf, w])
    assert ran[-1] and leaf._version == 1


def test_too_few_inputs_of_an_update_get_the_count_error_with_grad_enabled():
    """torch's leaf rule is checked at the updated positions: where the caller passed fewer inputs, the error
    says how many it takes (not an IndexError from the check)."""
    torch = pytest.importorskip("torch")
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.add(a, b), alias_input=b)
    with torch.enable_grad(), pytest.raises(ValueError, match="expected 2 inputs, got 1"):
        fd.execute([torch.zeros(3)])
