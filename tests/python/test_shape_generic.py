"""Kernels shared across batch sizes and sequence lengths: a fusion defined without sizes generates the
same CUDA source for every row count (the count is a launch argument, listed in kernels_for's
`arguments`), and the simulator's results stay those of the reference at each size."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from braze import DataType, FusionDefinition
from braze import execute as bx

BF16 = ml_dtypes.bfloat16


def sizeless_layer_norm(fd, dtype=DataType.BFloat16):
    """A layer_norm with no sizes in its definition: one fusion for every batch and sequence length."""
    x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=dtype)
    w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=dtype)
    xf = fd.ops.cast(x, DataType.Float)
    var, mean = fd.ops.var_mean(xf, dims=[2], correction=0, keepdim=True)
    y = fd.ops.mul(fd.ops.sub(xf, mean), fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5))))
    y = fd.ops.mul(y, fd.ops.cast(fd.ops.broadcast(w, [True, True, False]), DataType.Float))
    fd.add_output(fd.ops.cast(y, dtype))


def test_one_source_for_every_row_count_from_two_up():
    with FusionDefinition() as fd:
        sizeless_layer_norm(fd)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(1600).astype(BF16)
    sources = set()
    for batch, seq in [(1, 2), (2, 3), (4, 128), (3, 1000), (8, 4096)]:
        x = np.zeros((batch, seq, 1600), BF16)
        (kernel,) = bx.kernels_for(fd, [x, w])
        assert [(name, value) for name, value, _ in kernel["arguments"]] == [("rows", batch * seq)]
        assert f"rows {batch * seq}" in kernel["summary"]
        sources.add(kernel["source"])
    assert len(sources) == 1


def test_simulated_results_match_the_reference_at_each_row_count():
    with FusionDefinition() as fd:
        sizeless_layer_norm(fd)
    rng = np.random.default_rng(1)
    w = rng.standard_normal(24).astype(BF16)
    for batch, seq in [(1, 1), (2, 3), (1, 17)]:
        x = rng.standard_normal((batch, seq, 24)).astype(BF16)
        (got,) = fd.execute([x, w])
        (want,) = bx.reference(fd, [x, w])
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-2, atol=2e-2)


def _softmax(fd):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True)))
    fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))


def _rms_norm_backward(fd, rank=2):
    """grad_in, grad_weight of an RMS norm (x * rstd * w), float, over [rows, hidden] (rank 2) or [batch,
    seq, hidden] (rank 3): an inner-outer segment."""
    rows = list(range(rank - 1))
    go = fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=DataType.Float)
    x = fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=DataType.Float)
    rstd = fd.define_tensor(shape=[-1] * (rank - 1) + [1], contiguity=[True] * (rank - 1) + [None], dtype=DataType.Float)
    w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
    x_hat = fd.ops.mul(x, rstd)
    g = fd.ops.mul(go, fd.ops.broadcast(w, [True] * (rank - 1) + [False]))
    mean_gx = fd.ops.div(fd.ops.sum(fd.ops.mul(g, x_hat), dims=[rank - 1], keepdim=True), fd.ops.size(x, rank - 1))
    fd.add_output(fd.ops.mul(rstd, fd.ops.sub(g, fd.ops.mul(x_hat, mean_gx))))
    fd.add_output(fd.ops.sum(fd.ops.mul(go, x_hat), dims=rows))


def _expect_canonical_kernels(define, make, lowered_for, rows_per_extent):
    """At row extents 129, 201, 255 and 131 (one shape class), the fusion `define` builds gives the
    reference's results on `make(extent)`, and its plan runs kernels lowered for `lowered_for`, launched
    for the extent's own rows, except at 255, where they are its own."""
    with FusionDefinition() as fd:
        define(fd)
    for extent in (129, 201, 255, 131):
        inputs = make(extent)
        got = fd.execute(inputs)
        for g, w in zip(got, bx.reference(fd, inputs)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        plan = str(fd.explain(inputs))
        assert (f"kernels: lowered for {lowered_for}, launched for {extent}" in plan) == (extent != 255), plan
        assert f"rows {extent * rows_per_extent}" in plan, plan


def test_row_counts_of_a_shape_class_run_the_kernels_lowered_for_its_canonical_row_count():
    """Row counts 129 to 255 (odd) are one shape class: their inner-persistent and inner-outer kernels are
    lowered once, for 255 rows, and each row count runs them with its own launch values, as the plan says;
    the results are the reference's at every row count."""
    rng = np.random.default_rng(7)
    cases = [  # the definition, its inputs at a row count, and rows per leading row
        (lambda fd: sizeless_layer_norm(fd, DataType.Float), 2,
         lambda rows: [rng.standard_normal((rows, 2, 40)).astype(np.float32), rng.standard_normal(40).astype(np.float32)]),
        (_softmax, 1, lambda rows: [rng.standard_normal((rows, 72)).astype(np.float32)]),
        (_rms_norm_backward, 1, lambda rows: [rng.standard_normal((rows, 56)).astype(np.float32),
                                           rng.standard_normal((rows, 56)).astype(np.float32),
                                           rng.uniform(0.5, 2, (rows, 1)).astype(np.float32),
                                           rng.standard_normal(56).astype(np.float32)]),
    ]
    for define, per_leading_row, make in cases:
        _expect_canonical_kernels(define, make, "255 leading rows (the shape class's canonical row count)",
                                  per_leading_row)


def test_sequence_lengths_of_a_shape_class_run_the_kernels_lowered_for_its_canonical_row_extent():
    """[2, seq, hidden] with seq 129 to 255 (odd) is one shape class whose rows are spread over the batch and
    the sequence, as a model hands them: the row kernels are lowered once, for seq 255, and each sequence
    length runs them with its own launch values (2 * seq rows), as the plan says; the results are the
    reference's at every length."""
    rng = np.random.default_rng(11)
    cases = [
        (lambda fd: sizeless_layer_norm(fd, DataType.Float),
         lambda seq: [rng.standard_normal((2, seq, 40)).astype(np.float32), rng.standard_normal(40).astype(np.float32)]),
        (lambda fd: _rms_norm_backward(fd, rank=3),
         lambda seq: [rng.standard_normal((2, seq, 56)).astype(np.float32),
                      rng.standard_normal((2, seq, 56)).astype(np.float32),
                      rng.uniform(0.5, 2, (2, seq, 1)).astype(np.float32),
                      rng.standard_normal(56).astype(np.float32)]),
    ]
    for define, make in cases:
        _expect_canonical_kernels(define, make, "a row extent of 255 in dim 1 (the shape class's canonical one)", 2)


def test_batch_sizes_of_a_power_of_two_run_the_kernels_lowered_for_its_smallest():
    """[batch, seq, 56] with batches 4 to 7 (one power of two) and seq 129 to 255 (odd) is one shape class:
    the RMS-norm backward's inner-outer kernel is lowered once, for [4, 255], and each batch and length runs
    it with its own launch values (batch * seq rows), as the plan says; the results are the reference's."""
    rng = np.random.default_rng(13)
    with FusionDefinition() as fd:
        _rms_norm_backward(fd, rank=3)
    for batch, seq in [(5, 129), (7, 255), (4, 201), (6, 131), (4, 255)]:
        inputs = [rng.standard_normal((batch, seq, 56)).astype(np.float32),
                  rng.standard_normal((batch, seq, 56)).astype(np.float32),
                  rng.uniform(0.5, 2, (batch, seq, 1)).astype(np.float32),
                  rng.standard_normal(56).astype(np.float32)]
        got = fd.execute(inputs)
        for g, w in zip(got, bx.reference(fd, inputs)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        plan = str(fd.explain(inputs))
        assert f"rows {batch * seq}" in plan, plan
        if batch == 4:
            said = "a row extent of 255 in dim 1 (the shape class's canonical one)"
            assert (f"kernels: lowered for {said}, launched for {seq}" in plan) == (seq != 255), plan
        else:
            said = "rows 4x255 in dims 0 to 1 (the shape class's canonical sizes)"
            assert f"kernels: lowered for {said}, launched for {batch}x{seq}" in plan, plan


def _per_row_norm(fd, x):
    var, mean = fd.ops.var_mean(x, [1], correction=0, keepdim=True)
    return fd.ops.mul(fd.ops.sub(x, mean), fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5))))


def test_code_that_names_the_leading_row_count_is_lowered_for_each_one():
    """Row kernels whose code names the leading row count are not relaunched at another count of its class:
    a concatenation along the rows (its boundary; the first input broadcast, so a shifted boundary would read
    in bounds), an output asked column-major (its column stride) and an index into a [rows, 33] table (the
    bound it is checked against). Each count gives the reference's results and its plan says no relaunch."""
    rng = np.random.default_rng(17)

    def cat_rows(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[False, True], dtype=DataType.Float)
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(_per_row_norm(fd, fd.ops.cat([x, y], 0)))

    def column_major(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(_per_row_norm(fd, x), stride_order=[0, 1])

    def gather_rows(fd):
        table = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        index = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        fd.add_output(_per_row_norm(fd, fd.ops.index_select(table, index, 0)))

    cases = [
        (cat_rows, lambda rows: [np.broadcast_to(rng.standard_normal((1, 33)).astype(np.float32), (rows, 33)),
                                 rng.standard_normal((rows, 33)).astype(np.float32)]),
        (column_major, lambda rows: [rng.standard_normal((rows, 33)).astype(np.float32)]),
        (gather_rows, lambda rows: [rng.standard_normal((rows, 33)).astype(np.float32),
                                    rng.integers(0, rows, 64).astype(np.int64)]),
    ]
    for define, make in cases:
        with FusionDefinition() as fd:
            define(fd)
        for rows in (255, 200, 129):
            inputs = make(rows)
            got = fd.execute(inputs)
            for g, w in zip(got, bx.reference(fd, inputs)):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
            plan = str(fd.explain(inputs))
            assert "launched for" not in plan, (define.__name__, rows, plan)


def test_an_index_past_the_table_names_its_own_row_count():
    """An index into a [200, 33] table at 210 (inside 255, the canonical row count of the class) is out of
    bounds, and the error names the table's own size."""
    with FusionDefinition() as fd:
        table = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        index = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        fd.add_output(_per_row_norm(fd, fd.ops.index_select(table, index, 0)))
    index = np.arange(64, dtype=np.int64)
    index[5] = 210
    try:
        fd.execute([np.ones((200, 33), np.float32), index])
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        assert "size 200" in str(e) and "index 210 is out of bounds" in str(e), str(e)
    else:
        raise AssertionError("an index of 210 into 200 rows raised nothing")


def test_sizes_the_definition_fixes_keep_their_own_row_count():
    """A definition with a size of its own (full([rows]) beside a row sum, a bias broadcast to [rows, 40])
    runs at that row count, whatever the shape class's canonical count is (254 for 130): the class's
    segmentation does not hold there, and the inputs' own sizes are lowered."""
    for rows in (127, 128, 130, 136, 200, 256, 264):
        with FusionDefinition() as fd:
            x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
            fd.add_output(fd.ops.add(fd.ops.sum(x, dims=[1]), fd.ops.full([rows], 1.0, DataType.Float)))
            fd.add_output(fd.ops.add(x, fd.ops.broadcast_in_dim(fd.ops.sum(x, dims=[0]), [rows, 40], [1])))
        x = np.ones((rows, 40), np.float32)
        got = fd.execute([x])
        for g, w in zip(got, bx.reference(fd, [x])):
            np.testing.assert_allclose(g, w, rtol=1e-5)


def test_a_permuted_layout_with_a_row_count_of_a_class():
    """An input of [rows, 7, 7] whose dim 0 is not outermost in memory (strides (7, 1, 7 * rows)), declared
    so: its contiguity holds at its own row count only, and each row count runs."""
    rng = np.random.default_rng(19)
    for rows in (128, 200):
        x = np.ascontiguousarray(rng.standard_normal((7, rows, 7)).astype(np.float32)).transpose(1, 2, 0)
        with FusionDefinition() as fd:
            t = fd.define_tensor(sizes=list(x.shape), strides=[s // 4 for s in x.strides], dtype=DataType.Float)
            fd.add_output(fd.ops.sum(t, dims=[0, 1]))
            fd.add_output(fd.ops.sum(t, dims=[2]))
        got = fd.execute([x])
        for g, w in zip(got, bx.reference(fd, [x])):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_a_head_slice_of_the_rows_keeps_its_own_row_count():
    """x[:150] of [rows, 8] (and x[:4] of a [5, seq, 8] batch): the slice's result does not change with the
    rows while x does, so the kernels count 150 rows (4 batches), not the canonical count scaled to x's."""
    rng = np.random.default_rng(23)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        head = fd.ops.slice(x, [0, 0], [150, fd.ops.size(x, 1)])
        fd.add_output(fd.ops.sum(head, dims=[1]))
        fd.add_output(fd.ops.sum(x, dims=[1]))
    for rows in (3003, 4095, 300, 150):
        a = rng.standard_normal((rows, 8)).astype(np.float32)
        got = fd.execute([a])
        np.testing.assert_allclose(got[0], a[:150].astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1], a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True] * 3, dtype=DataType.Float)
        first4 = fd.ops.slice(x, [0, 0, 0], [4, fd.ops.size(x, 1), fd.ops.size(x, 2)])
        fd.add_output(fd.ops.sum(first4, dims=[2]))
    for batch in (5, 7, 4):
        a = rng.standard_normal((batch, 511, 8)).astype(np.float32)
        (got,) = fd.execute([a])
        np.testing.assert_allclose(got, a[:4].astype(np.float64).sum(2), rtol=1e-5, atol=1e-5)
