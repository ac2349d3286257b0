"""nvFuser-style scripts, written here in the style of nvFuser's own frontend tests (a fusion_func per
case, torch CPU tensors in, torch's result as the reference), for the forms real nvFuser scripts use:
define_scalar's positional and empty forms, from_pytorch, pytorch_utils, rank broadcasting, a 0-D
index, float sizes in define_vector, error types, repr with aliases, inputs()/outputs(), print_repro,
ids and the cache of definitions, and the complex dtypes braze leaves out."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from braze import BrazeValueError, DataType, FusionDefinition  # noqa: E402
from braze import pytorch_utils  # noqa: E402
from test_cross_entropy import thunders_cross_entropy  # noqa: E402


def exec_nvfuser(fusion_func, inputs, **kwargs):
    """nvFuser's test helper in miniature: define, execute, and check that repr(fd) rebuilds a fusion
    that gives the same outputs."""
    with FusionDefinition() as fd:
        fusion_func(fd)
    out = fd.execute(inputs, **kwargs)
    namespace = {}
    exec(repr(fd), namespace)  # noqa: S102 - the printed script is braze's own output
    again = namespace["fd"].execute(inputs)
    for a, b in zip(out, again):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    return out, fd


def test_define_scalar_with_the_dtype_first_and_with_nothing():
    inputs = [torch.randn(2, 3), 2.5, 0.5]

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.from_pytorch(inputs[0])
        s0 = fd.define_scalar(DataType.Double)  # the dtype as the first positional argument
        s1 = fd.define_scalar()  # no value, no dtype: a Double input
        fd.add_output(fd.ops.add(fd.ops.mul(t0, s0), s1))

    (out,), fd = exec_nvfuser(fusion_func, inputs)
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, inputs[0] * 2.5 + 0.5)
    assert "fd.define_scalar(None, dtype=DataType.Double)" in repr(fd)


def test_from_pytorch_takes_sizes_strides_and_dtype():
    x = torch.randn(4, 6).to(torch.bfloat16).t()  # transposed: strides (1, 6)
    one = torch.ones(1, 6)  # a size-1 dim is a broadcast dim
    scalar = torch.tensor(3.0)  # a 0-D CPU tensor is an is_cpu input, as in nvFuser

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.from_pytorch(x)
        t1 = fd.from_pytorch(one.t())
        t2 = fd.from_pytorch(scalar)
        t3 = fd.ops.mul(fd.ops.add(fd.ops.cast(t0, DataType.Float), t1), t2)
        fd.add_output(fd.ops.cast(t3, DataType.BFloat16))

    (out,), fd = exec_nvfuser(fusion_func, [x, one.t(), scalar])
    assert out.dtype == torch.bfloat16 and out.shape == (6, 4)
    torch.testing.assert_close(out.float(), ((x.float() + one.t()) * 3.0).to(torch.bfloat16).float())
    assert "is_cpu=True" in repr(fd) and "stride_order=[0, 1]" in repr(fd)

    with FusionDefinition() as fd:
        t = fd.from_pytorch(torch.ones(2, 5), static_sizes=True)
        fd.add_output(t)
    assert "shape=[2, 5]" in repr(fd)


def test_from_pytorch_refuses_what_is_not_a_tensor_and_complex_tensors():
    with FusionDefinition() as fd:
        with pytest.raises(TypeError, match=r"from_pytorch: expected a torch.Tensor, got list"):
            fd.from_pytorch([1, 2])
        with pytest.raises(TypeError, match=r"torch.complex64: braze has no complex dtypes"):
            fd.from_pytorch(torch.ones(2, dtype=torch.complex64))


def test_from_pytorch_without_torch_says_it_needs_torch():
    script = (
        "import sys; sys.modules['torch'] = None\n"
        "from braze import FusionDefinition\n"
        "with FusionDefinition() as fd:\n"
        "    try:\n"
        "        fd.from_pytorch(object())\n"
        "    except ImportError as e:\n"
        "        print('ImportError:', e)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "ImportError: this needs PyTorch (pip install torch)" in result.stdout, result.stderr


def test_pytorch_utils_map_dtypes_both_ways():
    assert pytorch_utils.torch_dtype_to_nvfuser_dtype(torch.float32) == DataType.Float
    assert pytorch_utils.torch_dtype_to_nvfuser_dtype(torch.bfloat16) == DataType.BFloat16
    assert pytorch_utils.torch_dtype_to_nvfuser_dtype(torch.float8_e4m3fn) == DataType.Float8_e4m3fn
    assert pytorch_utils.torch_dtype_to_nvfuser_dtype(torch.int64) == DataType.Int64
    assert pytorch_utils.torch_dtype_to_nvfuser_dtype(torch.bool) == DataType.Bool
    assert pytorch_utils.torch_dtype_to_nvfuser_dtype(float) == DataType.Double
    assert pytorch_utils.torch_dtype_to_nvfuser_dtype(int) == DataType.Int64
    assert pytorch_utils.python_scalar_to_nvfuser_dtype(True) == DataType.Bool
    assert pytorch_utils.nvfuser_dtype_to_torch_dtype(DataType.Half) == torch.float16
    with pytest.raises(TypeError, match="no complex dtypes"):
        pytorch_utils.torch_dtype_to_nvfuser_dtype(torch.complex128)


def test_binary_ops_broadcast_the_lower_rank_operand():
    inputs = [torch.tensor(1.5), torch.randn(2, 3, 4), torch.randn(4), torch.randn(3, 1)]

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)  # 0-D with a 3-D
        t1 = fd.from_pytorch(inputs[1])
        t2 = fd.from_pytorch(inputs[2])
        t3 = fd.from_pytorch(inputs[3])
        fd.add_output(fd.ops.add(t0, t1))
        fd.add_output(fd.ops.mul(t1, t2))
        fd.add_output(fd.ops.where(fd.ops.gt(t3, 0.0), t1, t2))

    (a, b, c), _ = exec_nvfuser(fusion_func, inputs)
    torch.testing.assert_close(a, inputs[0] + inputs[1])
    torch.testing.assert_close(b, inputs[1] * inputs[2])
    torch.testing.assert_close(c, torch.where(inputs[3] > 0, inputs[1], inputs[2]))


def test_index_select_with_a_0d_index():
    inputs = [torch.randn(5, 3), torch.tensor(3)]

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.from_pytorch(inputs[0])
        t1 = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Int64)
        fd.add_output(fd.ops.index_select(t0, t1, 0))

    (out,), _ = exec_nvfuser(fusion_func, inputs)
    torch.testing.assert_close(out, torch.index_select(inputs[0], 0, inputs[1]))


def test_define_vector_casts_a_float_scalar_to_int():
    inputs = [torch.randn(6, 4), 3.0]

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.from_pytorch(inputs[0])
        s0 = fd.define_scalar(DataType.Double)
        shape = fd.define_vector([s0, 8], dtype=DataType.Int)
        fd.add_output(fd.ops.reshape(t0, shape))

    (out,), _ = exec_nvfuser(fusion_func, inputs)
    torch.testing.assert_close(out, inputs[0].reshape(3, 8))


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda fd, t: fd.ops.squeeze(t, [0]), r"squeeze: dim 0 of T0"),
        (lambda fd, t: fd.ops.slice(t, [-1, -2], [5, 5], [7, 7]), r"slice: start_indices\[0\] = -1 must be >= 0"),
        (lambda fd, t: fd.ops.slice(t, [3, 4], [1, 2], [1, 1]), r"slice: end_indices\[0\] = 1 must be >= start"),
        (lambda fd, t: fd.ops.slice(t, [0, 0, 0], [4, 4, 4]), r"slice: start_indices \(3\) and end_indices \(3\)"),
        (lambda fd, t: fd.ops.sum(t, [2]), r"sum: dim 2 is out of range"),
        (lambda fd, t: fd.ops.permute(t, [0, 0]), r"permute: .*not a permutation"),
    ],
    ids=["squeeze", "slice-start", "slice-end", "slice-rank", "sum-dim", "permute"],
)
def test_definition_errors_are_runtime_errors_as_in_nvfuser(build, match):
    # nvFuser scripts catch RuntimeError; braze's errors are that and the precise builtin too.
    x = torch.randn(10, 10)
    with FusionDefinition() as fd:
        t0 = fd.from_pytorch(x)
        with pytest.raises(RuntimeError, match=match) as raised:
            build(fd, t0)
    assert isinstance(raised.value, (ValueError, IndexError))


def test_slice_with_ends_past_the_extent_is_clamped():
    inputs = [torch.randn(5, 5)]

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.from_pytorch(inputs[0])
        fd.add_output(fd.ops.slice(t0, start_indices=[2, 2], end_indices=[4, 4]))
        fd.add_output(fd.ops.slice(t0, start_indices=[6, 6], end_indices=[8, 8], strides=[1, 1]))

    (inner, empty), _ = exec_nvfuser(fusion_func, inputs)
    torch.testing.assert_close(inner, inputs[0][2:4, 2:4])
    assert empty.shape == (0, 0)


def test_repr_of_a_fusion_whose_output_aliases_an_input_rebuilds_it():
    x = torch.randn(4, 4)

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.from_pytorch(x)
        t1 = fd.ops.add(t0, 1.0)
        fd.add_output(t1, alias_input=t0)
        fd.add_output(t1)  # listed again: returned as the updated t0 itself, as nvFuser does

    with FusionDefinition() as fd:
        fusion_func(fd)
    text = repr(fd)
    assert text.count("alias_input=") == 1
    namespace = {}
    exec(text, namespace)  # noqa: S102
    rebuilt = namespace["fd"]
    a, b = x.clone(), x.clone()
    (out_a,), (out_b,) = fd.execute([a]), rebuilt.execute([b])
    assert out_a.data_ptr() == a.data_ptr() and out_b.data_ptr() == b.data_ptr()
    torch.testing.assert_close(a, x + 1.0)
    torch.testing.assert_close(b, a)


def test_inputs_and_outputs_are_state_indices():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True)
        s1 = fd.define_scalar(DataType.Double)
        t2 = fd.ops.mul(t0, s1)
        fd.add_output(t2)
    assert fd.inputs() == [t0.index, s1.index] == [0, 1]
    assert fd.outputs() == [t2.index]


def test_print_repro_prints_the_script_on_success(capsys):
    x = torch.randn(3)
    with FusionDefinition() as fd:
        t0 = fd.from_pytorch(x)
        fd.add_output(fd.ops.exp(t0))
    (out,) = fd.execute([x], print_repro=True)
    printed = capsys.readouterr().out
    assert printed.startswith("# braze reproducer") and "fd.ops.exp(T0)" in printed
    torch.testing.assert_close(out, torch.exp(x))


def _layer(fd, x):
    t0 = fd.from_pytorch(x)
    fd.add_output(fd.ops.sum(fd.ops.mul(t0, t0), [1]))


def test_identical_definitions_share_an_id_and_their_prepared_plans():
    x = torch.randn(3, 17)
    with FusionDefinition() as first:
        _layer(first, x)
    first.execute([x])
    with FusionDefinition() as second:
        _layer(second, x)
    assert second.id() == first.id()
    assert second.explain([x]).cache == "hit"  # planned and compiled once, for both
    with FusionDefinition() as other:
        t0 = other.from_pytorch(x)
        other.add_output(fd_sum := other.ops.sum(t0, [0]))
        assert fd_sum.ndim == 1
    assert other.id() != first.id()
    again = FusionDefinition(first.id())  # nvFuser's FusionDefinition(id): the cached definition
    (out,) = again.execute([x])
    torch.testing.assert_close(out, (x * x).sum(1))
    with pytest.raises(BrazeValueError, match=r"FusionDefinition\(id=100000\): no definition has that id"):
        FusionDefinition(100000)
    with pytest.raises(RuntimeError, match=r"id: the FusionDefinition has no definition yet"):
        FusionDefinition().id()


def test_complex_dtypes_are_named_and_refused():
    with FusionDefinition() as fd:
        with pytest.raises(TypeError, match=r"dtype is DataType.ComplexFloat: braze has no complex dtypes"):
            fd.define_tensor(shape=[-1], dtype=DataType.ComplexFloat)
        with pytest.raises(TypeError, match=r"braze has no complex dtypes"):
            fd.define_scalar(1j)
        with pytest.raises(TypeError, match=r"define_scalar: dtype is DataType.ComplexFloat: braze has no complex"):
            fd.define_scalar(DataType.ComplexFloat)
        t0 = fd.define_tensor(shape=[-1])
        with pytest.raises(TypeError, match=r"cast: dtype is DataType.ComplexDouble"):
            fd.ops.cast(t0, DataType.ComplexDouble)


def test_dtypes_nvfuser_names_that_braze_lacks_exist_and_are_refused_when_used():
    # Lightning Thunder's nvFuser executor maps torch.uint64 to DataType.UInt64 when it is imported
    # (for nvFuser 0.2.27 and later, the level braze reports): without the name, `import thunder` fails.
    with FusionDefinition() as fd:
        for name, why in (("UInt64", "only unsigned integer dtype is UInt8"), ("Float8_e8m0fnu", "8-bit float")):
            dtype = getattr(DataType, name)
            assert repr(dtype) == f"DataType.{name}"
            with pytest.raises(TypeError, match=rf"define_tensor: dtype is DataType.{name}: braze's {why}"):
                fd.define_tensor(shape=[-1], dtype=dtype)
        t0 = fd.define_tensor(shape=[-1])
        with pytest.raises(TypeError, match=r"cast: dtype is DataType.UInt64"):
            fd.ops.cast(t0, DataType.UInt64)


def test_torch_cpu_tensors_come_back_as_torch_tensors_sharing_views():
    x = torch.randn(2, 8)

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.from_pytorch(x)
        fd.add_output(fd.ops.reshape(t0, [4, 4]))  # a view of the input (bookended)
        fd.add_output(fd.ops.cast(fd.ops.gt(t0, 0.0), DataType.Bool))

    (view, positive), _ = exec_nvfuser(fusion_func, [x])
    assert isinstance(view, torch.Tensor) and view.dtype == torch.float32
    assert view.data_ptr() == x.data_ptr()  # zero-copy, as torch's reshape
    assert positive.dtype == torch.bool
    torch.testing.assert_close(positive, x > 0)


def test_cumsum_scatter_index_put_accumulate_and_triu_match_torch():
    x = torch.randn(4, 6)
    ints = torch.randint(-50, 50, (4, 6), dtype=torch.int8)
    index = torch.tensor([[3, 0, 1, 2, 0, 1], [1, 2, 3, 0, 2, 3]])
    src = torch.randn(2, 6)
    rows = torch.tensor([0, 3, 0, -1], dtype=torch.int32)
    value = torch.randn(4, 6)

    def fusion_func(fd: FusionDefinition) -> None:
        t0, t1 = fd.from_pytorch(x), fd.from_pytorch(ints)
        t2, t3 = fd.from_pytorch(index), fd.from_pytorch(src)
        t4, t5 = fd.from_pytorch(rows), fd.from_pytorch(value)
        fd.add_output(fd.ops.cumsum(t0, 1))
        fd.add_output(fd.ops.cumsum(t1, 0))
        fd.add_output(fd.ops.scatter(t0, t2, t3, 0))
        fd.add_output(fd.ops.index_put_accumulate(t0, t4, t5))
        fd.add_output(fd.ops.triu(t0, 1))
        fd.add_output(fd.ops.triu(t1, -1))

    (c0, c1, s, acc, u0, u1), _ = exec_nvfuser(fusion_func, [x, ints, index, src, rows, value])
    torch.testing.assert_close(c0, torch.cumsum(x, 1))
    assert c1.dtype == torch.int64 and torch.equal(c1, torch.cumsum(ints, 0))
    torch.testing.assert_close(s, x.scatter(0, index, src), rtol=0, atol=0)
    torch.testing.assert_close(acc, x.index_put((rows.long(),), value, accumulate=True))
    assert torch.equal(u0, torch.triu(x, 1)) and torch.equal(u1, torch.triu(ints, -1))


def test_random_ops_take_nvfusers_forms_and_depend_on_seed_and_offset():
    x = torch.randn(64, 33).to(torch.bfloat16)

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.from_pytorch(x)
        seed = fd.define_scalar(DataType.Int)
        offset = fd.define_scalar(DataType.Int)
        fd.add_output(fd.ops.uniform(-2.0, 3.0, [1000, 7], dtype=DataType.Float, rng_seed=seed, rng_offset=offset))
        fd.add_output(fd.ops.normal(1.0, 0.5, [7001], DataType.Double, rng_seed=seed, rng_offset=offset))
        fd.add_output(fd.ops.rand_like(t0, rng_seed=seed, rng_offset=offset))
        fd.add_output(fd.ops.randn_like(t0, rng_seed=seed, rng_offset=offset))

    (u, n, r, rn), fd = exec_nvfuser(fusion_func, [x, 11, 0])
    assert {s.scheduler for s in fd.explain([x, 11, 0]).segments} == {"pointwise"}  # Philox in kernels
    assert u.shape == (1000, 7) and u.dtype == torch.float32 and -2.0 <= u.min() and u.max() < 3.0
    assert abs(u.mean().item() - 0.5) < 0.05
    assert n.dtype == torch.float64 and abs(n.mean().item() - 1.0) < 0.03 and abs(n.std().item() - 0.5) < 0.03
    assert r.dtype == torch.bfloat16 and r.shape == x.shape and 0.0 <= r.float().min() and r.float().max() < 1.0
    assert rn.dtype == torch.bfloat16 and abs(rn.float().std().item() - 1.0) < 0.05
    again = fd.execute([x, 11, 0])
    assert all(torch.equal(a, b) for a, b in zip(again, (u, n, r, rn)))  # a function of (seed, offset)
    other = fd.execute([x, 11, 1])
    assert not torch.equal(other[0], u) and not torch.equal(other[2], r)
    with FusionDefinition() as fd:
        t0 = fd.from_pytorch(x)
        with pytest.raises(TypeError, match=r"rand_like: give both rng_seed= and rng_offset=, or neither"):
            fd.ops.rand_like(t0, rng_seed=11)


def test_stride_order_outputs_come_back_with_those_strides():
    x = torch.randn(5, 7, 3)
    y = torch.randn(7, 5)

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.from_pytorch(x)
        t1 = fd.from_pytorch(y)
        fd.add_output(fd.ops.mul(t0, 2.0), stride_order=[0, 1, 2])  # column-major
        fd.add_output(fd.ops.stride_order(fd.ops.exp(t0), [1, 2, 0]))  # dim 2 innermost, then 0, then 1
        fd.add_output(fd.ops.sum(t0, [2]), stride_order=[0, 1])  # a reduction's output, column-major
        centered = fd.ops.sub(t0, fd.ops.broadcast_in_dim(fd.ops.max(t0, [2]), [5, 7, 3], [0, 1]))
        fd.add_output(centered, stride_order=[2, 0, 1])  # a normalization's output
        fd.add_output(fd.ops.add(fd.ops.permute(t1, [1, 0]), 1.0), stride_order=[0, 1])  # a transpose

    (a, b, c, d, e), fd = exec_nvfuser(fusion_func, [x, y])
    torch.testing.assert_close(a, x * 2)
    assert a.stride() == (1, 5, 35)
    torch.testing.assert_close(b, torch.exp(x))
    assert b.stride() == (3, 15, 1)
    torch.testing.assert_close(c, x.sum(2))
    assert c.stride() == (1, 5)
    torch.testing.assert_close(d, x - x.amax(2, keepdim=True))
    assert d.stride() == (21, 1, 7)
    torch.testing.assert_close(e, y.t() + 1.0)
    assert e.stride() == (1, 5)
    assert "fd.ops.stride_order(" in repr(fd)


def test_stride_order_checks_its_order():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1])
        with pytest.raises(RuntimeError, match=r"stride_order: stride_order \[0, 0\] is not a permutation of 0..1"):
            fd.ops.stride_order(t0, [0, 0])
        with pytest.raises(ValueError, match=r"stride_order: stride_order \[0\] has 1 entries but the rank is 2"):
            fd.add_output(t0, stride_order=[0])


def test_scatter_and_index_put_check_bound_sizes_of_symbolic_shapes():
    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.define_tensor(shape=[-1, -1])
        t1 = fd.define_tensor(shape=[-1, -1], dtype=DataType.Int64)
        t2 = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.scatter(t0, t1, t2, 0))

    with FusionDefinition() as fd:
        fusion_func(fd)
    x, src = torch.zeros(4, 3), torch.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"scatter: index T1 \[2, 5\] is larger than src T2 \[2, 3\] on dim 1"):
        fd.execute([x, torch.zeros(2, 5, dtype=torch.int64), src])
    with FusionDefinition() as fd:
        acc = fd.define_tensor(shape=[-1, -1])
        rows = fd.define_tensor(shape=[-1], dtype=DataType.Int64)
        value = fd.define_tensor(shape=[-1, -1])
        fd.add_output(fd.ops.index_put_accumulate(acc, rows, value))
    with pytest.raises(RuntimeError, match=r"index_put_accumulate: value T2 \[2, 7\] and acc T0 \[4, 3\] differ on dim 1"):
        fd.execute([x, torch.tensor([0, 1]), torch.ones(2, 7)])


def test_index_put_accumulate_rounds_at_each_add_as_torch():
    acc = torch.zeros(2, 4, dtype=torch.bfloat16)
    rows = torch.zeros(300, dtype=torch.int64)  # 300 adds into row 0: bf16 rounding at each one
    value = torch.full((300, 4), 0.01, dtype=torch.bfloat16)

    def fusion_func(fd: FusionDefinition) -> None:
        fd.add_output(fd.ops.index_put_accumulate(fd.from_pytorch(acc), fd.from_pytorch(rows), fd.from_pytorch(value)))

    (out,), _ = exec_nvfuser(fusion_func, [acc, rows, value])
    assert torch.equal(out, acc.index_put((rows,), value, accumulate=True))


def test_a_view_of_a_stride_ordered_output_is_planned_on_its_real_strides():
    x = torch.randn(4, 6)

    def fusion_func(fd: FusionDefinition) -> None:
        t0 = fd.from_pytorch(x)
        t1 = fd.ops.stride_order(fd.ops.mul(t0, 2.0), [0, 1])
        fd.add_output(t1)
        fd.add_output(fd.ops.reshape(t1, [24]))  # not a view of a column-major buffer: computed
        fd.add_output(fd.ops.permute(t1, [1, 0]))  # a view: row-major [6, 4]

    with FusionDefinition() as fd:
        fusion_func(fd)
    for bookend in ("auto", "outputs", "none"):
        a, flat, transposed = fd.execute([x], bookend=bookend)
        torch.testing.assert_close(a, x * 2)
        torch.testing.assert_close(flat, (x * 2).reshape(24))
        torch.testing.assert_close(transposed, (x * 2).t())


def test_a_float_index_is_truncated_to_int64_as_thunders_cross_entropy_needs():
    """Lightning Thunder's nvFuser cross entropy picks each row's target logit with take_along_axis of
    where(target != ignore_index, target, define_scalar(0, Float)): a Float index, which nvFuser's kernels
    index with. Mean loss over the rows that are not ignored, against torch."""
    logits = torch.randn(37, 1000, dtype=torch.float32)
    target = torch.randint(0, 1000, (37,))
    target[[3, 20]] = -1
    with FusionDefinition() as fd:
        thunders_cross_entropy(fd)
    (loss,) = fd.execute([logits, target])
    want = torch.nn.functional.cross_entropy(logits.double(), target, ignore_index=-1)
    torch.testing.assert_close(loss.double(), want, rtol=1e-5, atol=1e-5)


def test_broadcast_in_dim_keeps_an_input_extent_for_minus_one():
    # Lightning Thunder's index_put: broadcast_in_dim(index, [-1, *values.shape()[1:]], [0]), then scatter.
    # -1 keeps the mapped input dim's extent (nvFuser expands to the shape); a new dim's -1 is 1.
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        v = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.scatter(a, fd.ops.broadcast_in_dim(i, [-1, a.shape()[1]], [0]), v, 0))
        fd.add_output(fd.ops.broadcast_in_dim(i, [-1, -1, 3], [1]))
    acc, index, values = np.zeros((5, 3), np.float32), np.array([4, 1]), np.arange(6, dtype=np.float32).reshape(2, 3)
    updated, broadcast = fd.execute([acc, index, values])
    want = acc.copy()
    want[index] = values
    np.testing.assert_array_equal(updated, want)
    np.testing.assert_array_equal(broadcast, np.broadcast_to(index[None, :, None], (1, 2, 3)))


def test_add_output_takes_a_stride_order_positionally():
    # nvFuser's test_output_stride_order: fd.add_output(t, perm).
    x = torch.arange(120, dtype=torch.float32).reshape(2, 3, 4, 5)
    with FusionDefinition() as fd:
        t = fd.from_pytorch(x)
        fd.add_output(fd.ops.add(t, 3.0), [0, 1, 2, 3])
        fd.add_output(fd.ops.add(t, 4.0), (3, 2, 1, 0))
    column_major, row_major = fd.execute([x])
    torch.testing.assert_close(column_major, x + 3)
    torch.testing.assert_close(row_major, x + 4)
    assert column_major.stride() == (1, 2, 6, 24) and row_major.is_contiguous()


@pytest.mark.parametrize("start, step, why", [(0, 0, r"step must not be 0"),
                                              (float("inf"), 1.0, r"start must be a finite number, got inf"),
                                              (0.0, float("nan"), r"step must be a finite number, got nan")])
def test_iota_refuses_what_arange_refuses(start, step, why):
    dtype = DataType.Int if isinstance(start, int) else DataType.Double
    with FusionDefinition() as fd:
        with pytest.raises(BrazeValueError, match=rf"iota: {why}"):
            fd.ops.iota(fd.define_scalar(5), fd.define_scalar(start, dtype), fd.define_scalar(step, dtype), dtype)


def test_a_user_schedule_is_named_as_not_called_and_no_debug_output_is_captured():
    x = torch.randn(4, 4)

    class WithSchedule(FusionDefinition):
        def definition(self):
            self.t0 = self.from_pytorch(x)
            self.add_output(self.ops.tanh(self.t0))

        def schedule(self):
            raise AssertionError("braze does not call it")

    fd = WithSchedule()
    with pytest.warns(UserWarning, match=r"WithSchedule.schedule\(\) is not called"):
        (out,) = fd.execute([x], capture_debug_output=True)
    torch.testing.assert_close(out, x.tanh())
    assert fd.debug_output() is None
