"""Sizes that do not fit together, and index values out of range, with symbolic shapes: a named error on
every path, never a result. The size rules (ir/size_rules.h) are checked when a plan binds the inputs,
so the simulated device's execute, the reference evaluator and planning for a GPU (cuda_code_for) all
refuse the same inputs with the same message; index values are checked in the kernels."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from braze import DataType, FusionDefinition
from braze import execute as _execute

NUMPY = {DataType.BFloat16: ml_dtypes.bfloat16, DataType.Half: np.float16, DataType.Int8: np.int8,
         DataType.Float8_e4m3fn: ml_dtypes.float8_e4m3fn, DataType.Float: np.float32, DataType.Int: np.int64}


def _tensor(fd, rank, dtype):
    return fd.define_tensor(shape=[-1] * rank, contiguity=True, dtype=dtype)


def _ones(shape, dtype):
    return np.ones(shape, NUMPY[dtype])


def _matmul(dtype, a_shape, b_shape):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.matmul(_tensor(fd, len(a_shape), dtype), _tensor(fd, len(b_shape), dtype)))
    return fd, [_ones(a_shape, dtype), _ones(b_shape, dtype)]


def _linear(x_shape, w_shape, bias_shape=None):
    with FusionDefinition() as fd:
        x = _tensor(fd, len(x_shape), DataType.BFloat16)
        w = _tensor(fd, len(w_shape), DataType.BFloat16)
        bias = None if bias_shape is None else _tensor(fd, len(bias_shape), DataType.BFloat16)
        fd.add_output(fd.ops.linear(x, w, bias))
    inputs = [_ones(x_shape, DataType.BFloat16), _ones(w_shape, DataType.BFloat16)]
    return fd, inputs + ([] if bias_shape is None else [_ones(bias_shape, DataType.BFloat16)])


def _cat(a_shape, b_shape, dim):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.cat([_tensor(fd, 2, DataType.Float), _tensor(fd, 2, DataType.Float)], dim=dim))
    return fd, [_ones(a_shape, DataType.Float), _ones(b_shape, DataType.Float)]


def _dequantize(rows, scales):
    with FusionDefinition() as fd:
        q = _tensor(fd, 2, DataType.Int8)
        scale = _tensor(fd, 1, DataType.Float)
        fd.add_output(fd.ops.dequantize(q, scale, axis=0))
    return fd, [_ones((rows, 8), DataType.Int8), _ones(scales, DataType.Float)]


SIZE_ERRORS = [
    *[(f"matmul-inner-{dtype}", lambda dtype=dtype: _matmul(dtype, (4, 5), (6, 3)),
       r"matmul: inner sizes differ: T0 \[4, 5\] has K = 5 but T1 \[6, 3\] has K = 6")
      for dtype in (DataType.BFloat16, DataType.Half, DataType.Int8, DataType.Float8_e4m3fn, DataType.Float)],
    ("linear-inner", lambda: _linear((4, 5), (3, 6)), r"linear: inner sizes differ: T0 \[4, 5\] has K = 5 but T1 \[3, 6\]"),
    ("linear-bias", lambda: _linear((4, 5), (3, 5), (5,)),
     r"linear: the bias T2 \[5\] has 5 entries but the weight T1 \[3, 5\] has 3 outputs"),
    ("cat-other-dim", lambda: _cat((2, 3), (2, 4), 0), r"cat: T1 \[2, 4\] has size 4 on dim 1 but T0 \[2, 3\] has 3"),
    ("bmm-batch", lambda: _matmul(DataType.BFloat16, (2, 4, 8), (3, 8, 4)),
     r"matmul: batch dim 0 differs: T0 \[2, 4, 8\] has 2 but T1 \[3, 8, 4\] has 3"),
    ("dequantize-scale", lambda: _dequantize(40, 39),
     r"dequantize: the per-channel scale T1 \[39\] needs 40 entries, one per index of axis 0 of T0 \[40, 8\]"),
]


@pytest.mark.parametrize("make, match", [c[1:] for c in SIZE_ERRORS], ids=[c[0] for c in SIZE_ERRORS])
def test_mismatched_sizes_are_refused_on_every_path(make, match):
    fd, inputs = make()
    with pytest.raises(ValueError, match=match):
        fd.execute(inputs)  # the simulated device: FusionCache, PreparedPlan, the scheduler's kernels
    with pytest.raises(ValueError, match=match):
        _execute.reference(fd, inputs)
    with pytest.raises(ValueError, match=match):
        fd.cuda_code_for(inputs)  # planned for a GPU


def test_the_sizes_that_fit_still_run():
    """The same definitions with sizes that fit give the reference's results (the rules refuse only the bad)."""
    for fd, inputs in (_matmul(DataType.BFloat16, (4, 5), (5, 3)), _linear((4, 5), (3, 5), (3,)),
                       _cat((2, 3), (4, 3), 0), _matmul(DataType.BFloat16, (2, 4, 8), (1, 8, 4)), _dequantize(40, 40)):
        got, = fd.execute(inputs)
        want, = _execute.reference(fd, inputs)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-2)


def _indexing(op, x_shape, index):
    with FusionDefinition() as fd:
        x = _tensor(fd, len(x_shape), DataType.Float)
        i = _tensor(fd, index.ndim, DataType.Int)
        fd.add_output(getattr(fd.ops, op)(x, i, 0))
    x_value = np.arange(np.prod(x_shape), dtype=np.float32).reshape(x_shape)
    return fd, [x_value, index]


INDEX_ERRORS = [
    ("index_select", (40, 8), np.array([1, 57, 3])),
    ("index_select", (40, 8), np.array([-1])),
    ("index_select", (40, 8), np.array([2**32 + 1])),  # checked as read, not after it narrows to 32 bits
    ("gather", (40, 8), np.full((3, 8), 40)),
    ("take_along_axis", (40, 8), np.array([[2] * 8, [41] * 8])),
]


@pytest.mark.parametrize("op, x_shape, index", INDEX_ERRORS, ids=[f"{c[0]}-{c[2].ravel()[-1]}" for c in INDEX_ERRORS])
def test_an_index_out_of_range_is_an_index_error_naming_the_op(op, x_shape, index):
    fd, inputs = _indexing(op, x_shape, index)
    good = [inputs[0], np.clip(index, 0, x_shape[0] - 1)]  # the same signature: the same plan and kernel
    np.testing.assert_array_equal(fd.execute(good)[0], _execute.reference(fd, good)[0])
    assert "braze_checked_index" in fd.last_cuda_code()
    bad = int(index[(index < 0) | (index >= x_shape[0])].ravel()[0])
    with pytest.raises(IndexError, match=rf"{op} T2 \(dim 0 of T0, size 40\): index {bad} is out of bounds"):
        fd.execute(inputs)  # checked in the kernel, reported when the execute waits for it
    with pytest.raises(IndexError, match=rf"{op}: index {bad} is out of bounds for dim 0 of T0 \(size 40\)"):
        _execute.reference(fd, inputs)
    np.testing.assert_array_equal(fd.execute(good)[0], _execute.reference(fd, good)[0])  # reported once


@pytest.mark.parametrize("op", ["index_select", "gather", "take_along_axis"])
@pytest.mark.parametrize("layout", ["one_row", "expanded"])
def test_an_index_into_a_size_one_or_expanded_dim_is_checked(op, layout):
    """The kernel reads row 0 of such a dim whatever the index: the check still reports one out of range."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[False, True], dtype=DataType.Float)
        index_rank = 1 if op == "index_select" else 2
        i = fd.define_tensor(shape=[-1] * index_rank, contiguity=[True] * index_rank, dtype=DataType.Int)
        fd.add_output(getattr(fd.ops, op)(x, i, 0))
    row = np.arange(5, dtype=np.float32)[None]
    table = row if layout == "one_row" else np.broadcast_to(row, (6, 5))
    rows = table.shape[0]
    index_shape = (2,) if op == "index_select" else (2, 5)
    good = [table, np.zeros(index_shape, np.int64)]
    np.testing.assert_array_equal(fd.execute(good)[0], _execute.reference(fd, good)[0])
    bad = [table, np.full(index_shape, rows + 2, np.int64)]
    with pytest.raises(IndexError, match=rf"{op} T2 \(dim 0 of T0, size {rows}\): index {rows + 2} is out of bounds"):
        fd.execute(bad)
    np.testing.assert_array_equal(fd.execute(good)[0], _execute.reference(fd, good)[0])


def test_an_empty_dim_to_index_is_refused_when_bound():
    fd, inputs = _indexing("index_select", (0, 8), np.array([0]))
    with pytest.raises(IndexError, match=r"index_select: dim 0 of T0 \[0, 8\] is empty, so every index is out of bounds"):
        fd.execute(inputs)


def test_index_checks_can_be_turned_off():
    """index_checks=0 (BRAZE_TUNING on a GPU, or a target) emits unchecked indexing: the simulator then
    reports the access outside the tensor itself, as a GPU would read it."""
    fd, inputs = _indexing("index_select", (40, 8), np.array([1, 57, 3]))
    target = "h100:index_checks=0"
    good = inputs[:1] + [np.array([1, 2, 3])]
    np.testing.assert_array_equal(fd.execute(good, target=target)[0], _execute.reference(fd, good)[0])
    assert "braze_checked_index" not in fd.last_cuda_code()
    with pytest.raises(RuntimeError, match=r"braze_s\d+_\w+: .*outside"):
        fd.execute(inputs, target=target)


def _shape_op(build):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        n = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.sum(build(fd, t, n), dims=[0]))
    return fd


@pytest.mark.parametrize("build, n, match", [
    (lambda fd, t, n: fd.ops.broadcast_in_dim(t, shape=[n, 4], broadcast_dims=[1]), -3,
     r"broadcast_in_dim: shape \[-3, 4\] of T\d+ has a negative size in dim 0"),
    (lambda fd, t, n: fd.ops.expand(fd.ops.broadcast(t, [True, False]), [n, -1]), -5,
     r"expand: shape \[-5, -1\] has a negative size in dim 0"),
], ids=["broadcast-in-dim-negative", "expand-negative"])
def test_a_negative_or_overflowing_size_is_refused_on_every_path(build, n, match):
    """A broadcast or expand to a negative size summed to 0 (the reference read it otherwise): torch refuses
    it, and so does braze, by name."""
    fd = _shape_op(build)
    inputs = [np.arange(4, dtype=np.float32), n]
    for run in (fd.execute, lambda i: _execute.reference(fd, i), fd.cuda_code_for):
        with pytest.raises(ValueError, match=match):
            run(inputs)


def test_an_expand_past_a_64_bit_element_count_is_refused():
    """[2^32, 2^32] elements summed to 0 at once (the count wrapped); torch refuses it."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[1, 1], contiguity=[None, None], dtype=DataType.Float)
        n = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.sum(fd.ops.expand(t, [n, n]), dims=[0, 1]))
    inputs = [np.ones((1, 1), np.float32), 2**32]
    for run in (fd.execute, lambda i: _execute.reference(fd, i)):
        with pytest.raises(ValueError, match=r"expand: shape \[4294967296, 4294967296\] has more elements than a 64"):
            run(inputs)


def test_a_slice_with_a_huge_step_takes_its_first_element():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        step = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.slice(t, [0], [4], [step]))
    x = np.arange(4, dtype=np.float32)
    for step in (2**63 - 1, 2**63 - 2, 3):
        np.testing.assert_array_equal(fd.execute([x, step])[0], x[0:4:step])


@pytest.mark.parametrize("op", ["sum", "max", "var"])
def test_an_empty_dims_list_is_refused(op):
    """torch reads dim=[] as every dim, a reduction over no dim would return x: nvFuser refuses it."""
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        with pytest.raises(ValueError, match=rf"{op}: dims is empty for T0 of rank 2: name the dims to reduce"):
            getattr(fd.ops, op)(t, [])
    with FusionDefinition() as fd:  # a 0-d tensor has no dim to name
        t = fd.define_tensor(shape=[], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t, []))
    np.testing.assert_array_equal(fd.execute([np.array(2.5, np.float32)])[0], 2.5)


def _symbolic_extent_op(build, scalars):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(build(fd, t, [fd.define_scalar(dtype=DataType.Int) for _ in range(scalars)]))
    return fd


def _cat_of_expanded(fd, t, n):
    wide = fd.ops.broadcast_in_dim(fd.ops.slice(t, [0], [1]), [n[0]], [0])  # [n], stride 0
    return fd.ops.cat([wide, wide, wide, wide], 0)


@pytest.mark.parametrize("build, scalars, values, match", [
    # 4 (2^62 + 3) wraps to 12, 2 (2^62 + 2^61) to a negative size.
    (_cat_of_expanded, 1, [2**62 + 3], r"cat: the result's dim 0 would have more elements than a 64-bit count holds"),
    (_cat_of_expanded, 1, [2**62 + 2**61], r"cat: the result's dim 0 would have more elements than a 64-bit count"),
    # 2 * 3 * 3 * 3074457345618258603 wraps to 6, the element count.
    (lambda fd, t, n: fd.ops.reshape(t, n), 4, [2, 3, 3, 3074457345618258603],
     r"reshape: shape \[2, 3, 3, 3074457345618258603\] has more elements than a 64-bit count holds"),
    (lambda fd, t, n: fd.ops.pad(t, n, 7.0), 2, [2**63 - 1, 2**63 - 1],
     r"pad: dim 0 of T0 \[6\] with widths 9223372036854775807 and 9223372036854775807 would have more elements"),
], ids=["cat-wraps-small", "cat-wraps-negative", "reshape-wraps-to-numel", "pad-wraps"])
def test_a_size_whose_arithmetic_overflows_is_refused_on_every_path(build, scalars, values, match):
    """Sizes summed or multiplied past 64 bits wrapped into a plausible size: the kernel wrote 12 elements of
    a cat, the reference crashed. torch cannot make such a tensor either."""
    fd = _symbolic_extent_op(build, scalars)
    inputs = [np.arange(6, dtype=np.float32), *values]
    for run in (fd.execute, lambda i: _execute.reference(fd, i), fd.cuda_code_for):
        with pytest.raises(ValueError, match=match):
            run(inputs)


@pytest.mark.parametrize("left, right", [(2**32 - 2, -(2**32 - 2)), (-(2**32), 2**32 + 1), (2**31, -2**31 + 1),
                                         (-2**63, 2**63 - 3), (2**63 - 1, -2**63 + 1), (2, -1)])
def test_pad_widths_past_32_bits_index_in_64_bits(left, right):
    """Widths that nearly cancel leave a small result, but the kernel shifts its indices by them: 32-bit index
    arithmetic overflowed there (the simulator checks every 32-bit index; a GPU could have wrapped into the
    input)."""
    fd = _symbolic_extent_op(lambda fd, t, n: fd.ops.pad(t, n, 7.0), 2)
    inputs = [np.arange(1, 7, dtype=np.float32), left, right]
    got, = fd.execute(inputs)
    want = np.full(6 + left + right, 7.0, np.float32)
    lo, hi = max(left, 0), min(left + 6, want.size)
    want[lo:hi] = inputs[0][lo - left:hi - left]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(_execute.reference(fd, inputs)[0], want)


def test_a_result_too_large_for_one_launch_is_refused_by_name():
    """2^62 elements and more: a grid no launch holds (an internal error under BRAZE_VERIFY; past 2^62 the
    heuristics' next power of two looped for ever, at 2^63 - 1 a count overflowed to a negative grid)."""
    with FusionDefinition() as fd:
        n = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.full([n], 1.0, DataType.Float))
    for count in (2**62, 2**62 + 1, 2**63 - 1):
        for run in (fd.execute, fd.explain):
            with pytest.raises(ValueError, match=r"segment 0 \(writing T\d+\): its kernel braze_s0_pointwise would need "
                                                 r"more blocks than one launch holds .* too large"):
                run([count])


def test_a_result_past_2_to_the_64_bytes_is_refused_not_wrapped():
    """Element counts within int64 whose bytes are not: the reference crashed allocating a wrapped size, and
    a sort of one such line (an expanded input) wrapped its shared-memory arithmetic (SIGFPE, internal
    errors)."""
    with FusionDefinition() as fd:
        n = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.full([n], 1.0, DataType.Float))
    with pytest.raises(ValueError, match=r"a tensor of 4611686018427387904 elements of Float would take more bytes"):
        _execute.reference(fd, [2**62])
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        n = fd.define_scalar(dtype=DataType.Int)
        row = fd.ops.broadcast_in_dim(fd.ops.slice(t, [0], [1]), [1, n], [1])
        fd.add_output(fd.ops.argsort(row, 1))
    for count in (2**60 + 1, 2**61 + 1, 2**62 - 1):
        inputs = [np.zeros(3, np.float32), count]
        fd.explain(inputs)  # planned: one thread walks the line
        for run in (fd.execute, lambda i: _execute.reference(fd, i)):
            with pytest.raises(ValueError, match=rf"a tensor of {count} elements of Int64 would take more bytes"):
                run(inputs)


def test_merging_weighs_huge_byte_counts_without_wrapping():
    """The segmenter's byte counts saturate: a sum of full([n]) stays one kernel at every n, where a count
    wrapped to a negative one split it at 2^60 and 2^63 - 1 (and the pointwise half then had no grid)."""
    with FusionDefinition() as fd:
        n = fd.define_scalar(dtype=DataType.Int)
        fd.add_output(fd.ops.sum(fd.ops.full([n], 1.0, DataType.Float), dims=[0]))
    for count in (2**59, 2**60, 2**62, 2**63 - 1):
        assert "plan: 1 segment(s), 1 kernel(s)" in str(fd.explain([count]))
