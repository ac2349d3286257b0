"""Differential fuzzer: random fusions (fuzz_fusions.py) through the whole pipeline (bookending,
segmentation, heuristics, kernel IR, CPU simulator) against the reference evaluator.

BRAZE_FUZZ_CASES (default 1000) and BRAZE_FUZZ_SEED (default 0) choose the cases; a failure prints the
case's source, a standalone Python reproducer."""

from __future__ import annotations

import contextlib
import ctypes
import os

import ml_dtypes
import numpy as np
import pytest

from braze import execute as _execute
from fuzz_backward import generate_backward, generate_norm_backward_shapes
from fuzz_cat_pieces import generate_cat_pieces
from fuzz_fusions import (defined, generate, generate_in_place, generate_large, generate_matmul, generate_multi_shape,
                          generate_scan)
from fuzz_indexing import generate_indexing, generate_scatter_in_place
from fuzz_integers import generate_integer
from fuzz_random import generate_random
from fuzz_row_totals import generate_row_totals
from fuzz_scalar_parts import generate_scalar_parts
from fuzz_views import generate_views

CASES = int(os.environ.get("BRAZE_FUZZ_CASES", "1000"))
FIRST = int(os.environ.get("BRAZE_FUZZ_SEED", "0"))
BATCHES = 20

# Kernels accumulate in float where the reference uses float64, and bf16 outputs round once more.
# Random fusions can cancel catastrophically (x - mean of a constant row, scaled by rsqrt(1e-5)):
# absolute errors of a few 1e-4 there are float arithmetic, not bugs.
TOLERANCE = {np.dtype(np.float32): (1e-3, 1e-3), np.dtype(np.float16): (2e-3, 2e-3),
             np.dtype(ml_dtypes.bfloat16): (2e-2, 2e-2)}


def _nudged(x, factor):
    """x times `factor` (within a few float32 ulps of 1) where it is a float32 or float64 array (anything else as it is), in
    x's own layout (a view keeps its strides, which the definition names): a copy of the memory x spans,
    nudged, seen through x's strides."""
    if not (isinstance(x, np.ndarray) and x.dtype in (np.float32, np.float64)) or x.size == 0:
        return x
    lo = sum(min(0, (n - 1) * s) for n, s in zip(x.shape, x.strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(x.shape, x.strides)) + x.itemsize
    span = np.ctypeslib.as_array((ctypes.c_char * (hi - lo)).from_address(x.ctypes.data + lo)).view(x.dtype)
    copy = (span.astype(np.float64) * factor).astype(x.dtype)
    return np.lib.stride_tricks.as_strided(copy[-lo // x.itemsize:], shape=x.shape, strides=x.strides)


def _check(seed: int, make=generate, target: str | None = None) -> bool:
    """Runs one case (planned for `target`, a device preset with tuning, or the default); False when the
    generator made a fusion the reference itself rejects."""
    source = make(seed)
    scope: dict = {}
    try:
        exec(compile(source, f"<fuzz case {seed}>", "exec"), scope)
        fd, inputs = scope["fd"], scope["inputs"]
        want = _execute.reference(fd, inputs)
        # The reference again with its float32/float64 inputs a few float32 ulps larger and smaller: an
        # element that moves by more than a quarter of the tolerance then is ill-conditioned (sin of
        # exp(10) to exp(18), where a float sum's rounding in the exponent moves the result anywhere in
        # [-1, 1]), and no kernel computing in float could match the float64 reference there.
        # The same with every float reduction result nudged that much, whatever the inputs' dtype: a half
        # input cannot carry so small a nudge, and a float32 sum of 12288 exp(x) moves sin(exp(x) - sum) as
        # much as the inputs' nudge would.
        nudged = [] if scope.get("exact") else [
            *(_execute.reference(fd, [_nudged(x, f) for x in inputs]) for f in (1 + 2.0**-21, 1 - 2.0**-21)),
            *(_execute.reference(fd, inputs, reduction_nudge=n) for n in (2.0**-21, -(2.0**-21)))]
    except ValueError:
        return False
    reproducer = (
        f"# braze fuzz case {seed}: run this file to reproduce\n{source}"
        f"got = fd.execute(inputs{'' if target is None else f', target={target!r}'})\nfrom braze import execute\nwant = execute.reference(fd, inputs)\n"
        "for g, w in zip(got, want):\n    print(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))\n"
    )
    try:
        got = fd.execute(inputs) if target is None else fd.execute(inputs, target=target)
        if target is None:
            # Every op the generators draw has a scheduler: a kernel segment none took would have no GPU kernel.
            plan = fd.explain(inputs)
            assert all(seg.scheduler is not None for seg in plan.segments if seg.kind == "kernel"), str(plan)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert g.dtype == w.dtype and g.shape == w.shape
            # A case may name a narrower dtype its values pass through (a bf16 matmul result cast to float:
            # an f32 accumulation in another order may round to the neighbouring bf16 value).
            rounded = np.dtype(scope.get("rounded_through", w.dtype))
            rtol, atol = max(TOLERANCE.get(np.dtype(w.dtype), (0, 0)), TOLERANCE.get(rounded, (0, 0)))  # integers: exact
            if "var_mean" in source:
                # A constant row (an expanded input) has variance 0: float rounding of x - mean is
                # then scaled by rsqrt(1e-5) ~ 316 and summed, where the float64 reference gets 0.
                atol *= 400
            g, w = g.astype(np.float64), w.astype(np.float64)
            stable = np.ones(w.shape, dtype=bool)
            for other in nudged:
                n = other[i].astype(np.float64)
                with np.errstate(invalid="ignore"):  # inf - inf: NaN, which counts as not moved
                    stable &= ~(np.abs(n - w) > (atol + rtol * np.abs(w)) / 4) | (np.isnan(n) & np.isnan(w))
            np.testing.assert_allclose(g[stable], w[stable], rtol=rtol, atol=atol, equal_nan=True)
    except Exception as error:  # noqa: BLE001 - any failure gets the reproducer
        raise AssertionError(f"{type(error).__name__}: {error}\n\n{reproducer}") from error
    return True


@pytest.mark.parametrize("batch", range(BATCHES))
def test_random_fusions_match_the_reference(batch):
    per_batch = (CASES + BATCHES - 1) // BATCHES
    seeds = range(FIRST + batch * per_batch, min(FIRST + CASES, FIRST + (batch + 1) * per_batch))
    valid = sum(_check(seed) for seed in seeds)
    # The generator must not drift into mostly invalid fusions, or the fuzzer would test nothing.
    assert valid >= 0.9 * len(seeds), f"only {valid} of {len(seeds)} generated fusions were valid"


LARGE_CASES = int(os.environ.get("BRAZE_FUZZ_LARGE_CASES", "1000"))
LARGE_TARGETS = ["h100", "mi300x", "a100:block_threads=64,max_unroll=2", "h100:persistent_staged=1"]


def test_large_random_fusions_match_the_reference():
    """The general cases' kinds with 10-24 ops and 1-5 of their values as outputs (besides reduction
    results kept as outputs), planned for four devices and tunings: graphs that the segmenter cuts into
    several kernels (intermediates passed between them, views in between, reductions merged side by side)
    match the reference, every kernel has a scheduler, and a good share take several kernels."""
    valid = several = 0
    for seed in range(FIRST, FIRST + LARGE_CASES):
        target = LARGE_TARGETS[seed % len(LARGE_TARGETS)]
        if not _check(seed, generate_large, target):
            continue
        valid += 1
        scope: dict = {}
        exec(compile(generate_large(seed), "<case>", "exec"), scope)
        plan = scope["fd"].explain(scope["inputs"], target=target)
        kernels = [s for s in plan.segments if s.kind == "kernel"]
        with _reported(f"large case {seed}", generate_large(seed)):
            assert all(s.scheduler is not None for s in kernels), str(plan)
        several += len(kernels) > 1
    assert valid >= 0.9 * LARGE_CASES, f"only {valid} of {LARGE_CASES} large cases were valid"
    assert several >= LARGE_CASES // 4, f"only {several} of {LARGE_CASES} large cases took several kernels"


INDEXING_CASES = int(os.environ.get("BRAZE_FUZZ_INDEXING_CASES", "1000"))


def test_random_indexing_matches_the_reference():
    """index_select, gather, take_along_axis, select and embedding_fwd along any dim of a source read through
    layouts (maybe computed or permuted first), with int32 or int64 indices (transposed, strided or broadcast,
    repeating), then scaled, added to, reduced, normalized or put through a softmax; and cross entropies
    (log_softmax, then each row's target picked): the reference's values on several devices and tunings, and
    every cross entropy's pick in the kernel that keeps the row."""
    checked = 0
    for seed in range(FIRST, FIRST + INDEXING_CASES):
        source = generate_indexing(seed)
        scope = defined(source, f"indexing case {seed}")
        if scope is None or not _check(seed, generate_indexing, scope["target"]):
            continue
        plan = scope["fd"].explain(scope["inputs"], target=scope["target"])
        with _reported(f"indexing case {seed}", source):
            kernels = [s for s in plan.segments if s.kind == "kernel"]
            assert all(s.scheduler is not None for s in kernels), str(plan)
            if scope.get("pick_in_row_kernel"):
                assert any(s.scheduler == "inner_persistent" and "take_along_axis" in s.ops for s in kernels), str(plan)
        checked += 1
    assert checked >= 0.9 * INDEXING_CASES, f"only {checked} of {INDEXING_CASES} indexing cases ran"


INTEGER_CASES = int(os.environ.get("BRAZE_FUZZ_INTEGER_CASES", "1000"))


def test_random_integer_and_bool_fusions_match_the_reference():
    """Integer arithmetic in every width (wrapping), C division and remainders, Python's remainder, bitwise
    ops and shifts, comparisons, where, casts between integer widths and from floats, rounding of halves and
    float8 round trips past their largest values, read through layouts: integers and booleans exactly the
    reference's."""
    valid = sum(_check(seed, generate_integer) for seed in range(FIRST, FIRST + INTEGER_CASES))
    assert valid >= 0.9 * INTEGER_CASES, f"only {valid} of {INTEGER_CASES} integer cases were valid"


STAGED = "h100:persistent_staged=1"


def test_random_fusions_with_staged_rows_match_the_reference():
    """A quarter of the general cases planned with persistent rows staged in shared memory (each thread's
    chunks copied by cp.async into a stage, the passes reading them back, the block walking row groups):
    every layout, broadcast, view and dtype the generator draws, on the simulator, which reports a stage
    read before its copies landed. A good share of the cases take the staged kernel."""
    cases = max(CASES // 4, 1)
    staged = valid = 0
    for seed in range(FIRST, FIRST + cases):
        if not _check(seed, generate, STAGED):
            continue
        valid += 1
        scope: dict = {}
        exec(compile(generate(seed), "<case>", "exec"), scope)
        segments = scope["fd"].explain(scope["inputs"], target=STAGED).segments
        staged += any("staged in shared memory" in (s.heuristics or "") for s in segments)
    assert valid >= 0.9 * cases
    assert staged >= cases // 20, f"only {staged} of {cases} cases took the staged kernel"


MATMUL_CASES = int(os.environ.get("BRAZE_FUZZ_MATMUL_CASES", "200"))


def test_random_matmuls_match_the_reference():
    """Matmuls with prologues, transposed and broadcast operands and epilogues, through the matmul
    scheduler (mma.sync on the simulator), against the reference."""
    scheduled = gemv_mma = 0
    for seed in range(FIRST, FIRST + MATMUL_CASES):
        assert _check(seed, generate_matmul), f"matmul case {seed} was rejected by the reference"
        scope: dict = {}
        exec(compile(generate_matmul(seed), "<case>", "exec"), scope)
        segments = scope["fd"].explain(scope["inputs"]).segments
        scheduled += any(s.scheduler == "matmul" for s in segments)
        gemv_mma += any("gemv on tensor cores" in (s.heuristics or "") for s in segments)
        if "keep = " in generate_matmul(seed):
            # A dropout's numbers are drawn in the epilogue, and its mask (an output of the result's shape,
            # computed without it) is stored there too.
            assert [s.scheduler for s in segments if s.kind == "kernel"] == ["matmul"], f"matmul case {seed}"
    # Every generated case is one the matmul scheduler takes: the fuzzer tests it, not the host path. Its
    # few rows (up to 40) against a B read along K take the GEMV on tensor cores in a good share of cases.
    assert scheduled == MATMUL_CASES
    assert gemv_mma >= MATMUL_CASES // 5


WGMMA = "h100:matmul_wgmma=1"
WARP_SPECIALIZED = "h100:matmul_wgmma=1,matmul_warp_specialized=1"
# Persistent, with 3 blocks: most cases' blocks walk several tiles.
PERSISTENT = WARP_SPECIALIZED + ",matmul_persistent=1,matmul_persistent_blocks=3"
# In clusters of two blocks along M (where the cases have two tile rows or more), 2 clusters.
CLUSTERS = WARP_SPECIALIZED + ",matmul_persistent=1,matmul_persistent_blocks=4,matmul_cluster=2"


@pytest.mark.parametrize("target", [WGMMA, WARP_SPECIALIZED, PERSISTENT, CLUSTERS])
def test_random_matmuls_on_warpgroup_mmas_match_the_reference(target):
    """The same matmuls planned for an H100 that takes wgmma wherever it can (16-bit operands both copied
    as stored): the simulator reads each wgmma operand where the hardware would, and, where both operands
    are matrices with tensor maps of their own, each TMA box where the copy engine would put it (with a
    producer warpgroup and full and empty mbarriers, warp-specialized; persistent, each block walking
    several output tiles; in clusters of two blocks, each multicasting half of B's boxes to both)."""
    taken = by_tma = 0
    cases = 4 * MATMUL_CASES
    for seed in range(FIRST, FIRST + cases):
        assert _check(seed, generate_matmul, target), f"matmul case {seed} was rejected by the reference"
        scope: dict = {}
        exec(compile(generate_matmul(seed), "<case>", "exec"), scope)
        segments = scope["fd"].explain(scope["inputs"], target=target).segments
        taken += any("wgmma" in (s.heuristics or "") for s in segments)
        wanted = {WARP_SPECIALIZED: "warp-specialized TMA pipeline", PERSISTENT: "persistent: "}.get(target, "TMA pipeline")
        by_tma += any(wanted in (s.heuristics or "") for s in segments)
    # Most cases have 8-bit operands, prologues, a few rows (a GEMV) or rows cp.async cannot copy (not a
    # multiple of 16 bytes): those keep their schedule.
    assert taken >= cases // 40, f"only {taken} of {cases} cases took wgmma"
    assert by_tma >= cases // 80, f"only {by_tma} of {cases} cases loaded their slices by TMA"


BACKWARD_CASES = int(os.environ.get("BRAZE_FUZZ_BACKWARD_CASES", "200"))


def test_random_backward_fusions_match_the_reference():
    """Layer-norm and RMS-norm backwards (with and without weight and bias, with linears' bias grads of other
    widths, a residual's grad), activation backwards with their bias grads and softmax backwards, as Thunder
    writes them, over 1 to 257 rows of 1 to 2304 columns, read through layouts, planned for several devices
    and tunings: every output the reference's, every kernel segment with a scheduler, and each plan with the
    kernels the case names where it names them (the rows' pass and its finish for a norm's over several rows,
    one kernel for an activation's or a softmax's)."""
    inner_outer = 0
    for seed in range(FIRST, FIRST + BACKWARD_CASES):
        scope: dict = {}
        source = generate_backward(seed)
        exec(compile(source, f"<backward case {seed}>", "exec"), scope)
        assert _check(seed, generate_backward, scope["target"]), f"backward case {seed} was rejected by the reference"
        plan = scope["fd"].explain(scope["inputs"], target=scope["target"])
        kernels = int(str(plan).split(" kernel(s)")[0].rsplit(" ", 1)[1])
        with _reported(f"backward case {seed}: planned as {kernels} kernels", source):
            assert scope["kernels"] in (None, kernels), str(plan)
            assert all(s.scheduler is not None for s in plan.segments if s.kind == "kernel"), str(plan)
        inner_outer += any(s.scheduler == "inner_outer_persistent" for s in plan.segments)
    assert inner_outer >= BACKWARD_CASES // 4, f"only {inner_outer} of {BACKWARD_CASES} cases took the inner-outer kernel"


REDUCTIONS = {"sum", "prod", "max", "min", "any", "all"}


def test_random_reductions_computed_per_element_match_the_reference():
    """The generated fusions whose plan computes a small reduction per element (in a pointwise or transpose
    kernel, scheduler/pointwise/check.cpp): about 1 in 40 of the large and backward ones and 1 in 200 of the
    others, so cases are drawn until a few dozen such ran, every output the reference's."""
    wanted, ran = max(CASES // 40, 12), 0
    generators = (generate_large, generate_backward, generate)
    for seed in range(FIRST, FIRST + 100 * wanted):
        make = generators[seed % len(generators)]
        scope = defined(make(seed), f"case {seed}")
        if scope is None:
            continue
        try:
            plan = scope["fd"].explain(scope["inputs"])
        except ValueError:  # a case the generator made that braze refuses: _check skips those too
            continue
        if not any(s.scheduler in ("pointwise", "transpose") and REDUCTIONS & set(s.ops) for s in plan.segments):
            continue
        ran += _check(seed, make)
        if ran == wanted:
            break
    assert ran == wanted, f"only {ran} of the {100 * wanted} cases drawn compute a reduction per element"


def test_random_norm_backwards_over_several_row_counts_match_the_reference():
    """Norm backwards whose definitions leave every size open, run for several row counts (and now and then
    other widths) one after the other, as a training loop's last, shorter batch does: each shape's outputs
    and the first shape's again match the reference, and most shapes take the inner-outer kernel."""
    checked = inner_outer = 0
    for seed in range(FIRST, FIRST + BACKWARD_CASES // 2):
        source = generate_norm_backward_shapes(seed)
        fd, input_sets = _definition_and_input_sets(source, f"norm backward shapes case {seed}")
        wants = [_execute.reference(fd, inputs) for inputs in input_sets]
        with _reported(f"norm backward shapes case {seed}", source):
            for inputs, want in zip(input_sets + input_sets[:1], wants + wants[:1]):
                _close_all(fd.execute(inputs), want, source)
        inner_outer += sum(any(s.scheduler == "inner_outer_persistent" for s in fd.explain(inputs).segments)
                           for inputs in input_sets)
        checked += len(input_sets)
    assert inner_outer >= checked // 2, f"only {inner_outer} of {checked} shapes took the inner-outer kernel"


SCALAR_PARTS_CASES = int(os.environ.get("BRAZE_FUZZ_SCALAR_PARTS_CASES", "150"))


def test_random_rows_beside_values_made_from_scalars_match_the_reference():
    """Softmaxes and norms beside iotas, fulls and seeded noise that their rows read or not and that are
    returned or not, at one or two shapes of a definition: every output matches the reference, and most cases
    run such a value as a pointwise part beside the rows (reduction_parts.h)."""
    parts = 0
    for seed in range(FIRST, FIRST + SCALAR_PARTS_CASES):
        source = generate_scalar_parts(seed)
        fd, input_sets = _definition_and_input_sets(source, f"scalar parts case {seed}")
        with _reported(f"scalar parts case {seed}", source):
            for inputs in input_sets:
                _close_all(fd.execute(inputs), _execute.reference(fd, inputs), source)
        parts += "then pointwise" in str(fd.explain(input_sets[0]))
    assert parts >= SCALAR_PARTS_CASES // 2, f"only {parts} of {SCALAR_PARTS_CASES} cases ran a part beside the rows"


ROW_TOTALS_CASES = int(os.environ.get("BRAZE_FUZZ_ROW_TOTALS_CASES", "150"))


def test_random_totals_over_rows_match_the_reference():
    """Softmaxes, norms and cross entropies beside sums, maxima and minima over every row of per-row values,
    with math after them, at one or two shapes of a definition: every output matches the reference, and
    most cases finish their totals in the rows' kernel (row_totals.h)."""
    totals = 0
    for seed in range(FIRST, FIRST + ROW_TOTALS_CASES):
        source = generate_row_totals(seed)
        fd, input_sets = _definition_and_input_sets(source, f"row totals case {seed}")
        # The devices and tunings of the large cases in turn: staged rows, wavefronts of 64, small blocks.
        target = LARGE_TARGETS[seed % len(LARGE_TARGETS)]
        with _reported(f"row totals case {seed}", source + f"# target={target!r}\n"):
            for inputs in input_sets:
                # Double outputs are float values cast (the rows compute in float): float's tolerance.
                _close_all(fd.execute(inputs, target=target), _execute.reference(fd, inputs), source,
                           TOLERANCE[np.dtype(np.float32)])
        totals += "combined by the last block" in str(fd.explain(input_sets[0], target=target))
    # (106 of the default 150 do: the others sum only the per-row weights, whose totals are a kernel apart.)
    assert totals >= ROW_TOTALS_CASES // 3, f"only {totals} of {ROW_TOTALS_CASES} cases finished totals in the rows' kernel"


CAT_PIECES_CASES = int(os.environ.get("BRAZE_FUZZ_CAT_PIECES_CASES", "120"))


def test_random_cats_of_costly_inputs_match_the_reference():
    """Cats of plain inputs and of sums over a few query heads (GQA's backward), read transposed or not,
    with RoPE's rotate-half in them, returned as they are, as a fused QKV gradient or with their last dim
    moved, at head sizes of whole vectors or not, planned for the large cases' targets in turn: every output
    the reference's, and most cases one kernel (each chunk computing the cat input it falls in)."""
    one_kernel = 0
    for seed in range(FIRST, FIRST + CAT_PIECES_CASES):
        target = LARGE_TARGETS[seed % len(LARGE_TARGETS)]
        assert _check(seed, generate_cat_pieces, target), f"cat pieces case {seed} was refused by the reference"
        scope: dict = {}
        exec(compile(generate_cat_pieces(seed), f"<cat pieces case {seed}>", "exec"), scope)
        plan = scope["fd"].explain(scope["inputs"], target=target)
        one_kernel += plan.kernel_count == 1
    assert one_kernel >= CAT_PIECES_CASES // 2, f"only {one_kernel} of {CAT_PIECES_CASES} cases planned as one kernel"


SCAN_CASES = int(os.environ.get("BRAZE_FUZZ_SCAN_CASES", "100"))


def test_random_scans_match_the_reference():
    """topk, argsort and cumsum of tied values (and NaNs), read through layouts and views, along any dim,
    short and long lines, with elementwise ops before them, softmaxes along the line, elementwise ops
    after a cumsum, and ops and sums of a topk's kept elements: line walks and block sorts (split and
    merged too) on the simulator, against the reference's stable sort; every case gets a scan kernel,
    which takes those ops where its line walk can (the kernel count is checked), and no segment falls
    back to the reference."""
    for seed in range(FIRST, FIRST + SCAN_CASES):
        assert _check(seed, generate_scan), f"scan case {seed} was rejected by the reference"
        scope: dict = {}
        exec(compile(generate_scan(seed), "<case>", "exec"), scope)
        kernels = [s for s in scope["fd"].explain(scope["inputs"]).segments if s.kind == "kernel"]
        schedulers = [s.scheduler for s in kernels]
        assert "scan" in schedulers and "none" not in schedulers, f"scan case {seed}: {schedulers}"
        expected = scope["kernels"]
        assert len(kernels) == expected or (not scope["exact_kernels"] and len(kernels) > expected), \
            f"scan case {seed}: {schedulers}, not {expected} kernels"


IN_PLACE_CASES = int(os.environ.get("BRAZE_FUZZ_IN_PLACE_CASES", "200"))


@contextlib.contextmanager
def _reported(what: str, source: str):
    """Any failure inside raised again with the case's source, a standalone reproducer."""
    try:
        yield
    except Exception as error:  # noqa: BLE001 - any failure gets the reproducer
        raise AssertionError(f"{type(error).__name__}: {error}\n\n# {what}\n{source}") from error


def _close(got, want, source: str, at_least=(0, 0)):
    rtol, atol = max(TOLERANCE.get(np.dtype(want.dtype), (0, 0)), at_least)
    if "DataType.BFloat16), DataType.Float)" in source:
        # A value rounded through bf16 on its way (the multi-shape generator's cast round trip): a float32
        # sum in another order than the reference's float64 one may round to the neighbouring bf16 value
        # (multi-shape case 8202040: one element of 128 off by one bf16 step).
        rtol, atol = max((rtol, atol), TOLERANCE[np.dtype(ml_dtypes.bfloat16)])
    if "var_mean" in source:
        atol *= 400  # as _check: a constant row's variance
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64), rtol=rtol,
                               atol=atol, equal_nan=True)


def _definition_and_input_sets(source: str, what: str):
    """The `fd` and `input_sets` a case's source defines."""
    scope: dict = {}
    exec(compile(source, f"<{what}>", "exec"), scope)
    return scope["fd"], scope["input_sets"]


def _close_all(got, want, source: str, at_least=(0, 0)):
    assert len(got) == len(want), f"{len(got)} outputs, the reference has {len(want)}"
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w), f"{np.shape(g)} != {np.shape(w)}"
        _close(g, w, source, at_least)


def test_random_in_place_updates_match_the_reference():
    """Random fusions that write one of their values back into an input (transposed, strided or offset in
    memory) while other outputs read it as it was: the outputs and every input after the run match the
    reference's, run on an identical set of inputs."""
    checked = 0
    for seed in range(FIRST, FIRST + IN_PLACE_CASES):
        source = generate_in_place(seed)
        if source is None:
            continue
        ours: dict = {}
        theirs: dict = {}
        exec(compile(source, f"<in-place case {seed}>", "exec"), ours)
        exec(compile(source, f"<in-place case {seed}>", "exec"), theirs)  # the same inputs, made again
        try:
            want = _execute.reference(theirs["fd"], theirs["inputs"])
        except ValueError:
            continue
        with _reported(f"in-place case {seed}", source):
            _close_all(ours["fd"].execute(ours["inputs"]), want, source)
            for i, (g, w) in enumerate(zip(ours["inputs"], theirs["inputs"])):
                assert g.strides == w.strides, f"input {i}'s layout changed"
                _close(g, w, source)
        checked += 1
    assert checked >= 0.8 * IN_PLACE_CASES, f"only {checked} of {IN_PLACE_CASES} in-place cases ran"


def test_random_scatters_into_their_input_match_the_reference():
    """scatter and index_put_accumulate updating an input in place (repeated entries, an index shorter than
    the input, any layout, entries given, computed, or read from the updated input itself), now and then
    beside an output reading the input as it was: the outputs and every input after the run match the
    reference's; most cases write only the entries into the input, the others copy the update back."""
    in_place = 0
    for seed in range(FIRST, FIRST + IN_PLACE_CASES):
        source = generate_scatter_in_place(seed)
        ours: dict = {}
        theirs: dict = {}
        exec(compile(source, f"<scatter in-place case {seed}>", "exec"), ours)
        exec(compile(source, f"<scatter in-place case {seed}>", "exec"), theirs)
        want = _execute.reference(theirs["fd"], theirs["inputs"])
        with _reported(f"scatter in-place case {seed}", source):
            in_place += "braze_copy" not in str(ours["fd"].explain(ours["inputs"]))
            _close_all(ours["fd"].execute(ours["inputs"]), want, source)
            for i, (g, w) in enumerate(zip(ours["inputs"], theirs["inputs"])):
                assert g.strides == w.strides, f"input {i}'s layout changed"
                _close(g, w, source)
    assert in_place >= IN_PLACE_CASES // 3, f"only {in_place} of {IN_PLACE_CASES} scatters wrote their input in place"


VIEW_CASES = int(os.environ.get("BRAZE_FUZZ_VIEW_CASES", "1000"))


def test_random_meta_op_chains_match_the_reference():
    """Chains of permutes, reshapes, slices with steps, squeezes, broadcasts and expands before and after a
    little math (or none), read through layouts, under each bookending policy (views made at the outputs, at
    both ends, at neither, or as the cost model says): every output has the reference's shape, dtype and
    values. A definition braze refuses (a squeeze of a dim only a slice made 1, whose size is symbolic) is
    skipped, as is one the reference rejects."""
    checked = 0
    for seed in range(FIRST, FIRST + VIEW_CASES):
        source = generate_views(seed)
        scope = defined(source, f"view case {seed}")
        if scope is None:
            continue
        try:
            want = _execute.reference(scope["fd"], scope["inputs"])
        except ValueError:
            continue
        with _reported(f"view case {seed}", source + f"got = fd.execute(inputs, bookend={scope['bookend']!r})\n"):
            got = scope["fd"].execute(scope["inputs"], bookend=scope["bookend"])
            _close_all(got, want, source)
            assert [g.dtype for g in got] == [w.dtype for w in want]
        checked += 1
    assert checked >= 0.9 * VIEW_CASES, f"only {checked} of {VIEW_CASES} view cases ran"


RANDOM_CASES = int(os.environ.get("BRAZE_FUZZ_RANDOM_CASES", "1000"))


def test_random_numbers_inside_fusions_match_the_reference():
    """uniform, normal, rand_like and randn_like drawn in a shape that meta ops bring to an input's
    (permuted, broadcast, flattened, sliced with steps, expanded), with constant or scalar-input seeds,
    then dropping out, adding noise to or scaling the input before a sum, a max, a var_mean or a softmax:
    element i is the reference's, counted in the random tensor's own order, whichever kernel draws it
    (pointwise, reduction, persistent rows), on several devices and tunings. Definitions that leave every
    size open run for three shapes in turn (kernels compiled for one shape run for the others), then the
    first again."""
    checked = 0
    schedulers = set()
    for seed in range(FIRST, FIRST + RANDOM_CASES):
        source = generate_random(seed)
        scope = defined(source, f"random case {seed}")
        if scope is None:
            continue
        fd, target, input_sets = scope["fd"], scope["target"], scope["input_sets"]
        if len(input_sets) == 1:
            if not _check(seed, generate_random, target):
                continue
        else:
            try:
                wants = [_execute.reference(fd, inputs) for inputs in input_sets]
            except ValueError:
                continue
            with _reported(f"random case {seed}", source + f"# target={target!r}\n"):
                for inputs, want in zip(input_sets + input_sets[:1], wants + wants[:1]):
                    _close_all(fd.execute(inputs, target=target), want, source)
        plan = fd.explain(scope["inputs"], target=target)
        with _reported(f"random case {seed}", source):
            assert all(s.scheduler is not None for s in plan.segments if s.kind == "kernel"), str(plan)
        schedulers.update(s.scheduler for s in plan.segments if s.kind == "kernel")
        checked += 1
    assert checked >= 0.9 * RANDOM_CASES, f"only {checked} of {RANDOM_CASES} random-number cases ran"
    if RANDOM_CASES >= 200:
        assert {"pointwise", "reduction", "inner_persistent"} <= schedulers, schedulers


SHAPES_CASES = int(os.environ.get("BRAZE_FUZZ_SHAPES_CASES", "200"))


def test_random_fusions_over_several_shapes_match_the_reference():
    """Definitions that leave sizes open, run for several input shapes one after the other: a new shape
    whose kernels were compiled for an earlier one runs them (known by their code digest, neither emitted
    nor loaded again) with its own launch arguments; every shape's outputs match the reference's, and
    so do the first shape's when it runs again (its prepared plan)."""
    checked = 0
    for seed in range(FIRST, FIRST + SHAPES_CASES):
        source = generate_multi_shape(seed)
        fd, input_sets = _definition_and_input_sets(source, f"multi-shape case {seed}")
        try:
            wants = [_execute.reference(fd, inputs) for inputs in input_sets]
        except ValueError:
            continue
        with _reported(f"multi-shape case {seed}", source):
            for inputs, want in zip(input_sets + input_sets[:1], wants + wants[:1]):
                _close_all(fd.execute(inputs), want, source)
        checked += 1
    assert checked >= 0.9 * SHAPES_CASES, f"only {checked} of {SHAPES_CASES} multi-shape cases ran"
